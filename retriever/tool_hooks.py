"""Claude Code tool hooks: vault context before a tool runs, focused extracts after it ran.

``retriever hook pre-tool`` (PreToolUse) turns what the agent is about to do (a file it
opens, a command, a web search, a grep pattern) into a query and, when the vault clearly
covers it, adds a small cited block as ``additionalContext``. ``retriever hook post-tool``
(PostToolUse) replaces a long MCP tool output (``updatedMCPToolOutput``) or adds a focused
extract of a long built-in tool output (``additionalContext``), see :mod:`retriever.compress`.

Both read the event JSON on stdin, never block: any problem means exit 0 and no output. A
tiny per-session state file (under RETRIEVER_HOME/hook-state, else the temp dir) remembers
the last tool target (the same file twice in a row injects nothing) and the last prompt.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import sys
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit

from retriever.compress import compress
from retriever.hook_state import MAX_TASK_CHARS, load_state, save_state, state_dir
from retriever.hooks import MAX_CONTEXT_CHARS, _cap, cited_block, hook_output, read_hook_input
from retriever.redact import redact

if TYPE_CHECKING:
    from retriever.app import Retriever
    from retriever.config import Settings

log = logging.getLogger(__name__)

# Unasked-for context before a tool call must be precise: the best passage must hold this
# share of the query's terms (all of one or two words, two of three).
PRE_TOOL_MIN_COVERAGE = 0.66
MAX_QUERY_WORDS = 12
TINY_FILE_BYTES = 4_096
RECENT_QUERIES = 16
TRANSCRIPT_TAIL_BYTES = 256_000

# Commands that never need the vault (and cat/head/tail of tiny files).
_TRIVIAL_PROGRAMS = frozenset(
    "ls ll la l dir pwd cd pushd popd echo printf clear true false whoami id date which type "
    "command env export set unset source alias history exit sleep wc mkdir touch rmdir tree "
    "stat file du df ps jobs".split()
)
_VIEWERS = frozenset("cat head tail less more bat".split())
_PREFIXES = frozenset("sudo time nohup env nice exec xargs command".split())
# Words that say nothing about a topic: build tools, generic folders and file names.
_GENERIC = frozenset(
    "git python python3 py pip uv bash sh zsh node npm npx pnpm yarn make cargo go java "
    "docker kubectl run install test tests build show status diff add commit push pull log "
    "checkout branch merge rebase fetch clone exec start stop restart list get set src lib "
    "bin app apps doc docs tmp temp main index init utils util common core misc readme file "
    "files dir home users user usr var etc opt md txt json yaml yml toml cfg ini sh js ts "
    "tsx jsx html css rs cpp hpp h c java rb the and for www com org net io http https "
    "grep rg find sed awk sort uniq cut tr cat head tail less more bat systemctl journalctl "
    "def class function func return import from const let var self none null true false "
    "readthedocs github gitlab stackoverflow wikipedia medium stable latest master blob tree "
    "wiki how does what why when where which work code repo repos project projects workspace "
    "dev".split()
)
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+[a-z]*", re.UNICODE)
_REGEX_CHARS = re.compile(r"\\[wdsbWDSB]|[\\^$.*+?()\[\]{}|]")


# --------------------------------------------------------------------------- tool -> query


def _words(text: str) -> list[str]:
    """Topic words of a path, identifier or phrase: split, lowercased, generic ones dropped."""
    out: list[str] = []
    for piece in re.split(r"[\W_]+", text):
        for word in _WORD.findall(piece) or [piece]:
            low = word.lower()
            if len(low) >= 3 and not low.isdigit() and low not in _GENERIC and low not in out:
                out.append(low)
    return out


def path_words(path: str) -> list[str]:
    """A file's note-ish words: its stem, then its parent folder (e.g. 'backups verify')."""
    p = PurePath(path.replace("\\", "/"))
    return _words(p.stem) + [w for w in _words(p.parent.name) if w not in _words(p.stem)]


