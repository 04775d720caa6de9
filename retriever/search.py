"""Hybrid search: BM25 and cosine arms, link-graph walk, fusion, token budget, citations,
and absence signals. One function serves the CLI, the MCP server and hooks."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import psycopg
from psycopg import sql

from retriever import store
from retriever.absence import (
    UNKNOWN_MAX_COVERAGE,
    UNKNOWN_SHARE,
    AbsenceModel,
    foreign,
    model_free_verdict,
    signals,
    unknown_name,
    unknown_share,
)
from retriever.budget import allocate, estimate_tokens
from retriever.calibration_store import CALIBRATION_VERSION, LEXICAL_KEY, CalibrationCache
from retriever.doc_filter import DocFilter
from retriever.embed import Embedder, EmbedderError, ZeroVectorError
from retriever.feedback import (
    PASSAGES,
    POLICIES,
    Feedback,
    Policy,
    contextual,
    expanded,
    too_common,
    wanted,
)
from retriever.graph import LinkGraph, random_walk_scores
from retriever.lexical import (
    BM25Params,
    StatsLookup,
    TermStatsCache,
    bm25_rescore,
    bm25_search,
    idf,
    named_words,
    query_terms,
    term_idf,
    term_stats,
)
from retriever.passage_text import unpack
from retriever.query_input import (
    MODES,
    Mode,
    SearchInputError,
    check_budget,
)
from retriever.query_words import QueryWords, embedding_text
from retriever.ranking import (
    DEFAULT_RANKING,
    GRAPH_NEIGHBOURS,
    Arms,
    Ranking,
    Walk,
    best_first,
    fuse,
)
from retriever.store import ChunkRow
from retriever.titles import TitleCache, TitleIndex
from retriever.vector import QueryVectorCache, vector_search

if TYPE_CHECKING:
    from retriever.config import Settings

log = logging.getLogger(__name__)
ARM_DEPTH = 50  # candidates per arm and query
# How deep the plain BM25 list of a query with feedback goes: with the semantic arm's list,
# the candidates its expanded query re-ranks (see gather). Against searching the whole
# vault for the expanded query (MiniLM, calibrated nDCG@10): two arms' depth gave the same
# on Dendron, the test vault and Cranfield and 0.0001 less on CISI; one arm's depth 0.0024
# less on CISI; four the same on all four, at no latency difference we could measure.
FEEDBACK_DEPTH = 2 * ARM_DEPTH

T = TypeVar("T")
# A second connection beside the search's own, or None when none is free (Database.spare).
Spare = Callable[[], AbstractContextManager[psycopg.Connection | None]]

# The uncalibrated absence rule (vaults too small to calibrate): few query terms in the
# best passage and a weak best cosine. The cosine threshold suits static models only;
# calibration replaces both with a model fitted to the vault and its model.
ABSENT_COVERAGE = 0.4
# Pseudo-queries, which calibrated thresholds are read from, run to about this many terms;
# a longer query's coverage and score lead are on another scale.
DEFAULT_MAX_TERMS = 16
ABSENT_COSINE = 0.7

_IDENTIFIER = re.compile(r"[a-z][A-Z]|\w_\w|\w\.\w|\d|::|->|\(\)")


@dataclass(slots=True)
class SearchOptions:
    budget_tokens: int = 1200
    mode: Mode = "hybrid"
    ranking: Ranking | None = None  # a fixed ranking (eval ablation); None: calibrated
    overrides: dict[str, Any] = field(default_factory=dict)  # settings/flags over calibration
    absent_coverage: float = ABSENT_COVERAGE
    absent_cosine: float = ABSENT_COSINE
    folder: str | None = None
    tags: list[str] | None = None
    note_type: str | None = None
    modified_after: datetime | None = None
    limit: int = 30
    bm25: BM25Params = field(default_factory=BM25Params)
    feedback: Policy = "auto"  # query feedback (retriever.feedback)

    @classmethod
    def from_settings(cls, settings: Settings, **given: Any) -> SearchOptions:
        """One search's options: the settings' defaults, then what the caller gave (None
        means "not given")."""
        opts = cls(
            budget_tokens=settings.budget_tokens,
            bm25=BM25Params(settings.bm25_k1, settings.bm25_b),
            absent_coverage=settings.absent_coverage,
            absent_cosine=settings.absent_cosine,
            feedback=settings.query_feedback,
        )
        for name, value in given.items():
            if value is not None:
                setattr(opts, name, value)
        return opts


@dataclass(slots=True)
class Hit:
    path: str
    title: str
    heading_trail: list[str]
    start_line: int
    end_line: int
    text: str
    score: float
    ranks: dict[str, int | None]
    passage_hash: str
    stale: bool
    content_type: str
    tokens: int
    truncated: bool = False  # cut to fit the budget: read_note the cited range for the rest

    @property
    def citation(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["citation"] = self.citation
        return d


@dataclass(slots=True)
class SearchResult:
    queries: list[str]
    mode: str
    degraded_reason: str | None
    hits: list[Hit]
    coverage: float
    best_cosine: float | None
    likely_absent: bool
    budget_tokens: int
    used_tokens: int
    fusion: str
    ranking: str = ""
    calibration: str = ""
    signals: dict[str, float] = field(default_factory=dict)  # what likely_absent weighed
    refreshed_files: int = 0
    took_ms: float = 0.0
    ranked_paths: list[str] = field(default_factory=list)  # full document ranking (eval)
    model: str | None = None  # the embedding model of the semantic arm (None: lexical)
    tier: str | None = None  # which embedding tier answered: "primary" or "fallback"
    feedback: bool = False  # BM25 ran on a query expanded by feedback (retriever.feedback)

    def to_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "mode": self.mode,
            "model": self.model,
            "tier": self.tier,
            "degraded_reason": self.degraded_reason,
            "likely_absent": self.likely_absent,
            "coverage": round(self.coverage, 3),
            "best_cosine": None if self.best_cosine is None else round(self.best_cosine, 4),
            "budget_tokens": self.budget_tokens,
            "used_tokens": self.used_tokens,
            "fusion": self.fusion,
            "ranking": self.ranking,
            "calibration": self.calibration,
            "feedback": self.feedback,
            "signals": {k: round(v, 3) for k, v in self.signals.items()},
            "refreshed_files": self.refreshed_files,
            "took_ms": round(self.took_ms, 1),
            "hits": [h.to_dict() for h in self.hits],
        }

    def to_markdown(self) -> str:
        """One block ready to paste into a conversation, each passage under its citation."""
        lines: list[str] = []
        if self.degraded_reason:
            lines.append(f"> search mode: {self.mode} ({self.degraded_reason})")
        if self.likely_absent:
            lines.append("> the vault probably does not answer this; the closest passages follow")
        for h in self.hits:
            trail = " > ".join(h.heading_trail)
            lines.append(f"### {h.citation}" + (f" — {trail}" if trail else ""))
            lines.append(h.text)
            lines.append("")
        if not self.hits:
            lines.append("(no matching passage in the vault)")
        return "\n".join(lines).strip() + "\n"


def check_options(opts: SearchOptions) -> None:
    if opts.mode not in MODES:
        raise SearchInputError(f"mode must be one of {', '.join(MODES)}")
    check_budget(opts.budget_tokens)
    if not 1 <= opts.limit <= 200:
        raise SearchInputError("limit must be between 1 and 200")
    if opts.feedback not in POLICIES:
        raise SearchInputError(f"feedback must be one of {', '.join(POLICIES)}")


def _embedded_as(ranking: Ranking, semantic: bool) -> Ranking:
    """The ranking as it ran: without a semantic arm no query words were embedded."""
    return ranking if semantic else ranking.with_(query_words="all")


def looks_like_identifier(query: str) -> bool:
    """Code identifiers, versions and paths: lexical matching is what finds those."""
    words = query.split()
    return bool(words) and len(words) <= 4 and any(_IDENTIFIER.search(w) for w in words)


@dataclass(slots=True)
class _Semantic:
    """How the semantic arm runs in one search: its model row and query vectors, or why
    it does not (the search then runs lexical and says so)."""

    mode: Mode
    model: tuple[int, int] | None = None
    vectors: list[np.ndarray] | None = None
    degraded: str | None = None
    failure: str | None = None  # the embedder's error when it failed mid-search


class Searcher:
    """Holds per-process caches (query vectors, link graph, note names, calibrations)."""

    def __init__(self) -> None:
        self.vectors = QueryVectorCache()
        self.graph = LinkGraph()
        self.titles = TitleCache()
        self.calibrations = CalibrationCache()
        self.terms = TermStatsCache()
        self._pending: dict[int, tuple[str, int | None]] = {}  # model -> (generation, n)
        # fingerprint -> (vectors generation, model row): rows change only in index runs
        self._models: dict[str, tuple[str, tuple[int, int] | None]] = {}
        self._workers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="retriever-arm")
        self.warming: Future[None] | None = None  # the last title warm-up (see warm_titles)

    def generation(self, conn: psycopg.Connection) -> store.Generation:
        """What this process's caches are checked against (one round trip per search)."""
        return store.read_generation(conn, CALIBRATION_VERSION)

    def begin(self, conn: psycopg.Connection) -> store.Generation:
        """Start a search's transaction on one snapshot (REPEATABLE READ: a re-index
        committing meanwhile must not remove the chunks it has just ranked) and read its
        generation: BEGIN, the isolation level and the read in one round trip."""
        with conn.pipeline():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            found = store.send_generation(conn, CALIBRATION_VERSION)
        return store.parse_generation(found.fetchall())

    def _model_row(
        self, conn: psycopg.Connection, fingerprint: str, gen: store.Generation
    ) -> tuple[int, int] | None:
        cached = self._models.get(fingerprint)
        if cached is not None and cached[0] == gen.vectors:
            return cached[1]
        row = store.model_row(conn, fingerprint)
        self._models[fingerprint] = (gen.vectors, row)
        return row

    def _pending_vectors(
        self, conn: psycopg.Connection, model: int, gen: store.Generation
    ) -> int | None:
        """Passages without a vector for ``model`` (None: no vector at all), recounted only
        after an index run or an embedding pass: the anti-join is too costly for every
        search."""
        generation = gen.vectors
        cached = self._pending.get(model)
        if cached is not None and cached[0] == generation:
            return cached[1]
        count = store.count_pending(conn, model) if store.has_vectors(conn, model) else None
        self._pending[model] = (generation, count)
        return count

    def pending_vectors(
        self, conn: psycopg.Connection, embedder: Embedder, gen: store.Generation | None = None
    ) -> int | None:
        """Passages without this model's vector; None when it has no vector at all.
        ``gen``: as the caller read it in this transaction, else read here."""
        gen = gen or self.generation(conn)
        model = self._model_row(conn, embedder.fingerprint, gen)
        return self._pending_vectors(conn, model[0], gen) if model else None

    def semantic_model(
        self,
        conn: psycopg.Connection,
        embedder: Embedder | None,
        embed_error: str | None,
        gen: store.Generation | None = None,
    ) -> tuple[tuple[int, int] | None, str | None]:
        """(model row, degraded reason) for the semantic arm; no row: lexical only.
        ``gen``: as the caller read it in this transaction, else read here."""
        if embedder is None:
            return None, f"embedder unavailable: {embed_error or 'no model configured'}"
        gen = gen or self.generation(conn)
        model = self._model_row(conn, embedder.fingerprint, gen)
        pending = self._pending_vectors(conn, model[0], gen) if model else None
        if model is None or pending is None:
            return None, "no passage has a vector for the current model yet (run index)"
        if pending:
            # Still hybrid, but the semantic arm cannot see every passage: say so.
            return model, (
                f"{pending} passages still lack vectors (run `retriever index`); "
                "semantic results are partial"
            )
        return model, None

    def search(
        self,
        conn: psycopg.Connection,
        queries: list[str],
        opts: SearchOptions,
        *,
        vault: Path,
        embedder: Embedder | None,
        embed_error: str | None,
        spare: Spare | None = None,
        gen: store.Generation | None = None,
    ) -> tuple[SearchResult, str | None]:
        """Returns the result and, if the embedder failed mid-search, its error.
        ``spare``: a second connection's source, for the arms to run side by side.
        ``gen``: as the caller read it in this transaction, else read here."""
        check_options(opts)
        started = time.perf_counter()
        gen = gen or self.generation(conn)
        sem = self._semantic(conn, queries, opts, embedder, embed_error, gen)
        scope = Scope(*DocFilter.of_options(opts).sql())
        titles = self.titles.get(conn, gen)
        lookup = self.terms.lookup(gen.terms_key())
        arms = self.gather(
            conn,
            queries,
            sem.mode,
            sem.model,
            sem.vectors,
            scope,
            opts.bm25,
            spare=spare,
            titles=titles,
            lookup=lookup,
            feedback=self._feedback(conn, opts, embedder, sem.mode, gen),
        )
        semantic = bool(arms.semantic)
        ranking, absence, calibration = self.ranking_for(conn, opts, embedder, semantic, gen)
        walk, prior = self.links(conn, scope, titles, gen)
        titles.load_openings(conn, arms.title)
        scores, lifted = fuse(arms, ranking, first_chunk=titles.first_chunk, walk=walk, prior=prior)
        ranked_ids = best_first(scores)
        top = ranked_ids[0] if ranked_ids else None
        rows = store.fetch_chunks(
            conn, ranked_ids[: max(opts.limit * 3, 60)] + lifted, terms_of=top
        )
        ranked_ids = [c for c in ranked_ids if c in rows]
        hits = self._deliver(ranked_ids, rows, scores, opts, arms, lifted, vault)
        unknown, named, n_terms = _unknown(conn, queries, lookup)
        coverage = _coverage(conn, rows[ranked_ids[0]], queries, lookup) if ranked_ids else 0.0
        languages = absence.languages if absence is not None else ()
        sig = signals(
            arms,
            coverage,
            unknown,
            named=named,
            foreign=foreign(queries, languages),
            terms=n_terms,
        )
        result = SearchResult(
            queries=queries,
            mode=sem.mode,
            degraded_reason=sem.degraded,
            hits=hits,
            coverage=coverage,
            best_cosine=sig["best_cosine"] if semantic else None,
            likely_absent=_likely_absent(hits, absence, sig, opts, semantic),
            budget_tokens=opts.budget_tokens,
            used_tokens=sum(h.tokens for h in hits),
            fusion=ranking.method if sem.mode == "hybrid" else sem.mode,
            ranking=ranking.label(),
            calibration=calibration,
            signals=sig,
            took_ms=(time.perf_counter() - started) * 1000,
            ranked_paths=_distinct_paths(ranked_ids, rows),
            model=embedder.model_id if embedder is not None and sem.mode != "lexical" else None,
            feedback=arms.feedback,
        )
        return result, sem.failure

    def _feedback(
        self,
        conn: psycopg.Connection,
        opts: SearchOptions,
        embedder: Embedder | None,
        mode: str,
        gen: store.Generation,
    ) -> Feedback | None:
        """Query feedback for a hybrid search when the setting and the model call for it,
        with the vault's languages as this model's calibration found them."""
        if mode != "hybrid" or embedder is None:
            return None
        if not wanted(opts.feedback, contextual(embedder)):
            return None
        found = self.calibrations.get(conn, embedder.fingerprint, gen.calibrations)
        return Feedback(found.languages if found is not None else ())

    def _semantic(
        self,
        conn: psycopg.Connection,
        queries: list[str],
        opts: SearchOptions,
        embedder: Embedder | None,
        embed_error: str | None,
        gen: store.Generation,
    ) -> _Semantic:
        """The semantic arm's model and query vectors, or lexical with the reason."""
        mode = opts.mode
        if mode not in ("hybrid", "semantic"):
            return _Semantic(mode)
        model, degraded = self.semantic_model(conn, embedder, embed_error, gen)
        if model is None or embedder is None:
            return _Semantic("lexical", degraded=degraded)
        try:
            words = self.query_words(conn, opts, embedder, gen)
            vectors = self.query_vectors(embedder, queries, words)
        except EmbedderError as exc:
            return _Semantic("lexical", degraded=f"embedder failed: {exc}", failure=str(exc))
        return _Semantic(mode, model, vectors, degraded)

    def query_words(
        self,
        conn: psycopg.Connection,
        opts: SearchOptions,
        embedder: Embedder,
        gen: store.Generation,
    ) -> QueryWords:
        """Which words of a query the semantic arm embeds: as the ranking in force says
        (a fixed one, else this model's calibration with the settings over it)."""
        if opts.ranking is not None:
            return opts.ranking.query_words
        found = self.calibrations.get(conn, embedder.fingerprint, gen.calibrations)
        ranking = found.ranking if found is not None else DEFAULT_RANKING
        return ranking.apply(opts.overrides).query_words

    def query_vectors(
        self, embedder: Embedder, queries: list[str], words: QueryWords = "all"
    ) -> list[np.ndarray]:
        """One vector per query the model can embed (a query of unknown words has none),
        of the query's ``words`` (see retriever.query_words). NaN, infinite or wrong-size
        vectors raise: the model is failing, and the answer must say so instead of passing
        for hybrid."""
        out: list[np.ndarray] = []
        for q in queries:
            try:
                out.append(self.vectors.get(embedder, [embedding_text(q, words)])[0])
            except ZeroVectorError:
                continue
        return out

    def gather(
        self,
        conn: psycopg.Connection,
        queries: list[str],
        mode: str,
        model: tuple[int, int] | None,
        qvecs: list[np.ndarray] | None,
        scope: Scope,
        bm25: BM25Params,
        *,
        spare: Spare | None = None,
        titles: TitleIndex | None = None,
        lookup: StatsLookup | None = None,
        feedback: Feedback | None = None,
    ) -> Arms:
        """Run every arm the mode allows for ``queries`` (no fusion yet). With ``spare``
        (a source of a second connection), a hybrid search runs the title and semantic
        arms on it while BM25 runs on ``conn``. ``titles``: the generation's title index
        (looked up when not given); ``lookup``: where term statistics come from (else
        read); ``feedback``: for the queries it applies to, the query expanded with the
        semantic arm's nearest passages (see retriever.feedback) re-ranks, by BM25, the
        candidates of both arms: the plain BM25 list (FEEDBACK_DEPTH deep) and the semantic
        one (a query none of whose words the vault holds gets none: the added words alone
        would echo the semantic arm). The plain BM25 runs beside the semantic arm as for
        any query, and the re-ranking scores at most FEEDBACK_DEPTH + ARM_DEPTH chunks.
        Searching the whole vault for the expanded query instead waited for the semantic
        arm, then scored every chunk holding one of the ten added words: p50 of a whole
        search 1.16-1.20x that without feedback against 1.05-1.08x re-ranking (Dendron,
        MiniLM), 1.61-1.64x against 1.13-1.17x (win32-17k, forced on). What it gives up: a
        chunk in neither list that the added words alone would lift (see FEEDBACK_DEPTH)."""
        arms = Arms(identifier=any(looks_like_identifier(q) for q in queries))
        lexical = mode in ("hybrid", "lexical")
        semantic = mode in ("hybrid", "semantic") and model is not None and bool(qvecs)
        index = (titles if titles is not None else self.titles.get(conn)) if lexical else None
        own = [query_terms(q) for q in queries]  # BM25's terms, and what feedback adds to
        # Feedback needs each query's own semantic list: not when a query had no vector.
        # A query of stopwords only has no term for feedback to add to.
        fed = [
            feedback is not None
            and lexical
            and semantic
            and len(qvecs or ()) == len(queries)
            and feedback.applies(q)
            and bool(own[i])
            for i, q in enumerate(queries)
        ]

        near_docs: dict[int, int] = {}  # the semantic arm's chunks' notes (its own thread)

        def others(c: psycopg.Connection) -> tuple[dict[int, float], list[dict[int, float]]]:
            title = self._titles(c, index, queries, scope, lookup) if index is not None else {}
            cosines = _cosine_lists(c, model, qvecs, scope, near_docs) if semantic else []
            return title, cosines

        beside = None
        if lexical and semantic and spare is not None:
            beside = run_beside(self._workers, conn, spare, others)
        lex_docs: dict[int, int] = {}
        if lexical:
            depths = [FEEDBACK_DEPTH if f else ARM_DEPTH for f in fed]
            arms.lexical = _bm25_lists(conn, own, scope, bm25, lex_docs, lookup, depths)
        found = beside.result() if beside is not None else None
        arms.title, arms.semantic = found if found is not None else others(conn)
        for i in (i for i, f in enumerate(fed) if f):
            if not arms.lexical[i]:  # none of its words in the vault: the added ones alone
                continue  # would only echo the semantic arm
            terms = _fed_terms(conn, own[i], list(arms.semantic[i]), lookup)
            added = len(terms) > len(own[i])
            arms.feedback = arms.feedback or added
            among = [*arms.lexical[i], *(c for c in arms.semantic[i] if c not in arms.lexical[i])]
            ranked = (
                bm25_rescore(conn, terms, among, params=bm25, owners=lex_docs, lookup=lookup)
                if added
                else list(arms.lexical[i].items())
            )
            arms.lexical[i] = dict(ranked[:ARM_DEPTH])
        arms.doc_of = {**lex_docs, **near_docs}  # both arms return their chunks' notes
        return arms

    def warm_titles(self, spare: Spare, *, eager: bool) -> Future[None] | None:
        """Weigh the rest of the title index in the background: a search fetches only the
        weights its own query needs, so without this every new query of a generation
        would fetch some. ``eager`` (a long-lived process): after any search; else once a
        second search had to fetch (a one-off command does not pay for it, nor wait for it
        at exit). Skipped without a spare connection; a newer index run leaves it to that
        run's index."""
        index = self.titles.latest()
        if index.complete or index.warming or index.generation is None:
            return None
        if not eager and index.fetches < 2:
            return None
        index.warming = True
        self.warming = self._workers.submit(_preload, index, spare)
        return self.warming

    def _titles(
        self,
        conn: psycopg.Connection,
        index: TitleIndex,
        queries: list[str],
        scope: Scope,
        lookup: StatsLookup | None = None,
    ) -> dict[int, float]:
        plans = [index.plan(q) for q in queries]
        words = index.to_weigh(plans)
        if words:  # one round trip: these queries' words and their candidate names' words
            index.weigh(*term_idf(conn, sorted(words), lookup), words)
            index.fetches += 1
        found: dict[int, float] = {}
        for plan in plans:
            for doc, score in index.score(plan).items():
                found[doc] = max(found.get(doc, 0.0), score)
        if found and scope.where:
            found = {d: found[d] for d in scope.allowed(conn, list(found))}
        return dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))

    def links(
        self,
        conn: psycopg.Connection,
        scope: Scope,
        titles: TitleIndex | None = None,
        gen: store.Generation | None = None,
    ) -> tuple[Walk, Mapping[int, float]]:
        """The link-graph walk for fusion (neighbour notes best first, within the filters)
        and every cited note's link prior. With ``titles``, the walk looks up the openings
        of the notes it lifts there."""
        graph = self.graph.get(conn, gen)

        def walk(seeds: Mapping[int, float]) -> list[int]:
            found = list(random_walk_scores(graph, seeds))[: GRAPH_NEIGHBOURS * 2]
            if found and scope.where:
                allowed = set(scope.allowed(conn, found))
                found = [d for d in found if d in allowed]
            if titles is not None:
                titles.load_openings(conn, found[:GRAPH_NEIGHBOURS])
            return found

        return walk, graph.graph.get("prior", {})

    def ranking_for(
        self,
        conn: psycopg.Connection,
        opts: SearchOptions,
        embedder: Embedder | None,
        semantic: bool,
        gen: store.Generation | None = None,
    ) -> tuple[Ranking, AbsenceModel | None, str]:
        """The ranking in force: explicit options, else this model's calibration (with the
        settings' overrides), else the defaults. Also the absence model and a short note."""
        if opts.ranking is not None:
            return _embedded_as(opts.ranking, semantic), None, "fixed"
        key = embedder.fingerprint if (semantic and embedder is not None) else LEXICAL_KEY
        found = self.calibrations.get(conn, key, gen.calibrations if gen else None)
        if found is None:
            ranking = DEFAULT_RANKING.apply(opts.overrides)
            return _embedded_as(ranking, semantic), None, "default (not calibrated)"
        absence = found.absence_hybrid if semantic else found.absence_lexical
        note = "calibrated" if found.ranking_chosen else "default ranking, calibrated absence"
        note += ", with overrides" if opts.overrides else ""
        return _embedded_as(found.ranking.apply(opts.overrides), semantic), absence, note

    def _deliver(
        self,
        ranked_ids: list[int],
        rows: dict[int, ChunkRow],
        scores: dict[int, float],
        opts: SearchOptions,
        arms: Arms,
        lifted: list[int],
        vault: Path,
    ) -> list[Hit]:
        """The best passages that fit the budget, adjacent ones merged, each cited."""
        candidates = [rows[c] for c in ranked_ids[: opts.limit * 2]]
        plan = allocate(
            candidates,
            budget=opts.budget_tokens,
            doc_of=lambda r: r.path,
            tokens_of=lambda r: r.tokens,
        )
        chosen = [candidates[i] for i in plan.kept][: opts.limit]
        ranks = _ArmRanks.of(arms, lifted)
        stale: dict[str, bool] = {}
        hits: list[Hit] = []
        for group in _merge_adjacent(chosen):
            path = group[0].path
            if path not in stale:
                stale[path] = _is_stale(vault, group[0])
            hits.append(_hit(group, scores, ranks.of_group(group), stale[path]))
        if hits and hits[0].tokens > opts.budget_tokens:
            # The single best passage alone is over budget (a huge code block or table is
            # never split at index time): deliver its head, cited exactly, and say so.
            truncate_to_budget(hits[0], opts.budget_tokens)
        return hits


