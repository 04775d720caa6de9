"""Embedding windows: a passage may hold several vectors per model (``part``).

Part 0 is the whole passage, as before; parts 1.. are the overlapping windows of a long
passage (``retriever.windows``), and a search scores a passage by its best part. The
vectors stored so far have no windows, and nothing but a new embedding can make them: they
are dropped, so the next ``retriever index`` embeds every passage again (files, passages
and links stay; Model2Vec re-embeds a few thousand notes in seconds, an Ollama model takes
longer). Searches meanwhile run lexical and say so. The HNSW indexes go with the vectors
and are rebuilt by that index run.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        r"""
        TRUNCATE embeddings;
        -- An emptied HNSW index would take the new vectors one insert at a time; the next
        -- index run builds each model's index once its vectors are in (index.py).
        DO $$
        DECLARE name text;
        BEGIN
            FOR name IN SELECT indexname FROM pg_indexes
                        WHERE schemaname = current_schema() AND tablename = 'embeddings'
                          AND indexname LIKE 'embeddings\_hnsw\_%'
            LOOP
                EXECUTE format('DROP INDEX %I', name);
            END LOOP;
        END
        $$;
        ALTER TABLE embeddings ADD COLUMN part smallint NOT NULL DEFAULT 0;
        ALTER TABLE embeddings DROP CONSTRAINT embeddings_pkey;
        ALTER TABLE embeddings ADD PRIMARY KEY (model, hash, part);
        """
    )


def downgrade() -> None:
    # Windows cannot live in the old schema: they go, and the whole-passage vectors stay.
    op.execute(
        """
        DELETE FROM embeddings WHERE part <> 0;
        ALTER TABLE embeddings DROP CONSTRAINT embeddings_pkey;
        ALTER TABLE embeddings DROP COLUMN part;
        ALTER TABLE embeddings ADD PRIMARY KEY (model, hash);
        """
    )
