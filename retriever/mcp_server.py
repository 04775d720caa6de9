"""The MCP server: read-only tools over the vault index for AI agents (FastMCP).

``build_server(app)`` makes the server; ``serve(app)`` runs it on stdio (default) or
streamable HTTP. The server:

* runs the health check at start-up and keeps the verdict; it starts even when the
  database or the embedder is down, and every answer says what is missing;
* searches with the fallback embedding tier (or keyword-only) while the primary model is
  unavailable and re-probes it in the background, so the primary tier comes back without
  a restart (see retriever.tiers);
* validates every argument with messages that tell the calling model how to recover;
  errors never carry absolute paths, SQL or stack traces (``mask_error_details``);
* redacts everything it returns with :func:`redact` again, as defence in depth;
* binds HTTP to loopback unless ``RETRIEVER_ALLOW_REMOTE=1`` (the container sets it) and
  can require a bearer token.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import Field

from retriever import hook_state, hooks, notes, tool_hooks
from retriever.budget import estimate_tokens
from retriever.compress import compress as compress_text
from retriever.config import env_flag
from retriever.errors import InputError
from retriever.health import HealthReport, run_health
from retriever.query_input import (
    HARD_QUERY_BYTES,
    MAX_BUDGET,
    MAX_QUERIES,
    MAX_QUERY_CHARS,
    MIN_BUDGET,
    check_budget,
    check_mode,
    check_queries,
    clean_text,
)
from retriever.redact import redact

if TYPE_CHECKING:
    from fastmcp import FastMCP
    from fastmcp.exceptions import ToolError

    from retriever.app import Retriever

log = logging.getLogger(__name__)

T = TypeVar("T")

HARD_INPUT_BYTES = HARD_QUERY_BYTES  # anything bigger is refused outright, not truncated
MAX_HITS = 40
MAX_OUTPUT_BYTES = 64_000
MAX_TAGS = 20
DEFAULT_PORT = 8765
MAX_HOOK_BUDGET = 4_000
MAX_COMPRESS_BYTES = 4_000_000  # tool outputs are big; the extract is small
_BARE_INPUT_KEYS = {
    "Bash": "command",
    "WebSearch": "query",
    "WebFetch": "url",
    "Grep": "pattern",
    "Glob": "pattern",
}
STARTUP_WAIT_SECONDS = 30.0

INSTRUCTIONS = """\
Search and read the user's personal markdown notes (an Obsidian-style vault). Read-only.

Good habits:
1. `search` first (or `get_context` for a ready-to-read block), then `read_note` on the
   cited lines before relying on a passage.
2. Cite sources as path:start-end, exactly as given in `citation`.
3. When an answer has `likely_absent: true` or no hits, tell the user the vault does not
   seem to cover it instead of guessing.
4. If `mode` is "lexical", semantic matching is down (see `degraded_reason`): rephrase with
   the exact words the notes would use, and try synonyms.
5. Paths are always relative to the vault root, with forward slashes ('folder/Note.md').
6. `compress` a long log, test run or page with your task before reading it whole.
"""


class RemoteBindError(InputError):
    """Refused to listen on a non-loopback address without RETRIEVER_ALLOW_REMOTE=1."""


def _bad(message: str) -> ToolError:
    """A refusal of the caller's input: logged quietly, shown to the agent as is."""
    from fastmcp.exceptions import ToolError

    return ToolError(message, log_level=logging.INFO)


def _redact_all(value: Any) -> Any:
    """Redact every string in a JSON-like value (keys excluded)."""
    if isinstance(value, str):
        return redact(value)[0] if value else value
    if isinstance(value, list):
        return [_redact_all(v) for v in value]
    if isinstance(value, dict):
        return {k: _redact_all(v) for k, v in value.items()}
    return value


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8"))


