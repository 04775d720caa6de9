"""Index cost: drop the document-level BM25 statistics nothing reads, links as distinct rows
with a count.

Migrates an existing index in place (no re-index needed): ``lexicon.ddf``,
``lex_stats.n_docs`` and ``lex_stats.sum_doc_len`` go (document-level BM25 was removed;
they were maintained on every write for nothing), and repeated links of a note (same
target, anchor, alias and kind) collapse into one row that keeps the first line and counts
the repeats in ``n``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE lexicon DROP COLUMN ddf;
        ALTER TABLE lex_stats DROP COLUMN n_docs, DROP COLUMN sum_doc_len;

        -- A note that links to the same place ten times holds one row with n = 10: what
        -- readers need is the edge (and the first line it appears on), not every repeat.
        ALTER TABLE links ADD COLUMN n integer NOT NULL DEFAULT 1;
        CREATE TEMP TABLE links_distinct ON COMMIT DROP AS
            SELECT doc_id, target, anchor, alias, kind, min(line) AS line,
                   count(*)::integer AS n, min(resolved) AS resolved
            FROM links GROUP BY doc_id, target, anchor, alias, kind;
        TRUNCATE links;
        INSERT INTO links (doc_id, target, anchor, alias, kind, line, n, resolved)
            SELECT doc_id, target, anchor, alias, kind, line, n, resolved FROM links_distinct;
        """
    )


def downgrade() -> None:
    # Repeated links are not restored (their other lines are gone); the statistics come
    # back at zero: a `retriever index --full` recomputes everything.
    op.execute(
        """
        ALTER TABLE links DROP COLUMN n;
        ALTER TABLE lex_stats ADD COLUMN n_docs bigint NOT NULL DEFAULT 0,
                              ADD COLUMN sum_doc_len double precision NOT NULL DEFAULT 0;
        ALTER TABLE lexicon ADD COLUMN ddf integer NOT NULL DEFAULT 0;
        """
    )
