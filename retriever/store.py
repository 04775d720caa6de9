"""Writes to the index. Every function runs inside the caller's transaction, so a note's
document row, chunks, links and the BM25 statistics change together or not at all."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector
from psycopg.rows import args_row

from retriever.chunk import Link
from retriever.passage_text import pack, unpack
from retriever.prepare import PreparedChunk, PreparedDoc
from retriever.windows import pack_windows

# What telling a changed file from an unchanged one needs: (size, mtime_ns) per path.
FileStamp = tuple[int, int]


def forget_stamps(conn: psycopg.Connection, paths: list[str]) -> None:
    """Make these notes differ from any file on disk: the next run that reads them derives
    and writes them again (a size no file has, a content hash no file has, no digest)."""
    conn.execute(
        "UPDATE documents SET size = -1, sha256 = '\\x00'::bytea, derived = NULL"
        " WHERE path = ANY(%s)",
        (paths,),
    )


def load_stamps(
    conn: psycopg.Connection, paths: Iterable[str] | None = None
) -> dict[str, FileStamp]:
    """Each indexed note's size and mtime by path (only ``paths``, when given): all a
    freshness pass compares (three narrow columns; the hashes are read only for the notes
    that changed, see ``known_hashes``)."""
    if paths is None:
        rows = conn.execute("SELECT path, size, mtime_ns FROM documents").fetchall()
    else:
        rows = conn.execute(
            "SELECT path, size, mtime_ns FROM documents WHERE path = ANY(%s)", (sorted(paths),)
        ).fetchall()
    return {path: (size, mtime) for path, size, mtime in rows}


def count_documents(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM documents").fetchone()
    return int(row[0]) if row else 0


def known_hashes(conn: psycopg.Connection, paths: Sequence[str]) -> dict[str, bytes]:
    """The stored content hash of each of ``paths`` that is indexed."""
    if not paths:
        return {}
    rows = conn.execute(
        "SELECT path, sha256 FROM documents WHERE path = ANY(%s)", (list(paths),)
    ).fetchall()
    return {path: bytes(sha) for path, sha in rows}


def derived_digests(conn: psycopg.Connection) -> dict[str, bytes]:
    """Each indexed note's derived digest (``prepare.derived_digest``), where it has one
    (notes written before revision 0008 have none)."""
    rows = conn.execute("SELECT path, derived FROM documents WHERE derived IS NOT NULL")
    return {path: bytes(digest) for path, digest in rows}


def notes_stamp(conn: psycopg.Connection) -> tuple[int, ...]:
    """Every note's id, path, title and aliases summed up in one pass (~10 ms for 17,000
    notes): what is built from them (link resolution, the title index) is rebuilt only
    when it moves, not after every edit."""
    row = conn.execute(
        "SELECT count(*), coalesce(max(id), 0), coalesce(sum(hashtext(id::text || '|' ||"
        " path || '|' || title || '|' || array_to_string(aliases, '|'))), 0) FROM documents"
    ).fetchone()
    return tuple(int(v) for v in row) if row else ()


def links_stamp(conn: psycopg.Connection) -> tuple[int, ...]:
    """The resolved links between notes summed up in one pass: the link graph is rebuilt
    only when it moves (an edit rewrites its note's links, mostly to the same targets)."""
    row = conn.execute(
        "SELECT count(*), coalesce(sum(hashtext(doc_id::text || '>' || resolved::text)), 0)"
        " FROM links WHERE resolved IS NOT NULL AND doc_id <> resolved"
    ).fetchone()
    return tuple(int(v) for v in row) if row else ()


def get_meta(conn: psycopg.Connection, key: str, default: object = None) -> object:
    row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
    return row[0] if row else default


def set_meta(conn: psycopg.Connection, key: str, value: object) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (%s, %s::jsonb) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, json.dumps(value)),
    )


@dataclass(slots=True)
class _Deltas:
    df: Counter[int]  # keyed by lexicon id
    n_chunks: int = 0
    sum_len: float = 0.0


