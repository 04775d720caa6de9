"""Passage text packed: ``passages.ztext``, the UTF-8 text under raw DEFLATE.

PostgreSQL compresses a value only once its row passes about 2 kB; most passages are
shorter, so their text was stored as written (win32-17k: 58 MiB of text column, 28 MiB
packed). The text is only ever read by the program (``retriever.passage_text``), never
searched in SQL: BM25 reads the term arrays of ``chunks``.

The upgrade packs the stored texts (nothing is parsed or embedded again) in one rewrite of
the table, so the old texts' space goes back to the disk at once (win32-17k: 87,000
passages in about 4 s). The downgrade unpacks them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

BATCH = 5000  # passages read per round trip


def _driver() -> Any:
    """The psycopg connection under Alembic's (COPY and server-side cursors)."""
    return op.get_bind().connection.driver_connection


def _pack(text: str) -> bytes:
    # retriever.passage_text.pack as of this revision: a migration must not change with the
    # code after it.
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    return packer.compress(text.encode("utf-8")) + packer.flush()


def _unpack(blob: bytes) -> str:
    return zlib.decompress(bytes(blob), -15).decode("utf-8")


def _convert(
    source: str, target: str, sql_type: str, storage: str, convert: Callable[[Any], object]
) -> None:
    """Turn column ``source`` into ``target`` (``sql_type``), each value through
    ``convert``, in one rewrite of the table."""
    conn = _driver()
    conn.execute(
        f"CREATE TEMP TABLE passages_conv (hash bytea PRIMARY KEY, v {sql_type}) ON COMMIT DROP;"
        f" CREATE FUNCTION pg_temp.converted(h bytea) RETURNS {sql_type} LANGUAGE sql STABLE"
        " AS 'SELECT v FROM passages_conv WHERE hash = h'"
    )
    with conn.cursor(name="passages_read") as read, conn.cursor() as write:
        read.execute(f"SELECT hash, {source} FROM passages")
        # One batch at a time: the connection cannot fetch while a COPY is open on it.
        while batch := read.fetchmany(BATCH):
            with write.copy("COPY passages_conv (hash, v) FROM STDIN") as copy:
                for h, value in batch:
                    copy.write_row((h, convert(value)))
    # A change of type rewrites the table with only the new values (an UPDATE would leave
    # every old row version behind, which not even CLUSTER drops inside this transaction),
    # and the column keeps its place.
    op.execute(
        f"ALTER TABLE passages ALTER COLUMN {source} SET STORAGE {storage},"
        f" ALTER COLUMN {source} TYPE {sql_type} USING pg_temp.converted(hash);"
        f" ALTER TABLE passages RENAME COLUMN {source} TO {target};"
        " DROP FUNCTION pg_temp.converted(bytea);"
        " ANALYZE passages"
    )


def upgrade() -> None:
    # Packed text does not compress again: no pglz, long values out of line as they are.
    _convert("text", "ztext", "bytea", "EXTERNAL", _pack)


def downgrade() -> None:
    _convert("ztext", "text", "text", "EXTENDED", _unpack)