def url_words(url: str) -> list[str]:
    parts = urlsplit(url if "//" in url else f"//{url}")
    host = [w for w in (parts.hostname or "").split(".") if w not in {"www", "docs", "en"}]
    return _words(" ".join(host[:-1] if len(host) > 1 else host)) + _words(parts.path)


def _tiny(arg: str, cwd: str | None) -> bool:
    """A file argument of cat/head/tail: tiny (or unknown) files are not worth a search."""
    if cwd is None and not os.path.isabs(arg):
        return True
    try:
        return Path(cwd or "/", arg).stat().st_size <= TINY_FILE_BYTES
    except (OSError, ValueError):
        return True


def _segments(command: str) -> list[list[str]]:
    """The simple commands of a shell line (split at | && || ; and newlines)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = command.split()
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token and set(token) <= set("|&;()<>\n"):
            segments.append([])
        else:
            segments[-1].append(token)
    return [s for s in segments if s]


def _program(segment: list[str]) -> tuple[str, list[str]]:
    i = 0
    while i < len(segment) and ("=" in segment[i] or segment[i] in _PREFIXES):
        i += 1
    if i >= len(segment):
        return "", []
    return PurePath(segment[i]).name, segment[i + 1 :]


def bash_words(command: str, cwd: str | None = None) -> list[str]:
    """Meaningful words of a command line; none when every part is trivial (ls, cd, pwd,
    cat of tiny files...)."""
    words: list[str] = []
    for segment in _segments(command[:4_000]):
        program, args = _program(segment)
        if not program or program in _TRIVIAL_PROGRAMS:
            continue
        files = [a for a in args if not a.startswith("-")]
        if program in _VIEWERS and all(_tiny(a, cwd) for a in files):
            continue
        for token in [program, *args]:
            if token.startswith("-"):
                token = token.split("=", 1)[1] if "=" in token else ""
            if "://" in token:
                found = url_words(token)
            elif "/" in token or "." in token:
                found = path_words(token)
            else:
                found = _words(token)
            words += [w for w in found if w not in words]
    return words


def tool_query(
    tool_name: str, tool_input: dict[str, Any], cwd: str | None = None
) -> tuple[str, str] | None:
    """(repeat key, query) for a tool call, or None when it never needs the vault."""

    def get(key: str) -> str:
        value = tool_input.get(key)
        return value if isinstance(value, str) else ""

    if tool_name in {"Read", "Edit", "MultiEdit", "Write", "NotebookEdit", "NotebookRead"}:
        path = get("file_path") or get("notebook_path") or get("path")
        key, words = f"file:{path}", path_words(path)
    elif tool_name == "Bash":
        key, words = f"bash:{get('command')}", bash_words(get("command"), cwd)
    elif tool_name == "WebSearch":
        key, words = f"web:{get('query')}", _words(get("query"))
    elif tool_name == "WebFetch":
        words = _words(get("prompt")) + [w for w in url_words(get("url")) if w]
        key = f"url:{get('url')}"
    elif tool_name in {"Grep", "Glob"}:
        pattern = _REGEX_CHARS.sub(" ", get("pattern"))
        key, words = f"{tool_name}:{get('pattern')}", _words(pattern)
    else:
        return None  # MCP and unknown tools: their input is not a topic we can read
    words = list(dict.fromkeys(words))[:MAX_QUERY_WORDS]
    if not words or not any(len(w) >= 4 for w in words):
        return None
    return key, " ".join(words)


# --------------------------------------------------------------------------- PreToolUse


def tool_context(app: Retriever, tool_name: str, query: str, budget_tokens: int) -> str:
    """The cited block for a tool call's query, or "" when the vault does not clearly cover it.

    Byte-stable: no timings or scores, only citations, headings and passage text.
    """

    def header(mode: str) -> str:
        return (
            f"Notes possibly relevant to this {tool_name} call (retriever, {mode} search "
            f"for '{query}'; cite as path:start-end; ignore if unrelated):"
        )

    return cited_block(
        app,
        query,
        header,
        budget_tokens=budget_tokens,
        min_coverage=PRE_TOOL_MIN_COVERAGE,
        mode=app.settings.hook_pre_tool_mode,
        what="pre-tool hook",
    )


def is_repeat(folder: Path | None, session_id: object, key: str, query: str) -> bool:
    """True for the same target twice in a row, or a query already answered this session;
    records this call either way."""
    if folder is None or not isinstance(session_id, str) or not session_id:
        return False
    state = load_state(folder, session_id)
    recent = [q for q in state.get("recent", []) if isinstance(q, str)]
    repeat = state.get("last_key") == key or query in recent
    state["last_key"] = key
    state["recent"] = ([q for q in recent if q != query] + [query])[-RECENT_QUERIES:]
    try:
        save_state(folder, session_id, state)
    except OSError as exc:  # no memory this time: still answer
        log.info("hook state not saved: %s", type(exc).__name__)
    return repeat


def _matches(pattern: str, tool_name: str) -> bool:
    try:
        return re.search(pattern, tool_name) is not None
    except re.error:
        return False  # a broken matcher setting turns the hook off, it does not crash it


def run_pre_tool_hook(
    vault: Path | None = None, *, stdin: TextIO | None = None, stdout: TextIO | None = None
) -> int:
    """``retriever hook pre-tool``: prints context JSON or nothing; always exit 0."""
    try:
        text = _pre_tool(vault, read_hook_input(stdin or sys.stdin))
    except Exception as exc:  # never stand between the agent and its tool
        log.warning("pre-tool hook failed: %s", type(exc).__name__)
        text = ""
    _emit(text, stdout)
    return 0


def _pre_tool(vault: Path | None, event: dict[str, Any]) -> str:
    from retriever.config import settings_from

    tool_name, tool_input = event.get("tool_name"), event.get("tool_input")
    if not isinstance(tool_name, str) or not isinstance(tool_input, dict):
        return ""
    settings = settings_from(vault=vault)
    if not settings.hook_pre_tool or not _matches(settings.hook_pre_tool_matcher, tool_name):
        return ""
    cwd = event.get("cwd") if isinstance(event.get("cwd"), str) else None
    found = tool_query(tool_name, tool_input, cwd)
    if found is None:
        return ""  # decided before opening anything: trivial calls cost ~nothing
    key, query = found
    try:
        folder: Path | None = state_dir(settings)
    except OSError:
        folder = None
    if is_repeat(folder, event.get("session_id"), key, query):
        return ""
    from retriever.db import start_early

    start_early(settings.database_url, settings.home)  # while the next import runs
    from retriever.app import open_app

    app = open_app(settings)
    try:
        block = tool_context(app, tool_name, query, settings.hook_pre_tool_budget)
    finally:
        app.close()
    return hook_output("PreToolUse", block) if block else ""


# --------------------------------------------------------------------------- PostToolUse


def _blocks_text(blocks: list[Any]) -> str | None:
    texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    strings = [t for t in texts if isinstance(t, str)]
    if texts and len(strings) == len(texts):
        return "\n".join(strings)
    return None


def output_text(response: Any) -> str:
    """The text a tool returned, from the shapes Claude Code passes as ``tool_response``."""
    if isinstance(response, str):
        return response
    if isinstance(response, list):
        return _blocks_text(response) or json.dumps(response, ensure_ascii=False)
    if not isinstance(response, dict):
        return "" if response is None else json.dumps(response, ensure_ascii=False)
    if isinstance(response.get("stdout"), str):  # Bash
        err = response.get("stderr")
        return response["stdout"] + (f"\n{err}" if isinstance(err, str) and err else "")
    file = response.get("file")
    if isinstance(file, dict) and isinstance(file.get("content"), str):  # Read
        return file["content"]
    if isinstance(response.get("content"), list):  # MCP CallToolResult
        found = _blocks_text(response["content"])
        if found is not None:
            return found
    for key in ("result", "output", "content", "text"):  # WebFetch and friends
        if isinstance(response.get(key), str):
            return response[key]
    return json.dumps(response, ensure_ascii=False)


def last_user_prompt(transcript_path: object) -> str:
    """The last prompt the user typed, from the tail of the session transcript (JSONL)."""
    if not isinstance(transcript_path, str) or not transcript_path:
        return ""
    try:
        with open(transcript_path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TRANSCRIPT_TAIL_BYTES))
            tail = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    for line in reversed(tail.splitlines()):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        text = _user_text(entry)
        if text:
            return text[:MAX_TASK_CHARS]
    return ""


def _user_text(entry: Any) -> str:
    if not isinstance(entry, dict) or entry.get("type") != "user" or entry.get("isMeta"):
        return ""
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # tool results come back as "user" entries: skip those
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return ""
        content = _blocks_text(content)
    if not isinstance(content, str) or content.lstrip().startswith("<"):
        return ""  # slash-command wrappers and system notes
    return content.strip()


def input_text(tool_input: Any) -> str:
    """The tool input's words (command, path, pattern, query...) as context for scoring."""
    if isinstance(tool_input, str):
        return tool_input[:MAX_TASK_CHARS]
    if not isinstance(tool_input, dict):
        return ""
    parts = [v for k, v in sorted(tool_input.items()) if isinstance(v, str) and k != "content"]
    return " ".join(parts)[:MAX_TASK_CHARS]