def _forget(
    conn: psycopg.Connection, doc_ids: list[int], deltas: _Deltas, dropped: set[bytes] | None
) -> int:
    """Remove the chunks and links of ``doc_ids``, subtracting them from the BM25 stats;
    the passages they referred to join ``dropped`` (what may now be orphaned)."""
    if not doc_ids:
        return 0
    removed, total = 0, 0.0
    for term, count, n, length in conn.execute(
        "SELECT t, count(*), NULL::bigint, NULL::float8 FROM chunks, unnest(terms) AS t"
        " WHERE doc_id = ANY(%s) GROUP BY t"
        " UNION ALL SELECT NULL, NULL, count(*), coalesce(sum(len), 0) FROM chunks"
        " WHERE doc_id = ANY(%s)",
        (doc_ids, doc_ids),
    ):
        if term is None:
            removed, total = int(n), float(length)
        else:
            deltas.df[term] -= count
    deltas.n_chunks -= removed
    deltas.sum_len -= total
    gone = conn.execute(
        "DELETE FROM chunks WHERE doc_id = ANY(%s) RETURNING passage_hash", (doc_ids,)
    ).fetchall()
    if dropped is not None:
        dropped.update(bytes(r[0]) for r in gone)
    conn.execute("DELETE FROM links WHERE doc_id = ANY(%s)", (doc_ids,))
    return removed


def _apply(conn: psycopg.Connection, deltas: _Deltas) -> None:
    ids = sorted(t for t, d in deltas.df.items() if d)
    if ids:
        conn.execute(
            """
            UPDATE lexicon AS l SET df = l.df + u.df
            FROM unnest(%s::int[], %s::int[]) AS u(id, df)
            WHERE l.id = u.id
            """,
            (ids, [deltas.df[t] for t in ids]),
        )
        # A term no chunk holds any more is forgotten (no chunk refers to its id).
        conn.execute("DELETE FROM lexicon WHERE id = ANY(%s) AND df <= 0", (ids,))
    conn.execute(
        "UPDATE lex_stats SET n_chunks = n_chunks + %s, sum_len = sum_len + %s WHERE id = 1",
        (deltas.n_chunks, deltas.sum_len),
    )


def term_ids(conn: psycopg.Connection, terms: set[str]) -> dict[str, int]:
    """Lexicon ids for ``terms``, creating the missing ones (counts are applied later)."""
    ordered = sorted(terms)
    conn.execute(
        "INSERT INTO lexicon (term) SELECT unnest(%s::text[]) ON CONFLICT (term) DO NOTHING",
        (ordered,),
    )
    return dict(
        conn.execute("SELECT term, id FROM lexicon WHERE term = ANY(%s)", (ordered,)).fetchall()
    )


def aliases_differ(conn: psycopg.Connection, docs: Sequence[PreparedDoc]) -> bool:
    """Whether writing ``docs`` changes any note's aliases (links may then resolve anew)."""
    old: dict[str, list[str]] = dict(
        conn.execute(
            "SELECT path, aliases FROM documents WHERE path = ANY(%s)", ([d.path for d in docs],)
        ).fetchall()
    )
    return any(list(old.get(d.path) or []) != list(d.aliases) for d in docs)


def write_documents(
    conn: psycopg.Connection,
    docs: Sequence[PreparedDoc],
    *,
    bulk: bool = False,
    dropped: set[bytes] | None = None,
) -> tuple[int, int]:
    """Insert or replace ``docs``; returns (chunks added, chunks removed). The passages
    the replaced chunks referred to join ``dropped`` (see :func:`gc_passages`).

    ``bulk``: the first load of an empty index (see :func:`begin_bulk`): nothing to replace,
    and term document frequencies are counted once at the end instead of per batch."""
    if not docs:
        return 0, 0
    deltas = _Deltas(Counter())
    removed = 0
    if not bulk:
        paths = [d.path for d in docs]
        existing: dict[str, int] = dict(
            conn.execute("SELECT path, id FROM documents WHERE path = ANY(%s)", (paths,)).fetchall()
        )
        removed = _forget(conn, list(existing.values()), deltas, dropped)
    ids = _upsert_documents(conn, docs)
    ids_of = term_ids(conn, {t for d in docs for c in d.chunks for t in c.terms})
    _insert_passages(conn, docs)
    with conn.cursor() as cur:
        added = _copy_chunks(cur, docs, ids, ids_of, deltas, count_terms=not bulk)
        _copy_links(cur, docs, ids)
    _apply(conn, deltas)
    return added, removed