class Warmup:
    """Start-up work on a background thread: the health check (which loads the embedder),
    then a throw-away search that opens the pool and fills the caches. It overlaps the
    FastMCP import and the client's handshake; tools wait for it before their first answer.
    """

    def __init__(self, app: Retriever) -> None:
        self.app = app
        self.report: HealthReport | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="retriever-warmup", daemon=True)

    def start(self) -> Warmup:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.report = run_health(self.app)
            log.warning("retriever MCP: %s", self.report.summary())
            if self.report.verdict != "down":
                self.app.search("warm up", budget_tokens=MIN_BUDGET, fresh=False)
        except Exception as exc:  # the tools will report whatever is wrong
            log.warning("start-up warm-up failed: %s", type(exc).__name__)
        finally:
            self.done.set()


class ServerState:
    """What the tools share: the app and the last health report."""

    def __init__(self, app: Retriever, warmup: Warmup | None = None) -> None:
        self.app = app
        self.report: HealthReport | None = None
        self.warmup = warmup
        self._lock = threading.Lock()

    def wait_ready(self) -> None:
        """Let the start-up warm-up finish first (bounded: a hung part is reported later)."""
        warmup = self.warmup
        if warmup is None:
            return
        warmup.done.wait(STARTUP_WAIT_SECONDS)
        with self._lock:
            if self.report is None:
                self.report = warmup.report
            self.warmup = None

    # -- health ----------------------------------------------------------------------
    def check_health(self, *, timeout: float = 3.0) -> HealthReport:
        report = run_health(self.app, timeout=timeout)
        with self._lock:
            self.report = report
        return report

    def maybe_reprobe(self) -> None:
        """Let every embedding tier that is down start a background probe when one is due
        (a short timeout, growing pauses up to probe_interval_max): no tool call waits for
        a dead model server, and the primary tier returns without a restart."""
        self.app.tiers.for_index(block=False)

    # -- messages --------------------------------------------------------------------
    def scrub(self, text: str | None) -> str | None:
        if text is None:
            return None
        return notes.scrub_message(self.app, text)

    def scrub_all(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list):
            return [self.scrub_all(v) for v in value]
        if isinstance(value, dict):
            return {k: self.scrub_all(v) for k, v in value.items()}
        return value

    def run(self, tool: str, fn: Callable[[], T]) -> T:
        """Run a tool body, turning every failure into a ToolError an agent can act on."""
        import psycopg
        from fastmcp.exceptions import ToolError

        from retriever.db import DatabaseError
        from retriever.errors import InputError, describe
        from retriever.query_input import SearchInputError

        try:
            self.wait_ready()
            return fn()
        except ToolError:
            raise
        except (notes.NotePathError, notes.NoteQueryError, SearchInputError) as exc:
            # Input problems: the message is the advice (checked free of absolute paths).
            raise _bad(self.scrub(str(exc)) or "invalid input") from None
        except InputError as exc:  # a setting of the server (its home, its vault's index)
            raise ToolError(
                f"{self.scrub(describe(exc))}. This is the server's configuration, not this "
                "request: call `health` for details."
            ) from None
        except (DatabaseError, psycopg.OperationalError) as exc:  # pool timeouts too
            log.warning("%s: database unavailable: %s", tool, type(exc).__name__)
            raise ToolError(
                "The note index is unavailable right now (the database does not answer). "
                "This is not an empty result. Call `health` for details and retry later."
            ) from None
        except Exception:
            log.exception("%s failed", tool)
            raise ToolError(
                f"{tool} failed with an internal error; retry, or simplify the request. "
                "Call `health` if it keeps failing."
            ) from None


def _check_tags(tags: list[str] | str | None) -> list[str] | None:
    if tags is None:
        return None
    items = [tags] if isinstance(tags, str) else tags
    if len(items) > MAX_TAGS or not all(isinstance(t, str) and 0 < len(t) <= 100 for t in items):
        raise _bad(f"tags must be up to {MAX_TAGS} short tag names, e.g. ['homelab']")
    cleaned = [clean_text(t).lstrip("#") for t in items]
    return [t for t in cleaned if t] or None


