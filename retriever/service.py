"""The resident service: one long-lived process per RETRIEVER_HOME keeps the database,
the model and the link graph warm, and runs the CLI's commands for thin clients.

A client sends one JSON line (its argv, working folder, ``RETRIEVER_*`` environment and,
for hooks, its stdin); the service runs the very same CLI command in a thread with that
context and streams back what it prints, then the exit code. The socket is the user's
alone (mode 0600, peer uid checked). The service stops after an idle time, on
``retriever serve --stop``, and on SIGTERM/SIGHUP/SIGINT, stopping the embedded
PostgreSQL it started.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from retriever import request_context
from retriever.app import AppPool, use_pool
from retriever.client import PROTOCOL, SERVED_COMMANDS, code_stamp, log_path, socket_path

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 8 * 1024 * 1024  # a hook event carries at most a tool's output
LOG_ROTATE_BYTES = 10 * 1024 * 1024
IDLE_CHECK_SECONDS = 5.0

Sink = Callable[[str, str], None]
_sink: ContextVar[Sink | None] = ContextVar("retriever_service_sink", default=None)
_stdin: ContextVar[TextIO | None] = ContextVar("retriever_service_stdin", default=None)


class RoutedOutput(io.TextIOBase):
    """The service's sys.stdout/sys.stderr: a request's writes go to its client, every
    other write (background threads, the service's own logs) to the service's stream."""

    def __init__(self, own: TextIO, channel: str) -> None:
        self._own, self._channel = own, channel

    def write(self, text: str) -> int:
        sink = _sink.get()
        if sink is None:
            return self._own.write(text)
        sink(self._channel, text)
        return len(text)

    def flush(self) -> None:
        if _sink.get() is None:
            self._own.flush()

    def isatty(self) -> bool:
        return False  # answers are relayed, never drawn on a terminal here

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class RoutedInput(io.TextIOBase):
    """The service's sys.stdin: the requesting client's stdin (hooks read events there)."""

    def read(self, size: int | None = -1) -> str:
        stream = _stdin.get()
        return stream.read(-1 if size is None else size) if stream is not None else ""

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        stream = _stdin.get()
        return stream.readline(-1 if size is None else size) if stream is not None else ""

    def isatty(self) -> bool:
        return False


@dataclass
class ServiceState:
    home: Path
    idle_seconds: float
    started: float = field(default_factory=time.time)
    last_activity: float = field(default_factory=time.monotonic)
    active: int = 0
    served: int = 0
    pool: AppPool = field(default_factory=AppPool)
    code: str = field(default_factory=code_stamp)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self) -> None:
        with self.lock:
            self.active += 1
            self.served += 1

    def end(self) -> None:
        with self.lock:
            self.active -= 1
            self.last_activity = time.monotonic()

    def idle_for(self) -> float:
        with self.lock:
            return 0.0 if self.active else time.monotonic() - self.last_activity

    def describe(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "home": str(self.home),
            "socket": str(socket_path(self.home)),
            "log": str(log_path(self.home)),
            "uptime_seconds": round(time.time() - self.started, 1),
            "idle_seconds": round(self.idle_for(), 1),
            "idle_timeout_seconds": self.idle_seconds,
            "requests": self.served,
            "vaults": self.pool.vaults(),
        }


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    state: ServiceState
    beside: bool = False  # something else (the MCP server) runs in the main thread

    def request_stop(self) -> None:
        if self.beside:  # the MCP server owns the main thread: stop it as a signal would
            os.kill(os.getpid(), signal.SIGTERM)
        threading.Thread(target=self.shutdown, daemon=True).start()


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        if not _same_user(self.request):
            return
        line = self.rfile.readline(MAX_REQUEST_BYTES)
        try:
            request = json.loads(line)
        except ValueError:
            return
        send = _frame_writer(self.wfile)
        op = request.get("op")
        state = self.server.state
        if request.get("protocol") != PROTOCOL:
            send({"mismatch": PROTOCOL})  # the client then runs the command itself
        elif op == "run" and request.get("code") != state.code:
            # Installed code changed since this service started: let the client run the
            # command itself, and make way for a service running the new code.
            log.warning("the installed code changed: stopping so a new service starts")
            send({"mismatch": PROTOCOL})
            self.server.request_stop()
        elif op == "status":
            send({"status": state.describe()})
        elif op == "stop":
            send({"stopping": state.describe()})
            self.server.request_stop()
        elif op == "run":
            state.begin()
            try:
                send({"exit": run_command(request, send)})
            finally:
                state.end()


def _frame_writer(wfile: Any) -> Callable[[dict[str, Any]], None]:
    """Frames to the client. A client that hung up (a hook's timeout, ^C) no longer
    reads: the command finishes without it (an index run is not cut short) and what it
    would have printed is dropped, without a traceback in the log."""
    lock = threading.Lock()
    gone = False

    def send(frame: dict[str, Any]) -> None:
        nonlocal gone
        data = json.dumps(frame, ensure_ascii=False).encode() + b"\n"
        with lock:
            if gone:
                return
            try:
                wfile.write(data)
                wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                gone = True
                log.info("the client hung up: finishing its command without it")

    return send


def _same_user(sock: socket.socket) -> bool:
    """Only the user who owns the service may use it (the socket mode says so too)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def run_command(request: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> int:
    """Run one CLI command as the client would have, printing to the client."""
    argv = [str(a) for a in request.get("argv") or []]
    if next((a for a in argv if not a.startswith("-")), None) not in SERVED_COMMANDS:
        send({"err": "retriever: the service does not run this command\n"})
        return 2
    env = {str(k): str(v) for k, v in (request.get("env") or {}).items()}
    cwd = Path(str(request.get("cwd") or "/"))
    stdin = request.get("stdin")
    sink_token = _sink.set(lambda channel, text: send({channel: text}))
    stdin_token = _stdin.set(io.StringIO(stdin) if isinstance(stdin, str) else None)
    try:
        with request_context.serving(env, cwd):
            return _invoke_cli(argv)
    finally:
        _sink.reset(sink_token)
        _stdin.reset(stdin_token)


def _invoke_cli(argv: list[str]) -> int:
    from retriever.cli import run

    try:
        return run(argv)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        sys.stderr.write(f"{exc.code}\n")
        return 2
    except Exception as exc:  # a bug must not take the service down with it
        log.exception("command failed: %s", argv)
        sys.stderr.write(f"retriever: internal error: {type(exc).__name__}: {exc}\n")
        return 2


# ------------------------------------------------------------------------ lifecycle


@contextlib.contextmanager
def _single_instance(home: Path) -> Iterator[bool]:
    """True while this process holds the service lock of ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "service.lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _bind(path: Path) -> _Server:
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead service's socket: we hold the lock, so nobody else uses it
    old_umask = os.umask(0o177)  # the socket is created 0600: no window for other users
    try:
        return _Server(os.fspath(path), _Handler)
    finally:
        os.umask(old_umask)


def _watch_idle(server: _Server, stopped: threading.Event) -> None:
    state = server.state
    every = min(IDLE_CHECK_SECONDS, max(0.1, state.idle_seconds / 4))
    while not stopped.wait(every):
        if state.idle_seconds > 0 and state.idle_for() > state.idle_seconds:
            log.warning("idle for %.0f s: stopping", state.idle_for())
            server.shutdown()
            return


def _prewarm() -> None:
    """What every first request needs, started while the client connects: the embedded
    PostgreSQL (when no DATABASE_URL is set) and the search modules."""
    try:
        from retriever.config import settings_from
        from retriever.db import start_embedded

        settings = settings_from()
        if not settings.database_url:
            start_embedded(settings.home)
        import retriever.search  # noqa: F401
    except Exception as exc:  # the first request will meet it again, and say it
        log.warning("warm-up: %s", exc)


def _rotate_log(home: Path) -> None:
    path = Path(log_path(home))
    with contextlib.suppress(OSError):
        if path.stat().st_size > LOG_ROTATE_BYTES:
            path.replace(path.with_suffix(".log.1"))


def _route_stdio() -> None:
    own_stderr = sys.stderr
    sys.stdout = RoutedOutput(sys.stdout, "out")
    sys.stderr = RoutedOutput(own_stderr, "err")
    sys.stdin = RoutedInput()
    # Log handlers made earlier hold the old stream: a request's logs go to its client too.
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is own_stderr:
            handler.setStream(sys.stderr)


def _stop_on_signals(server: _Server) -> None:
    def stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, stop)


def serve(
    home: Path,
    *,
    idle_seconds: float,
    on_ready: Callable[[dict[str, Any]], None],
    beside: Callable[[], None] | None = None,
) -> bool:
    """Run the service until it is stopped or idle; False if one already runs here.
    ``beside`` (the MCP HTTP server) runs in the main thread, sharing the warm apps; the
    service then lasts as long as it does."""
    with _single_instance(home) as mine:
        if not mine:
            return False
        _rotate_log(home)
        from retriever.cli import command

        command()  # built now, not during the first request
        threading.Thread(target=_prewarm, daemon=True).start()

        server = _bind(Path(socket_path(home)))
        server.state = ServiceState(home=home, idle_seconds=idle_seconds)
        use_pool(server.state.pool)
        server.beside = beside is not None
        stopped = threading.Event()
        threading.Thread(target=_watch_idle, args=(server, stopped), daemon=True).start()
        _stop_on_signals(server)
        _route_stdio()
        try:
            on_ready(server.state.describe())
            if beside is None:
                server.serve_forever(poll_interval=0.5)
            else:
                threading.Thread(target=server.serve_forever, args=(0.5,), daemon=True).start()
                beside()
                server.shutdown()
        finally:
            stopped.set()
            server.server_close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(socket_path(home))
            use_pool(None)
            server.state.pool.close_all()
    return True