def run_beside(
    workers: Executor,
    conn: psycopg.Connection,
    spare: Spare,
    work: Callable[[psycopg.Connection], T],
) -> Future[T | None]:
    """``work`` on ``workers``, on a second connection that sees exactly what ``conn`` sees
    (its exported snapshot: a re-index committing meanwhile changes neither). The future
    holds None when no second connection was free, or when the server is a standby (a
    standby cannot export a snapshot)."""
    snapshot = conn.execute(
        "SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_export_snapshot() END"
    ).fetchone()
    if snapshot is None or snapshot[0] is None:
        done: Future[T | None] = Future()
        done.set_result(None)
        return done
    begin = sql.SQL(
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT {}"
    ).format(sql.Literal(snapshot[0]))

    def run() -> T | None:
        with spare() as other:
            if other is None:
                return None
            other.execute(begin)
            return work(other)

    return workers.submit(run)


def _preload(index: TitleIndex, spare: Spare) -> None:
    """``index.preload`` on a spare connection, if the index is still the current one."""
    try:
        with spare() as conn:
            if conn is None:
                return
            if store.index_generation(conn) == index.generation:
                index.preload(conn)
    except psycopg.Error as exc:  # a closed pool, a lost server: searches fetch their own
        log.debug("title index warm-up skipped: %s", exc)
    finally:
        index.warming = False