def _check_text(value: str | None, name: str, limit: int = 200) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise _bad(f"{name} must be a string of at most {limit} characters")
    cleaned = clean_text(value)
    return cleaned or None


def _cap_hits(data: dict[str, Any]) -> dict[str, Any]:
    """Cap the number of hits and the answer size, dropping the lowest-ranked hits."""
    hits = data.get("hits") or []
    if len(hits) > MAX_HITS:
        data["hits"] = hits = hits[:MAX_HITS]
        data["truncated"] = True
    while len(hits) > 1 and _size(data) > MAX_OUTPUT_BYTES:
        hits.pop()
        data["truncated"] = True
    while hits and _size(data) > MAX_OUTPUT_BYTES and hits[0].get("text"):
        # The best hit alone is over the limit (one huge line or table): shortened, never
        # dropped (an empty answer would read as "not in the vault").
        _shorten(hits[0], _size(data) - MAX_OUTPUT_BYTES)
        data["truncated"] = True
    if data.get("truncated"):
        data["hint"] = "answer cut to fit; lower budget_tokens or narrow with folder/tags"
    return data


def _shorten(hit: dict[str, Any], excess: int) -> None:
    """Cut a hit's text by at least ``excess`` bytes: to its last whole line that fits, its
    citation narrowed to the lines shown; inside the last line when whole lines would keep
    less than half (one huge line: a pasted log, a minified table)."""
    raw = hit["text"].encode("utf-8")
    # ``excess`` is in JSON bytes: quotes, backslashes and line breaks take two there.
    escaped = max(1, _size(hit["text"]))
    keep = int(len(raw) * max(0, escaped - excess - 256) / escaped)
    kept = raw[:keep].decode("utf-8", errors="ignore")
    whole, newline, _ = kept.rpartition("\n")
    if newline and len(whole) >= len(kept) // 2:
        kept = whole
    hit["text"] = kept
    hit["end_line"] = hit["start_line"] + kept.count("\n")
    hit["citation"] = f"{hit['path']}:{hit['start_line']}-{hit['end_line']}"
    hit["truncated"] = True


def _check_tool_name(value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 200 or not value.isprintable():
        raise _bad("tool_name must be the tool's name, e.g. 'Read', 'Bash' or 'mcp__srv__tool'")
    return value


def _check_hook_event(value: str | None, expected: str) -> str | None:
    if value is None or value == "":
        return None
    if value != expected:
        raise _bad(f"hook_event must be '{expected}' or left out")
    return value


def _tool_input(tool_name: str, value: dict[str, Any] | str) -> dict[str, Any]:
    """A tool input given as an object, as JSON text, or as the bare path/command/query."""
    if _size(value) > HARD_INPUT_BYTES:
        raise _bad(f"tool_input is over the {HARD_INPUT_BYTES // 1000} KB limit")
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        key = _BARE_INPUT_KEYS.get(tool_name, "file_path")
        return {key: value}
    if not isinstance(value, dict):
        raise _bad("tool_input must be an object such as {'file_path': 'notes/x.md'}")
    return value


def _cap_text(text: str, limit: int = MAX_OUTPUT_BYTES) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    cut = raw[: limit - 100].decode("utf-8", errors="ignore")
    whole, newline, _ = cut.rpartition("\n")
    if newline and len(whole) >= len(cut) // 2:  # else one huge line: cut inside it
        cut = whole
    return cut + "\n\n(cut to fit the output limit; ask a narrower question)\n"


# The tools' docstrings are the descriptions the calling model reads. "Examples" has no
# colon on purpose: FastMCP's docstring parser drops a Google-style "Examples:" section.
READ_ONLY = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}