def _copy_chunks(
    cur: psycopg.Cursor,
    docs: Sequence[PreparedDoc],
    ids: Mapping[str, int],
    ids_of: Mapping[str, int],
    deltas: _Deltas,
    *,
    count_terms: bool,
) -> int:
    """COPY every chunk of ``docs``; the statistics' deltas are kept as rows go (term
    frequencies only when ``count_terms``: a bulk load counts them once at the end)."""
    added = 0
    with cur.copy(
        "COPY chunks (doc_id, ordinal, passage_hash, heading_trail, start_line, end_line,"
        " content_type, terms, tfs, len) FROM STDIN"
    ) as copy:
        for d in docs:
            for c in d.chunks:
                copy.write_row(_chunk_row(ids[d.path], c, ids_of))
                added += 1
                deltas.n_chunks += 1
                deltas.sum_len += c.length
                if count_terms:
                    for t in c.terms:
                        deltas.df[ids_of[t]] += 1
    return added


def _chunk_row(doc_id: int, c: PreparedChunk, ids_of: Mapping[str, int]) -> tuple[object, ...]:
    """One chunk as COPY takes it: terms as ascending lexicon ids, tfs in the same order."""
    pairs = sorted(zip((ids_of[t] for t in c.terms), c.tfs, strict=True))
    terms = "{" + ",".join(str(i) for i, _ in pairs) + "}"
    tfs = "{" + ",".join(repr(f) for _, f in pairs) + "}"
    place = (c.ordinal, c.passage_hash, c.heading_trail, c.start_line, c.end_line)
    return (doc_id, *place, c.content_type, terms, tfs, c.length)


def _copy_links(cur: psycopg.Cursor, docs: Sequence[PreparedDoc], ids: Mapping[str, int]) -> None:
    with cur.copy("COPY links (doc_id, target, anchor, alias, kind, line, n) FROM STDIN") as copy:
        for d in docs:
            for key, (line, n) in distinct_links(d.links).items():
                copy.write_row((ids[d.path], *key, line, n))


LinkKey = tuple[str, str | None, str | None, str]  # target, anchor, alias, kind


def distinct_links(links: Sequence[Link]) -> dict[LinkKey, tuple[int, int]]:
    """(target, anchor, alias, kind) -> (first line, count): a note linking ten times to the
    same place is one edge, stored once."""
    out: dict[LinkKey, tuple[int, int]] = {}
    for link in links:
        # Display text only matters where it may be the target (Dendron style).
        alias = link.alias if link.kind in ("wiki", "frontmatter") else None
        key = (link.target, link.anchor, alias, link.kind)
        found = out.get(key)
        out[key] = (link.line, 1) if found is None else (min(found[0], link.line), found[1] + 1)
    return out


def _upsert_documents(conn: psycopg.Connection, docs: Sequence[PreparedDoc]) -> dict[str, int]:
    ids: dict[str, int] = {}
    with conn.cursor() as cur:
        # One pipelined round trip for the whole batch, not one per note.
        cur.executemany(
            """
            INSERT INTO documents (path, size, mtime_ns, sha256, title, frontmatter, tags,
                aliases, note_type, created, updated, encoding, derived, indexed_at)
            VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, now())
            ON CONFLICT (path) DO UPDATE SET size = excluded.size,
                mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256,
                title = excluded.title, frontmatter = excluded.frontmatter,
                tags = excluded.tags, aliases = excluded.aliases,
                note_type = excluded.note_type, created = excluded.created,
                updated = excluded.updated, encoding = excluded.encoding,
                derived = excluded.derived, indexed_at = now()
            RETURNING id, path
            """,
            [_document_row(d) for d in docs],
            returning=True,
        )
        while True:
            row = cur.fetchone()
            if row is not None:
                ids[row[1]] = int(row[0])
            if not cur.nextset():
                break
    return ids


