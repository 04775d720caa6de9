"""The MCP server through FastMCP's in-memory client, against a real indexed vault.

Hostile input must be refused cleanly or answered safely: nothing outside the vault is
read, and no message carries an absolute path, SQL or a stack trace.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastmcp import Client, FastMCP

from retriever.app import Retriever
from retriever.config import Settings
from retriever.mcp_server import (
    MAX_OUTPUT_BYTES,
    RemoteBindError,
    Warmup,
    build_server,
    check_bind,
    serve,
)
from retriever.passage_text import pack, unpack

TOOLS = {
    "search",
    "read_note",
    "list_notes",
    "get_context",
    "links",
    "health",
    "context_for_tool",
    "compress",
}


def fake_github_token() -> str:
    body = re.sub(r"[^A-Za-z0-9]", "", secrets.token_urlsafe(64))[:36]
    return "gh" + "p_" + body


class Caller:
    """Synchronous facade over an in-memory FastMCP client (one session per call)."""

    def __init__(self, server: FastMCP) -> None:
        self.server = server
        self.messages: list[str] = []  # every text the server sent back

    async def _call(self, tool: str, args: dict[str, Any]) -> Any:
        async with Client(self.server) as client:
            return await client.call_tool(tool, args, raise_on_error=False)

    def raw(self, tool: str, **args: Any) -> Any:
        result = asyncio.run(self._call(tool, args))
        self.messages += [getattr(c, "text", "") for c in result.content]
        return result

    def ok(self, tool: str, **args: Any) -> Any:
        result = self.raw(tool, **args)
        assert not result.is_error, result.content
        return result.data

    def error(self, tool: str, **args: Any) -> str:
        result = self.raw(tool, **args)
        assert result.is_error, f"{tool}({args!r}) was accepted: {str(result.data)[:300]}"
        return result.content[0].text

    def list_tools(self) -> list[Any]:
        async def go() -> list[Any]:
            async with Client(self.server) as client:
                return await client.list_tools()

        return asyncio.run(go())


def assert_safe(text: str, *roots: Path) -> None:
    for root in roots:
        assert str(root) not in text
        assert os.path.realpath(root) not in text
    for marker in ("Traceback", "SELECT ", "psycopg", 'File "', "OUTSIDE-THE-VAULT"):
        assert marker not in text, text[:500]


@pytest.fixture
def model_path(tmp_path: Path, model_dir: Path) -> Path:
    """The test model copied under tmp_path (so its location is test-specific)."""
    dest = tmp_path / "models" / "m2v"
    shutil.copytree(model_dir, dest)
    return dest


@pytest.fixture
def indexed(make_app, vault_copy: Path, model_path: Path) -> Retriever:
    app = make_app(vault_copy, model=model_path)
    report = app.index()
    assert report.passages_pending == 0
    return app


@pytest.fixture
def mcp(indexed: Retriever) -> Caller:
    return Caller(build_server(indexed))


# --------------------------------------------------------------------------- tools


def test_tools_are_listed_read_only_with_examples(mcp: Caller) -> None:
    tools = {t.name: t for t in mcp.list_tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False
        assert tool.description and len(tool.description) > 80
        if tool.name != "health":
            assert "Example" in tool.description


def test_search_hybrid_with_citations(mcp: Caller, vault_copy: Path) -> None:
    data = mcp.ok("search", queries="how are backups verified")
    assert data["mode"] == "hybrid"
    assert "degraded_reason" in data and data["degraded_reason"] is None
    assert data["hits"]
    for hit in data["hits"]:
        path, lines = hit["citation"].rsplit(":", 1)
        start, end = (int(x) for x in lines.split("-"))
        assert (path, start, end) == (hit["path"], hit["start_line"], hit["end_line"])
    top = data["hits"][0]
    shown = mcp.ok(
        "read_note", path=top["path"], start_line=top["start_line"], end_line=top["end_line"]
    )
    assert shown["citation"] == top["citation"]


def test_a_best_hit_over_the_output_limit_is_shortened_not_dropped(
    make_app, vault_copy: Path, model_path: Path
) -> None:
    """One huge line (a pasted log, a minified table) as the only answer: the agent gets
    it cut, cited and marked truncated, never an empty answer that reads as "absent"."""
    (vault_copy / "wombats.md").write_text("# Wombats\n\n" + "wombat " * 60_000 + "\n", "utf-8")
    (vault_copy / "quolls.md").write_text(
        "# Quolls\n\n" + "".join(f"quoll line {i}\n" for i in range(12_000)), "utf-8"
    )
    # JSON escapes double quotes and backslashes: the cut is measured as it is sent
    paths = '{"path": "C:\\\\Users\\\\numbat"}, ' * 9_000
    (vault_copy / "numbats.md").write_text("# Numbats\n\n" + paths + "\n", "utf-8")
    app = make_app(vault_copy, model=model_path)
    app.index()
    mcp = Caller(build_server(app))
    cases = (("wombat", "wombats.md"), ("quoll line", "quolls.md"), ("numbat", "numbats.md"))
    for query, path in cases:
        data = mcp.ok("search", queries=query, mode="lexical", budget_tokens=20_000)
        assert data["truncated"] and data["hits"], query
        top = data["hits"][0]
        assert top["path"] == path and top["truncated"]
        assert len(json.dumps(data).encode("utf-8")) > 0.9 * MAX_OUTPUT_BYTES  # not a sliver
        assert len(json.dumps(data).encode("utf-8")) <= MAX_OUTPUT_BYTES + 1000
        assert top["citation"] == f"{path}:{top['start_line']}-{top['end_line']}"
        lines = (vault_copy / path).read_text("utf-8").splitlines()
        shown = top["text"].splitlines()
        cited = lines[top["start_line"] - 1 : top["end_line"]]
        assert shown[:-1] == cited[:-1] and cited[-1].startswith(shown[-1])
    context = mcp.ok("get_context", topic="wombat", budget_tokens=20_000)
    assert "wombat wombat" in context and len(context.encode("utf-8")) <= MAX_OUTPUT_BYTES


def test_an_index_of_another_vault_is_said_not_an_internal_error(
    make_app, vault_copy: Path, model_path: Path, tmp_path: Path
) -> None:
    """One DATABASE_URL for two vaults: the server says what is wrong with its setup,
    without the paths, instead of answering with the other vault's notes."""
    make_app(vault_copy, model=model_path).index()
    other = tmp_path / "other vault"
    other.mkdir()
    (other / "Alone.md").write_text("# Alone\n\nnothing about backups\n", "utf-8")
    mcp = Caller(build_server(make_app(other, model=model_path)))
    said = mcp.error("search", queries="backups")
    assert "this index holds" in said and "configuration" in said
    assert "internal error" not in said and str(tmp_path) not in said