def _do_search(
    state: ServerState,
    queries: str | list[str],
    budget: int,
    mode: str | None,
    folder: str | None,
    tags: list[str] | str | None,
    note_type: str | None,
    modified_after: str | None,
) -> tuple[Any, list[str]]:
    cleaned, remarks = check_queries(queries)
    budget = check_budget(budget)
    folder_norm = notes.folder_filter(state.app, folder)  # as app.search will check it
    state.maybe_reprobe()
    result = state.app.search(
        cleaned,
        budget_tokens=budget,
        mode=check_mode(mode),
        folder=folder_norm,
        tags=_check_tags(tags),
        note_type=_check_text(note_type, "type"),
        modified_after=_check_text(modified_after, "modified_after", 40),
    )
    if folder_norm:
        # The folder is a promise to the caller: hold it even for hits another arm
        # (the link-graph walk) brought in from elsewhere.
        prefix = folder_norm + "/"
        result.hits = [h for h in result.hits if h.path.startswith(prefix)]
        result.used_tokens = sum(h.tokens for h in result.hits)
    return result, remarks


def build_server(
    app: Retriever,
    *,
    token: str | None = None,
    warmup: Warmup | None = None,
) -> FastMCP:
    """The FastMCP server over ``app``.

    Runs the health check now, or lets a started :class:`Warmup` do it in the background.
    """
    from fastmcp import FastMCP

    state = ServerState(app, warmup)
    if warmup is None:
        try:
            report = state.check_health()
            log.warning("retriever MCP: %s", report.summary())
        except Exception:  # never keep the server from starting: tools will explain
            log.exception("start-up health check failed")

    auth = None
    if token:
        from fastmcp.server.auth.providers.debug import DebugTokenVerifier

        expected = token.encode("utf-8")
        auth = DebugTokenVerifier(
            validate=lambda got: hmac.compare_digest(got.encode("utf-8"), expected),
            client_id="retriever-client",
        )

    server = FastMCP(
        name="retriever",
        instructions=INSTRUCTIONS,
        mask_error_details=True,
        auth=auth,
        on_duplicate="error",
    )
    for register in (_search_tools, _note_tools, _hook_tools, _health_tool):
        register(server, state)
    server.retriever_state = state  # type: ignore[attr-defined]  # for tests and the CLI
    return server


def _search_tools(server: FastMCP, state: ServerState) -> None:
    """search and get_context: the vault searched, cited, within a budget."""
    _register_search(server, state)
    _register_get_context(server, state)


def _register_search(server: FastMCP, state: ServerState) -> None:
    @server.tool(annotations=READ_ONLY)
    def search(
        queries: Annotated[
            str | list[str],
            Field(
                description="A question or key words, or up to "
                f"{MAX_QUERIES} alternative phrasings (each at most {MAX_QUERY_CHARS} "
                "characters)."
            ),
        ],
        budget_tokens: Annotated[
            int, Field(description=f"Tokens of passage text to return, {MIN_BUDGET}-{MAX_BUDGET}.")
        ] = 1200,
        mode: Annotated[
            str | None,
            Field(description="'hybrid' (default), 'lexical' (exact words) or 'semantic'."),
        ] = None,
        folder: Annotated[
            str | None, Field(description="Only notes under this vault folder, e.g. 'homelab'.")
        ] = None,
        tags: Annotated[
            list[str] | str | None, Field(description="Only notes with any of these tags.")
        ] = None,
        type: Annotated[
            str | None, Field(description="Only notes whose frontmatter type is this.")
        ] = None,
        modified_after: Annotated[
            str | None, Field(description="Only notes modified since this ISO date (UTC).")
        ] = None,
    ) -> dict[str, Any]:
        """Search the user's notes; returns the best passages with citations.

        Each hit has `citation` (path:start-end), `text`, `heading_trail` and `score`.
        `mode` says how the search ran ("hybrid", or "lexical" when semantic matching is
        down, with `degraded_reason`). `likely_absent: true` means the vault probably does
        not cover the question: say so rather than guess.

        Examples
        - search(queries="how are backups verified")
        - search(queries=["restic retention policy", "how long are snapshots kept"])
        - search(queries="caddy reverse proxy", folder="homelab", budget_tokens=3000)
        - search(queries="ERR_CONFIG_RELOAD", mode="lexical")
        """

        return state.run(
            "search",
            lambda: _search_answer(
                state, queries, budget_tokens, mode, folder, tags, type, modified_after
            ),
        )


