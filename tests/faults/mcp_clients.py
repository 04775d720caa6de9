"""Talk to a real `retriever mcp` process over stdio or streamable HTTP, as agents do."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from tests.conftest import retriever_exe
from tests.faults.harness import free_port


@dataclass
class Answer:
    ok: bool
    data: Any  # the tool's structured result, or the error text
    seconds: float


async def call(client: Any, tool: str, args: dict[str, Any], timeout: float = 60) -> Answer:
    started = time.perf_counter()
    try:
        result = await client.call_tool(tool, args, raise_on_error=False, timeout=timeout)
    except Exception as exc:  # a transport failure: as clear as it gets, and counted
        return Answer(False, f"{type(exc).__name__}: {exc}", time.perf_counter() - started)
    took = time.perf_counter() - started
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        return Answer(False, text, took)
    data = result.data if result.data is not None else result.structured_content
    if data is None:
        data = " ".join(getattr(c, "text", "") for c in result.content)
    return Answer(True, data, took)


@contextmanager
def http_server(env: dict[str, str], *extra: str) -> Any:
    """`retriever mcp --http` on a free loopback port; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [retriever_exe(), "mcp", "--http", "--port", str(port), *extra],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def stdio_client(env: dict[str, str]) -> AsyncIterator[Any]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(command=retriever_exe(), args=["mcp"], env=env)
    async with Client(transport, timeout=120) as client:
        yield client


@asynccontextmanager
async def http_client(url: str) -> AsyncIterator[Any]:
    from fastmcp import Client

    async with Client(url, timeout=120) as client:
        yield client
