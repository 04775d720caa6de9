"""PreToolUse context: queries from tool calls, precision, repeats, byte-stable blocks."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from retriever.app import Retriever
from retriever.hook_state import load_state, remember_prompt, state_dir
from retriever.hooks import MAX_CONTEXT_CHARS, prompt_context
from retriever.tool_hooks import is_repeat, run_pre_tool_hook, tool_context, tool_query


@pytest.mark.parametrize(
    ("tool", "tool_input", "query"),
    [
        ("Read", {"file_path": "/code/ops/restic_backup_verify.sh"}, "restic backup verify ops"),
        ("Edit", {"file_path": "/code/src/CaddyReload.ts"}, "caddy reload"),
        ("Bash", {"command": "restic -r /srv/backup check --read-data"}, "restic backup srv check"),
        (
            "Bash",
            {"command": "git commit -m 'tweak caddy reload timeout'"},
            "tweak caddy reload timeout",
        ),
        ("WebSearch", {"query": "restic prune retention policy"}, "restic prune retention policy"),
        (
            "WebFetch",
            {"url": "https://restic.readthedocs.io/en/stable/060_forget.html"},
            "restic forget",
        ),
        ("Grep", {"pattern": r"def\s+verify_backup\("}, "verify backup"),
        ("Glob", {"pattern": "**/*sourdough*.md"}, "sourdough"),
    ],
)
def test_tool_queries(tool: str, tool_input: dict[str, str], query: str) -> None:
    found = tool_query(tool, tool_input)
    assert found is not None and found[1] == query


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Bash", {"command": "ls -la"}),
        ("Bash", {"command": "pwd"}),
        ("Bash", {"command": "cd /tmp && ls | wc -l"}),
        ("Bash", {"command": "cat notes.txt"}),
        ("Read", {"file_path": "/code/src/index.ts"}),
        ("Read", {"file_path": "/code/README.md"}),
        ("Bash", {"command": "git status"}),
        ("mcp__github__get_issue", {"number": "12"}),
        ("Read", {}),
        ("Bash", {"command": 42}),
    ],
)
def test_trivial_tool_calls_have_no_query(tool: str, tool_input: dict[str, object]) -> None:
    assert tool_query(tool, tool_input) is None


def test_cat_of_a_big_file_is_not_trivial(tmp_path: Path) -> None:
    (tmp_path / "tiny.txt").write_text("x")
    (tmp_path / "sourdough_schedule.txt").write_text("flour water salt\n" * 1000)
    assert tool_query("Bash", {"command": "cat tiny.txt"}, str(tmp_path)) is None
    found = tool_query("Bash", {"command": "cat sourdough_schedule.txt"}, str(tmp_path))
    assert found is not None and "sourdough" in found[1]


def test_repeats_are_detected_per_session(tmp_path: Path) -> None:
    assert not is_repeat(tmp_path, "s1", "file:/a/restic.sh", "restic")
    assert is_repeat(tmp_path, "s1", "file:/a/restic.sh", "restic")  # twice in a row
    assert not is_repeat(tmp_path, "s2", "file:/a/restic.sh", "restic")  # other session
    assert not is_repeat(tmp_path, "s1", "file:/a/caddy.conf", "caddy")
    assert is_repeat(tmp_path, "s1", "bash:restic check", "restic")  # answered already
    assert not is_repeat(tmp_path, "", "file:/a/restic.sh", "restic")  # no session: no state


# --------------------------------------------------------------------------- with a vault


@pytest.fixture
def healthy_app(make_app, vault_copy: Path, model_dir: Path) -> Retriever:
    app = make_app(vault_copy, model=model_dir)
    app.index()
    return app


def test_tool_context_for_a_covered_file(healthy_app: Retriever) -> None:
    found = tool_query("Read", {"file_path": "/code/ops/restic_backup.sh"})
    assert found is not None
    block = tool_context(healthy_app, "Read", found[1], 300)
    assert block.startswith("Notes possibly relevant to this Read call")
    assert "homelab/Backups.md:" in block
    assert len(block) < 300 * 4 * 2


def test_tool_context_quotes_a_query_with_braces(healthy_app: Retriever) -> None:
    block = tool_context(healthy_app, "Bash", "restic backup {retention}", 300)
    assert "for 'restic backup {retention}'" in block
    assert "homelab/Backups.md:" in block


def test_tool_context_stays_quiet_when_not_covered(healthy_app: Retriever) -> None:
    for query in ("kubernetes helm chart", "quantum chromodynamics", "webpack config"):
        assert tool_context(healthy_app, "Read", query, 300) == ""


def _pre_tool(event: dict[str, object]) -> str:
    out = io.StringIO()
    assert run_pre_tool_hook(stdin=io.StringIO(json.dumps(event)), stdout=out) == 0
    return out.getvalue()


@pytest.fixture
def hook_env(healthy_app: Retriever, monkeypatch, db_url: str, model_dir: Path) -> Retriever:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("RETRIEVER_HOME", str(healthy_app.settings.home))
    monkeypatch.setenv("RETRIEVER_EMBED_MODEL", str(model_dir))
    monkeypatch.setenv("RETRIEVER_VAULT", str(healthy_app.settings.vault))
    return healthy_app


def test_pre_tool_hook_command(hook_env: Retriever) -> None:
    event = {
        "session_id": "s1",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "restic -r /srv/backup snapshots"},
        "cwd": "/tmp",
    }
    data = json.loads(_pre_tool(event))
    out = data["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and "permissionDecision" not in out
    assert "homelab/Backups.md:" in out["additionalContext"]
    assert len(out["additionalContext"]) <= MAX_CONTEXT_CHARS
    assert _pre_tool(event) == ""  # the same call again: nothing new to say
    for quiet in ({"command": "ls -la"}, {"command": "pwd"}):
        assert _pre_tool({**event, "session_id": "s2", "tool_input": quiet}) == ""
    assert _pre_tool({**event, "session_id": "s3", "tool_name": "Task"}) == ""  # matcher


def test_pre_tool_hook_never_fails(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("RETRIEVER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RETRIEVER_EMBED_MODEL", "none")
    (tmp_path / "empty").mkdir()  # no database and nothing in the files: no context
    monkeypatch.setenv("RETRIEVER_VAULT", str(tmp_path / "empty"))
    event = {"session_id": "s", "tool_name": "Read", "tool_input": {"file_path": "/x/restic.sh"}}
    assert _pre_tool(event) == ""
    for stdin in ("not json", "[]", "", json.dumps({"tool_name": "Read", "tool_input": "x"})):
        out = io.StringIO()
        assert run_pre_tool_hook(stdin=io.StringIO(stdin), stdout=out) == 0
        assert out.getvalue() == ""
    monkeypatch.setenv("RETRIEVER_HOOK_PRE_TOOL", "false")
    assert _pre_tool({**event, "session_id": "t"}) == ""


def test_prompt_is_remembered_for_the_post_tool_hook(healthy_app: Retriever) -> None:
    remember_prompt(healthy_app.settings, "s9", "why is the nightly backup failing?")
    folder = state_dir(healthy_app.settings)
    assert folder.is_relative_to(healthy_app.settings.home)
    assert load_state(folder, "s9")["prompt"] == "why is the nightly backup failing?"


# --------------------------------------------------------------------------- byte-stable


def _blocks(app: Retriever) -> list[str]:
    return [
        prompt_context(app, "How do I restore a single file from the restic backup?"),
        tool_context(app, "Read", "restic backup", 300),
        tool_context(app, "WebSearch", "sourdough starter feeding", 300),
    ]


def test_context_blocks_are_byte_stable(healthy_app: Retriever, vault_copy: Path) -> None:
    first = _blocks(healthy_app)
    assert all(first)
    assert _blocks(healthy_app) == first
    note = vault_copy / "travel" / "Packing List.md"
    note.write_text(note.read_text(encoding="utf-8") + "\n- a spare phone charger\n")
    report = healthy_app.index()
    assert report.files_changed == 1
    assert _blocks(healthy_app) == first
