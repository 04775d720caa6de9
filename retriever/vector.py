"""Semantic side: pgvector cosine search over the current model's passage embeddings."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import psycopg
from pgvector import HalfVector

from retriever.embed import Embedder
from retriever.windows import best_window_cosines

# recall@30 vs exact on win32-17k with the index's ef_construction 128 (the parallel build
# is not deterministic): at 300, 0.983-0.989 over most builds but 0.977 in one, 0.981-0.985
# in three more (200 queries); at 400, 0.988-0.989 in those three (0.989 in a fifth), for
# 0.5-1.8 ms more a query (the hour decides). With pgvector's default ef_construction 64 the graph, not the beam, was the limit
# (0.973-0.982 at 300, 0.977 at 500).
EF_SEARCH = 400
# Passages whose windows are read, per passage wanted: the nearest whole-passage vectors
# (through the HNSW index, which holds only those) are rescored by their best window and the
# best ``limit`` kept. On the Dendron cases, calibrated, end to end: MiniLM 0.507 against
# 0.517 searching every window, static 0.413 both; searching every window needed an index
# three times the size (win32-17k: 200 MiB and 97 s of build against 69 MiB and 33 s;
# hybrid p50 54 against 41 ms). Offline, rescoring 4x instead of 2x gained nothing.
RESCORED = 2


class QueryVectorCache:
    """Small LRU of query vectors: agents often repeat or rephrase the same question."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # the MCP server searches from several threads

    def get(self, embedder: Embedder, texts: list[str]) -> np.ndarray:
        fp = embedder.fingerprint
        with self._lock:
            found: dict[str, np.ndarray | None] = {t: self._items.get((fp, t)) for t in texts}
        missing = [t for t, v in found.items() if v is None]
        if missing:
            vectors = embedder.embed(missing)  # outside the lock: it may take a while
            with self._lock:
                for t, v in zip(missing, vectors, strict=True):
                    found[t] = self._items[(fp, t)] = v
                    while len(self._items) > self._size:
                        self._items.popitem(last=False)
        with self._lock:
            for t in texts:
                if (fp, t) in self._items:
                    self._items.move_to_end((fp, t))
        return np.vstack([v for t in texts if (v := found[t]) is not None])


def vector_search(
    conn: psycopg.Connection,
    model: int,
    dim: int,
    query: np.ndarray,
    *,
    limit: int,
    doc_filter: str = "",
    filter_params: dict[str, object] | None = None,
    owners: dict[int, int] | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) best first: the passages nearest by their whole
    vector, each scored by its best vector (whole or window). Uses the model's HNSW index
    when present (the ORDER BY expression and predicate match the index's), else an exact
    scan. ``owners`` gains each returned chunk's document id."""
    d = int(dim)
    # Transaction-local settings (one round trip): a wider beam for recall, and with filters
    # keep walking the graph until enough rows survive them. They end with the transaction,
    # so nothing leaks to the next user of the pooled connection.
    fetch = RESCORED * limit + 8
    conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', %s, true)",
        (str(max(EF_SEARCH, fetch * 2)), "relaxed_order" if doc_filter else "off"),
    )
    # The filter sits inside the nearest-neighbour scan (so the iterative HNSW scan, or the
    # exact scan, keeps going until enough filtered passages are found), and again outside
    # because a passage shared by two notes may sit in both an allowed and another folder.
    within = (
        "AND EXISTS (SELECT 1 FROM chunks c2 JOIN documents d ON d.id = c2.doc_id"
        f" WHERE c2.passage_hash = e.hash AND {doc_filter})"
        if doc_filter
        else ""
    )
    # The model id is written into the statement, not passed: the HNSW index is partial
    # (WHERE model = <id>), and a prepared statement's generic plan (psycopg prepares from
    # the sixth run on a connection; Postgres may choose that plan five runs later) can
    # use it only when the predicate is a literal. With a parameter, such searches became
    # exact scans (4,000-note sample: 9.7 against 0.9 ms for this statement).
    # One round trip: the nearest passages, their windows, and the chunks (within the
    # filters) that hold each one, with their notes.
    nearest = conn.execute(
        f"""
        WITH nearest AS (  -- whole passages (part 0): what the HNSW index holds
            SELECT e.hash, (e.vec::halfvec({d})) <=> %(q)s::halfvec({d}) AS dist
            FROM embeddings e
            WHERE e.model = {int(model)} AND e.part = 0 {within}
            ORDER BY (e.vec::halfvec({d})) <=> %(q)s::halfvec({d})
            LIMIT %(fetch)s
        )
        SELECT n.hash, n.dist, w.vecs, o.ids, o.docs
        FROM nearest n
        LEFT JOIN windows w ON w.model = {int(model)} AND w.hash = n.hash
        CROSS JOIN LATERAL (
            SELECT array_agg(c.id) AS ids, array_agg(c.doc_id) AS docs FROM chunks c
            {"JOIN documents d ON d.id = c.doc_id" if doc_filter else ""}
            WHERE c.passage_hash = n.hash {"AND " + doc_filter if doc_filter else ""}
        ) o
        WHERE o.ids IS NOT NULL
        """,
        {"q": HalfVector(query.astype(np.float32)), "fetch": fetch, **(filter_params or {})},
    ).fetchall()
    if not nearest:
        return []
    dist = _rescored([(h, whole, blob) for h, whole, blob, _, _ in nearest], query)
    doc_of = {int(c): int(d) for *_, ids, docs in nearest for c, d in zip(ids, docs, strict=True)}
    ranked = sorted((dist[bytes(h)], int(c)) for h, *_, ids, _ in nearest for c in ids)[:limit]
    if owners is not None:
        owners.update((cid, doc_of[cid]) for _, cid in ranked)
    return [(cid, 1.0 - d) for d, cid in ranked]


def _rescored(
    nearest: list[tuple[bytes, float, bytes | None]], query: np.ndarray
) -> dict[bytes, float]:
    """Each passage's cosine distance by its best vector: whole, or one of its windows
    (every window scored in one product)."""
    dist = {bytes(h): float(whole) for h, whole, _ in nearest}
    packed = [(bytes(h), bytes(blob)) for h, _, blob in nearest if blob is not None]
    if packed:
        best = best_window_cosines([blob for _, blob in packed], query)
        for (h, _), cos in zip(packed, best, strict=True):
            dist[h] = min(dist[h], 1.0 - float(cos))
    return dist
