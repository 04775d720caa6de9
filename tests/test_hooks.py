"""Claude Code hooks: output shape, trivial-prompt skipping, redaction, failure safety."""

from __future__ import annotations

import io
import json
import re
import secrets
import socket
import time
from pathlib import Path

import pytest

from retriever.app import Retriever
from retriever.config import Settings
from retriever.hooks import (
    MAX_CONTEXT_CHARS,
    is_trivial,
    prompt_context,
    run_prompt_hook,
    run_session_start_hook,
    session_start,
)
from tests.conftest import TEST_VAULT


def _context(output: str, event: str) -> str:
    data = json.loads(output)
    assert set(data) == {"hookSpecificOutput"}
    assert data["hookSpecificOutput"]["hookEventName"] == event
    context = data["hookSpecificOutput"]["additionalContext"]
    assert isinstance(context, str) and len(context) <= MAX_CONTEXT_CHARS
    return context


def _dead_db_app(tmp_path: Path, vault: Path = TEST_VAULT) -> Retriever:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return Retriever(
        Settings(
            vault=vault,
            home=tmp_path / "home",
            database_url=f"postgresql://nobody@127.0.0.1:{port}/none",
            embed_model="none",
        )
    )


@pytest.fixture
def healthy_app(make_app, model_dir: Path) -> Retriever:
    app = make_app(TEST_VAULT, model=model_dir)
    app.index()
    return app


# --------------------------------------------------------------------------- SessionStart


def test_session_start_healthy(healthy_app: Retriever, tmp_path: Path) -> None:
    context = _context(session_start(healthy_app), "SessionStart")
    assert "retriever MCP tools" in context
    assert "healthy" in context and "31 notes" in context
    assert str(tmp_path) not in context


def test_session_start_degraded(make_app, tmp_path: Path) -> None:
    app = make_app(TEST_VAULT, model=tmp_path / "missing-model")
    app.index(embed=False)
    context = _context(session_start(app), "SessionStart")
    assert "degraded" in context and "keyword-only" in context
    assert "embedder" in context
    assert str(tmp_path) not in context


def test_session_start_down_is_said_plainly(tmp_path: Path) -> None:
    context = _context(session_start(_dead_db_app(tmp_path, tmp_path / "gone")), "SessionStart")
    assert "DOWN" in context
    assert "do not mean the notes lack the answer" in context


def test_session_start_without_database_says_the_files_answer(tmp_path: Path) -> None:
    context = _context(session_start(_dead_db_app(tmp_path)), "SessionStart")
    assert "degraded" in context and "files scanned, no database" in context
    assert "database: cannot connect" in context


def test_session_start_hook_command_never_fails(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("RETRIEVER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RETRIEVER_EMBED_MODEL", "none")
    out = io.StringIO()
    stdin = io.StringIO(json.dumps({"hook_event_name": "SessionStart", "source": "startup"}))
    assert run_session_start_hook(TEST_VAULT, stdin=stdin, stdout=out) == 0
    assert "files scanned, no database" in _context(out.getvalue(), "SessionStart")


# --------------------------------------------------------------------------- UserPromptSubmit


@pytest.mark.parametrize(
    "prompt",
    [
        "",
        "   ",
        "hi",
        "Hello!",
        "thanks",
        "Thank you, that works",
        "ok go on",
        "yes",
        "lgtm",
        "/compact",
        "/review the backup script",
        "!ls -la",
        "why?",
        "fix it",
    ],
)
def test_trivial_prompts_are_skipped(prompt: str) -> None:
    assert is_trivial(prompt)


@pytest.mark.parametrize(
    "prompt",
    [
        "How do I restore a single file from the restic backup?",
        "ok now fix the backup verification script please",
        "Wie mache ich ein Backup vom Heimserver?",
        "what did I write about the Lisbon weekend",
    ],
)
def test_real_prompts_are_not_trivial(prompt: str) -> None:
    assert not is_trivial(prompt)


def test_prompt_context_injects_a_budgeted_cited_block(healthy_app: Retriever) -> None:
    output = prompt_context(
        healthy_app, "How do I restore a single file from the restic backup?", budget_tokens=300
    )
    context = _context(output, "UserPromptSubmit")
    assert "homelab/Backups.md:" in context
    assert "hybrid search" in context
    assert len(context) < 300 * 4 * 2  # the budget holds (plus header and headings)


def test_prompt_context_stays_quiet(healthy_app: Retriever, tmp_path: Path) -> None:
    assert prompt_context(healthy_app, "thanks!") == ""
    assert prompt_context(healthy_app, "/clear") == ""
    absent = "Explain quantum chromodynamics lattice gauge theory renormalisation"
    assert prompt_context(healthy_app, absent) == ""
    # A dead database: context from the files themselves, said so, and quickly.
    started = time.perf_counter()
    output = prompt_context(_dead_db_app(tmp_path), "How are my restic backups verified?")
    assert time.perf_counter() - started < 15
    context = _context(output, "UserPromptSubmit")
    assert "files search" in context and "search mode: files" in context
    assert "homelab/Backups.md:" in context


def test_prompt_context_never_carries_a_credential(make_app, vault_copy: Path, model_dir) -> None:
    token = "gh" + "p_" + re.sub(r"[^A-Za-z0-9]", "", secrets.token_urlsafe(64))[:36]
    (vault_copy / "homelab" / "Zeppelin deploy.md").write_text(
        f"# Zeppelin deploy\n\nThe zeppelin deploy pipeline token is {token} (rotate yearly).\n",
        encoding="utf-8",
    )
    app = make_app(vault_copy, model=model_dir)
    app.index()
    output = prompt_context(app, "Which token does the zeppelin deploy pipeline use?")
    context = _context(output, "UserPromptSubmit")
    assert "Zeppelin deploy.md" in context
    assert token not in output and token[4:] not in output


def test_prompt_hook_command(healthy_app: Retriever, monkeypatch, db_url: str, model_dir) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("RETRIEVER_HOME", str(healthy_app.settings.home))
    monkeypatch.setenv("RETRIEVER_EMBED_MODEL", str(model_dir))
    event = {
        "session_id": "s1",
        "hook_event_name": "UserPromptSubmit",
        "cwd": "/somewhere",
        "prompt": "How do I restore a single file from the restic backup?",
    }
    out = io.StringIO()
    assert run_prompt_hook(TEST_VAULT, stdin=io.StringIO(json.dumps(event)), stdout=out) == 0
    assert "homelab/Backups.md:" in _context(out.getvalue(), "UserPromptSubmit")
    for stdin in ("not json", json.dumps({**event, "prompt": "thanks!"}), "[1, 2]", ""):
        out = io.StringIO()
        assert run_prompt_hook(TEST_VAULT, stdin=io.StringIO(stdin), stdout=out) == 0
        assert out.getvalue() == ""
