"""The MCP stdio transport, with an answer for every request the client sends.

mcp's stdio transport drops a line it cannot read as one JSON-RPC message without a word:
not JSON, a batch, ``params`` that are not an object, nesting past its parser's limit, or
a string holding half of a surrogate pair (a cut emoji). The client then waits for its own
timeout. Here each line is read first with the same adapter. A bad one gets the error
JSON-RPC 2.0 asks for, with the request's id when it can be read (else null), sent on the
server's own write stream so that answers never interleave. A lone surrogate becomes
U+FFFD instead, and the request runs. Blank lines and malformed responses (to requests of
the server's) are dropped: JSON-RPC answers neither.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, BinaryIO, cast

import anyio
from mcp import types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger("retriever.mcp")

REASON_CHARS = 200  # of the parser's complaint, in an error's message


def check_line(line: str) -> tuple[str | None, types.JSONRPCError | None]:
    """(the line to hand on, or None; the error to answer, or None). A blank line is
    neither: nothing to read, nothing to answer."""
    if not line.strip():
        return None, None
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        reason = str(exc.errors()[0].get("msg", "not a JSON-RPC 2.0 message"))
    else:
        if isinstance(message, types.JSONRPCNotification) and '"id"' in line:
            return _unusable_id(line)
        return line, None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None, _error(None, types.PARSE_ERROR, "Parse error: the line is not JSON")
    try:
        repaired = _whole_characters(data)
    except RecursionError:
        repaired = data
    if repaired != data:
        text = json.dumps(repaired, ensure_ascii=False)
        try:
            types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            return text, None
        except ValidationError as exc:
            reason = str(exc.errors()[0].get("msg", reason))
    if isinstance(data, dict) and "method" not in data and ("result" in data or "error" in data):
        # A malformed response to a request of ours: JSON-RPC answers no response, and
        # its id is ours, which the client would take for one of its own requests.
        log.warning("dropped a malformed response from the client: %s", reason[:REASON_CHARS])
        return None, None
    if isinstance(data, list):
        reason = "a batch (JSON array) is not supported; send one message per line"
    return None, _error(_request_id(repaired), types.INVALID_REQUEST, f"Invalid request: {reason}")


def _unusable_id(line: str) -> tuple[str | None, types.JSONRPCError | None]:
    """A request whose id is null, a float, a bool, an object or an array reads as a
    notification (which gets no answer): MCP's ids are strings or integers."""
    data = json.loads(line)
    if isinstance(data, dict) and "id" in data:
        return None, _error(
            None, types.INVALID_REQUEST, "Invalid request: the id must be a string or an integer"
        )
    return line, None


def _error(request_id: str | int | None, code: int, message: str) -> types.JSONRPCError:
    error = types.ErrorData(code=code, message=message[: REASON_CHARS + 20])
    answer = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    try:  # what the transport's writer will do: it must never fail on our answer
        answer.model_dump_json(by_alias=True, exclude_unset=True)
    except ValueError:
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)
    return answer


def _request_id(data: object) -> str | int | None:
    """The id of a request that failed, when it has a usable one."""
    found = data.get("id") if isinstance(data, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def _whole_characters(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (and keys) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_whole_characters(v) for v in value]
    if isinstance(value, dict):
        return {_whole_characters(k): _whole_characters(v) for k, v in value.items()}
    return value


class CheckedLines:
    """The client's lines for mcp's stdio transport, checked (``check_line``): a bad one is
    answered on the write stream given by ``answer_with`` and not handed on."""

    def __init__(self, source: AsyncIterable[str]) -> None:
        self._source = source
        self._answers: Any = None  # the transport's write stream, once it exists
        self._ready = anyio.Event()

    def answer_with(self, write_stream: Any) -> None:
        self._answers = write_stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._source:
            passed, error = check_line(line)
            if passed is not None:
                yield passed
            elif error is not None:
                await self._ready.wait()
                try:
                    await self._answers.send(SessionMessage(error))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the server is shutting down


def claim_stdin() -> tuple[BinaryIO, Callable[[], None]]:
    """The client's end of stdin, with fd 0 pointed at the null device while serving, as
    mcp's own transport does: a handler or child process that reads stdin gets EOF, not
    the client's next message. Undone by the returned function."""
    try:
        wire = os.dup(0)
        saved = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
    except OSError:  # no usable fd 0 (an embedding host): read the stream in place
        return sys.stdin.buffer, lambda: None
    os.dup2(null, 0)
    os.close(null)

    def restore() -> None:
        os.dup2(saved, 0)
        os.close(saved)

    return os.fdopen(wire, "rb"), restore


async def serve_stdio(server: Any) -> None:
    """Run a FastMCP server on stdio with checked lines. It uses FastMCP's lifespan and
    low-level server, which are not public: where they are missing (another FastMCP),
    it runs FastMCP's own stdio transport, saying that bad lines go unanswered."""
    lifespan = getattr(server, "_lifespan_manager", None)
    low = getattr(server, "_mcp_server", None)
    try:
        from fastmcp.server.context import reset_transport, set_transport
        from mcp.server.stdio import stdio_server
    except ImportError:
        lifespan = None
    if lifespan is None or low is None:
        log.warning("this FastMCP has no seam for checked lines: malformed ones go unanswered")
        await server.run_async(transport="stdio", show_banner=False)
        return
    wire, restore = claim_stdin()
    token = set_transport("stdio")
    try:
        async with lifespan():
            text = io.TextIOWrapper(wire, encoding="utf-8", errors="replace")
            lines = CheckedLines(anyio.wrap_file(text))
            async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
                lines.answer_with(write_stream)
                await low.run(read_stream, write_stream, low.create_initialization_options())
    finally:
        reset_transport(token)
        restore()