def _register_get_context(server: FastMCP, state: ServerState) -> None:
    @server.tool(annotations=READ_ONLY)
    def get_context(
        topic: Annotated[str, Field(description="What the conversation needs background on.")],
        budget_tokens: Annotated[
            int, Field(description=f"Tokens of passage text to return, {MIN_BUDGET}-{MAX_BUDGET}.")
        ] = 1500,
    ) -> str:
        """Background from the user's notes on a topic, as one markdown block to read.

        Each passage is headed by its citation (path:start-end) so you can quote it or
        open it with read_note. The first line says when search ran keyword-only.

        Examples
        - get_context(topic="home server hardware and what runs on it")
        - get_context(topic="trip to Japan 2023", budget_tokens=3000)
        """

        return state.run("get_context", lambda: _context_answer(state, topic, budget_tokens))


def _search_answer(
    state: ServerState,
    queries: str | list[str],
    budget_tokens: int,
    mode: str | None,
    folder: str | None,
    tags: list[str] | str | None,
    note_type: str | None,
    modified_after: str | None,
) -> dict[str, Any]:
    """The search tool's answer: hits as data, with mode, model and reasons scrubbed."""
    result, remarks = _do_search(
        state, queries, budget_tokens, mode, folder, tags, note_type, modified_after
    )
    data = result.to_dict()
    data["mode"] = result.mode
    data["model"] = state.scrub(result.model)  # a local model folder by its name
    data["degraded_reason"] = state.scrub(result.degraded_reason)
    if remarks:
        data["notes"] = remarks
    if data.get("likely_absent"):
        data["advice"] = (
            "The vault probably does not answer this; tell the user instead of guessing."
        )
    return _cap_hits(_redact_all(data))


def _context_answer(state: ServerState, topic: str, budget_tokens: int) -> str:
    """get_context's answer: one markdown block, its first lines saying how search ran."""
    result, remarks = _do_search(state, topic, budget_tokens, None, None, None, None, None)
    text = result.to_markdown()
    if result.degraded_reason:
        # The reason may name a model path on this machine: scrub just that line.
        text = text.replace(result.degraded_reason, state.scrub(result.degraded_reason))
    else:
        text = f"> search mode: {result.mode}\n" + text
    for remark in remarks:
        text = f"> note: {remark}\n" + text
    return _cap_text(redact(text)[0])


def _note_tools(server: FastMCP, state: ServerState) -> None:
    """read_note, list_notes and links: the vault read, confined to it."""
    _register_read_note(server, state)
    _register_list_notes(server, state)
    _register_links(server, state)


def _register_read_note(server: FastMCP, state: ServerState) -> None:
    app = state.app

    @server.tool(annotations=READ_ONLY)
    def read_note(
        path: Annotated[
            str,
            Field(
                description="Vault-relative path as given in a citation, e.g. 'homelab/Backups.md'."
            ),
        ],
        start_line: Annotated[int | None, Field(description="First line (1-based).")] = None,
        end_line: Annotated[int | None, Field(description="Last line (inclusive).")] = None,
    ) -> dict[str, Any]:
        """Read a note, or the lines of a citation, with line numbers.

        Use it to check a search passage in context before relying on it. Long notes are
        cut at about 24 KB: `truncated` is then true and `next_start_line` says where to
        continue. Credentials in notes appear as [REDACTED:kind].

        Examples
        - read_note(path="homelab/Backups.md")
        - read_note(path="homelab/Backups.md", start_line=12, end_line=40)
        """
        return state.run(
            "read_note",
            lambda: _redact_all(notes.read_note(app, path, start_line, end_line)),
        )


