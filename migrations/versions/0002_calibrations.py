"""Calibrations: the ranking and absence model chosen per (vault, model).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- One row per embedding model ('' = lexical only): what calibration chose for this
        -- vault, the pseudo-queries it chose on, and how much the vault changed since.
        CREATE TABLE calibrations (
            model          text PRIMARY KEY,          -- embedder fingerprint
            version        integer NOT NULL,          -- of the calibration procedure
            created_at     timestamptz NOT NULL DEFAULT now(),
            n_docs         integer NOT NULL,          -- notes in the vault when calibrated
            changed_docs   integer NOT NULL DEFAULT 0,  -- notes written or removed since
            pseudo_queries jsonb NOT NULL,
            result         jsonb NOT NULL
        );
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS calibrations")
