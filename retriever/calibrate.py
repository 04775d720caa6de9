"""Calibration: choose the ranking and the absence model for this vault and this model.

1. Pseudo-queries from the vault (``retriever.pseudo``), split by note into a half to
   choose on and a half to report on.
2. Every arm runs once per query (BM25, cosine, titles); candidate rankings are then
   fused in memory, exactly as a search fuses them, and scored by nDCG@10 of the query's
   note. Coordinate ascent over the fusion method and its weights, the title weight, the
   graph weight and the identifier lean; a simpler choice wins when the difference is
   within the noise of the paired per-query differences.
3. Absence: the model-dependent threshold (best cosine, or the BM25 lead without a model)
   is a quantile of what answerable pseudo-queries reach; both rates are reported on the
   held-back half, with each query's note there and left out.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import psycopg

from retriever import absence, languages
from retriever.calibration_store import LEXICAL_KEY, save
from retriever.embed import Embedder, InvalidVectorError
from retriever.lexical import (
    BM25Params,
    TermStatsCache,
    idf,
    named_words,
    query_terms,
    term_idf,
    tokenize,
)
from retriever.passage_text import unpack
from retriever.pseudo import NoteSample, PseudoQuery, Section, make_queries, name_key, note_order
from retriever.query_words import QueryWords, embedding_text
from retriever.ranking import (
    DEFAULT_RANKING,
    Arms,
    Ranking,
    Walk,
    doc_rank,
    fuse,
    ranked_docs,
)
from retriever.search import Scope, Searcher, Spare, run_beside
from retriever.titles import TitleIndex, note_names

log = logging.getLogger(__name__)

MIN_NOTES = 30  # below this a vault is too small to calibrate: defaults apply
MAX_QUERIES = 400
EMBED_BATCH = 64
FOUND_DEPTH = 3  # a note "found" by a query: among the first three
# Fewer pseudo-queries than this and the choice is noise (a 32-note vault gives ~80):
# the defaults stay.
MIN_QUERIES = 100
MIN_ABSENCE_QUERIES = 20  # per half; fewer and the default absence rule stays
NOISE_FLOOR = 0.002  # nDCG differences below this are never worth a more complex ranking
NOISE_SE = 0.5  # "within noise": this many standard errors of the paired differences

# Simplest first: a later fusion must beat an earlier one by more than the noise. Linear
# fusion leads (with the right semantic weight it matched, within 0.003, or beat RRF on
# all seven development sets); RRF and interleaving follow. Within a fusion the best
# semantic weight is taken (Chooser.best_weights).
METHOD_GRID = [
    *[Ranking("linear", sw) for sw in (0.125, 0.25, 0.5, 1.0, 2.0)],
    *[Ranking("rrf", sw, k) for k in (60.0, 20.0) for sw in (0.5, 0.25, 1.0)],
    *[Ranking("interleave", sw) for sw in (0.5, 1.0)],
]
SINGLE_ARMS = [Ranking("lexical"), Ranking("semantic")]
CLEAR_WIN = 2.0  # standard errors by which one arm alone must beat the fusion to replace it
# Pseudo-queries are cut from the notes themselves, so they flatter the lexical arm: on
# four development collections with a static and a transformer model, the semantic
# weight that serves real questions best is about twice the pseudo-query optimum. The
# choice is made on pseudo-queries, then its semantic weight is corrected by this factor,
# when the semantic arm earned a weight at all (see ``corrected``).
SEMANTIC_CORRECTION = 2.0
TITLE_GRID = (0.0, 0.25, 0.5, 1.0, 2.0)
GRAPH_GRID = (0.0, 0.25, 0.5, 1.0)
LEAN_GRID = (1.0, 2.0)


class CachedWalk:
    """The graph walk, memoised on its seeds (weights to two decimals of their share):
    candidate rankings mostly seed it with the same notes."""

    def __init__(self, walk: Walk) -> None:
        self._walk = walk
        self._memo: dict[tuple[tuple[int, float], ...], list[int]] = {}

    def __call__(self, seeds: Mapping[int, float]) -> list[int]:
        total = sum(seeds.values()) or 1.0
        key = tuple(sorted((d, round(w / total, 2)) for d, w in seeds.items()))
        if key not in self._memo:
            self._memo[key] = self._walk(seeds)
        return self._memo[key]


@dataclass(slots=True)
class Workbench:
    """Everything candidate rankings are scored on: the queries and their arms."""

    queries: list[PseudoQuery]
    arms: list[Arms]
    first_chunk: Callable[[int], int | None]
    walk: Walk | None
    prior: Mapping[int, float] = field(default_factory=dict)  # graph.link_prior

    def fused(self, arms: Arms, ranking: Ranking) -> dict[int, float]:
        """``arms`` fused as a search fuses them (``arms.doc_of`` gains lifted chunks)."""
        walk, prior = self.walk, self.prior
        return fuse(arms, ranking, first_chunk=self.first_chunk, walk=walk, prior=prior)[0]

    def ndcg(self, ranking: Ranking, which: Sequence[int]) -> np.ndarray:
        out = np.zeros(len(which))
        for n, i in enumerate(which):
            arms = self.arms[i].copy()
            rank = doc_rank(self.fused(arms, ranking), arms.doc_of, self.queries[i].doc)
            out[n] = 1.0 / math.log2(rank + 2) if rank is not None and rank < 10 else 0.0
        return out


# --- loading ---------------------------------------------------------------------------


def load_notes(
    conn: psycopg.Connection, limit: int
) -> tuple[list[NoteSample], set[str], set[str], int]:
    """(sampled notes, names several notes share, headings many notes repeat, note count)."""
    docs = conn.execute("SELECT id, path, title, aliases FROM documents").fetchall()
    by_path = {r[1]: r for r in docs}
    chosen = note_order(by_path)[:limit]
    ids = [int(by_path[p][0]) for p in chosen]
    rows = conn.execute(
        """
        SELECT c.doc_id, c.id, c.heading_trail, p.ztext, c.content_type
        FROM chunks c JOIN passages p ON p.hash = c.passage_hash
        WHERE c.doc_id = ANY(%s) ORDER BY c.doc_id, c.ordinal
        """,
        (ids,),
    ).fetchall()
    sections: dict[int, list[Section]] = {}
    for doc, chunk, trail, text, ctype in rows:
        sections.setdefault(int(doc), []).append(
            Section(int(chunk), tuple(trail), unpack(text), ctype)
        )
    anchors = _anchors(conn, ids)
    notes = [
        NoteSample(
            int(by_path[p][0]),
            p,
            by_path[p][2],
            tuple(by_path[p][3]),
            tuple(sections.get(int(by_path[p][0]), ())),
            tuple(anchors.get(int(by_path[p][0]), ())),
        )
        for p in chosen
    ]
    return notes, _shared_names(docs), _common_headings(conn), len(docs)


def _anchors(conn: psycopg.Connection, ids: list[int], per_note: int = 8) -> dict[int, list[str]]:
    """Lines of other notes that link to each note (embeds and frontmatter left out)."""
    rows = conn.execute(
        """
        SELECT l.resolved, l.line - c.start_line, p.ztext
        FROM links l
        JOIN chunks c ON c.doc_id = l.doc_id AND l.line BETWEEN c.start_line AND c.end_line
        JOIN passages p ON p.hash = c.passage_hash
        WHERE l.resolved = ANY(%s) AND l.resolved <> l.doc_id AND l.kind IN ('wiki', 'markdown')
        ORDER BY l.resolved, l.doc_id, l.line
        """,
        (ids,),
    ).fetchall()
    out: dict[int, list[str]] = {}
    for doc, offset, text in rows:
        lines = unpack(text).split("\n")
        found = out.setdefault(int(doc), [])
        if 0 <= offset < len(lines) and len(found) < per_note and lines[offset] not in found:
            found.append(lines[offset])
    return out


def _shared_names(docs: Sequence[tuple[Any, ...]]) -> set[str]:
    seen: dict[str, int] = {}
    for _, path, title, aliases in docs:
        for name in note_names(path, title, aliases):
            key = name_key(name)
            seen[key] = seen.get(key, 0) + 1
    return {k for k, n in seen.items() if n > 1}


def _common_headings(conn: psycopg.Connection) -> set[str]:
    rows = conn.execute(
        """
        SELECT h, count(DISTINCT doc_id) FROM chunks, unnest(heading_trail[2:]) AS h
        GROUP BY h HAVING count(DISTINCT doc_id) > 2
        """
    ).fetchall()
    return {name_key(r[0]) for r in rows}


def _rarity(conn: psycopg.Connection, notes: Sequence[NoteSample]) -> dict[str, float]:
    """IDF of every term in the sampled notes (chunk-level, as BM25 sees it)."""
    terms = {t for n in notes for s in n.sections for t in tokenize(s.text)}
    return term_idf(conn, sorted(terms))[0]


# --- running the arms ------------------------------------------------------------------


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> list[np.ndarray | None]:
    """Query vectors in batches; a batch the model refuses is retried one by one."""
    out: list[np.ndarray | None] = []
    for start in range(0, len(texts), EMBED_BATCH):
        batch = list(texts[start : start + EMBED_BATCH])
        try:
            out.extend(embedder.embed(batch))
        except InvalidVectorError:  # one query of unknown words spoils its batch
            for text in batch:
                try:
                    out.append(embedder.embed([text])[0])
                except InvalidVectorError:
                    out.append(None)
    return out


def run_arms(
    conn: psycopg.Connection,
    searcher: Searcher,
    queries: Sequence[PseudoQuery],
    *,
    embedder: Embedder | None,
    model: tuple[int, int] | None,
    bm25: BM25Params,
    spare: Spare | None = None,
    titles: TitleIndex | None = None,
    words: QueryWords = "all",
    semantic_only: bool = False,
) -> list[Arms]:
    """Every pseudo-query's arms (``titles``: the title index, else looked up; ``words``:
    what the semantic arm embeds; ``semantic_only``: that arm alone), without
    query feedback (see retriever.feedback: pseudo-queries cannot judge it). With
    ``spare`` (a second connection's source), the
    second half runs on it, on ``conn``'s snapshot, while the first half runs on ``conn``:
    the same arms, in most of the time (the server has a core for each). ``conn`` must
    not be inside a savepoint then: a subtransaction cannot export its snapshot."""
    vectors: list[np.ndarray | None] = [None] * len(queries)
    if embedder is not None and model is not None:
        vectors = embed_queries(embedder, [embedding_text(q.text, words) for q in queries])
    mode = ("semantic" if semantic_only else "hybrid") if model is not None else "lexical"
    scope = Scope("", {})
    # Each term's statistics read once for all the pseudo-queries (they share many words),
    # in a cache of this calibration's own: its statements do not share the snapshot a
    # search's cache is keyed by.
    lookup = TermStatsCache().lookup("calibration")
    titles = titles if titles is not None else searcher.titles.get(conn)

    def arms_of(c: psycopg.Connection, part: range) -> list[Arms]:
        out: list[Arms] = []
        for i in part:
            q, v = queries[i], vectors[i]
            vecs = [v] if v is not None else []
            arms = searcher.gather(
                c, [q.text], mode, model, vecs, scope, bm25, titles=titles, lookup=lookup
            )
            out.append(arms.without_chunk(q.hide) if q.hide is not None else arms)
        return out

    if spare is None or len(queries) < 2:
        return arms_of(conn, range(len(queries)))
    half = len(queries) // 2
    with ThreadPoolExecutor(1, thread_name_prefix="retriever-calibrate") as worker:
        later = run_beside(worker, conn, spare, lambda c: arms_of(c, range(half, len(queries))))
        first = arms_of(conn, range(half))
        rest = later.result()
    return first + (rest if rest is not None else arms_of(conn, range(half, len(queries))))


# --- choosing --------------------------------------------------------------------------


def paired_lead(challenger: np.ndarray, incumbent: np.ndarray) -> tuple[float, float]:
    """Mean of the per-query differences and its standard error."""
    diff = challenger - incumbent
    noise = float(diff.std(ddof=1)) / math.sqrt(len(diff)) if len(diff) > 1 else 0.0
    return float(diff.mean()), noise


@dataclass(slots=True)
class Chooser:
    """Scores candidates on both halves (memoised) and picks with a simplicity bias."""

    bench: Workbench
    choose: list[int]
    report: list[int]
    seen: dict[Ranking, np.ndarray] = field(default_factory=dict)
    reported: dict[Ranking, float] = field(default_factory=dict)

    def score(self, ranking: Ranking) -> np.ndarray:
        if ranking not in self.seen:
            self.seen[ranking] = self.bench.ndcg(ranking, self.choose)
        return self.seen[ranking]

    def report_score(self, ranking: Ranking) -> float:
        if ranking not in self.reported:
            self.reported[ranking] = float(self.bench.ndcg(ranking, self.report).mean())
        return self.reported[ranking]

    def lead(self, challenger: Ranking, incumbent: Ranking) -> tuple[float, float]:
        """Mean paired nDCG difference and its standard error."""
        return paired_lead(self.score(challenger), self.score(incumbent))

    def pick(self, candidates: Sequence[Ranking]) -> Ranking:
        """The first candidate (they come simplest first) whose mean nDCG is within the
        noise of the best: NOISE_SE standard errors of the paired differences."""
        best = max(candidates, key=lambda r: (float(self.score(r).mean()), -candidates.index(r)))
        for ranking in candidates:
            behind, noise = self.lead(best, ranking)
            if behind <= max(NOISE_FLOOR, NOISE_SE * noise):
                return ranking
        return best

    def best_weights(self, candidates: Sequence[Ranking]) -> list[Ranking]:
        """The best-scoring semantic weight of each fusion (method and RRF k), in the order
        the fusions first appear. No weight is simpler than another, so none is preferred
        within the noise: listing one first would be a prior for one model's scale."""
        best: dict[tuple[str, float], Ranking] = {}
        for r in candidates:
            family = (r.method, r.rrf_k if r.method == "rrf" else 0.0)
            held = best.get(family)
            if held is None or float(self.score(r).mean()) > float(self.score(held).mean()):
                best[family] = r
        return list(best.values())

    def clearly_better(self, challenger: Ranking, incumbent: Ranking) -> bool:
        ahead, noise = self.lead(challenger, incumbent)
        return ahead > max(NOISE_FLOOR, CLEAR_WIN * noise)

    def table(self) -> list[dict[str, Any]]:
        rows = [
            {
                "ranking": r.label(),
                "choose": round(float(s.mean()), 4),
                "report": round(self.report_score(r), 4),
            }
            for r, s in self.seen.items()
        ]
        return sorted(rows, key=lambda r: -r["choose"])


def choose_ranking(chooser: Chooser, *, hybrid: bool) -> Ranking:
    """Coordinate ascent: fusion method, title weight, graph weight, identifier lean, and
    the method once more with the others settled."""
    grid = METHOD_GRID if hybrid else [Ranking("lexical", graph_weight=0.0)]
    current = chooser.pick(
        chooser.best_weights([r.with_(title_weight=0.0, graph_weight=0.0) for r in grid])
    )
    if hybrid:  # an arm alone replaces the fusion only when it clearly wins
        for arm in SINGLE_ARMS:
            arm = arm.with_(title_weight=0.0, graph_weight=0.0)
            if chooser.clearly_better(arm, current):
                current = arm
    current = chooser.pick([current.with_(title_weight=t) for t in TITLE_GRID])
    current = chooser.pick([current.with_(graph_weight=g) for g in GRAPH_GRID])
    current = chooser.pick([current.with_(identifier_lean=x) for x in LEAN_GRID])
    if hybrid:
        settled = {
            "title_weight": current.title_weight,
            "graph_weight": current.graph_weight,
            "identifier_lean": current.identifier_lean,
        }
        if current.method not in ("lexical", "semantic"):
            current = chooser.pick(
                chooser.best_weights([current, *[r.with_(**settled) for r in grid]])
            )
    return current


def corrected(ranking: Ranking, chooser: Chooser) -> Ranking:
    """The pseudo-query choice with its semantic weight corrected (see SEMANTIC_CORRECTION),
    when the fusion beats BM25 alone (with the same title, graph and lean settings) on the
    choose half. When it does not, the fusion is kept only because one arm alone must win
    clearly to replace it, and doubling a weight the pseudo-queries gave no credit would
    be a guess (CISI, static model: 0.413 nDCG@10 with it doubled, BM25 alone 0.415,
    0.417 kept as chosen)."""
    if ranking.method in ("lexical", "semantic"):
        return ranking
    if float(chooser.score(ranking).mean()) <= float(chooser.score(lexical_twin(ranking)).mean()):
        return ranking
    return ranking.with_(semantic_weight=ranking.semantic_weight * SEMANTIC_CORRECTION)


def lexical_twin(ranking: Ranking) -> Ranking:
    """``ranking`` with BM25 alone in place of its fusion (its other settings kept)."""
    return ranking.with_(method="lexical", query_words="all")


# --- query words -----------------------------------------------------------------------

WORDS_PROBE = Ranking("semantic", title_weight=0.0, graph_weight=0.0, identifier_lean=1.0)


def with_semantic(arms: Arms, other: Arms) -> Arms:
    """``arms`` with the semantic lists of ``other`` (the same query, embedded otherwise)."""
    doc_of = {**arms.doc_of, **other.doc_of}
    return Arms(arms.lexical, other.semantic, arms.title, doc_of, arms.identifier, arms.feedback)


def choose_words(every: Chooser, content: Chooser) -> tuple[QueryWords, dict[str, Any]]:
    """Embed the queries' content words only when the semantic arm alone clearly does
    better with them on the choose half (every word is the simpler choice: the query as
    written). Returns the choice and both forms' scores."""
    ahead, noise = paired_lead(content.score(WORDS_PROBE), every.score(WORDS_PROBE))
    chosen: QueryWords = "content" if ahead > max(NOISE_FLOOR, CLEAR_WIN * noise) else "all"
    scores = {
        words: {
            "choose": round(float(c.score(WORDS_PROBE).mean()), 4),
            "report": round(c.report_score(WORDS_PROBE), 4),
        }
        for words, c in (("all", every), ("content", content))
    }
    return chosen, {"chosen": chosen, "semantic_only": scores}


def query_form(
    every: Chooser,
    content: Callable[[], Chooser],
    *,
    forced: QueryWords | None,
    few: bool,
) -> tuple[QueryWords, dict[str, Any], Chooser]:
    """The words the semantic arm embeds, the report of that choice, and the chooser on
    that form's arms. ``every``: the arms of the queries as written; ``content``: makes
    the chooser on the content words' arms (a second semantic pass, run only when needed);
    ``forced``: the setting, which calibration then fits its thresholds to; ``few``: too
    few pseudo-queries to choose (the query is embedded as written)."""
    if forced is not None:
        return forced, {"chosen": forced, "set": True}, content() if forced == "content" else every
    if few:
        return "all", {}, every
    other = content()
    words, report = choose_words(every, other)
    return words, report, other if words == "content" else every


# --- absence ---------------------------------------------------------------------------


@dataclass(slots=True)
class AbsenceSignals:
    present: list[dict[str, float]]  # each query, its note there
    missing: list[dict[str, float]]  # the same query, its note left out
    found: list[bool]  # the note was among the first FOUND_DEPTH with it there


def absence_signals(
    conn: psycopg.Connection,
    bench: Workbench,
    ranking: Ranking,
    which: Sequence[int],
    vault_languages: Sequence[str] = (),
) -> AbsenceSignals:
    """Signals of each query with its note there, and with its note left out."""
    cases: list[tuple[int, Arms, int | None]] = []
    found: list[bool] = []
    for i in which:
        target = bench.queries[i].doc
        for arms in (bench.arms[i].copy(), bench.arms[i].without_doc(target)):
            scores = bench.fused(arms, ranking)
            top = min(scores, key=lambda c: (-scores[c], c)) if scores else None
            if len(cases) % 2 == 0:
                found.append(target in ranked_docs(scores, arms.doc_of)[:FOUND_DEPTH])
            cases.append((i, arms, top))
    terms = _chunk_term_ids(conn, [t for _, _, t in cases if t is not None])
    lex = Lexicon.load(conn, {t for q in bench.queries for t in query_terms(q.text)})
    held_by = _doc_term_counts(conn, [bench.queries[i].doc for i in which])
    present: list[dict[str, float]] = []
    missing: list[dict[str, float]] = []
    for n, (i, arms, top) in enumerate(cases):
        qterms = query_terms(bench.queries[i].text)
        held = terms.get(top, set()) if top is not None else set()
        coverage = sum(1 for t in qterms if lex.ids.get(t) in held) / len(qterms) if qterms else 0.0
        text = bench.queries[i].text
        left_out = held_by.get(bench.queries[i].doc) if n % 2 else None
        sig = absence.signals(
            arms,
            coverage,
            lex.unknown(qterms, left_out),
            named=absence.unknown_name(named_words(text), lex.holds(left_out), qterms),
            foreign=absence.foreign([text], vault_languages),
            terms=len(qterms),
        )
        (present if n % 2 == 0 else missing).append(sig)
    return AbsenceSignals(present, missing, found)


@dataclass(frozen=True, slots=True)
class Lexicon:
    """Chunk frequencies of the pseudo-queries' terms, to tell which words the vault
    holds with a note left out."""

    n_chunks: int
    ids: dict[str, int]
    dfs: dict[str, int]

    @classmethod
    def load(cls, conn: psycopg.Connection, terms: set[str]) -> Lexicon:
        rows = conn.execute(
            "SELECT term, id, df FROM lexicon WHERE term = ANY(%s)", (list(terms),)
        ).fetchall()
        n = conn.execute("SELECT n_chunks FROM lex_stats WHERE id = 1").fetchone()
        ids = {r[0]: int(r[1]) for r in rows}
        return cls(int(n[0]) if n else 0, ids, {r[0]: int(r[2]) for r in rows})

    def holds(self, left_out: DocTerms | None) -> Callable[[str], bool]:
        """Whether some passage holds a term, with ``left_out``'s chunks removed."""
        counts = left_out.counts if left_out else Counter()
        return lambda t: self.dfs.get(t, 0) - counts[self.ids.get(t, -1)] > 0

    def unknown(self, qterms: Counter[str], left_out: DocTerms | None) -> float:
        """``absence.unknown_share`` of the query, with ``left_out``'s chunks removed."""
        counts = left_out.counts if left_out else Counter()
        n = self.n_chunks - (left_out.chunks if left_out else 0)
        dfs = {t: self.dfs.get(t, 0) - counts[self.ids.get(t, -1)] for t in qterms}
        idfs = {t: idf(n, df) for t, df in dfs.items() if df > 0}
        return absence.unknown_share(qterms, idfs, idf(n, 0))


@dataclass(frozen=True, slots=True)
class DocTerms:
    chunks: int
    counts: Counter[int]  # lexicon id -> chunks of the note that hold it


def _doc_term_counts(conn: psycopg.Connection, docs: list[int]) -> dict[int, DocTerms]:
    rows = conn.execute(
        "SELECT doc_id, terms FROM chunks WHERE doc_id = ANY(%s)", (docs,)
    ).fetchall()
    counts: dict[int, Counter[int]] = {}
    chunks: Counter[int] = Counter()
    for doc, ids in rows:
        counts.setdefault(int(doc), Counter()).update(set(ids))
        chunks[int(doc)] += 1
    return {d: DocTerms(chunks[d], c) for d, c in counts.items()}


def _chunk_term_ids(conn: psycopg.Connection, chunks: list[int]) -> dict[int, set[int]]:
    rows = conn.execute("SELECT id, terms FROM chunks WHERE id = ANY(%s)", (chunks,)).fetchall()
    return {int(r[0]): set(r[1]) for r in rows}


def fit_absence(
    conn: psycopg.Connection,
    chooser: Chooser,
    ranking: Ranking,
    *,
    semantic: bool,
    coverage: float,
    quantile: float,
    vault_languages: Sequence[str] = (),
) -> dict[str, Any] | None:
    """Thresholds from the choose half; both rates on the report half (the same queries
    with their note there, and left out). Title queries are left out: they name their
    note, unlike questions. None when too few are left."""
    queries = chooser.bench.queries
    choose = [i for i in chooser.choose if queries[i].kind != "title"]
    report = [i for i in chooser.report if queries[i].kind != "title"]
    if min(len(choose), len(report)) < MIN_ABSENCE_QUERIES:
        return None
    fit = absence_signals(conn, chooser.bench, ranking, choose, vault_languages)
    model = absence.fit(
        fit.present,
        semantic=semantic,
        coverage=coverage,
        quantile=quantile,
        vault_languages=vault_languages,
    )
    rep = absence_signals(conn, chooser.bench, ranking, report, vault_languages)
    found = [m for m, f in zip(rep.missing, rep.found, strict=True) if f]
    return {
        "model": model.to_dict(),
        "report": {
            **absence.rates(model, rep.present, rep.missing),
            "found_absent_flagged": absence.rates(model, [], found)["absent_flagged"],
        },
    }


# --- the whole run ---------------------------------------------------------------------


def _lexical_only(arms: Arms) -> Arms:
    return Arms(arms.lexical, [], arms.title, arms.doc_of, arms.identifier)


def _summary(chooser: Chooser, pseudo_best: Ranking, ranking: Ranking) -> dict[str, Any]:
    return {
        "ranking": ranking.to_dict(),
        "label": ranking.label(),
        "pseudo_best": pseudo_best.label(),
        "ndcg_choose": round(float(chooser.score(ranking).mean()), 4),
        "ndcg_report": round(chooser.report_score(ranking), 4),
        "candidates": chooser.table(),
    }


def calibrate(
    conn: psycopg.Connection,
    searcher: Searcher,
    *,
    embedder: Embedder | None,
    model: tuple[int, int] | None,
    bm25: BM25Params,
    absent_coverage: float,
    absent_quantile: float,
    spare: Spare | None = None,
    query_words: QueryWords | None = None,
) -> dict[str, Any]:
    """Calibrate and store the result for the model (and for lexical-only searches).
    Returns the report; ``status`` is "calibrated" or "too_small". ``spare``: a second
    connection's source, to run the pseudo-queries on two connections (see run_arms);
    ``query_words``: the form the settings impose (None: calibration chooses)."""
    started = time.perf_counter()
    key = embedder.fingerprint if embedder is not None and model is not None else LEXICAL_KEY
    notes, shared, common, n_docs = load_notes(conn, MAX_QUERIES)
    if n_docs < MIN_NOTES:
        return _too_small(
            conn, key, n_docs, f"{n_docs} notes: too few to calibrate (at least {MIN_NOTES})"
        )
    queries = make_queries(
        notes,
        limit=MAX_QUERIES,
        shared_names=shared,
        common_headings=common,
        rarity=_rarity(conn, notes),
    )
    few = _too_few_to_choose(queries)
    if few and sum(q.kind != "title" for q in queries) < 2 * MIN_ABSENCE_QUERIES:
        return _too_small(
            conn, key, n_docs, f"the notes give only {len(queries)} usable pseudo-queries"
        )
    titles = searcher.titles.get(conn).preload(conn)
    vault_languages = languages.present(s.text for n in notes for s in n.sections)
    gather = partial(
        run_arms,
        conn,
        searcher,
        queries,
        embedder=embedder,
        model=model,
        bm25=bm25,
        spare=spare,
        titles=titles,
    )
    arms = gather()
    walker, prior = searcher.links(conn, Scope("", {}))
    walk = CachedWalk(walker)
    split = {s: [i for i, q in enumerate(queries) if q.split == s] for s in ("choose", "report")}
    gathered = time.perf_counter() - started

    def chooser(arm_lists: list[Arms]) -> Chooser:
        bench = Workbench(queries, arm_lists, titles.first_chunk, walk, prior)
        return Chooser(bench, split["choose"], split["report"])

    limits: dict[str, Any] = {
        "coverage": absent_coverage,
        "quantile": absent_quantile,
        "vault_languages": vault_languages,
    }
    base = _base_report(conn, n_docs, queries, split, few)
    lexical = chooser([_lexical_only(a) for a in arms])
    lex_ranking = DEFAULT_RANKING if few else choose_ranking(lexical, hybrid=False)
    lex_absence = fit_absence(conn, lexical, lex_ranking, semantic=False, **limits)
    results = {
        LEXICAL_KEY: {
            **base,
            **_summary(lexical, lex_ranking, lex_ranking),
            "absence": _present({"lexical": lex_absence}),
        }
    }
    if model is not None and embedder is not None:

        def content() -> Chooser:
            again = gather(words="content", semantic_only=True)
            return chooser([with_semantic(a, c) for a, c in zip(arms, again, strict=True)])

        words, why, hybrid_chooser = query_form(chooser(arms), content, forced=query_words, few=few)
        hybrid = _hybrid_result(conn, hybrid_chooser, few, lex_absence, limits, words)
        if why:
            hybrid["query_words"] = why
        results[embedder.fingerprint] = {
            **base,
            "model": embedder.model_id,
            "vault_languages": list(vault_languages),  # for query feedback
            **hybrid,
        }
    seconds = {"total": round(time.perf_counter() - started, 2), "arms": round(gathered, 2)}
    for row_key, result in results.items():
        save(conn, row_key, n_docs, [q.to_dict() for q in queries], {**result, "seconds": seconds})
    log.info("calibrated on %d pseudo-queries in %.1fs", len(queries), seconds["total"])
    return {**results[key], "seconds": seconds}


def _too_few_to_choose(queries: Sequence[PseudoQuery]) -> bool:
    """Too few pseudo-queries (overall, or in either half) to choose a ranking on."""
    halves = [sum(q.split == s for q in queries) for s in ("choose", "report")]
    return len(queries) < MIN_QUERIES or min(halves) < MIN_QUERIES // 4


def _base_report(
    conn: psycopg.Connection,
    n_docs: int,
    queries: Sequence[PseudoQuery],
    split: dict[str, list[int]],
    few: bool,
) -> dict[str, Any]:
    """What a calibration ran on: the notes, the pseudo-queries and their split."""
    generation = conn.execute("SELECT value FROM meta WHERE key = 'last_index'").fetchone()
    source = (
        f"default: {len(queries)} pseudo-queries are too few to choose "
        "a ranking (absence thresholds are still calibrated)"
        if few
        else "pseudo-queries"
    )
    return {
        "status": "calibrated",
        "notes": n_docs,
        "queries": len(queries),
        "vault_generation": (generation[0] or {}).get("at") if generation else None,
        "kinds": dict(Counter(q.kind for q in queries)),
        "choose": len(split["choose"]),
        "report": len(split["report"]),
        "ranking_source": source,
    }


def _hybrid_result(
    conn: psycopg.Connection,
    hybrid: Chooser,
    few: bool,
    lex_absence: dict[str, Any] | None,
    limits: dict[str, Any],
    words: QueryWords,
) -> dict[str, Any]:
    """The ranking chosen for the model (corrected for the pseudo-queries' lexical bias)
    on the arms of the query ``words`` chosen, and its absence thresholds, beside the
    lexical ones that serve when it is down."""
    pseudo_best = DEFAULT_RANKING if few else choose_ranking(hybrid, hybrid=True)
    pseudo_best = pseudo_best.with_(query_words=words)
    ranking = pseudo_best if few else corrected(pseudo_best, hybrid)
    absence = fit_absence(conn, hybrid, ranking, semantic=True, **limits)
    fused = pseudo_best.method not in ("lexical", "semantic") and not few
    return {
        **_summary(hybrid, pseudo_best, ranking),
        "semantic_correction": (
            round(ranking.semantic_weight / pseudo_best.semantic_weight, 3) if fused else None
        ),
        "absence": _present({"hybrid": absence, "lexical": lex_absence}),
    }


def _too_small(conn: psycopg.Connection, key: str, n_docs: int, why: str) -> dict[str, Any]:
    """Stored too, so that status says why the defaults apply (and the next index run
    tries again only once the vault has grown)."""
    result = {
        "status": "too_small",
        "notes": n_docs,
        "min_notes": MIN_NOTES,
        "message": f"{why}; the default ranking applies",
    }
    save(conn, key, n_docs, [], result)
    return result


def _present(fits: dict[str, Any]) -> dict[str, Any]:
    return {arm: fit for arm, fit in fits.items() if fit is not None}