def compress_output(
    tool_name: str,
    text: str,
    task: str,
    context: str,
    *,
    threshold: int,
    budget_tokens: int,
) -> str:
    """The PostToolUse JSON for a long output ("" below ``threshold`` characters)."""
    if len(text) <= threshold:
        return ""
    is_mcp = tool_name.startswith("mcp__")
    hint = (
        "the full output was replaced; call the tool again with a narrower request to see more"
        if is_mcp
        else "the complete output is in the tool result above"
    )
    extract = compress(text, task, context=context, budget_tokens=budget_tokens, full_hint=hint)
    body = redact(extract.text)[0]
    if is_mcp:
        payload = {"hookEventName": "PostToolUse", "updatedMCPToolOutput": body}
        return json.dumps({"hookSpecificOutput": payload}, ensure_ascii=False)
    note = (
        f"The {tool_name} output was long ({extract.total_lines:,} lines, "
        f"~{extract.tokens_before:,} tokens); retriever's extract of what matters for the task:"
    )
    return hook_output("PostToolUse", _cap(f"{note}\n\n{body}", MAX_CONTEXT_CHARS))


def run_post_tool_hook(
    vault: Path | None = None, *, stdin: TextIO | None = None, stdout: TextIO | None = None
) -> int:
    """``retriever hook post-tool``: prints the extract JSON or nothing; always exit 0."""
    try:
        text = _post_tool(vault, read_hook_input(stdin or sys.stdin))
    except Exception as exc:  # pass the output through untouched
        log.warning("post-tool hook failed: %s", type(exc).__name__)
        text = ""
    _emit(text, stdout)
    return 0