def test_search_filters_and_several_queries(mcp: Caller) -> None:
    data = mcp.ok(
        "search", queries=["restic retention", "how long are snapshots kept"], folder="homelab"
    )
    assert data["hits"] and all(h["path"].startswith("homelab/") for h in data["hits"])
    assert len(data["queries"]) == 2
    assert mcp.ok("search", queries="backups", tags="backup")["hits"]
    lexical = mcp.ok("search", queries="restic", mode="lexical")
    assert lexical["mode"] == "lexical"


def test_search_in_a_folder_the_vault_lacks_says_so(mcp: Caller, vault_copy: Path) -> None:
    """A folder that is not there is a tool error naming it, not "likely absent"."""
    message = mcp.error("search", queries="backups", folder="homelabs")
    assert message == "no folder 'homelabs' in the vault"
    message = mcp.error("search", queries="backups", folder="Homelab")
    assert message == "no folder 'Homelab' in the vault: did you mean 'homelab'?"
    assert "excluded" in mcp.error("search", queries="journal", folder="private")
    (vault_copy / "a%20b").mkdir()  # an odd name, but a real folder: searched
    assert mcp.ok("search", queries="backups", folder="a%20b")["hits"] == []
    # Listing a folder is checked the same way (it answered an empty page).
    assert mcp.error("list_notes", folder="homelabs") == "no folder 'homelabs' in the vault"
    message = mcp.error("list_notes", folder="Homelab/")
    assert message == "no folder 'Homelab' in the vault: did you mean 'homelab'?"
    assert "excluded" in mcp.error("list_notes", folder="private")
    assert mcp.ok("list_notes", folder="a%20b")["notes"] == []
    assert mcp.ok("list_notes", folder="/")["notes"]  # the whole vault


