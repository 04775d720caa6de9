"""Hybrid search: BM25 and cosine arms, link-graph walk, fusion, token budget, citations,
and absence signals. One function serves the CLI, the MCP server and hooks."""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from retriever import store
from retriever.budget import allocate, estimate_tokens
from retriever.embed import Embedder, EmbedderError, InvalidVectorError
from retriever.fuse import FUSIONS, RankedList, interleave, linear, rrf
from retriever.graph import LinkGraph, random_walk_scores
from retriever.lexical import BM25Params, bm25_search, query_terms
from retriever.vector import QueryVectorCache, vector_search

MODES = ("hybrid", "lexical", "semantic")
MAX_QUERIES = 4
MAX_QUERY_CHARS = 2_000
HARD_QUERY_LIMIT = 100_000  # longer than this is refused, not truncated
MIN_BUDGET, MAX_BUDGET = 50, 20_000
ARM_DEPTH = 50  # candidates per arm and query

# Absence thresholds, calibrated on the eval's unanswerable cases (test vault + Dendron,
# m2v-minilm-256): flags 73% / 50% of them, 11% / 20% of answerable ones. The cosine one
# depends on the model: recalibrate (RETRIEVER_ABSENT_COSINE) for another.
ABSENT_COVERAGE = 0.4
ABSENT_COSINE = 0.7

_IDENTIFIER = re.compile(r"[a-z][A-Z]|\w_\w|\w\.\w|\d|::|->|\(\)")


class SearchInputError(ValueError):
    """The query or options are unusable; the message says how to fix them."""


@dataclass(slots=True)
class SearchOptions:
    budget_tokens: int = 1200
    mode: str = "hybrid"
    fusion: str = "linear"
    rrf_k: float = 60.0
    graph: bool = True
    graph_weight: float = 1.0
    semantic_weight: float = 0.5
    absent_coverage: float = ABSENT_COVERAGE
    absent_cosine: float = ABSENT_COSINE
    doc_weight: float = 0.0  # weight of the document-level BM25 list (eval: no gain)
    folder: str | None = None
    tags: list[str] | None = None
    note_type: str | None = None
    modified_after: datetime | None = None
    limit: int = 30
    bm25: BM25Params = field(default_factory=BM25Params)


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
    refreshed_files: int = 0
    took_ms: float = 0.0
    ranked_paths: list[str] = field(default_factory=list)  # full document ranking (eval)

    def to_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "mode": self.mode,
            "degraded_reason": self.degraded_reason,
            "likely_absent": self.likely_absent,
            "coverage": round(self.coverage, 3),
            "best_cosine": None if self.best_cosine is None else round(self.best_cosine, 4),
            "budget_tokens": self.budget_tokens,
            "used_tokens": self.used_tokens,
            "fusion": self.fusion,
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


def validate_queries(queries: str | Sequence[str]) -> list[str]:
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, Sequence) or not all(isinstance(q, str) for q in queries):
        raise SearchInputError("queries must be a string or a list of 1-4 strings")
    cleaned: list[str] = []
    for q in queries:
        if len(q) > HARD_QUERY_LIMIT:
            raise SearchInputError(
                f"a query of {len(q)} characters is too long; send the question in at most "
                f"{MAX_QUERY_CHARS} characters"
            )
        q = "".join(ch if ch.isprintable() else " " for ch in q)
        q = " ".join(q.split())[:MAX_QUERY_CHARS]
        if q and q not in cleaned:
            cleaned.append(q)
    if not cleaned:
        raise SearchInputError("the query is empty: give at least one non-blank question")
    if len(cleaned) > MAX_QUERIES:
        raise SearchInputError(f"at most {MAX_QUERIES} queries per call (got {len(cleaned)})")
    return cleaned


def _check_options(opts: SearchOptions) -> None:
    if opts.mode not in MODES:
        raise SearchInputError(f"mode must be one of {', '.join(MODES)}")
    if opts.fusion not in FUSIONS:
        raise SearchInputError(f"fusion must be one of {', '.join(FUSIONS)}")
    if not MIN_BUDGET <= opts.budget_tokens <= MAX_BUDGET:
        raise SearchInputError(f"budget_tokens must be between {MIN_BUDGET} and {MAX_BUDGET}")
    if not 1 <= opts.limit <= 200:
        raise SearchInputError("limit must be between 1 and 200")


def looks_like_identifier(query: str) -> bool:
    """Code identifiers, versions and paths: lexical matching is what finds those."""
    words = query.split()
    return bool(words) and len(words) <= 4 and any(_IDENTIFIER.search(w) for w in words)