def _register_list_notes(server: FastMCP, state: ServerState) -> None:
    app = state.app

    @server.tool(annotations=READ_ONLY)
    def list_notes(
        folder: Annotated[str | None, Field(description="Vault folder, e.g. 'travel'.")] = None,
        tag: Annotated[
            str | None, Field(description="Tag, e.g. 'homelab' (nested tags too).")
        ] = None,
        type: Annotated[str | None, Field(description="Frontmatter type, e.g. 'howto'.")] = None,
        modified_after: Annotated[
            str | None, Field(description="ISO date (UTC), e.g. '2024-05-01'.")
        ] = None,
        limit: Annotated[int, Field(description="Notes per page, 1-200.")] = 50,
        cursor: Annotated[
            str | None, Field(description="next_cursor from the previous page.")
        ] = None,
    ) -> dict[str, Any]:
        """List indexed notes (path, title, tags, type, modified), sorted by path.

        Filters combine. Pages: pass `next_cursor` back as `cursor` with the same filters
        until it is null.

        Examples
        - list_notes(folder="homelab")
        - list_notes(tag="recipe", limit=20)
        - list_notes(modified_after="2024-05-01")
        """
        return state.run(
            "list_notes",
            lambda: _redact_all(
                notes.list_notes(app, folder, tag, type, modified_after, limit, cursor)
            ),
        )


def _register_links(server: FastMCP, state: ServerState) -> None:
    app = state.app

    @server.tool(annotations=READ_ONLY)
    def links(
        path: Annotated[str, Field(description="Vault-relative note path.")],
        direction: Annotated[
            str, Field(description="'out' (links from the note), 'back' (links to it) or 'both'.")
        ] = "both",
        depth: Annotated[int, Field(description="Hops to follow, 1-3.")] = 1,
    ) -> dict[str, Any]:
        """Notes linked with a note: its outgoing links, its backlinks, or both.

        Returns `links` (path, title, distance, direction) and `unresolved` (links in the
        note that point to no existing note).

        Examples
        - links(path="Home.md", direction="out")
        - links(path="homelab/Backups.md", direction="back", depth=2)
        """
        return state.run(
            "links", lambda: _redact_all(notes.note_links(app, path, direction, depth))
        )


def _hook_tools(server: FastMCP, state: ServerState) -> None:
    """context_for_tool and compress: what the agent hooks do, as tools."""
    _register_context_for_tool(server, state)
    _register_compress(server, state)


def _register_context_for_tool(server: FastMCP, state: ServerState) -> None:
    @server.tool(annotations=READ_ONLY)
    def context_for_tool(
        tool_name: Annotated[
            str, Field(description="The tool about to run: 'Read', 'Bash', 'WebSearch', ...")
        ],
        tool_input: Annotated[
            dict[str, Any] | str,
            Field(description="Its input, as an object or JSON text (or the bare path/command)."),
        ],
        budget_tokens: Annotated[
            int, Field(description=f"Tokens of passage text, {MIN_BUDGET}-{MAX_HOOK_BUDGET}.")
        ] = 300,
        hook_event: Annotated[
            str | None,
            Field(description="'PreToolUse': answer as Claude Code hook JSON (mcp_tool hooks)."),
        ] = None,
        session_id: Annotated[
            str | None, Field(description="The hook's session id: repeats then get nothing.")
        ] = None,
    ) -> str:
        """Notes relevant to a tool call about to run (a file, command, web search, grep).

        Returns a small cited markdown block, or an empty string when the call is trivial
        (ls, pwd, tiny files), repeated, or the vault does not clearly cover it. Same
        behaviour as the `retriever hook pre-tool` command, without starting a process.

        Examples
        - context_for_tool(tool_name="Read", tool_input={"file_path": "ops/restic_backup.sh"})
        - context_for_tool(tool_name="Bash", tool_input="restic check --read-data")
        """

        return state.run(
            "context_for_tool",
            lambda: _context_for_tool(
                state, tool_name, tool_input, budget_tokens, hook_event, session_id
            ),
        )


