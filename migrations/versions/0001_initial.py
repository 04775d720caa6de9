"""Initial schema: documents, passages, chunks, embeddings, links, lexicon.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
    op.execute(
        """
        CREATE TABLE meta (
            key   text PRIMARY KEY,
            value jsonb NOT NULL
        );

        -- One row per note file. Files are the truth; this is derived.
        CREATE TABLE documents (
            id          serial PRIMARY KEY,
            path        text NOT NULL UNIQUE,          -- vault-relative, POSIX separators
            size        bigint NOT NULL,
            mtime_ns    bigint NOT NULL,
            sha256      bytea NOT NULL,                -- of the raw file bytes
            title       text NOT NULL,
            frontmatter jsonb NOT NULL DEFAULT '{}',
            tags        text[] NOT NULL DEFAULT '{}',
            aliases     text[] NOT NULL DEFAULT '{}',
            note_type   text,
            created     text,
            updated     text,
            encoding    text NOT NULL DEFAULT 'utf-8',
            indexed_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX documents_tags_gin ON documents USING gin (tags);

        -- Passage text, keyed by the sha256 of its normalised text and heading context
        -- (shared by duplicates, kept across renames so nothing is embedded twice).
        CREATE TABLE passages (
            hash    bytea PRIMARY KEY,
            text    text NOT NULL,
            context text NOT NULL DEFAULT '',     -- "title > H2 > H3", embedded with the text
            tokens  integer NOT NULL
        );

        -- A passage's occurrence in a document, with its citation and lexical data
        -- (weighted term frequencies as parallel arrays; document-level BM25 sums them).
        CREATE TABLE chunks (
            id            bigserial PRIMARY KEY,
            doc_id        integer NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            ordinal       integer NOT NULL,
            passage_hash  bytea NOT NULL REFERENCES passages(hash),
            heading_trail text[] NOT NULL DEFAULT '{}',
            start_line    integer NOT NULL,
            end_line      integer NOT NULL,
            content_type  text NOT NULL,
            terms         integer[] NOT NULL,      -- lexicon ids, ascending
            tfs           real[] NOT NULL,
            len           real NOT NULL,
            UNIQUE (doc_id, ordinal)
        );
        CREATE INDEX chunks_terms_gin ON chunks USING gin (terms);
        CREATE INDEX chunks_passage ON chunks (passage_hash);

        CREATE TABLE models (
            id          serial PRIMARY KEY,
            fingerprint text NOT NULL UNIQUE,
            model_id    text NOT NULL,
            dim         integer NOT NULL CHECK (dim > 0),
            created_at  timestamptz NOT NULL DEFAULT now()
        );

        -- Embeddings keyed by (model fingerprint, passage hash); half precision halves the
        -- footprint at no measurable cost for cosine ranking.
        CREATE TABLE embeddings (
            model  integer NOT NULL REFERENCES models(id) ON DELETE CASCADE,
            hash   bytea NOT NULL REFERENCES passages(hash) ON DELETE CASCADE,
            vec    halfvec NOT NULL,
            PRIMARY KEY (model, hash)
        );

        CREATE TABLE links (
            doc_id   integer NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            target   text NOT NULL,
            anchor   text,
            alias    text,                          -- kept only when it may be the target
            kind     text NOT NULL,
            line     integer NOT NULL,
            resolved integer REFERENCES documents(id) ON DELETE SET NULL
        );
        CREATE INDEX links_doc ON links (doc_id);
        CREATE INDEX links_resolved ON links (resolved);

        -- Document frequencies for BM25 IDF, kept in step with chunks/documents.
        CREATE TABLE lexicon (
            id   serial UNIQUE,                     -- what chunks.terms hold: integer
                                                    -- comparisons score far faster than text
            term text PRIMARY KEY,
            df   integer NOT NULL DEFAULT 0,       -- chunks containing the term
            ddf  integer NOT NULL DEFAULT 0        -- documents containing the term
        );
        CREATE TABLE lex_stats (
            id          integer PRIMARY KEY CHECK (id = 1),
            n_chunks    bigint NOT NULL DEFAULT 0,
            sum_len     double precision NOT NULL DEFAULT 0,
            n_docs      bigint NOT NULL DEFAULT 0,
            sum_doc_len double precision NOT NULL DEFAULT 0
        );
        INSERT INTO lex_stats (id) VALUES (1);
        """
    )


def downgrade() -> None:
    op.execute(
        "DROP TABLE IF EXISTS lex_stats, lexicon, links, embeddings, models, chunks, "
        "passages, documents, meta CASCADE"
    )
