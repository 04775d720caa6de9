"""The MCP stdio transport answers every line: a malformed one gets its JSON-RPC error
(with the request's id when it has one) instead of silence, and the server keeps serving."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from retriever.mcp_stdio import check_line

SEARCH = {"name": "search", "arguments": {"queries": "restic backups"}}


@pytest.fixture
def indexed(make_app: Any, vault_copy: Path, model_dir: Path) -> Any:
    app = make_app(vault_copy, model=model_dir)
    assert app.index().passages_pending == 0
    return app


def _request(rid: object, method: str, params: object = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message)


@pytest.mark.parametrize(
    ("line", "code", "rid"),
    [
        ('{"jsonrpc": "2.0", "id": 1, "method": ', -32700, None),
        ("not json at all", -32700, None),
        ("[]", -32600, None),
        (f"[{_request(2, 'tools/list')}]", -32600, None),
        ("42", -32600, None),
        (_request(3, "tools/call", "search"), -32600, 3),
        (_request("a-7", "tools/call", "search"), -32600, "a-7"),
        (
            _request(5, "tools/call", {"name": "search", "arguments": {"q": "[" * 300 + "]" * 300}})
            .replace('"' + "[" * 300, "[" * 300)
            .replace("]" * 300 + '"', "]" * 300),
            -32600,
            5,
        ),
        ("[" * 5000 + "]" * 5000, -32700, None),  # past Python's own limit
    ],
)
def test_a_bad_line_gets_its_error(line: str, code: int, rid: object) -> None:
    passed, error = check_line(line + "\n")
    assert passed is None and error is not None
    assert error.error.code == code and error.id == rid
    assert error.error.message and len(error.error.message) <= 220


def test_an_id_holding_a_lone_surrogate_is_answered_with_its_repair() -> None:
    """The answer must be writable: an id the writer could not encode stopped the server."""
    line = '{"jsonrpc": "2.0", "id": "\\ud800", "method": "tools/call", "params": "x"}'
    passed, error = check_line(line)
    assert passed is None and error is not None and error.id == "\ufffd"
    error.model_dump_json(by_alias=True, exclude_unset=True)


def test_a_malformed_response_from_the_client_is_not_answered() -> None:
    """Its id is one of the server's: an error with it would look like an answer to one of
    the client's own requests."""
    assert check_line('{"jsonrpc": "2.0", "id": 3, "result": []}') == (None, None)
    assert check_line('{"jsonrpc": "2.0", "id": 3, "error": "no"}') == (None, None)


@pytest.mark.parametrize(
    "line",
    ['{"jsonrpc": "2.0", "id": 7, "params": {}}', '{"jsonrpc": "2.0", "id": 7, "metod": "ping"}'],
)
def test_a_request_without_its_method_is_answered(line: str) -> None:
    passed, error = check_line(line)
    assert passed is None and error is not None and error.id == 7
    assert error.error.code == -32600


@pytest.mark.parametrize("rid", ['{"a": 1}', "[1]", "true", "1.5", "null"])
def test_a_request_whose_id_is_no_string_or_integer_is_answered(rid: str) -> None:
    """It reads as a notification, which gets no answer: the client would wait for ever."""
    passed, error = check_line(f'{{"jsonrpc": "2.0", "id": {rid}, "method": "tools/list"}}')
    assert passed is None and error is not None
    assert error.id is None and error.error.code == -32600 and "id" in error.error.message


def test_a_notification_is_handed_on_even_with_id_in_its_text() -> None:
    line = '{"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "\\"id\\""}}'
    assert check_line(line) == (line, None)


def test_a_good_line_is_handed_on_as_it_came() -> None:
    line = _request(9, "tools/call", SEARCH) + "\n"
    assert check_line(line) == (line, None)


def test_a_blank_line_is_neither_handed_on_nor_answered() -> None:
    assert check_line("\n") == (None, None) and check_line("  \r\n") == (None, None)


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    """Half of a cut emoji: the request runs, with U+FFFD in its place; a whole pair is
    kept."""
    raw = _request(4, "tools/call", {"name": "search", "arguments": {"queries": "x"}})
    line = raw.replace('"x"', '"\\ud83d backups \\ud83d\\ude00"')
    passed, error = check_line(line)
    assert error is None and passed is not None
    assert json.loads(passed)["params"]["arguments"]["queries"] == "\ufffd backups \U0001f600"


def _reader(stream: Any) -> queue.Queue[dict[str, Any]]:
    found: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        for raw in stream:
            found.put(json.loads(raw))

    threading.Thread(target=read, daemon=True).start()
    return found


def _answer(found: queue.Queue[dict[str, Any]], rid: object, timeout: float = 60) -> dict:
    """The next message answering ``rid`` (others, e.g. log notifications, skipped)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            message = found.get(timeout=max(0.1, end - time.monotonic()))
        except queue.Empty:
            break
        if "id" in message and message["id"] == rid:
            return message
    raise AssertionError(f"no answer for id {rid!r} within {timeout} s")


def test_the_stdio_server_answers_bad_lines_and_keeps_serving(indexed: Any, db_url: str) -> None:
    """The real server on real pipes: each bad line is answered (with its id when it has
    one), the next request too, and a search whose text holds a lone surrogate runs."""
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "RETRIEVER_VAULT": str(indexed.settings.vault),
        "RETRIEVER_HOME": str(indexed.settings.home),
        "RETRIEVER_EMBED_MODEL": indexed.settings.embed_model,
        "RETRIEVER_SERVICE": "off",
        "FASTMCP_LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "retriever.mcp_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=str(Path(__file__).parent.parent),
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    found = _reader(proc.stdout)

    def send(line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
        send(_request(0, "initialize", {**hello, "clientInfo": {"name": "t", "version": "1"}}))
        assert "result" in _answer(found, 0)
        send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        send('{"jsonrpc": "2.0", "id": 1, "method": ')
        assert _answer(found, None)["error"]["code"] == -32700
        send(_request(2, "tools/call", "search"))
        assert _answer(found, 2)["error"]["code"] == -32600
        send(f"[{_request(3, 'ping')}]")
        assert _answer(found, None)["error"]["code"] == -32600
        send('{"jsonrpc": "2.0", "id": "\\ud800", "method": "tools/call", "params": "x"}')
        assert _answer(found, "\ufffd")["error"]["code"] == -32600
        send(_request(4, "ping"))
        assert _answer(found, 4)["result"] == {}
        line = _request(5, "tools/call", SEARCH).replace("restic backups", "\\ud83d restic")
        send(line)
        result = _answer(found, 5)["result"]
        assert result.get("isError") is not True and result["structuredContent"]["hits"]
        proc.stdin.close()
        assert proc.wait(30) == 0  # the client hung up: the server ends on its own
    finally:
        if proc.poll() is None:
            proc.kill()
