"""Health check: verdicts and exit codes against a real PostgreSQL (no mocks)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from healthcheck.cli import main
from retriever.health import run_health
from retriever.health_output import render
from tests.conftest import TEST_VAULT


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Point the CLI's settings at a test database/vault/model through the environment."""

    def set_env(*, db_url: str, model: str | Path = "none", vault: Path = TEST_VAULT) -> None:
        monkeypatch.setenv("DATABASE_URL", db_url)
        monkeypatch.setenv("RETRIEVER_VAULT", str(vault))
        monkeypatch.setenv("RETRIEVER_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("RETRIEVER_EMBED_MODEL", str(model))

    return set_env


def _run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return int(exc.value.code or 0), capsys.readouterr().out


def test_exit_1_and_files_mode_when_database_port_is_closed(env, capsys, tmp_path: Path) -> None:
    env(db_url=f"postgresql://nobody@127.0.0.1:{_closed_port()}/nothing")
    started = time.perf_counter()
    code, out = _run_cli(capsys, "--json")
    assert time.perf_counter() - started < 5
    assert code == 1  # search still answers, from the files: degraded, not down
    data = json.loads(out)
    assert data["verdict"] == "degraded" and data["search_mode"] == "files"
    assert "over the files themselves" in data["summary"]
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["database"]["status"] == "fail"
    assert "cannot connect" in checks["database"]["detail"]
    assert "start PostgreSQL or fix DATABASE_URL" in checks["database"]["hint"]
    assert "scans the files" in checks["database"]["hint"]
    # Everything that depends on the database says so instead of looking empty.
    for name in ("extensions", "schema", "model", "index"):
        assert checks[name]["status"] == "fail"
        assert "not checked" in checks[name]["detail"]


def test_exit_2_when_neither_database_nor_vault_answer(env, capsys, tmp_path: Path) -> None:
    env(db_url=f"postgresql://nobody@127.0.0.1:{_closed_port()}/x", vault=tmp_path / "gone")
    code, out = _run_cli(capsys, "--json")
    assert code == 2
    data = json.loads(out)
    assert data["verdict"] == "down" and data["search_mode"] == "none"


def test_exit_1_when_embedder_is_missing(env, capsys, make_app, db_url, tmp_path: Path) -> None:
    make_app(TEST_VAULT).index(embed=False)  # fresh lexical index
    env(db_url=db_url, model=tmp_path / "no-such-model")
    code, out = _run_cli(capsys, "--json")
    assert code == 1
    data = json.loads(out)
    assert data["verdict"] == "degraded"
    assert data["search_mode"] == "lexical"
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["embedder"]["status"] == "fail"
    assert "unavailable" in checks["embedder"]["detail"]
    assert "keyword-only" in checks["embedder"]["hint"]
    assert checks["database"]["status"] == "ok"
    assert checks["schema"]["status"] == "ok"
    assert checks["index"]["status"] == "ok", checks["index"]


def test_exit_0_when_all_good(env, capsys, make_app, db_url, model_dir: Path) -> None:
    report = make_app(TEST_VAULT, model=model_dir).index()
    assert report.passages_pending == 0
    env(db_url=db_url, model=model_dir)
    started = time.perf_counter()
    code, out = _run_cli(capsys, "--json")
    elapsed = time.perf_counter() - started
    data = json.loads(out)
    assert code == 0, json.dumps(data["checks"], indent=1)
    assert data["verdict"] == "healthy" and data["search_mode"] == "hybrid"
    assert all(c["status"] == "ok" for c in data["checks"])
    assert elapsed < 2.0, f"health check took {elapsed:.2f} s"
    index = next(c for c in data["checks"] if c["name"] == "index")
    assert "0 passages pending" in index["detail"]


def test_quiet_and_human_output(env, capsys, make_app, db_url, tmp_path: Path) -> None:
    make_app(TEST_VAULT).index(embed=False)
    env(db_url=db_url, model=tmp_path / "no-such-model")
    code, out = _run_cli(capsys, "--quiet")
    assert code == 1 and out == ""
    code, out = _run_cli(capsys)
    assert code == 1
    assert "✓ database" in out
    assert "✗ embedder" in out
    assert "→ " in out  # the next step under the failed check
    assert "DEGRADED" in out


def test_schema_missing_is_down(make_app, empty_db_url: str) -> None:
    from retriever.app import Retriever
    from retriever.config import Settings

    app = Retriever(Settings(vault=TEST_VAULT, database_url=empty_db_url, embed_model="none"))
    report = run_health(app)
    assert report.verdict == "down" and report.exit_code == 2
    schema = report.check("schema")
    assert schema is not None and schema.status == "fail"
    assert schema.hint and "db upgrade" in schema.hint
    text = render(report)
    assert "✗ schema" in text and "DOWN" in text


def test_vectors_pending_and_stale_files_are_degraded(
    make_app, vault_copy: Path, model_dir
) -> None:
    app = make_app(vault_copy, model=model_dir)
    app.index(embed=False)
    report = run_health(app)
    assert report.verdict == "degraded"
    assert report.search_mode == "lexical"  # no vector for the current model yet
    model = report.check("model")
    assert model is not None and model.status == "warn"
    assert "no vectors for the configured model" in model.detail

    app.index()
    note = vault_copy / "Inbox.md"
    note.write_text(note.read_text(encoding="utf-8") + "\nA new line.\n", encoding="utf-8")
    report = run_health(app)
    assert report.search_mode == "hybrid"
    index = report.check("index")
    assert index is not None and index.status == "warn"
    assert "1 changed" in index.detail
    assert report.verdict == "degraded" and report.exit_code == 1
    assert "retriever index" in (index.hint or "")


def test_empty_index_is_not_healthy(make_app, model_dir) -> None:
    report = run_health(make_app(TEST_VAULT, model=model_dir))
    index = report.check("index")
    assert index is not None and index.status == "warn"
    assert "nothing is indexed yet" in index.detail
    assert report.verdict == "degraded"
    assert "nothing is indexed yet" in report.summary()