def _document_row(d: PreparedDoc) -> tuple[object, ...]:
    frontmatter = json.dumps(d.frontmatter, default=str)
    described = (d.title, frontmatter, d.tags, d.aliases, d.note_type, d.created, d.updated)
    return (d.path, d.size, d.mtime_ns, d.sha256, *described, d.encoding, d.derived or None)


def _insert_passages(conn: psycopg.Connection, docs: Sequence[PreparedDoc]) -> None:
    """New passage texts, each once: COPY into a staging table (far cheaper to send than
    array parameters), then one insert that skips the hashes already stored."""
    seen: set[bytes] = set()
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS passages_in (LIKE passages) ON COMMIT DELETE ROWS"
    )
    with (
        conn.cursor() as cur,
        cur.copy("COPY passages_in (hash, ztext, context, tokens) FROM STDIN") as copy,
    ):
        for d in docs:
            for c in d.chunks:
                if c.passage_hash not in seen:
                    seen.add(c.passage_hash)
                    copy.write_row((c.passage_hash, pack(c.text), c.context, c.tokens))
    conn.execute(
        "INSERT INTO passages SELECT * FROM passages_in ON CONFLICT (hash) DO NOTHING;"
        " TRUNCATE passages_in"
    )


def delete_documents(
    conn: psycopg.Connection, paths: Sequence[str], dropped: set[bytes] | None = None
) -> int:
    """Remove documents by path; returns the number of chunks removed (their passages join
    ``dropped``)."""
    if not paths:
        return 0
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM documents WHERE path = ANY(%s)", (list(paths),)
        ).fetchall()
    ]
    deltas = _Deltas(Counter())
    removed = _forget(conn, ids, deltas, dropped)
    conn.execute("DELETE FROM documents WHERE id = ANY(%s)", (ids,))
    _apply(conn, deltas)
    return removed


def touch_documents(conn: psycopg.Connection, rows: Iterable[tuple[str, int, int]]) -> None:
    """Record a new size/mtime for files whose bytes did not change."""
    data = list(rows)
    if data:
        conn.execute(
            """
            UPDATE documents d SET size = u.size, mtime_ns = u.mtime
            FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS u(path, size, mtime)
            WHERE d.path = u.path
            """,
            ([r[0] for r in data], [r[1] for r in data], [r[2] for r in data]),
        )


def gc_passages(conn: psycopg.Connection, among: Collection[bytes] | None = None) -> int:
    """Delete passages no chunk refers to (their embeddings go with them): all of them, or
    only those ``among`` the hashes a run's deleted chunks referred to (an edit's run
    then skips an anti-join over every passage: 60 ms on 87,000)."""
    if among is not None and not among:
        return 0
    scope = "p.hash = ANY(%s) AND " if among is not None else ""
    cur = conn.execute(
        f"DELETE FROM passages p WHERE {scope}NOT EXISTS "
        "(SELECT 1 FROM chunks c WHERE c.passage_hash = p.hash)",
        (list(among),) if among is not None else None,
    )
    return cur.rowcount or 0


def ensure_model(conn: psycopg.Connection, fingerprint: str, model_id: str, dim: int) -> int:
    row = conn.execute(
        """
        INSERT INTO models (fingerprint, model_id, dim) VALUES (%s, %s, %s)
        ON CONFLICT (fingerprint) DO UPDATE SET model_id = excluded.model_id
        RETURNING id
        """,
        (fingerprint, model_id, dim),
    ).fetchone()
    assert row is not None
    return int(row[0])