def _bm25_lists(
    conn: psycopg.Connection,
    queries: Sequence[Mapping[str, int]],
    scope: Scope,
    bm25: BM25Params,
    owners: dict[int, int],
    lookup: StatsLookup | None,
    depths: Sequence[int],
) -> list[dict[int, float]]:
    """The lexical arm: each query's (its terms') best passages by BM25 (chunk -> score),
    as many as its place in ``depths`` says; ``owners`` gains their notes."""
    return [
        _bm25(conn, terms, scope, bm25, owners, lookup, limit)
        for terms, limit in zip(queries, depths, strict=True)
    ]


def _bm25(
    conn: psycopg.Connection,
    terms: Mapping[str, float],
    scope: Scope,
    bm25: BM25Params,
    owners: dict[int, int],
    lookup: StatsLookup | None,
    limit: int,
) -> dict[int, float]:
    """One query's best passages by BM25 (``terms``: term -> weight)."""
    extra = (
        f"AND t.doc_id IN (SELECT d.id FROM documents d WHERE {scope.where})" if scope.where else ""
    )
    return dict(
        bm25_search(
            conn,
            terms,
            limit=limit,
            params=bm25,
            extra_sql=extra,
            extra_params=scope.params,
            owners=owners,
            lookup=lookup,
        )
    )


