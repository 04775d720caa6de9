"""Alembic migrations against a real PostgreSQL: empty -> head, idempotent, concurrent, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import psycopg
import pytest
from alembic import command

from retriever.db import current_revision, upgrade
from retriever.health import _extensions_check
from retriever.lexical import _stats
from retriever.migrate import alembic_config, head_revision
from retriever.passage_text import unpack
from retriever.windows import unpack_windows
from tests.conftest import retriever_exe

TABLES = {
    "meta",
    "documents",
    "passages",
    "chunks",
    "models",
    "embeddings",
    "links",
    "lexicon",
    "lex_stats",
    "alembic_version",
}


def schema(url: str) -> dict[str, object]:
    """Everything a migration creates, to compare before/after a second run."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        }
        extensions = {r[0] for r in conn.execute("SELECT extname FROM pg_extension").fetchall()}
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'public'"
            ).fetchall()
        }
        columns = {
            (r[0], r[1], r[2])
            for r in conn.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = 'public'"
            ).fetchall()
        }
        lex_stats = (
            conn.execute("SELECT * FROM lex_stats").fetchall() if "lex_stats" in tables else None
        )
        versions = (
            conn.execute("SELECT version_num FROM alembic_version").fetchall()
            if "alembic_version" in tables
            else None
        )
    return {
        "tables": tables,
        "extensions": extensions,
        "indexes": indexes,
        "columns": columns,
        "lex_stats": lex_stats,
        "versions": versions,
    }


def test_upgrade_brings_an_empty_database_to_head(empty_db_url: str) -> None:
    assert current_revision(empty_db_url) is None
    before = schema(empty_db_url)
    assert not (before["tables"] & TABLES)  # type: ignore[operator]

    revision = upgrade(empty_db_url)
    assert revision == head_revision()
    assert current_revision(empty_db_url) == head_revision()

    after = schema(empty_db_url)
    assert after["tables"] >= TABLES  # type: ignore[operator]
    assert {"vector", "unaccent"} <= after["extensions"]  # type: ignore[operator]
    assert after["versions"] == [(head_revision(),)]
    assert after["lex_stats"] == [(1, 0, 0.0)]
    assert {"chunks_terms_gin", "chunks_passage", "documents_tags_gin", "links_doc"} <= after[
        "indexes"
    ]  # type: ignore[operator]
    assert ("embeddings", "vec", "USER-DEFINED") in after["columns"]  # type: ignore[operator]

    # The extensions work, not just exist.
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT unaccent('Crème brûlée'), '[3,4]'::vector <-> '[0,0]'"
        ).fetchone()
        assert row == ("Creme brulee", 5.0)


def test_upgrade_twice_is_a_no_op(empty_db_url: str) -> None:
    first = upgrade(empty_db_url)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('probe', '\"kept\"'::jsonb)")
    snapshot = schema(empty_db_url)
    second = upgrade(empty_db_url)
    assert first == second == head_revision()
    assert schema(empty_db_url) == snapshot
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'probe'").fetchone() == ("kept",)


def test_concurrent_upgrades_both_succeed(empty_db_url: str) -> None:
    barrier = threading.Barrier(3)
    results: list[str] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(timeout=30)
            results.append(upgrade(empty_db_url))
        except BaseException as exc:  # reported below, with its type
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert results == [head_revision()] * 3
    after = schema(empty_db_url)
    assert after["versions"] == [(head_revision(),)]
    assert after["lex_stats"] == [(1, 0, 0.0)]  # created once, not duplicated


def test_db_upgrade_cli(empty_db_url: str, tmp_path: Path) -> None:
    env = dict(os.environ, DATABASE_URL=empty_db_url, RETRIEVER_HOME=str(tmp_path / "home"))
    env.pop("RETRIEVER_DATABASE_URL", None)
    cmd = [retriever_exe(), "db", "upgrade", "--json"]
    for _ in range(2):  # the second run is a no-op with the same answer
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["ok"] is True
        assert data["revision"] == head_revision()
        assert data["database"].startswith("postgresql://")
        assert ":" not in data["database"].split("//", 1)[1].split("@", 1)[0]  # no password
    assert current_revision(empty_db_url) == head_revision()
    assert not (tmp_path / "home" / "pgdata").exists()  # DATABASE_URL given: no embedded server