def _post_tool(vault: Path | None, event: dict[str, Any]) -> str:
    from retriever.config import settings_from

    tool_name = event.get("tool_name")
    if not isinstance(tool_name, str) or "tool_response" not in event:
        return ""
    settings = settings_from(vault=vault)
    if not settings.hook_post_tool or not _matches(settings.hook_post_tool_matcher, tool_name):
        return ""
    text = output_text(event["tool_response"])
    if len(text) <= settings.hook_compress_threshold:
        return ""
    return compress_output(
        tool_name,
        text,
        _task(settings, event),
        input_text(event.get("tool_input")),
        threshold=settings.hook_compress_threshold,
        budget_tokens=settings.hook_compress_budget,
    )


def _task(settings: Settings, event: dict[str, Any]) -> str:
    """The user's request: saved by the prompt hook, else read from the transcript."""
    session_id = event.get("session_id")
    if isinstance(session_id, str) and session_id:
        try:
            prompt = load_state(state_dir(settings), session_id).get("prompt")
        except OSError:
            prompt = None
        if isinstance(prompt, str) and prompt:
            return prompt
    return last_user_prompt(event.get("transcript_path"))


def _emit(text: str, stdout: TextIO | None) -> None:
    if text:
        out = stdout or sys.stdout
        out.write(text + "\n")
        out.flush()