def _doc_filter(opts: SearchOptions) -> tuple[str, dict[str, object]]:
    """SQL over ``documents d`` for the caller's filters (values always bound)."""
    parts: list[str] = []
    params: dict[str, object] = {}
    if opts.folder:
        folder = opts.folder.strip().strip("/")
        if folder:
            parts.append("d.path LIKE %(f_folder)s ESCAPE '\\'")
            escaped = folder.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params["f_folder"] = escaped + "/%"
    if opts.tags:
        # Case-insensitive, and a tag matches its nested tags too (#homelab ⊇ #homelab/backup),
        # the way list_notes and Obsidian treat them.
        parts.append(
            "EXISTS (SELECT 1 FROM unnest(d.tags) AS t(tag), unnest(%(f_tags)s::text[]) AS q(tag)"
            " WHERE lower(t.tag) = q.tag OR starts_with(lower(t.tag), q.tag || '/'))"
        )
        params["f_tags"] = [t.lstrip("#").lower() for t in opts.tags if t.strip("# ")]
    if opts.note_type:
        parts.append("lower(d.note_type) = lower(%(f_type)s)")
        params["f_type"] = opts.note_type
    if opts.modified_after:
        parts.append("d.mtime_ns >= %(f_mtime)s")
        params["f_mtime"] = int(opts.modified_after.timestamp() * 1e9)
    return " AND ".join(parts), params


@dataclass(slots=True)
class _ChunkRow:
    id: int
    doc_id: int
    path: str
    title: str
    trail: list[str]
    start: int
    end: int
    ctype: str
    text: str
    tokens: int
    hash: bytes
    size: int
    mtime_ns: int


def _fetch_chunks(conn: psycopg.Connection, ids: Sequence[int]) -> dict[int, _ChunkRow]:
    rows = conn.execute(
        """
        SELECT c.id, c.doc_id, d.path, d.title, c.heading_trail, c.start_line, c.end_line,
               c.content_type, p.text, p.tokens, c.passage_hash, d.size, d.mtime_ns
        FROM chunks c JOIN documents d ON d.id = c.doc_id JOIN passages p ON p.hash = c.passage_hash
        WHERE c.id = ANY(%s)
        """,
        (list(ids),),
    ).fetchall()
    return {int(r[0]): _ChunkRow(int(r[0]), int(r[1]), r[2], r[3], list(r[4]), int(r[5]), int(r[6]),
                                 r[7], r[8], int(r[9]), bytes(r[10]), int(r[11]),
                                 int(r[12])) for r in rows}  # fmt: skip