def test_db_upgrade_cli_reports_failure_as_json(tmp_path: Path) -> None:
    bad = f"postgresql://nobody@/nodb?host={tmp_path}&connect_timeout=2"  # no server there
    env = dict(os.environ, DATABASE_URL=bad, RETRIEVER_HOME=str(tmp_path / "home"))
    proc = subprocess.run(
        [retriever_exe(), "db", "upgrade", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    data = json.loads(proc.stdout)
    assert data["ok"] is False
    assert "migration failed" in data["error"]


def test_0003_migrates_an_existing_index(empty_db_url: str) -> None:
    """An index made before 0003 keeps its data: repeated links collapse into one row with
    a count and their first line, the unused document-level statistics go."""
    upgrade(empty_db_url, "0002")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO documents (id, path, size, mtime_ns, sha256, title)"
            " VALUES (1, 'a.md', 1, 1, '\\x00', 'A'), (2, 'b.md', 1, 1, '\\x01', 'B')"
        )
        conn.execute(
            "INSERT INTO links (doc_id, target, kind, line, resolved) VALUES"
            " (1, 'b', 'wiki', 7, 2), (1, 'b', 'wiki', 3, 2), (1, 'c', 'wiki', 4, NULL),"
            " (2, 'a', 'markdown', 1, 1)"
        )
        conn.execute("INSERT INTO lexicon (term, df, ddf) VALUES ('x', 3, 2)")
        conn.execute("UPDATE lex_stats SET n_chunks = 3, sum_len = 9, n_docs = 2")
    upgrade(empty_db_url)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        links = conn.execute(
            "SELECT doc_id, target, line, n, resolved FROM links ORDER BY doc_id, target"
        ).fetchall()
        assert links == [(1, "b", 3, 2, 2), (1, "c", 4, 1, None), (2, "a", 1, 1, 1)]
        assert conn.execute("SELECT term, df FROM lexicon").fetchall() == [("x", 3)]
        assert conn.execute("SELECT * FROM lex_stats").fetchall() == [(1, 3, 9.0)]
    assert {("lexicon", "ddf"), ("lex_stats", "n_docs")}.isdisjoint(
        {(t, c) for t, c, _ in schema(empty_db_url)["columns"]}  # type: ignore[attr-defined]
    )


def test_0005_drops_vectors_made_without_windows(empty_db_url: str) -> None:
    """Vectors stored before windows existed go (with their HNSW index), so the next index
    run embeds every passage again, windows included; passages stay. A downgrade keeps
    the whole-passage vectors and drops the windows."""
    upgrade(empty_db_url, "0004")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute("INSERT INTO passages (hash, text, tokens) VALUES ('\\x01', 'a', 1)")
        conn.execute("INSERT INTO models (id, fingerprint, model_id, dim) VALUES (1, 'f', 'm', 2)")
        conn.execute("INSERT INTO embeddings (model, hash, vec) VALUES (1, '\\x01', '[1,0]')")
        conn.execute(
            "CREATE INDEX embeddings_hnsw_m1 ON embeddings USING hnsw"
            " ((vec::halfvec(2)) halfvec_cosine_ops) WHERE model = 1"
        )
    upgrade(empty_db_url)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM embeddings").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM passages").fetchone() == (1,)
        assert conn.execute("SELECT to_regclass('embeddings_hnsw_m1')").fetchone() == (None,)
        conn.execute(
            "INSERT INTO embeddings (model, hash, part, vec) VALUES"
            " (1, '\\x01', 0, '[1,0]'), (1, '\\x01', 1, '[0,1]'), (1, '\\x01', 2, '[1,1]')"
        )
    command.downgrade(alembic_config(empty_db_url), "0004")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        rows = conn.execute("SELECT model, vec::text FROM embeddings").fetchall()
        assert rows == [(1, "[1,0]")]


def _intarray_schema(url: str) -> str | None:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'intarray'"
        ).fetchone()
    return row[0] if row else None


def test_0004_installs_intarray_off_the_search_path(empty_db_url: str) -> None:
    """intarray lands in its own schema (its operators must not take ``&&`` over from the
    GIN index); a downgrade removes only what the revision made."""
    upgrade(empty_db_url)
    assert _intarray_schema(empty_db_url) == "intarray"
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        # No int[]-specific && on the search path: the built-in (anyarray) one answers.
        own = conn.execute("SELECT to_regoperator('&&(integer[],integer[])')").fetchone()
        assert own == (None,)
        found = conn.execute("SELECT to_regoperator('intarray.&&(integer[],integer[])')")
        assert found.fetchone() != (None,)
    command.downgrade(alembic_config(empty_db_url), "0003")
    assert current_revision(empty_db_url) == "0003"
    assert _intarray_schema(empty_db_url) is None


def test_0004_goes_on_without_intarray(empty_db_url: str) -> None:
    """A server where intarray cannot be created (here: the name is taken in its schema)
    still migrates to head; BM25 then uses array_position and health says so."""
    upgrade(empty_db_url, "0003")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA intarray")
        conn.execute(
            "CREATE FUNCTION intarray.idx(int[], int) RETURNS int LANGUAGE sql AS 'SELECT 0'"
        )
    assert upgrade(empty_db_url) == head_revision()
    assert _intarray_schema(empty_db_url) is None
    with psycopg.connect(empty_db_url) as conn:
        assert _stats(conn, ["x"]).position == "array_position"
        check = _extensions_check(conn)
    assert check.status == "ok"
    assert "intarray not installed" in check.detail
    # What health advises: once the server can, `db upgrade` installs it after all.
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute("DROP FUNCTION intarray.idx(int[], int)")
    upgrade(empty_db_url)
    assert _intarray_schema(empty_db_url) == "intarray"


