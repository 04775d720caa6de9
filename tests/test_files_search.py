"""No database, still an answer: when PostgreSQL cannot be reached or started, search
scans the vault files (BM25 over the index's own passages), redacted, cited, bounded in
time, and says so in every answer; a wrong setting is still refused."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

import pytest

from retriever.app import Retriever
from retriever.config import Settings
from retriever.files_search import FilesQuery, search_files
from tests.conftest import TEST_VAULT, run_retriever


def _closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://nobody@127.0.0.1:{port}/none"


def _dead_app(vault: Path, tmp_path: Path, **overrides: object) -> Retriever:
    settings = Settings(
        vault=vault,
        home=tmp_path / "home",
        database_url=_closed_url(),
        embed_model="none",
        **overrides,
    )  # type: ignore[arg-type]
    return Retriever(settings)


def test_search_answers_from_the_files_and_says_so(tmp_path: Path) -> None:
    app = _dead_app(TEST_VAULT, tmp_path)
    result = app.search("restic retention policy snapshots")
    assert result.mode == "files"
    assert "cannot connect" in (result.degraded_reason or "")
    assert "scanning the vault files" in (result.degraded_reason or "")
    assert result.hits and result.hits[0].path == "homelab/Backups.md"
    for hit in result.hits:  # citations are exact: the cited lines hold the passage
        lines = (TEST_VAULT / hit.path).read_text("utf-8").splitlines()
        cited = "\n".join(lines[hit.start_line - 1 : hit.end_line])
        assert hit.text.splitlines()[-1].strip() in cited
    assert result.used_tokens <= result.budget_tokens


def test_the_files_answer_matches_the_index_passages(make_app, tmp_path: Path) -> None:
    indexed = make_app(TEST_VAULT)
    indexed.index()
    query = "sourdough starter hydration"
    from_index = indexed.search(query, mode="lexical")
    from_files = _dead_app(TEST_VAULT, tmp_path).search(query)
    assert from_files.hits[0].citation == from_index.hits[0].citation
    index_hashes = {h.passage_hash for h in from_index.hits}
    assert from_files.hits[0].passage_hash in index_hashes  # the same passage, same key


def test_secrets_never_leave_the_files_path(vault_copy: Path, tmp_path: Path) -> None:
    token = "ghp_" + secrets.token_hex(18)
    (vault_copy / "homelab" / "Zeppelin.md").write_text(
        f"# Zeppelin deploy\n\nThe zeppelin deploy token is {token} (rotate yearly).\n", "utf-8"
    )
    result = _dead_app(vault_copy, tmp_path).search("zeppelin deploy token")
    assert result.hits and result.hits[0].path == "homelab/Zeppelin.md"
    assert token not in json.dumps(result.to_dict())


def test_filters_hold_without_the_index(tmp_path: Path) -> None:
    app = _dead_app(TEST_VAULT, tmp_path)
    in_folder = app.search("restic backups", folder="Daily")
    assert in_folder.hits and all(h.path.startswith("Daily/") for h in in_folder.hits)
    assert app.search("restic backups", folder="cooking").hits == []


def test_the_time_limit_bounds_the_scan(tmp_path: Path) -> None:
    query = FilesQuery(["restic"], budget_tokens=400)
    answer = search_files(TEST_VAULT, query, time_limit=0.0)
    assert answer.timed_out and answer.files_read < answer.files_total
    result = _dead_app(TEST_VAULT, tmp_path, files_time_limit=0.0).search("restic")
    assert "time limit" in (result.degraded_reason or "")


@pytest.mark.server
def test_an_embedded_server_that_cannot_start_still_answers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "pgdata").write_text("not a data directory", "utf-8")  # a broken data directory
    app = Retriever(Settings(vault=TEST_VAULT, home=home, embed_model="none"))
    result = app.search("restic retention")
    assert result.mode == "files" and result.hits
    assert "embedded PostgreSQL" in (result.degraded_reason or "")


def _cli(env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRIEVER_")}
    env.update(RETRIEVER_SERVICE="off", RETRIEVER_EMBED_MODEL="none", **env_extra)
    return run_retriever(list(args), env, timeout=120)


def test_cli_search_without_database_is_degraded_not_failed(tmp_path: Path) -> None:
    done = _cli(
        {"DATABASE_URL": _closed_url(), "RETRIEVER_HOME": str(tmp_path)},
        "search",
        "--vault",
        str(TEST_VAULT),
        "restic retention",
        "--json",
    )
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert data["mode"] == "files" and data["hits"] and data["via"] == "process"


@pytest.mark.parametrize("url", ["postgres://[broken", "host=x port=notaport dbname"])
def test_a_malformed_url_is_refused_not_papered_over(tmp_path: Path, url: str) -> None:
    done = _cli(
        {"DATABASE_URL": url, "RETRIEVER_HOME": str(tmp_path)},
        "search",
        "--vault",
        str(TEST_VAULT),
        "restic",
        "--json",
    )
    assert done.returncode == 2
    data = json.loads(done.stdout)
    assert data["ok"] is False and "DATABASE_URL" in data["error"]
    assert "Traceback" not in done.stderr


@pytest.mark.server
def test_a_killed_embedded_server_falls_back_then_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psutil

    from retriever import app as app_module

    monkeypatch.setattr(app_module, "DATABASE_RETRY_SECONDS", 0.0)
    home = tmp_path / "home"
    app = Retriever(Settings(vault=TEST_VAULT, home=home, embed_model="none", calibrate=False))
    try:
        app.index()
        assert app.search("restic retention").mode == "lexical"
        pid = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
        psutil.Process(pid).kill()  # kill -9 of the postmaster, under a warm process
        psutil.Process(pid).wait(timeout=30)
        during = app.search("restic retention")
        assert during.mode == "files" and during.hits  # an answer, said to be from files
        # A later call starts the server again (once the killed server's backends are gone:
        # until then a start fails and the answer still comes from the files).
        deadline = time.monotonic() + 60
        after = app.search("restic retention")
        while after.mode == "files" and time.monotonic() < deadline:
            time.sleep(0.5)
            after = app.search("restic retention")
        assert after.mode == "lexical" and after.hits
        assert after.hits[0].path == during.hits[0].path
    finally:
        app.close()