def model_row(conn: psycopg.Connection, fingerprint: str) -> tuple[int, int] | None:
    row = conn.execute(
        "SELECT id, dim FROM models WHERE fingerprint = %s", (fingerprint,)
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else None


def model_row_of(conn: psycopg.Connection, model_id: str) -> tuple[int, int] | None:
    """The latest model row stored for a model setting (its fingerprint unknown while the
    model is away): what status and health count vectors against meanwhile."""
    stored = stored_model(conn, model_id)
    return (stored[0], stored[2]) if stored else None


def stored_model(conn: psycopg.Connection, model_id: str) -> tuple[int, str, int] | None:
    """(row id, fingerprint, dimension) of the latest model stored for a model setting."""
    row = conn.execute(
        "SELECT id, fingerprint, dim FROM models WHERE model_id = %s ORDER BY id DESC LIMIT 1",
        (model_id,),
    ).fetchone()
    return (int(row[0]), str(row[1]), int(row[2])) if row else None


def pending_hashes(
    conn: psycopg.Connection, model: int, *, among_paths: Sequence[str] | None = None
) -> list[bytes]:
    """Hashes of passages with no vector for ``model``, sorted: all of them (one anti-join
    for the whole run), or only those of the notes at ``among_paths``."""
    if among_paths is None:
        rows = conn.execute(
            "SELECT p.hash FROM passages p WHERE NOT EXISTS "
            "(SELECT 1 FROM embeddings e WHERE e.model = %s AND e.hash = p.hash)"
            " ORDER BY p.hash",
            (model,),
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT DISTINCT c.passage_hash FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " WHERE d.path = ANY(%s) AND NOT EXISTS (SELECT 1 FROM embeddings e"
            " WHERE e.model = %s AND e.hash = c.passage_hash) ORDER BY 1",
            (list(among_paths), model),
        ).fetchall()
    return [bytes(r[0]) for r in rows]


def passage_inputs(
    conn: psycopg.Connection, hashes: Sequence[bytes]
) -> list[tuple[bytes, str, str]]:
    """(hash, heading context, text) of each passage: what its vectors are made from
    (``embedding_input`` for the whole passage, ``embedding_windows`` for its windows)."""
    rows = conn.execute(
        "SELECT hash, context, ztext FROM passages WHERE hash = ANY(%s)", (list(hashes),)
    ).fetchall()
    return [(bytes(r[0]), r[1], unpack(r[2])) for r in rows]


def count_pending(conn: psycopg.Connection, model: int | None) -> int:
    """Passages without a vector for ``model`` (None: every passage). Two counts, not an
    anti-join (60 -> 21 ms on win32-17k's 87,000 passages; the part-0 count reads the
    partial index ``embeddings_whole``, migration 0006): a passage's whole vector is keyed
    by (model, hash, part 0) and goes with its passage (ON DELETE CASCADE), so each
    passage has at most one per model and every vector has its passage."""
    if model is None:
        row = conn.execute("SELECT count(*) FROM passages").fetchone()
    else:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM passages)"
            " - (SELECT count(*) FROM embeddings WHERE model = %s AND part = 0)",
            (model,),
        ).fetchone()
    return int(row[0]) if row else 0


def store_embeddings(
    conn: psycopg.Connection,
    model: int,
    keys: Sequence[tuple[bytes, int]],
    vectors: np.ndarray,
) -> None:
    """Store validated vectors keyed by (passage hash, part): part 0 is the whole passage,
    1.. its windows (the caller validated them; we re-check the shape). Whole vectors go to
    ``embeddings``; a passage's windows, in order, to one row of ``windows`` (migration
    0007: int8 codes, ``windows.pack_windows``)."""
    assert vectors.shape[0] == len(keys)
    grouped: dict[bytes, list[tuple[int, int]]] = {}
    with (
        conn.cursor() as cur,
        cur.copy("COPY embeddings (model, hash, vec) FROM STDIN WITH (FORMAT BINARY)") as copy,
    ):
        copy.set_types(["int4", "bytea", "halfvec"])
        for i, (h, part) in enumerate(keys):
            if part == 0:
                copy.write_row((model, h, HalfVector(vectors[i])))
            else:
                grouped.setdefault(h, []).append((part, i))
    if not grouped:
        return
    with (
        conn.cursor() as cur,
        cur.copy("COPY windows (model, hash, vecs) FROM STDIN WITH (FORMAT BINARY)") as copy,
    ):
        copy.set_types(["int4", "bytea", "bytea"])
        for h, parts in grouped.items():
            rows = [i for _, i in sorted(parts)]
            copy.write_row((model, h, pack_windows(vectors[rows])))


VECTORS_KEY = "vectors_at"  # meta: when an embedding pass last stored vectors


def note_vectors_stored(conn: psycopg.Connection) -> None:
    """Searches recount a model's missing vectors when this (or the last index run) moves."""
    set_meta(conn, VECTORS_KEY, time.time())