def _fed_terms(
    conn: psycopg.Connection,
    query: Mapping[str, int],
    ranked: list[int],
    lookup: StatsLookup | None,
) -> Mapping[str, float]:
    """``query`` expanded with the most distinctive terms of the first PASSAGES distinct
    passages of ``ranked`` (chunk ids, best first): a passage several notes share (a
    template, a copied paragraph) counts once."""
    if not ranked:
        return query
    rows = conn.execute(
        """
        SELECT p.ztext FROM (
            SELECT c.passage_hash AS hash, min(array_position(%(ranked)s::int[], c.id)) AS pos
            FROM chunks c WHERE c.id = ANY(%(ranked)s)
            GROUP BY c.passage_hash ORDER BY pos LIMIT %(n)s
        ) f JOIN passages p ON p.hash = f.hash ORDER BY f.pos
        """,
        {"ranked": ranked, "n": PASSAGES},
    ).fetchall()
    passages = [query_terms(unpack(row[0])) for row in rows]
    stats = term_stats(conn, sorted(set().union(*passages)), lookup)
    idfs = {t: idf(stats.n, df) for t, (_, df) in stats.found.items()}
    common = {t for t, (_, df) in stats.found.items() if too_common(df, stats.n)}
    return expanded(query, passages, idfs, skip=common)