def test_search_absent_topic_says_so(mcp: Caller) -> None:
    data = mcp.ok("search", queries="quantum chromodynamics lattice gauge theory")
    assert data["likely_absent"] is True
    assert "advice" in data


def test_get_context_is_markdown_with_mode(mcp: Caller) -> None:
    text = mcp.ok("get_context", topic="restic backups and restore tests", budget_tokens=800)
    assert isinstance(text, str)
    assert text.startswith("> search mode: hybrid")
    assert "### homelab/Backups.md:" in text


def test_get_context_is_byte_stable(mcp: Caller, indexed: Retriever, vault_copy: Path) -> None:
    def ask() -> str:
        return mcp.ok("get_context", topic="restic backups and restore tests", budget_tokens=800)

    first = ask()
    assert ask() == first
    note = vault_copy / "cooking" / "Shakshuka.md"
    note.write_text(note.read_text(encoding="utf-8") + "\nServe with warm bread.\n")
    assert indexed.index().files_changed == 1
    assert ask() == first


def test_context_for_tool(mcp: Caller) -> None:
    block = mcp.ok(
        "context_for_tool", tool_name="Read", tool_input={"file_path": "/code/ops/restic_backup.sh"}
    )
    assert "homelab/Backups.md:" in block
    as_text = mcp.ok("context_for_tool", tool_name="Bash", tool_input="restic snapshots --json")
    assert "homelab/Backups.md:" in as_text
    hook = json.loads(
        mcp.ok(
            "context_for_tool",
            tool_name="Read",
            hook_event="PreToolUse",
            tool_input='{"file_path": "/code/ops/restic_backup.sh"}',
        )
    )
    assert hook["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    assert "homelab/Backups.md:" in hook["hookSpecificOutput"]["additionalContext"]
    assert mcp.ok("context_for_tool", tool_name="Bash", tool_input={"command": "ls -la"}) == ""
    args = {"tool_name": "Glob", "tool_input": {"pattern": "**/*sourdough*"}, "session_id": "m1"}
    assert mcp.ok("context_for_tool", **args)
    assert mcp.ok("context_for_tool", **args) == ""  # repeated in the same session
    assert "hook_event" in mcp.error(
        "context_for_tool", tool_name="Read", tool_input="x.md", hook_event="PostToolUse"
    )
    assert "tool_input" in mcp.error(
        "context_for_tool", tool_name="Read", tool_input={"file_path": "x" * 200_000}
    )


def test_compress_tool(mcp: Caller) -> None:
    from tests.tool_outputs import build_log, json_answer

    log = build_log()
    text = mcp.ok("compress", text=log.text, task="why does the build fail", budget_tokens=600)
    assert "error: 'kMaxIdle' was not declared" in text and len(text) < len(log.text) / 10
    assert text.splitlines()[-1].startswith("[extract of 4,994 lines")
    assert mcp.ok("compress", text="short text", task="x") == "short text"
    api = json_answer()
    wrapped = json.dumps([{"type": "text", "text": api.text}])  # as ${tool_response} arrives
    hook = json.loads(
        mcp.ok(
            "compress",
            text=wrapped,
            task=api.task,
            tool_name=api.tool_name,
            hook_event="PostToolUse",
        )
    )
    assert '"name":"backup-nas"' in hook["hookSpecificOutput"]["updatedMCPToolOutput"]
    small = mcp.ok("compress", text="tiny", tool_name="Bash", hook_event="PostToolUse")
    assert small == ""  # below the threshold: the hook leaves the output alone
    assert "tool_name" in mcp.error("compress", text=wrapped, hook_event="PostToolUse")
    assert "budget_tokens" in mcp.error("compress", text="x", budget_tokens=49)


def test_compress_tool_redacts(mcp: Caller) -> None:
    token = fake_github_token()
    text = "\n".join(f"line {i} fine" for i in range(2000)) + f"\nERROR bad token {token}\n"
    out = mcp.ok("compress", text=text, task="errors")
    assert "bad token" in out and token not in out


def test_list_notes_links_and_health(mcp: Caller) -> None:
    page = mcp.ok("list_notes", folder="homelab", limit=3)
    assert page["count"] == 3 and page["next_cursor"]
    page2 = mcp.ok("list_notes", folder="homelab", limit=3, cursor=page["next_cursor"])
    assert not {n["path"] for n in page["notes"]} & {n["path"] for n in page2["notes"]}
    links = mcp.ok("links", path="Home.md", direction="out")
    assert "homelab/Backups.md" in {link["path"] for link in links["links"]}
    health = mcp.ok("health")
    assert health["verdict"] == "healthy" and health["search_mode"] == "hybrid"


# --------------------------------------------------------------------------- hostile input

HOSTILE_PATHS = [
    "/etc/passwd",
    "../outside/secret.md",
    "..%2foutside%2fsecret.md",
    "%2e%2e/%2e%2e/etc/passwd",
    "Home.md\x00",
    "homelab\\Backups.md",
    "C:\\Windows\\win.ini",
    ".obsidian/workspace.json",
    "private/Journal.md",
    "attachments/diagram.txt",
    "homelab",
    "escape.md",
    "escape-dir/secret.md",
    "pipe.md",
    "",
]


@pytest.fixture
def hostile_vault(vault_copy: Path, tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("OUTSIDE-THE-VAULT\n", encoding="utf-8")
    (vault_copy / "escape.md").symlink_to(outside / "secret.md")
    (vault_copy / "escape-dir").symlink_to(outside, target_is_directory=True)
    os.mkfifo(vault_copy / "pipe.md")
    return vault_copy


def test_read_note_refuses_hostile_paths(make_app, hostile_vault: Path, tmp_path: Path) -> None:
    mcp = Caller(build_server(make_app(hostile_vault)))
    started = time.perf_counter()
    for path in [
        *HOSTILE_PATHS,
        str(hostile_vault / "Home.md"),
        str(tmp_path / "outside/secret.md"),
    ]:
        message = mcp.error("read_note", path=path)
        assert message, path
        assert_safe(message, tmp_path)
    assert time.perf_counter() - started < 20  # the FIFO never blocked
    for bad in ({"start_line": -1}, {"start_line": 10**12}, {"start_line": 5, "end_line": 2}):
        assert_safe(mcp.error("read_note", path="Home.md", **bad), tmp_path)
    assert all(str(tmp_path) not in m for m in mcp.messages)


def test_two_dot_file_names_are_served(make_app, vault_copy: Path, model_path: Path) -> None:
    """``..notes.md`` is a name, not a climb: every path-taking tool accepts it."""
    (vault_copy / "..notes.md").write_text("# Dots\n\nSee [[Home]].\n", encoding="utf-8")
    (vault_copy / "homelab" / "..draft.md").write_text("# Draft\n", encoding="utf-8")
    app = make_app(vault_copy, model=model_path)
    app.index()
    mcp = Caller(build_server(app))
    assert mcp.ok("read_note", path="..notes.md")["total_lines"] == 3
    assert mcp.ok("read_note", path="homelab/..draft.md")["total_lines"] == 1
    links = mcp.ok("links", path="..notes.md", direction="out")
    assert "Home.md" in {link["path"] for link in links["links"]}
    listed = {n["path"] for n in mcp.ok("list_notes", folder="homelab", limit=200)["notes"]}
    assert "homelab/..draft.md" in listed
    for path in ("..", "../..notes.md", "homelab/../../..notes.md"):
        assert_safe(mcp.error("read_note", path=path), vault_copy)


def test_every_listed_or_found_path_is_readable_as_returned(
    make_app, vault_copy: Path, model_path: Path, tmp_path: Path
) -> None:
    """File names with URL-escape look-alikes or a line break are listed and found: the
    paths come back exactly as read_note and links must take them."""
    word = "zyxwombat"  # a term only these notes hold
    odd = ["100% done.md", "a%20b.md", "odd/50%2e5.md", "line\nbreak.md", "back\\slash.md"]
    (vault_copy / "odd").mkdir()
    for rel in odd:
        (vault_copy / rel).write_text(f"# Odd\n\n{word} see [[Home]]\n", encoding="utf-8")
    app = make_app(vault_copy, model=model_path)
    app.index()
    mcp = Caller(build_server(app))
    listed = {n["path"] for n in mcp.ok("list_notes", limit=200)["notes"]}
    found = {h["path"] for h in mcp.ok("search", queries=word, mode="lexical")["hits"]}
    assert set(odd) <= listed and set(odd) <= found
    for path in found & set(odd):
        note = mcp.ok("read_note", path=path)
        assert note["path"] == path and word in note["text"]
        assert "Home.md" in {link["path"] for link in mcp.ok("links", path=path)["links"]}
    # Taken literally, never decoded: the same strings name nothing once the files go.
    for rel in odd:
        (vault_copy / rel).unlink()
    for path in ("a%20b.md", "line\nbreak.md", "%2e%2e/outside.md", "..%2fHome.md"):
        assert_safe(mcp.error("read_note", path=path), tmp_path)


def test_two_dot_names_in_every_path_argument(
    make_app, vault_copy: Path, model_path: Path, tmp_path: Path
) -> None:
    """Names that merely start with ".." are served through every path and folder argument
    (nested ones too), while a real climb, an absolute path or a "..name" symlink leading
    out of the vault is still refused."""
    word = "zyxquokka"  # a term only these notes hold
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("OUTSIDE-THE-VAULT\n", encoding="utf-8")
    (vault_copy / "notes").mkdir()
    (vault_copy / "notes" / "..hidden.md").write_text(f"# Hidden\n\n{word} one\n", "utf-8")
    (vault_copy / "..archive").mkdir()
    (vault_copy / "..archive" / "old.md").write_text(f"# Old\n\n{word} two\n", "utf-8")
    (vault_copy / "..escape.md").symlink_to(outside / "secret.md")
    app = make_app(vault_copy, model=model_path)
    app.index()
    mcp = Caller(build_server(app))

    assert mcp.ok("read_note", path="notes/..hidden.md")["total_lines"] == 3
    assert mcp.ok("read_note", path="..archive/old.md")["citation"] == "..archive/old.md:1-3"
    assert mcp.ok("links", path="notes/..hidden.md", direction="out")["links"] == []
    listed = {n["path"] for n in mcp.ok("list_notes", folder="..archive")["notes"]}
    assert listed == {"..archive/old.md"}
    hits = mcp.ok("search", queries=word, folder="..archive", mode="lexical")["hits"]
    assert [h["path"] for h in hits] == ["..archive/old.md"]
    hits = mcp.ok("search", queries=word, folder="notes", mode="lexical")["hits"]
    assert [h["path"] for h in hits] == ["notes/..hidden.md"]
    context = mcp.ok("get_context", topic=word)
    assert "..archive/old.md:" in context and "notes/..hidden.md:" in context

    for path in (
        "..escape.md",
        "notes/../../outside/secret.md",
        "..archive/../../outside/secret.md",
        "notes/..",
        str(vault_copy / "notes" / "..hidden.md"),
    ):
        assert_safe(mcp.error("read_note", path=path), tmp_path)
    for folder in ("..archive/../..", "../outside", str(vault_copy / "..archive")):
        assert_safe(mcp.error("list_notes", folder=folder), tmp_path)
        assert_safe(mcp.error("search", queries=word, folder=folder), tmp_path)
    assert all("OUTSIDE-THE-VAULT" not in m for m in mcp.messages)


def test_search_refuses_or_survives_hostile_input(mcp: Caller, tmp_path: Path) -> None:
    too_big = mcp.error("search", queries="backup " * 20_000)
    assert "100 KB" in too_big
    assert "at most 4" in mcp.error("search", queries=["a", "b", "c", "d", "e"])
    assert "empty" in mcp.error("search", queries="   \t\n ")
    for budget in (0, 49, 20_001, -1, 10**15):
        assert "between 50 and 20000" in mcp.error("search", queries="x", budget_tokens=budget)
    for folder in ("../", "/etc", str(tmp_path), "..%2f", "C:\\"):
        assert_safe(mcp.error("search", queries="backups", folder=folder), tmp_path)
    assert "mode" in mcp.error("search", queries="backups", mode="telepathic")
    assert "ISO" in mcp.error("search", queries="backups", modified_after="yesterday-ish")
    # Answered safely: control characters, emoji, right-to-left text, a long query.
    for query in (
        "back\x00ups\x1b[31m restic\x07",
        "🔥💾 backups 🚀",
        "النسخ الاحتياطي backups",
        "שלום restic",
        "restic " * 400,
    ):
        data = mcp.ok("search", queries=query)
        assert data["mode"] in ("hybrid", "lexical") and "degraded_reason" in data
    assert "cut" in " ".join(mcp.ok("search", queries="restic " * 400).get("notes", []))
    for message in mcp.messages:
        assert_safe(message, tmp_path)


def test_list_notes_and_links_refuse_hostile_input(mcp: Caller, tmp_path: Path) -> None:
    for limit in (0, -1, 201, 10**12):
        assert "between 1 and 200" in mcp.error("list_notes", limit=limit)
    assert "cursor" in mcp.error("list_notes", cursor="' OR 1=1 --")
    for folder in ("../", "/etc", str(tmp_path), "%2e%2e"):
        assert_safe(mcp.error("list_notes", folder=folder), tmp_path)
    # "/" alone is the vault root: answered, and still only vault notes.
    assert mcp.ok("list_notes", folder="/")["total"] == mcp.ok("list_notes")["total"]
    assert_safe(mcp.error("links", path="../Home.md"), tmp_path)
    assert "depth" in mcp.error("links", path="Home.md", depth=99)
    assert "direction" in mcp.error("links", path="Home.md", direction="up")
    # Wrong types are refused by schema validation, still without internals.
    assert_safe(mcp.error("list_notes", limit="many"), tmp_path)
    assert_safe(mcp.error("read_note", path=["Home.md"]), tmp_path)


# --------------------------------------------------------------------------- redaction


def test_planted_credential_never_leaves(make_app, vault_copy: Path, model_path: Path) -> None:
    token = fake_github_token()
    (vault_copy / "homelab" / "Deploy token.md").write_text(
        "# Deploy token\n\nThe zeppelin deploy pipeline authenticates with this token:\n"
        f"{token}\n\nRotate the zeppelin token every spring.\n",
        encoding="utf-8",
    )
    app = make_app(vault_copy, model=model_path)
    app.index()
    mcp = Caller(build_server(app))
    outputs = [
        json.dumps(mcp.ok("search", queries="zeppelin deploy token")),
        mcp.ok("get_context", topic="zeppelin deploy pipeline token"),
        json.dumps(mcp.ok("read_note", path="homelab/Deploy token.md")),
    ]
    assert "homelab/Deploy token.md" in outputs[0]
    # Defence in depth: even a passage stored unredacted (an old index, a bug) is scrubbed.
    with app.db.connection() as conn:
        stored = conn.execute(
            "SELECT hash, ztext FROM passages WHERE hash IN (SELECT c.passage_hash"
            " FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = %s)",
            ("homelab/Deploy token.md",),
        ).fetchall()
        assert stored
        for h, packed in stored:
            leaked = pack(unpack(packed) + f"\nleaked: {token}")
            conn.execute("UPDATE passages SET ztext = %s WHERE hash = %s", (leaked, h))
        conn.commit()
    outputs.append(json.dumps(mcp.ok("search", queries="zeppelin deploy token", mode="lexical")))
    outputs.append(mcp.ok("get_context", topic="zeppelin deploy token"))
    assert "leaked: [REDACTED" in outputs[-1]
    for text in outputs:
        assert token not in text
        assert token[4:] not in text


# --------------------------------------------------------------------------- degraded mode


def test_degraded_without_embedder_then_recovers(
    make_app, vault_copy: Path, model_dir: Path, tmp_path: Path
) -> None:
    model = tmp_path / "models" / "m2v"
    shutil.copytree(model_dir, model)
    make_app(vault_copy, model=model).index()  # vectors stored for this model
    shutil.rmtree(model)  # ... and then the model goes away

    app = make_app(vault_copy, model=model)
    server = build_server(app)  # must start anyway
    mcp = Caller(server)
    health = mcp.ok("health")
    assert health["verdict"] == "degraded"
    assert health["search_mode"] == "lexical"
    embedder = next(c for c in health["checks"] if c["name"] == "embedder")
    assert embedder["status"] == "fail" and "unavailable" in embedder["detail"]
    data = mcp.ok("search", queries="how are backups verified")
    assert data["mode"] == "lexical"
    assert data["degraded_reason"] and "embedder unavailable" in data["degraded_reason"]
    assert data["hits"]
    assert "search mode: lexical" in mcp.ok("get_context", topic="restic backups")

    shutil.copytree(model_dir, model)  # the model is back
    # No search waits for the loader: this one answers at once, keyword-only...
    assert mcp.ok("search", queries="restic backups")["mode"] == "lexical"
    # ... while the tier is probed again in the background (short pauses at first), so
    # hybrid search returns within seconds, without a restart.
    deadline = time.monotonic() + 20
    while (data := mcp.ok("search", queries="how are backups verified"))["mode"] != "hybrid":
        assert time.monotonic() < deadline, data["degraded_reason"]
        time.sleep(0.2)
    assert data["degraded_reason"] is None and data["tier"] == "primary"
    assert mcp.ok("health")["verdict"] == "healthy"
    for message in mcp.messages:
        assert str(tmp_path) not in message


def test_database_down_is_an_error_not_an_empty_result(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = Retriever(
        Settings(
            vault=Path(__file__).parent / "vault",
            home=tmp_path / "home",
            database_url=f"postgresql://nobody@127.0.0.1:{port}/none",
            embed_model="none",
        )
    )
    mcp = Caller(build_server(app))
    health = mcp.ok("health")
    assert health["verdict"] == "degraded" and health["search_mode"] == "files"
    # Search answers from the files themselves, and says so.
    found = mcp.ok("search", queries="restic backups")
    assert found["mode"] == "files" and found["hits"]
    assert "scanning the vault files" in found["degraded_reason"]
    assert_safe(json.dumps(found), tmp_path)
    assert "files" in str(mcp.ok("get_context", topic="restic backups"))
    # What needs the index says it is unavailable, never an empty list.
    for tool, args in (("list_notes", {}), ("links", {"path": "Home.md"})):
        message = mcp.error(tool, **args)
        assert "not an empty result" in message
        assert_safe(message, tmp_path)
    # Reading a file needs no database.
    assert mcp.ok("read_note", path="Home.md")["total_lines"] > 5


# --------------------------------------------------------------------------- transport


def test_bind_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RETRIEVER_ALLOW_REMOTE", raising=False)
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        check_bind(host)
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.org"):
        with pytest.raises(RemoteBindError):
            check_bind(host)
    # serve() refuses before opening anything.
    app = Retriever(Settings(vault=Path(__file__).parent / "vault", embed_model="none"))
    with pytest.raises(RemoteBindError, match="RETRIEVER_ALLOW_REMOTE"):
        serve(app, http=True, host="0.0.0.0")
    monkeypatch.setenv("RETRIEVER_ALLOW_REMOTE", "1")
    check_bind("0.0.0.0")


def test_background_warmup_serves_the_first_call(indexed: Retriever) -> None:
    warmup = Warmup(indexed).start()
    mcp = Caller(build_server(indexed, warmup=warmup))
    data = mcp.ok("search", queries="how are backups verified")
    assert warmup.done.is_set()
    assert data["mode"] == "hybrid" and data["hits"]
    assert mcp.ok("health")["verdict"] == "healthy"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_http_transport_requires_the_bearer_token(indexed: Retriever, db_url: str) -> None:
    token = secrets.token_urlsafe(24)
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "RETRIEVER_VAULT": str(indexed.settings.vault),
        "RETRIEVER_HOME": str(indexed.settings.home),
        "RETRIEVER_EMBED_MODEL": indexed.settings.embed_model,
        "RETRIEVER_MCP_TOKEN": token,
        "FASTMCP_LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "retriever.mcp_server", "--http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return True
            except OSError:
                return False

        assert _wait_for(listening, 30), "HTTP server did not start"
        url = f"http://127.0.0.1:{port}/mcp"

        async def call(auth: str | None) -> Any:
            async with Client(url, auth=auth) as client:
                return await client.call_tool("search", {"queries": "restic backups"})

        data = asyncio.run(call(token)).data
        assert data["mode"] == "hybrid" and data["hits"]
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        accept = {"Accept": "application/json, text/event-stream"}
        for headers in ({}, {"Authorization": "Bearer wrong-" + token}):
            response = httpx.post(url, json=init, headers={**accept, **headers}, timeout=10)
            assert response.status_code == 401
        with pytest.raises(Exception):  # noqa: B017 - the client wraps the 401 its own way
            asyncio.run(call("wrong-" + token))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.slow
def test_stdio_cold_start(indexed: Retriever, db_url: str) -> None:
    """Spawn the server like an MCP client does and time the first search answer."""
    from fastmcp.client.transports import StdioTransport

    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "RETRIEVER_VAULT": str(indexed.settings.vault),
        "RETRIEVER_HOME": str(indexed.settings.home),
        "RETRIEVER_EMBED_MODEL": indexed.settings.embed_model,
        "FASTMCP_LOG_LEVEL": "WARNING",
    }

    async def first_answer() -> tuple[float, Any]:
        started = time.perf_counter()
        transport = StdioTransport(
            command=sys.executable,
            args=["-m", "retriever.mcp_server"],
            env=env,
            cwd=str(Path(__file__).parent.parent),
        )
        async with Client(transport) as client:
            result = await client.call_tool("search", {"queries": "restic backups"})
        return time.perf_counter() - started, result.data

    elapsed, data = asyncio.run(first_answer())
    print(f"stdio cold start to first search answer: {elapsed:.2f} s")
    assert data["mode"] == "hybrid" and data["hits"]
    assert elapsed < 30  # generous: shared CI machines; the measured figure is printed