def gc_embeddings(conn: psycopg.Connection, keep: Sequence[str]) -> int:
    """Drop embeddings (and model rows) of every model but those in ``keep`` (fingerprints:
    every configured tier's)."""
    cur = conn.execute("DELETE FROM models WHERE NOT (fingerprint = ANY(%s))", (list(keep),))
    if cur.rowcount:  # searches cache model rows per vectors stamp: move it
        note_vectors_stored(conn)
    return cur.rowcount or 0


# --- bulk load (the first index of a vault) ----------------------------------------------

# Secondary indexes a bulk load builds once at the end instead of maintaining row by row
# (as created by the migrations; ensure_indexes brings back any a crash left dropped).
SECONDARY_INDEXES = {
    "chunks_terms_gin": "CREATE INDEX IF NOT EXISTS chunks_terms_gin ON chunks USING gin (terms)",
    "chunks_passage": "CREATE INDEX IF NOT EXISTS chunks_passage ON chunks (passage_hash)",
    "links_doc": "CREATE INDEX IF NOT EXISTS links_doc ON links (doc_id)",
    "links_resolved": "CREATE INDEX IF NOT EXISTS links_resolved ON links (resolved)",
}
BULK_KEY = "bulk_load"  # meta flag: set while a bulk load runs (term counts are not kept)


def begin_bulk(conn: psycopg.Connection) -> None:
    """Drop the secondary indexes and mark the lexicon counts as pending (committed first,
    so a crash mid-load is repaired by :func:`finish_bulk` on the next run)."""
    with conn.transaction():
        set_meta(conn, BULK_KEY, True)
        for name in SECONDARY_INDEXES:
            conn.execute(f"DROP INDEX IF EXISTS {name}")


def bulk_pending(conn: psycopg.Connection) -> bool:
    return bool(get_meta(conn, BULK_KEY, False))


def finish_bulk(conn: psycopg.Connection) -> None:
    """Build the secondary indexes, count term frequencies and the BM25 totals from the
    chunks in one pass each, and compact what the load rewrote. Idempotent."""
    conn.commit()
    with conn.transaction():
        conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
        ensure_indexes(conn)
        recount_lexicon(conn)
        set_meta(conn, BULK_KEY, False)


def ensure_indexes(conn: psycopg.Connection) -> None:
    for sql in SECONDARY_INDEXES.values():
        conn.execute(sql)


def recount_lexicon(conn: psycopg.Connection) -> None:
    """Exact document frequencies and BM25 totals, recomputed from the chunks."""
    conn.execute(
        """
        CREATE TEMP TABLE lexicon_df ON COMMIT DROP AS
            SELECT t AS id, count(*)::integer AS df FROM chunks, unnest(terms) AS t GROUP BY t;
        UPDATE lexicon l SET df = x.df FROM lexicon_df x WHERE l.id = x.id AND l.df <> x.df;
        DELETE FROM lexicon l WHERE NOT EXISTS (SELECT 1 FROM lexicon_df x WHERE x.id = l.id);
        UPDATE lex_stats SET (n_chunks, sum_len) =
            (SELECT count(*), coalesce(sum(len), 0) FROM chunks) WHERE id = 1;
        """
    )


def compact(conn: psycopg.Connection, tables: Sequence[str]) -> None:
    """Rewrite ``tables`` without the dead row versions a bulk load's single update of every
    row leaves (half their size), and refresh the planner statistics."""
    conn.commit()
    conn.autocommit = True
    try:
        for table in tables:
            conn.execute(f"VACUUM (FULL, ANALYZE) {table}")
    finally:
        conn.autocommit = False


# -- read side: what a search fetches beside its ranking -------------------------------


@dataclass(slots=True)
class ChunkRow:
    """A passage as a search delivers it: where it is, its text, and its note's file state."""

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
    sha256: bytes  # of the note's raw bytes when indexed: a touched file may be unchanged
    terms: list[int] | None = None  # lexicon ids, of the chunk ``fetch_chunks`` was asked for


def _delivered_row(*values: Any) -> ChunkRow:
    """A fetched row with its passage text unpacked (the ninth column)."""
    fields = list(values)
    fields[8] = unpack(fields[8])
    return ChunkRow(*fields)