def _cosine_lists(
    conn: psycopg.Connection,
    model: tuple[int, int] | None,
    qvecs: list[np.ndarray] | None,
    scope: Scope,
    owners: dict[int, int],
) -> list[dict[int, float]]:
    """The semantic arm: each query vector's nearest passages (chunk -> cosine);
    ``owners`` gains their notes."""
    assert model is not None
    return [
        dict(
            vector_search(
                conn,
                *model,
                np.asarray(qv),
                limit=ARM_DEPTH,
                doc_filter=scope.where,
                filter_params=scope.params,
                owners=owners,
            )
        )
        for qv in qvecs or []
    ]


def _likely_absent(
    hits: list[Hit],
    absence: AbsenceModel | None,
    sig: Mapping[str, float],
    opts: SearchOptions,
    semantic: bool,
) -> bool:
    if not hits:
        return True
    if absence is not None:
        return absence.absent(sig)
    return default_absent(sig, opts, semantic=semantic)


def _distinct_paths(ranked_ids: list[int], rows: dict[int, ChunkRow]) -> list[str]:
    """Each note once, in the order of its best passage."""
    return list(dict.fromkeys(rows[c].path for c in ranked_ids))


@dataclass(frozen=True, slots=True)
class _ArmRanks:
    """Where each arm placed each passage (or, for the title arm, each note)."""

    lexical: dict[int, int]
    semantic: dict[int, int]
    graph: dict[int, int]
    title: dict[int, int]

    @classmethod
    def of(cls, arms: Arms, lifted: list[int]) -> _ArmRanks:
        return cls(
            lexical=_best_ranks([list(x) for x in arms.lexical]),
            semantic=_best_ranks([list(x) for x in arms.semantic]),
            graph={c: i for i, c in enumerate(lifted, start=1)},
            title={d: i for i, d in enumerate(arms.title, start=1)},
        )

    def of_group(self, group: list[ChunkRow]) -> dict[str, int | None]:
        return {
            "lexical": _min_rank(self.lexical, group),
            "semantic": _min_rank(self.semantic, group),
            "graph": _min_rank(self.graph, group),
            "title": self.title.get(group[0].doc_id),
        }