class Searcher:
    """Holds per-process caches (query vectors, link graph) across searches."""

    def __init__(self) -> None:
        self.vectors = QueryVectorCache()
        self.graph = LinkGraph()
        self._pending: tuple[object, int, int | None] | None = None  # (generation, model, n)

    def _pending_vectors(self, conn: psycopg.Connection, model: int) -> int | None:
        """Passages without a vector for ``model`` (None: no vector at all), recounted only
        after an index run: the anti-join is too costly for every search."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'last_index'").fetchone()
        generation = str(row[0]) if row else None
        cached = self._pending
        if cached is not None and cached[0] == generation and cached[1] == model:
            return cached[2]
        has_any = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM embeddings WHERE model = %s)", (model,)
        ).fetchone()
        count = store.count_pending(conn, model) if has_any and has_any[0] else None
        self._pending = (generation, model, count)
        return count

    def search(
        self,
        conn: psycopg.Connection,
        queries: list[str],
        opts: SearchOptions,
        *,
        vault: Path,
        embedder: Embedder | None,
        embed_error: str | None,
    ) -> tuple[SearchResult, str | None]:
        """Returns the result and, if the embedder failed mid-search, its error."""
        _check_options(opts)
        started = time.perf_counter()
        mode = opts.mode
        degraded: str | None = None
        failure: str | None = None
        model: tuple[int, int] | None = None
        if mode in ("hybrid", "semantic"):
            if embedder is None:
                degraded = f"embedder unavailable: {embed_error or 'no model configured'}"
            else:
                model = store.model_row(conn, embedder.fingerprint)
                pending = self._pending_vectors(conn, model[0]) if model else None
                if model is None or pending is None:
                    degraded = "no passage has a vector for the current model yet (run index)"
                    model = None
                elif pending:
                    # Still hybrid, but the semantic arm cannot see every passage: say so.
                    degraded = (
                        f"{pending} passages still lack vectors (run `retriever index`); "
                        "semantic results are partial"
                    )
            if model is None:
                mode = "lexical"

        where, fparams = _doc_filter(opts)
        lex_extra = f"AND t.doc_id IN (SELECT d.id FROM documents d WHERE {where})" if where else ""
        lexical_lists: list[list[int]] = []
        semantic_lists: list[list[int]] = []
        semantic_scores: list[dict[int, float]] = []
        cosine: dict[int, float] = {}
        qterms = [query_terms(q) for q in queries]

        doc_lists: list[list[int]] = []
        lexical_scores: list[dict[int, float]] = []
        if mode in ("hybrid", "lexical"):
            lexical_lists, doc_lists, lexical_scores = self._lexical(
                conn, qterms, opts, lex_extra, fparams
            )
        if mode in ("hybrid", "semantic") and embedder is not None and model is not None:
            qvecs: list[np.ndarray] = []
            try:
                for q in queries:
                    try:
                        qvecs.append(self.vectors.get(embedder, [q])[0])
                    except InvalidVectorError:
                        continue  # no word the model knows: this query has no semantic arm
            except EmbedderError as exc:
                failure = str(exc)
                degraded = f"embedder failed: {exc}"
                mode, qvecs = "lexical", []
                if not lexical_lists:
                    lexical_lists, doc_lists, _ = self._lexical(
                        conn, qterms, opts, lex_extra, fparams
                    )
            for qv in qvecs:
                rows = vector_search(conn, model[0], model[1], np.asarray(qv), limit=ARM_DEPTH,
                                     doc_filter=where, filter_params=fparams)  # fmt: skip
                semantic_lists.append([r[0] for r in rows])
                semantic_scores.append(dict(rows))
                for cid, cos in rows:
                    cosine[cid] = max(cosine.get(cid, -1.0), cos)

        scores, graph_list = self._fuse(
            conn,
            queries,
            opts,
            lexical_lists,
            semantic_lists,
            doc_lists,
            where,
            fparams,
            lexical_scores=lexical_scores,
            semantic_scores=semantic_scores,
        )
        ranked_ids = sorted(scores, key=lambda c: (-scores[c], c))
        rows = _fetch_chunks(conn, ranked_ids[: max(opts.limit * 3, 60)] + graph_list)
        ranked_ids = [c for c in ranked_ids if c in rows]
        hits, ranked_paths = self._deliver(ranked_ids, rows, scores, opts, lexical_lists,
                                           semantic_lists, graph_list, vault)  # fmt: skip

        all_terms = set().union(*qterms) if qterms else set()
        coverage = 0.0
        if ranked_ids and all_terms:
            best_terms = _chunk_terms(conn, ranked_ids[0])
            coverage = max(
                (len(set(t) & best_terms) / len(set(t)) for t in qterms if t), default=0.0
            )
        best_cos = max(cosine.values()) if cosine else None
        likely_absent = not hits or (
            coverage < opts.absent_coverage and (best_cos is None or best_cos < opts.absent_cosine)
        )
        used = sum(h.tokens for h in hits)
        result = SearchResult(
            queries=queries, mode=mode, degraded_reason=degraded, hits=hits, coverage=coverage,
            best_cosine=best_cos, likely_absent=likely_absent, budget_tokens=opts.budget_tokens,
            used_tokens=used, fusion=opts.fusion if mode == "hybrid" else mode,
            took_ms=(time.perf_counter() - started) * 1000, ranked_paths=ranked_paths,
        )  # fmt: skip
        return result, failure

    def _fuse(
        self,
        conn: psycopg.Connection,
        queries: list[str],
        opts: SearchOptions,
        lexical_lists: list[list[int]],
        semantic_lists: list[list[int]],
        doc_lists: list[list[int]],
        where: str,
        fparams: dict[str, object],
        lexical_scores: list[dict[int, float]],
        semantic_scores: list[dict[int, float]],
    ) -> tuple[dict[int, float], list[int]]:
        lex_weight = 2.0 if any(looks_like_identifier(q) for q in queries) else 1.0
        if semantic_lists and lexical_lists and opts.fusion == "interleave":
            scores: dict[int, float] = interleave(semantic_lists, lexical_lists)  # type: ignore[assignment]
        elif semantic_lists and lexical_lists and opts.fusion == "linear":
            alpha = opts.semantic_weight / (opts.semantic_weight + lex_weight)
            scores = linear(lexical_scores, semantic_scores, alpha=alpha)  # type: ignore[assignment]
        else:
            k = 30.0 if opts.fusion == "rrf30" else opts.rrf_k
            lists = [RankedList("lexical", ids, lex_weight) for ids in lexical_lists]
            lists += [RankedList("semantic", ids, opts.semantic_weight) for ids in semantic_lists]
            lists += [RankedList("lexical", ids, opts.doc_weight * lex_weight) for ids in doc_lists]
            scores = rrf(lists, k=k)  # type: ignore[assignment]
        graph_list: list[int] = []
        if opts.graph and scores:
            graph_list = self._graph_arm(conn, scores, where, fparams)
            # A third ranked list: neighbours of the best hits, weighted below the direct arms.
            k = 30.0 if opts.fusion == "rrf30" else opts.rrf_k
            if opts.fusion in ("interleave", "linear"):
                # Scores there are not RRF sums: scale the graph list to the best score.
                top = max(scores.values())
                for rank, cid in enumerate(graph_list, start=1):
                    scores[cid] = scores.get(cid, 0.0) + opts.graph_weight * 0.25 * top / rank
            else:
                for rank, cid in enumerate(graph_list, start=1):
                    scores[cid] = scores.get(cid, 0.0) + opts.graph_weight / (k + rank)
        return scores, graph_list

    def _lexical(
        self,
        conn: psycopg.Connection,
        qterms: list[Counter[str]],
        opts: SearchOptions,
        extra: str,
        fparams: dict[str, object],
    ) -> tuple[list[list[int]], list[list[int]], list[dict[int, float]]]:
        """Chunk-level BM25 lists and, when enabled, document-level BM25 lists (each note
        represented by its best-ranked chunk, else its opening chunk)."""
        chunk_lists: list[list[int]] = []
        doc_lists: list[list[int]] = []
        lexical_scores: list[dict[int, float]] = []
        for terms in qterms:
            rows = bm25_search(conn, terms, limit=ARM_DEPTH, params=opts.bm25,
                               extra_sql=extra, extra_params=fparams)  # fmt: skip
            chunk_lists.append([r[0] for r in rows])
            lexical_scores.append(dict(rows))
            if opts.doc_weight <= 0:
                continue
            docs = bm25_search(conn, terms, limit=ARM_DEPTH, params=opts.bm25, level="document",
                               extra_sql=extra, extra_params=fparams)  # fmt: skip
            if not docs:
                continue
            doc_ids = [d for d, _ in docs]
            best: dict[int, int] = {}  # doc -> its best-ranked chunk in the chunk list
            if chunk_lists[-1]:
                order = {c: i for i, c in enumerate(chunk_lists[-1])}
                owners = conn.execute(
                    "SELECT id, doc_id FROM chunks WHERE id = ANY(%s)", (chunk_lists[-1],)
                ).fetchall()
                for cid, did in sorted(owners, key=lambda r: order[int(r[0])]):
                    best.setdefault(int(did), int(cid))
            missing = [d for d in doc_ids if d not in best]
            if missing:
                for did, cid in conn.execute(
                    "SELECT DISTINCT ON (doc_id) doc_id, id FROM chunks WHERE doc_id = ANY(%s)"
                    " ORDER BY doc_id, ordinal",
                    (missing,),
                ).fetchall():
                    best[int(did)] = int(cid)
            doc_lists.append([best[d] for d in doc_ids if d in best])
        return chunk_lists, doc_lists, lexical_scores

    def _graph_arm(
        self,
        conn: psycopg.Connection,
        scores: dict[int, float],
        where: str,
        fparams: dict[str, object],
    ) -> list[int]:
        top = sorted(scores, key=lambda c: (-scores[c], c))[:10]  # explicit tie-break
        if not top:
            return []
        docs = dict(
            conn.execute("SELECT id, doc_id FROM chunks WHERE id = ANY(%s)", (top,)).fetchall()
        )
        seeds: dict[int, float] = defaultdict(float)
        for cid in top:
            if cid in docs:
                seeds[int(docs[cid])] += scores[cid]
        graph = self.graph.get(conn)
        walk = random_walk_scores(graph, seeds)
        neighbours = list(walk)[:10]
        if not neighbours:
            return []
        # Each neighbour note is represented by its first chunk (the note's opening).
        rows = conn.execute(
            "SELECT DISTINCT ON (c.doc_id) c.doc_id, c.id FROM chunks c"
            " JOIN documents d ON d.id = c.doc_id WHERE c.doc_id = ANY(%(n)s)"
            + (f" AND {where}" if where else "")
            + " ORDER BY c.doc_id, c.ordinal",
            {"n": neighbours, **fparams},
        ).fetchall()
        first = {int(d): int(c) for d, c in rows}
        return [first[d] for d in neighbours if d in first]

    def _deliver(
        self,
        ranked_ids: list[int],
        rows: dict[int, _ChunkRow],
        scores: dict[int, float],
        opts: SearchOptions,
        lexical_lists: list[list[int]],
        semantic_lists: list[list[int]],
        graph_list: list[int],
        vault: Path,
    ) -> tuple[list[Hit], list[str]]:
        lex_rank = _best_ranks(lexical_lists)
        sem_rank = _best_ranks(semantic_lists)
        graph_rank = {c: i for i, c in enumerate(graph_list, start=1)}
        ranked_paths: list[str] = []
        seen_paths: set[str] = set()
        for cid in ranked_ids:
            if rows[cid].path not in seen_paths:
                seen_paths.add(rows[cid].path)
                ranked_paths.append(rows[cid].path)
        candidates = [rows[c] for c in ranked_ids[: opts.limit * 2]]
        plan = allocate(candidates, budget=opts.budget_tokens, doc_of=lambda r: r.path,
                        tokens_of=lambda r: r.tokens)  # fmt: skip
        chosen = [candidates[i] for i in plan.kept][: opts.limit]
        merged = _merge_adjacent(chosen)
        stale_cache: dict[str, bool] = {}
        hits: list[Hit] = []
        for group in merged:
            head = group[0]
            text = "\n".join(r.text for r in group)
            if head.path not in stale_cache:
                stale_cache[head.path] = _is_stale(vault, head)
            hits.append(
                Hit(
                    path=head.path, title=head.title, heading_trail=head.trail,
                    start_line=min(r.start for r in group), end_line=max(r.end for r in group),
                    text=text, score=round(max(scores[r.id] for r in group), 6),
                    ranks={"lexical": _min_rank(lex_rank, group), "semantic": _min_rank(sem_rank, group),
                           "graph": _min_rank(graph_rank, group)},
                    passage_hash=head.hash.hex(), stale=stale_cache[head.path],
                    content_type=head.ctype, tokens=estimate_tokens(text),
                )
            )  # fmt: skip
        if hits and hits[0].tokens > opts.budget_tokens:
            # The single best passage alone is over budget (a huge code block or table is
            # never split at index time): deliver its head, cited exactly, and say so.
            _truncate(hits[0], opts.budget_tokens)
        return hits, ranked_paths


def _truncate(hit: Hit, budget: int) -> None:
    """Keep whole lines up to ``budget`` tokens and narrow the citation to them."""
    kept: list[str] = []
    used = 0
    for line in hit.text.split("\n"):
        cost = len(line) + 1
        if kept and used + cost > budget * 4:
            break
        kept.append(line[: budget * 4])
        used += cost
    hit.text = "\n".join(kept)
    hit.end_line = min(hit.end_line, hit.start_line + len(kept) - 1)
    hit.tokens = estimate_tokens(hit.text)
    hit.truncated = True


def _chunk_terms(conn: psycopg.Connection, chunk_id: int) -> set[str]:
    """The normalised terms of one chunk (its lexicon ids turned back into words)."""
    rows = conn.execute(
        "SELECT l.term FROM chunks c CROSS JOIN unnest(c.terms) AS u(id)"
        " JOIN lexicon l ON l.id = u.id WHERE c.id = %s",
        (chunk_id,),
    ).fetchall()
    return {r[0] for r in rows}


def _best_ranks(lists: list[list[int]]) -> dict[int, int]:
    best: dict[int, int] = {}
    for ids in lists:
        for rank, cid in enumerate(ids, start=1):
            best[cid] = min(best.get(cid, rank), rank)
    return best


def _min_rank(ranks: dict[int, int], group: list[_ChunkRow]) -> int | None:
    found = [ranks[r.id] for r in group if r.id in ranks]
    return min(found) if found else None


def _merge_adjacent(chosen: list[_ChunkRow]) -> list[list[_ChunkRow]]:
    """Merge chunks of one document whose line ranges touch (transitively: A, C then B
    become one hit), keeping the delivery order of each group's first chunk."""
    groups: list[list[_ChunkRow]] = []
    for row in chosen:
        touching = [
            g for g in groups
            if g[0].doc_id == row.doc_id
            and any(row.start <= r.end + 1 and r.start <= row.end + 1 for r in g)
        ]  # fmt: skip
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


def _is_stale(vault: Path, row: _ChunkRow) -> bool:
    try:
        st = (vault / row.path).stat()
    except OSError:
        return True
    return (st.st_size, st.st_mtime_ns) != (row.size, row.mtime_ns)


def parse_modified_after(value: datetime | str | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise SearchInputError("modified_after must be an ISO date such as 2024-05-01") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