def fetch_chunks(
    conn: psycopg.Connection, ids: Sequence[int], *, terms_of: int | None = None
) -> dict[int, ChunkRow]:
    """The chunks ``ids`` to deliver; chunk ``terms_of`` also with its terms (what the
    query's coverage is read from: no round trip of its own)."""
    with conn.cursor(row_factory=args_row(_delivered_row)) as cur:
        rows = cur.execute(
            """
            SELECT c.id, c.doc_id, d.path, d.title, c.heading_trail, c.start_line, c.end_line,
                   c.content_type, p.ztext, p.tokens, c.passage_hash, d.size, d.mtime_ns,
                   d.sha256, CASE WHEN c.id = %(terms_of)s THEN c.terms END
            FROM chunks c JOIN documents d ON d.id = c.doc_id
                 JOIN passages p ON p.hash = c.passage_hash
            WHERE c.id = ANY(%(ids)s)
            """,
            {"ids": list(ids), "terms_of": terms_of},
        ).fetchall()
    return {row.id: row for row in rows}


def chunk_terms_among(conn: psycopg.Connection, chunk_id: int, among: set[str]) -> set[str]:
    """Which of the terms ``among`` one chunk holds (a few lexicon lookups by term, not one
    per term of the chunk)."""
    rows = conn.execute(
        "SELECT l.term FROM chunks c JOIN lexicon l ON l.term = ANY(%s) AND l.id = ANY(c.terms)"
        " WHERE c.id = %s",
        (sorted(among), chunk_id),
    ).fetchall()
    return {r[0] for r in rows}


@dataclass(frozen=True, slots=True)
class Generation:
    """What a search's per-process caches are checked against, read in one round trip:
    ``index`` moves with every index run (notes, links); ``vectors`` also with every
    embedding pass and model clean-up (which passages have vectors, model rows); ``lexicon``
    with every write of the term statistics (the version of ``lex_stats``' row, which each
    batch of an index run rewrites, finished or not); ``calibrations``: each stored
    calibration's timestamp by model key."""

    index: str | None
    vectors: str
    lexicon: str | None
    calibrations: Mapping[str, str]
    vault: str | None = None  # the vault the last index run indexed

    def terms_key(self) -> str | None:
        """What cached term statistics are valid for (None: nothing indexed yet)."""
        return f"{self.index}|{self.lexicon}" if self.index and self.lexicon else None


def index_generation(conn: psycopg.Connection) -> str | None:
    """The last index run's stamp alone (see Generation.index)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'last_index'").fetchone()
    return str(row[0]) if row else None


def read_generation(conn: psycopg.Connection, calibration_version: int) -> Generation:
    return parse_generation(send_generation(conn, calibration_version).fetchall())


def send_generation(conn: psycopg.Connection, calibration_version: int) -> psycopg.Cursor[Any]:
    """The generation's statement; in pipeline mode its rows come at the next sync."""
    return conn.execute(
        "SELECT key, value FROM meta WHERE key IN ('last_index', %s)"
        " UNION ALL SELECT 'lexicon:', to_jsonb(xmin::text) FROM lex_stats WHERE id = 1"
        " UNION ALL SELECT 'calibration:' || model, to_jsonb(created_at::text)"
        " FROM calibrations WHERE version = %s",
        (VECTORS_KEY, calibration_version),
    )


def parse_generation(rows: Sequence[tuple[Any, ...]]) -> Generation:
    meta: dict[str, object] = {}
    stamps: dict[str, str] = {}
    lexicon = None
    for key, value in rows:
        if key.startswith("calibration:"):
            stamps[key.removeprefix("calibration:")] = str(value)
        elif key == "lexicon:":
            lexicon = str(value)
        else:
            meta[key] = value
    last = meta.get("last_index")
    index = str(last) if last is not None else None
    vault = last.get("vault") if isinstance(last, dict) else None
    return Generation(
        index, str(sorted(meta.items())), lexicon, stamps, vault if isinstance(vault, str) else None
    )


def has_vectors(conn: psycopg.Connection, model: int) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM embeddings WHERE model = %s)", (model,)
    ).fetchone()
    return bool(row and row[0])