def _hit(
    group: list[ChunkRow],
    scores: dict[int, float],
    ranks: dict[str, int | None],
    stale: bool,
) -> Hit:
    """One delivered hit from touching passages of one note."""
    head = group[0]
    text = "\n".join(r.text for r in group)
    return Hit(
        path=head.path,
        title=head.title,
        heading_trail=head.trail,
        start_line=min(r.start for r in group),
        end_line=max(r.end for r in group),
        text=text,
        score=round(max(scores[r.id] for r in group), 6),
        ranks=ranks,
        passage_hash=head.hash.hex(),
        stale=stale,
        content_type=head.ctype,
        tokens=estimate_tokens(text),
    )


@dataclass(frozen=True, slots=True)
class Scope:
    """The caller's document filters as SQL over ``documents d`` (values bound)."""

    where: str
    params: dict[str, object]

    def allowed(self, conn: psycopg.Connection, docs: list[int]) -> list[int]:
        rows = conn.execute(
            f"SELECT d.id FROM documents d WHERE d.id = ANY(%(scope_ids)s) AND {self.where}",
            {"scope_ids": docs, **self.params},
        ).fetchall()
        return [int(r[0]) for r in rows]


def default_absent(sig: Mapping[str, float], opts: SearchOptions, *, semantic: bool) -> bool:
    """The uncalibrated rule: few query terms in the best passage and, when there is a
    semantic arm, a weak best cosine too (its threshold suits static models); with a
    semantic arm, a query the vault has never heard of (``UNKNOWN_SHARE``, most of its
    words missing from the best passage) needs only the weak cosine. A query that names
    something no passage mentions is flagged whatever the rest says; one longer than
    DEFAULT_MAX_TERMS (a pasted paragraph) is not flagged on weak signals."""
    verdict = model_free_verdict(sig, max_terms=DEFAULT_MAX_TERMS)
    if verdict is not None:
        return verdict
    coverage = sig["coverage"]
    if not semantic:
        return coverage < opts.absent_coverage
    unheard = sig.get("unknown", 0.0) >= UNKNOWN_SHARE and coverage < UNKNOWN_MAX_COVERAGE
    return (coverage < opts.absent_coverage or unheard) and sig["best_cosine"] < opts.absent_cosine