def _register_compress(server: FastMCP, state: ServerState) -> None:
    @server.tool(annotations=READ_ONLY)
    def compress(
        text: Annotated[
            str, Field(description="A long text: build log, test run, command output, page, JSON.")
        ],
        task: Annotated[str, Field(description="What you are looking for in it.")] = "",
        budget_tokens: Annotated[
            int, Field(description=f"Tokens of the extract, {MIN_BUDGET}-{MAX_HOOK_BUDGET}.")
        ] = 800,
        tool_name: Annotated[
            str | None, Field(description="The tool that produced it (hook use).")
        ] = None,
        hook_event: Annotated[
            str | None,
            Field(description="'PostToolUse': answer as Claude Code hook JSON (mcp_tool hooks)."),
        ] = None,
        session_id: Annotated[
            str | None, Field(description="The hook's session id: scores against its prompt.")
        ] = None,
    ) -> str:
        """A focused extract of a long text: the lines that matter for the task, with line
        numbers, error lines always kept, runs of similar lines collapsed, and a last line
        saying what was dropped. Deterministic; no model involved.

        Examples
        - compress(text=<5,000-line build log>, task="why does the build fail")
        - compress(text=<git log>, task="which commit changed the caddy reload timeout")
        """

        return state.run(
            "compress",
            lambda: _compress(
                state.app, text, task, budget_tokens, tool_name, hook_event, session_id
            ),
        )


def _hook_budget(budget_tokens: object) -> int:
    budget = check_budget(budget_tokens)
    if budget > MAX_HOOK_BUDGET:
        raise _bad(f"budget_tokens must be at most {MAX_HOOK_BUDGET} here")
    return budget


def _context_for_tool(
    state: ServerState,
    tool_name: str,
    tool_input: dict[str, Any] | str,
    budget_tokens: int,
    hook_event: str | None,
    session_id: str | None,
) -> str:
    name = _check_tool_name(tool_name)
    event = _check_hook_event(hook_event, "PreToolUse")
    found = tool_hooks.tool_query(name, _tool_input(name, tool_input))
    budget = _hook_budget(budget_tokens)
    if found is None or _repeated(state.app, session_id, *found):
        return ""
    state.maybe_reprobe()
    block = tool_hooks.tool_context(state.app, name, found[1], budget)
    if event and block:
        return hooks.hook_output(event, block)
    return _cap_text(block)


def _repeated(app: Retriever, session_id: str | None, key: str, query: str) -> bool:
    if session_id is None:
        return False
    sid = _check_text(session_id, "session_id")
    try:
        folder = hook_state.state_dir(app.settings)
    except OSError:
        return False
    return tool_hooks.is_repeat(folder, sid, key, query)


def _compress(
    app: Retriever,
    text: str,
    task: str,
    budget_tokens: int,
    tool_name: str | None,
    hook_event: str | None,
    session_id: str | None,
) -> str:
    size = len(text.encode("utf-8", errors="replace")) if isinstance(text, str) else -1
    if size < 0 or size > MAX_COMPRESS_BYTES:
        raise _bad(f"text must be a string of at most {MAX_COMPRESS_BYTES // 1_000_000} MB")
    goal = _check_text(task, "task", hook_state.MAX_TASK_CHARS) or ""
    budget = _hook_budget(budget_tokens)
    if _check_hook_event(hook_event, "PostToolUse"):
        return _compress_hook(app, text, goal, budget, tool_name, session_id)
    if estimate_tokens(text) <= budget:
        return _cap_text(redact(text)[0])
    hint = "the full text is the one you passed in"
    extract = compress_text(text, goal, budget_tokens=budget, full_hint=hint)
    return _cap_text(redact(extract.text)[0])


def _compress_hook(
    app: Retriever,
    text: str,
    task: str,
    budget: int,
    tool_name: str | None,
    session_id: str | None,
) -> str:
    name = _check_tool_name(tool_name or "")
    try:  # ${tool_response} arrives as JSON text: take the tool's own text out of it
        text = tool_hooks.output_text(json.loads(text))
    except ValueError:
        pass
    if not task and session_id:
        sid = _check_text(session_id, "session_id") or ""
        with contextlib.suppress(OSError):
            saved = hook_state.load_state(hook_state.state_dir(app.settings), sid)
            task = str(saved.get("prompt") or "")
    return tool_hooks.compress_output(
        name, text, task, "", threshold=app.settings.hook_compress_threshold, budget_tokens=budget
    )


