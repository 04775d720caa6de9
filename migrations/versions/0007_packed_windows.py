"""Window vectors packed: one row per passage and model, int8 codes (``windows``).

Windows only rescore passages by cosine (``retriever.vector``), which any per-vector scale
drops out of, so their vectors are kept as int8 codes scaled to +-127
(``retriever.windows.pack_windows``), all of a passage's in one row. On win32-17k they
were 168,000 halfvec rows of ``embeddings`` (parts 1..) with as many primary-key entries.

The upgrade converts the stored windows (nothing is embedded again); ``embeddings`` keeps
the whole-passage vectors (part 0). The downgrade turns the codes back into halfvec rows
(each window's direction, which is all a cosine reads).

The deleted rows' space in ``embeddings`` is reused by later writes (autovacuum); a new
index, or ``VACUUM FULL embeddings``, gives it back to the disk at once.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

from typing import Any

import numpy as np
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

BATCH = 2000  # passages converted per round trip


def _halfvec(text: str) -> np.ndarray:
    return np.asarray(text.strip("[]").split(","), dtype=np.float32)


def _driver() -> Any:
    """The psycopg connection under Alembic's (COPY and server-side cursors)."""
    return op.get_bind().connection.driver_connection


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE windows (
            model integer NOT NULL REFERENCES models(id) ON DELETE CASCADE,
            hash  bytea NOT NULL REFERENCES passages(hash) ON DELETE CASCADE,
            vecs  bytea NOT NULL,                 -- int8 codes, one row of dim per window
            PRIMARY KEY (model, hash)
        );
        -- Codes do not compress: skip pglz, store long rows out of line as they are.
        ALTER TABLE windows ALTER COLUMN vecs SET STORAGE EXTERNAL;
        """
    )
    conn = _driver()
    with conn.cursor(name="old_windows") as read, conn.cursor() as write:
        read.itersize = BATCH * 4
        read.execute(
            "SELECT model, hash, vec::text FROM embeddings WHERE part > 0"
            " ORDER BY model, hash, part"
        )
        packed: list[tuple[int, bytes, bytes]] = []
        key: tuple[int, bytes] | None = None
        vecs: list[np.ndarray] = []
        for model, h, text in read:
            if key is not None and key != (model, bytes(h)):
                packed.append((*key, _pack(vecs)))
                vecs = []
                if len(packed) >= BATCH:
                    _copy_windows(write, packed)
            key = (model, bytes(h))
            vecs.append(_halfvec(text))
        if key is not None:
            packed.append((*key, _pack(vecs)))
        _copy_windows(write, packed)
    op.execute("DELETE FROM embeddings WHERE part > 0")


def _copy_windows(cur: Any, packed: list[tuple[int, bytes, bytes]]) -> None:
    with cur.copy("COPY windows (model, hash, vecs) FROM STDIN") as copy:
        for row in packed:
            copy.write_row(row)
    packed.clear()


def _pack(vecs: list[np.ndarray]) -> bytes:
    # retriever.windows.pack_windows as of this revision: a migration must not change
    # with the code after it.
    rows = np.vstack(vecs)
    peak = np.abs(rows).max(axis=1, keepdims=True)
    return bytes(np.rint(rows / peak * 127.0).astype(np.int8).tobytes())


def downgrade() -> None:
    conn = _driver()
    with conn.cursor() as cur:
        found = cur.execute(
            "SELECT w.model, w.hash, w.vecs, m.dim FROM windows w JOIN models m ON m.id = w.model"
        ).fetchall()
        with cur.copy("COPY embeddings (model, hash, part, vec) FROM STDIN") as copy:
            for model, h, blob, dim in found:
                codes = np.frombuffer(bytes(blob), dtype=np.int8).reshape(-1, dim)
                for part, row in enumerate(codes.astype(np.float32), start=1):
                    unit = row / float(np.linalg.norm(row))
                    text = "[" + ",".join(f"{x:.5g}" for x in unit) + "]"
                    copy.write_row((model, h, part, text))
    op.execute("DROP TABLE windows")