def _unknown(
    conn: psycopg.Connection, queries: list[str], lookup: StatsLookup | None = None
) -> tuple[float, float, int]:
    """The least, over the queries, of the share of a query's IDF mass in words that no
    passage holds, of ``unknown_name``, and of the number of distinct terms."""
    terms = [query_terms(q) for q in queries]
    idfs, unknown_idf = term_idf(conn, sorted(set().union(*terms)), lookup)
    share = min((unknown_share(t, idfs, unknown_idf) for t in terms if t), default=0.0)
    named = min(
        unknown_name(named_words(q), idfs.__contains__, t)
        for q, t in zip(queries, terms, strict=True)
    )
    return share, named, min((len(t) for t in terms if t), default=0)


def _coverage(
    conn: psycopg.Connection, chunk: store.ChunkRow, queries: list[str], lookup: StatsLookup
) -> float:
    """Best share, over the queries, of a query's terms that the chunk holds (its terms
    as fetched with it, matched by lexicon id; else asked for)."""
    qterms = [set(query_terms(q)) for q in queries]
    if not any(qterms):
        return 0.0
    among = set().union(*qterms)
    # The statistics of ``among`` (_unknown just looked them up) give the lexicon ids of
    # the terms some passage holds; a term they lack (unknown, or not counted yet during
    # a first load) is asked about instead.
    found = lookup(conn, sorted(among)).found
    if chunk.terms is None or not among <= found.keys():
        held = store.chunk_terms_among(conn, chunk.id, among)
    else:
        ids = set(chunk.terms)
        held = {t for t, (tid, _) in found.items() if tid in ids}
    return max((len(t & held) / len(t) for t in qterms if t), default=0.0)


