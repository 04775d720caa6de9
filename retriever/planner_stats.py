"""Planner statistics for the tables an index run changes.

Autovacuum gathers them after a one-minute nap, and a command's embedded server rarely
lives that long (the resident service's does). Without them the planner took a model's
vectors for a handful of rows, and a prepared statement's generic plan became an exact
scan. So an index run analyzes a table that holds rows but has no statistics (a first
index, or an index built by a version that never analyzed it), and one that the run
changed by autovacuum's default threshold: 50 rows plus a tenth of the table. Slower
growth over many short runs is left to autovacuum, in the service or the next long run.
"""

from __future__ import annotations

import logging

import psycopg

log = logging.getLogger("retriever.index")

ANALYZE_MIN_ROWS = 50
ANALYZE_SHARE = 0.1
# The notes' tables after a run that rewrote many chunks (the first, bulk, load analyzes
# its own).
NOTE_TABLES = "chunks, passages, documents, lexicon, links"


def analyze_vectors(conn: psycopg.Connection, stored: int) -> None:
    """After an embedding pass that stored ``stored`` whole-passage vectors. Only the
    columns plans filter and join on get statistics (the vectors would be costly).

    ``embeddings`` is vacuumed too (see ``keep_statistics``): every index run counts the
    passages that lack a vector through an index-only scan of ``embeddings_whole``, which
    reads the table itself for every page the visibility map does not mark all-visible,
    and only a vacuum marks them (win32-17k: the count of 87,000 vectors 25 -> 8 ms)."""
    keep_statistics(conn, "embeddings", stored, "embeddings (model, part, hash)", vacuum=True)
    keep_statistics(conn, "windows", stored, "windows (model, hash)")


def keep_statistics(
    conn: psycopg.Connection, table: str, changed: int, targets: str, *, vacuum: bool = False
) -> None:
    """ANALYZE ``targets`` when ``table`` needs it (see the module's docstring), in a
    transaction of its own: statistics are never worth failing an index run for. With
    ``vacuum``: VACUUM (ANALYZE) instead, also when most of the table's pages are not
    marked all-visible and no vacuum has ever seen the table (an index built before: once,
    not on every run where some pages cannot be marked)."""
    try:
        due, unmarked = _due(conn, table, changed)
        conn.commit()  # what the run wrote is kept whatever happens below
        if vacuum and (due or unmarked):
            _flush_log(conn)
            conn.autocommit = True  # VACUUM runs outside a transaction
            try:
                # Not the indexes: after a run that deleted many vectors that would be
                # pgvector's HNSW clean-up, which can take long (autovacuum does it, in
                # the service or a long run); pages holding deleted rows stay unmarked.
                conn.execute(f"VACUUM (ANALYZE, INDEX_CLEANUP OFF) {targets}")
            finally:
                conn.autocommit = False
        elif due:
            conn.execute(f"ANALYZE {targets}")
        conn.commit()
    except psycopg.Error as exc:  # a lock or statement timeout on a shared server
        conn.rollback()
        log.warning("could not gather planner statistics for %s: %s", table, exc)


# GIN indexes that rows written after their build reach through a pending list.
GIN_INDEXES = ("chunks_terms_gin", "documents_tags_gin")


def flush_gin_pending(conn: psycopg.Connection) -> None:
    """Move what an index run added to the GIN indexes' pending lists into their trees, in
    a transaction of its own. Inserts land in an unsorted list that every scan of the
    index reads in full until it passes 4 MB or a vacuum runs, and autovacuum rarely
    comes within a command's life. A run that writes notes one by one (a first index
    below BULK_THRESHOLD, a re-derive after a new redactor, ``index --full``) left them
    all there: Dendron re-derived kept its whole term index in 395 pending pages, and
    each BM25 statement read them (8 ms). Cheap when the list is empty (under 1 ms).
    Left to autovacuum when this role may not do it (it owns neither table)."""
    try:
        conn.commit()
        for name in GIN_INDEXES:
            conn.execute("SELECT gin_clean_pending_list(%s::regclass)", (name,))
        conn.commit()
    except psycopg.Error as exc:
        conn.rollback()
        log.warning("could not flush the GIN indexes' pending lists: %s", exc)


def _flush_log(conn: psycopg.Connection) -> None:
    """Flush the log to disk. The vectors were committed asynchronously, and a vacuum
    cannot mark a page all-visible while its rows' commits are not on disk (it would then
    mark none of a run's new pages). A commit that wrote nothing else flushes nothing, so
    this writes one flushed message (PostgreSQL 17 and later; where it is refused, the
    next run's vacuum marks them)."""
    try:
        conn.execute("SELECT pg_logical_emit_message(false, 'retriever', 'flush', true)")
        conn.commit()
    except psycopg.Error as exc:
        conn.rollback()
        log.debug("could not flush the log before a vacuum: %s", exc)


def _due(conn: psycopg.Connection, table: str, changed: int) -> tuple[bool, bool]:
    """(statistics due, most pages not marked all-visible by a vacuum that never ran)."""
    row = conn.execute(
        f"""
        SELECT c.reltuples,
            EXISTS (SELECT 1 FROM pg_stats s
                    WHERE s.schemaname = n.nspname AND s.tablename = c.relname),
            EXISTS (SELECT 1 FROM {table}),
            c.relallvisible, c.relpages,
            (SELECT coalesce(v.last_vacuum, v.last_autovacuum) IS NULL
             FROM pg_stat_user_tables v WHERE v.relid = c.oid)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.oid = %s::regclass
        """,
        (table,),
    ).fetchone()
    if row is None:
        return False, False
    rows = max(float(row[0]), 0.0)  # -1: never counted (0 before PostgreSQL 14)
    has_statistics, filled = bool(row[1]), bool(row[2])
    due = (filled and not has_statistics) or changed >= ANALYZE_MIN_ROWS + ANALYZE_SHARE * rows
    never_vacuumed = row[5] is not False  # no statistics row (NULL): none known either
    return due, filled and never_vacuumed and 2 * int(row[3]) < int(row[4])
