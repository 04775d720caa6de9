"""Each note's derived digest (``documents.derived``): what the index stores of it, hashed.

A new chunker, normaliser or redactor re-derives every note. With the digest of what the
note's rows were written from, that run rewrites only the notes whose output moved: on
win32-17k an upgrade used to rewrite all 17,000 notes and left the note tables twice their
size (dead rows the server reuses but does not give back). Notes written before this
revision have no digest: the first re-derivation rewrites them, as before.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE documents ADD COLUMN IF NOT EXISTS derived bytea")


def downgrade() -> None:
    op.execute("ALTER TABLE documents DROP COLUMN IF EXISTS derived")