def truncate_to_budget(hit: Hit, budget: int) -> None:
    """Keep the lines that fit in ``budget`` tokens and narrow the citation to them.

    Headings alone answer nothing: they may take at most half the room, and the first
    body line is cut inside its text when it does not fit whole."""
    limit = budget * 4
    kept: list[str] = []
    used, body = 0, False
    for line in hit.text.split("\n"):
        heading = line.lstrip().startswith("#")
        room = (limit // 2 if heading and not body else limit) - used
        if len(line) + 1 <= room:
            kept.append(line)
            used += len(line) + 1
            body = body or (bool(line.strip()) and not heading)
            continue
        if body or (not heading and room <= 1):
            break
        kept.append(_cut_line(line, room - 1))
        used += len(kept[-1]) + 1
        if not heading:
            break
    hit.text = "\n".join(kept)
    hit.end_line = min(hit.end_line, hit.start_line + len(kept) - 1)
    hit.tokens = estimate_tokens(hit.text)
    hit.truncated = True


def _cut_line(line: str, room: int) -> str:
    """The head of ``line`` in at most ``room`` characters, at a word boundary when one is
    near, marked with an ellipsis so the reader knows the line goes on."""
    if room <= 1:
        return ""
    head = line[: room - 1]
    word_end = head.rfind(" ")
    if word_end >= room // 2:
        head = head[:word_end]
    return head.rstrip() + "…"


def _best_ranks(lists: list[list[int]]) -> dict[int, int]:
    best: dict[int, int] = {}
    for ids in lists:
        for rank, cid in enumerate(ids, start=1):
            best[cid] = min(best.get(cid, rank), rank)
    return best


def _min_rank(ranks: dict[int, int], group: list[ChunkRow]) -> int | None:
    found = [ranks[r.id] for r in group if r.id in ranks]
    return min(found) if found else None


def _merge_adjacent(chosen: list[ChunkRow]) -> list[list[ChunkRow]]:
    """Merge chunks of one document whose line ranges touch (transitively: A, C then B
    become one hit), keeping the delivery order of each group's first chunk."""
    groups: list[list[ChunkRow]] = []
    for row in chosen:
        touching = [g for g in groups if _touches(g, row)]
        if not touching:
            groups.append([row])
            continue
        first = touching[0]
        first.append(row)
        for other in touching[1:]:
            first.extend(other)
            groups.remove(other)
        first.sort(key=lambda r: r.start)
    return groups


def _touches(group: list[ChunkRow], row: ChunkRow) -> bool:
    """Same note, and line ranges that overlap or meet."""
    return group[0].doc_id == row.doc_id and any(
        row.start <= r.end + 1 and r.start <= row.end + 1 for r in group
    )


def _is_stale(vault: Path, row: ChunkRow) -> bool:
    """The note's file no longer holds what was indexed. A new mtime alone is not enough:
    a copy, a checkout or a sync tool touches files without changing them, and every hit
    would be flagged until the next index run. Only then is the file read and hashed."""
    path = os.path.join(vault, row.path)  # os.path, not a Path per hit (7 -> 4 µs)
    try:
        st = os.stat(path)
        if st.st_size != row.size:
            return True
        if st.st_mtime_ns == row.mtime_ns:
            return False
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").digest() != bytes(row.sha256)
    except OSError:
        return True