def test_0006_indexes_whole_vectors_for_counting(empty_db_url: str) -> None:
    """Counting a model's whole-passage vectors reads the partial index of part 0 alone
    (not every window's entry in the primary key); a downgrade removes only it."""
    upgrade(empty_db_url)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        definition = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'embeddings_whole'"
        ).fetchone()
        assert definition is not None and "WHERE (part = 0)" in definition[0]
        conn.execute("SET enable_seqscan = off")  # the plan a big table gets
        plan = conn.execute(
            "EXPLAIN SELECT count(*) FROM embeddings WHERE model = 1 AND part = 0"
        ).fetchall()
        assert "embeddings_whole" in str(plan)
    command.downgrade(alembic_config(empty_db_url), "0005")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('embeddings_whole')").fetchone() == (None,)
        assert conn.execute("SELECT to_regclass('embeddings_pkey')").fetchone() != (None,)


def test_0007_packs_windows_without_embedding_again(empty_db_url: str) -> None:
    """Stored windows move into one row of int8 codes per passage (each window's direction
    kept, in order); whole vectors stay. A downgrade turns them back into rows."""
    upgrade(empty_db_url, "0006")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO passages (hash, text, tokens) VALUES ('\\x01', 'a', 1), ('\\x02', 'b', 1)"
        )
        conn.execute("INSERT INTO models (id, fingerprint, model_id, dim) VALUES (1, 'f', 'm', 3)")
        conn.execute(
            "INSERT INTO embeddings (model, hash, part, vec) VALUES"
            " (1, '\\x01', 0, '[1,0,0]'), (1, '\\x01', 2, '[0,0.5,-0.25]'),"
            " (1, '\\x01', 1, '[0,2,0]'), (1, '\\x02', 0, '[0,0,1]')"
        )
    upgrade(empty_db_url)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        whole = conn.execute("SELECT hash, part, vec::text FROM embeddings ORDER BY hash")
        assert whole.fetchall() == [(b"\x01", 0, "[1,0,0]"), (b"\x02", 0, "[0,0,1]")]
        rows = conn.execute("SELECT model, hash, vecs FROM windows").fetchall()
    assert [(m, bytes(h)) for m, h, _ in rows] == [(1, b"\x01")]
    assert unpack_windows(bytes(rows[0][2]), 3).tolist() == [[0, 127, 0], [0, 127, -64]]
    command.downgrade(alembic_config(empty_db_url), "0006")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('windows')").fetchone() == (None,)
        back = conn.execute(
            "SELECT part, vec::text FROM embeddings WHERE hash = '\\x01' ORDER BY part"
        ).fetchall()
    assert [p for p, _ in back] == [0, 1, 2]
    assert json.loads(back[1][1]) == pytest.approx([0, 1, 0])
    assert json.loads(back[2][1]) == pytest.approx([0, 0.894, -0.447], abs=5e-3)


_REFERENCES = (
    "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
    " WHERE confrelid = 'passages'::regclass ORDER BY conname"
)


def test_0009_packs_passage_text_and_gives_the_space_back(empty_db_url: str) -> None:
    """Stored texts are packed in place (vectors and their references kept), the table is
    rewritten (the old texts leave the disk), and a downgrade gives the same texts back."""
    texts = {
        b"\x01": "a",
        b"\x02": "Café « crème » ☕\n\n| col | x |\n\tindented",
        b"\x03": " ".join(f"word{i % 97}x{i % 13}" for i in range(2000)),  # past 2 kB packed
    }
    upgrade(empty_db_url, "0008")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        for h, text in texts.items():
            conn.execute("INSERT INTO passages (hash, text, tokens) VALUES (%s, %s, 1)", (h, text))
        conn.execute("INSERT INTO models (id, fingerprint, model_id, dim) VALUES (1, 'f', 'm', 2)")
        conn.execute("INSERT INTO embeddings (model, hash, vec) VALUES (1, '\\x02', '[1,0]')")
        before = conn.execute("SELECT pg_relation_filenode('passages')").fetchone()
        references = conn.execute(_REFERENCES).fetchall()
    upgrade(empty_db_url)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        stored = dict(conn.execute("SELECT hash, ztext FROM passages").fetchall())
        columns = conn.execute(
            "SELECT attname, attstorage FROM pg_attribute WHERE attrelid = 'passages'::regclass"
            " AND attnum > 0 AND NOT attisdropped"
        ).fetchall()
        assert conn.execute("SELECT pg_relation_filenode('passages')").fetchone() != before
        assert conn.execute(_REFERENCES).fetchall() == references
        assert conn.execute("SELECT hash FROM embeddings").fetchall() == [(b"\x02",)]
    assert {bytes(h): unpack(z) for h, z in stored.items()} == texts
    assert len(stored[b"\x03"]) < len(texts[b"\x03"]) / 4
    assert ("ztext", "e") in columns and "text" not in dict(columns)
    command.downgrade(alembic_config(empty_db_url), "0008")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        back = dict(conn.execute("SELECT hash, text FROM passages").fetchall())
    assert {bytes(h): t for h, t in back.items()} == texts
