"""A small index of the whole-passage vectors (part 0), by model.

``store.count_pending`` counts each model's part-0 vectors on every index run and after
each one (calibration, the first search): through the primary key that scan also steps
over every window's entry (on win32-17k 87,000 of 255,000 rows, 28 ms). This partial
index holds only part 0 (600 kB there) and counts them in 9 ms.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS embeddings_whole ON embeddings (model) WHERE part = 0")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS embeddings_whole")