def _health_tool(server: FastMCP, state: ServerState) -> None:
    """health: whether search works, and how well."""

    @server.tool(annotations=READ_ONLY)
    def health() -> dict[str, Any]:
        """Is search working, and how well? Checks database, schema, embedder and index,
        and lists every embedding tier (`tiers`: primary, fallback) with its state.

        `verdict` is "healthy" (hybrid search), "degraded" (search works, but e.g. only
        by keywords, or the index is behind: see `summary`) or "down" (no search; tools
        fail until it is fixed). Call it when results look wrong or a tool fails.
        """

        def body() -> dict[str, Any]:
            state.maybe_reprobe()
            data = state.check_health().to_dict()
            facts = data.pop("facts", None) or {}
            keep = ("tier", "model", "state", "vectors", "passages", "last_probe", "error")
            data["tiers"] = [{k: t.get(k) for k in keep} for t in facts.get("tiers", [])]
            return _redact_all(state.scrub_all(data))

        return state.run("health", body)


# --------------------------------------------------------------------------- running


def is_loopback(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str) -> None:
    """Refuse a non-loopback address unless RETRIEVER_ALLOW_REMOTE=1 says it is meant."""
    if is_loopback(host):
        return
    if not env_flag("RETRIEVER_ALLOW_REMOTE"):
        raise RemoteBindError(
            f"refusing to listen on {host}: the MCP server exposes your notes. Bind to "
            "127.0.0.1, or set RETRIEVER_ALLOW_REMOTE=1 (inside a container whose port is "
            "published on the host's loopback only) and preferably a token"
        )


def serve(
    app: Retriever,
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
) -> None:
    """Run the server until interrupted: stdio by default, else streamable HTTP at /mcp."""
    if not http:
        if token:
            log.warning("--token applies to HTTP only; stdio is private to the client process")
        # Warm up first: model loading overlaps the FastMCP import and the handshake.
        warmup = Warmup(app).start()
        import anyio

        from retriever.mcp_stdio import serve_stdio

        anyio.run(serve_stdio, build_server(app, warmup=warmup))  # answers every line
        return
    check_bind(host)
    if not is_loopback(host) and not token:
        log.warning(
            "listening on %s without a token: anything that reaches this port can read the "
            "vault index",
            host,
        )
    server = build_server(app, token=token, warmup=Warmup(app).start())
    server.run(
        transport="http",
        host=host,
        port=port,
        show_banner=False,
        # Host/Origin checks against DNS rebinding on loopback (off by default in FastMCP).
        host_origin_protection="auto",
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m retriever.mcp_server [--http] [--host H] [--port P]`` (token from
    RETRIEVER_MCP_TOKEN); the ``retriever mcp`` command does the same."""
    import argparse
    import sys
    from pathlib import Path

    from retriever.app import Retriever
    from retriever.config import settings_from
    from retriever.errors import ConfigError

    p = argparse.ArgumentParser(prog="retriever-mcp")
    p.add_argument("--vault", type=Path)
    p.add_argument("--http", action="store_true")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        app = Retriever(settings_from(vault=args.vault))
        app.long_lived = True  # watches the vault: a search walks it only after a change
        app.warm_models()  # while the client connects
    except ConfigError as exc:
        sys.stderr.write(f"✗ {exc}\n")
        raise SystemExit(2) from None
    try:
        serve(
            app,
            http=args.http,
            host=args.host,
            port=args.port,
            token=os.environ.get("RETRIEVER_MCP_TOKEN") or None,
        )
    except RemoteBindError as exc:
        sys.stderr.write(f"✗ {exc}\n")
        raise SystemExit(2) from None
    finally:
        app.close()


if __name__ == "__main__":
    main()
