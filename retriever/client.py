"""The thin client: hand a CLI or hook call to the resident service over a Unix socket.

Imported by the console script before anything else, on every hook call, so it imports
as little as it can (no pathlib, typing or dataclasses at run time: each costs
milliseconds an agent's prompt hook pays). It answers ``None`` whenever the call should run
in this process instead (the service is off, cannot be reached or started, or the command
is not one it serves).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterator
    from typing import Any

PROTOCOL = 1
# Commands the service runs; the others (mcp, watch, serve, eval, db) always run here.
SERVED_COMMANDS = frozenset({"search", "status", "health", "index", "hook", "calibrate", "gc"})
START_WAIT_SECONDS = 15.0
MODES = ("auto", "connect", "off")  # RETRIEVER_SERVICE: start if needed, only use, never
# The client's settings the service applies to its command (the rest of its env is its own).
FORWARDED_PREFIXES = ("RETRIEVER_",)
FORWARDED_NAMES = ("DATABASE_URL", "OLLAMA_HOST", "NO_COLOR", "COLUMNS")
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class ServiceUnavailable(Exception):
    """No service answered (and none could be started)."""


def home() -> str:
    """RETRIEVER_HOME as the settings resolve it (without importing them)."""
    configured = os.environ.get("RETRIEVER_HOME")
    if configured:
        return os.path.realpath(os.path.expanduser(configured))
    import platformdirs

    return os.path.realpath(platformdirs.user_data_dir("retriever"))


def socket_path(home_dir: str | os.PathLike[str]) -> str:
    """``<home>/service.sock``, or a short name in the runtime folder when that path is
    too long for a Unix socket (about 108 bytes)."""
    home_dir = os.fspath(home_dir)
    path = os.path.join(home_dir, "service.sock")
    if len(os.fsencode(path)) < 100:
        return path
    import hashlib
    import tempfile

    digest = hashlib.sha256(os.fsencode(home_dir)).hexdigest()[:16]
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(base, f"retriever-{os.getuid()}-{digest}.sock")


def log_path(home_dir: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(home_dir), "service.log")


def code_stamp() -> str:
    """Which code is installed: a service started before an upgrade (or an edit) must not
    keep answering with the old code. Sizes and mtimes of the package's modules."""
    import zlib

    parts: list[str] = []
    for folder in (PACKAGE_DIR, os.path.join(PACKAGE_DIR, "embed")):
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    st = entry.stat()
                    parts.append(f"{entry.path}:{st.st_size}:{st.st_mtime_ns}")
    return format(zlib.crc32(";".join(sorted(parts)).encode()), "08x")


def mode() -> str:
    """RETRIEVER_SERVICE; a value that is none of MODES runs here ("off"), where the
    settings refuse it with one clear line."""
    value = os.environ.get("RETRIEVER_SERVICE", "auto").strip().lower()
    return value if value in MODES else "off"


def command_of(argv: list[str]) -> str | None:
    """The subcommand: the first argument that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def forwarded_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    return {
        k: v for k, v in environ.items() if k.startswith(FORWARDED_PREFIXES) or k in FORWARDED_NAMES
    }


def connect(path: str, timeout: float | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError as exc:
        sock.close()
        raise ServiceUnavailable(f"no service at {path}: {exc.strerror or exc}") from exc
    return sock


def frames(sock: socket.socket) -> Iterator[dict[str, Any]]:
    """The service's answer, one JSON object per line, until it closes."""
    with sock.makefile("rb") as stream:
        for line in stream:
            yield json.loads(line)


def send(sock: socket.socket, request: dict[str, Any]) -> None:
    sock.sendall(json.dumps(request, ensure_ascii=False).encode() + b"\n")


def ask(
    op: str, home_dir: str | os.PathLike[str] | None = None, timeout: float = 5.0
) -> dict[str, Any]:
    """A control request (``status``, ``stop``) and its one-frame answer."""
    sock = connect(socket_path(home_dir or home()), timeout)
    with sock:
        send(sock, {"protocol": PROTOCOL, "op": op})
        for frame in frames(sock):
            return frame
    raise ServiceUnavailable("the service closed the connection without answering")


def start_service(home_dir: str) -> subprocess.Popen[bytes]:
    """Start a detached service that logs to ``<home>/service.log``."""
    import subprocess

    os.makedirs(home_dir, exist_ok=True)
    with open(log_path(home_dir), "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "retriever.cli", "serve", "--detach"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # survives the caller; no terminal signals
            close_fds=True,
            env={**os.environ, "RETRIEVER_HOME": home_dir},
        )


def reach(home_dir: str, *, may_start: bool) -> socket.socket:
    """A connection to the service, starting one when allowed and none answers."""
    path = socket_path(home_dir)
    try:
        return connect(path)
    except ServiceUnavailable:
        if not may_start:
            raise
    process = start_service(home_dir)
    deadline = time.monotonic() + START_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            return connect(path)
        except ServiceUnavailable:
            if process.poll() not in (None, 0):
                break  # it failed to start: its log says why
            time.sleep(0.02)
    raise ServiceUnavailable(f"the service did not start (see {log_path(home_dir)})")


def run_remote(argv: list[str], stdin_text: str | None) -> int | None:
    """Run ``retriever <argv>`` in the service; its exit code, or None to run it here."""
    command = command_of(argv)
    if mode() == "off" or command not in SERVED_COMMANDS or "--help" in argv:
        return None  # help needs no service: none is started for it
    if command == "index" and sys.stderr.isatty():
        return None  # a person at a terminal sees the progress bar, drawn here
    try:
        sock = reach(home(), may_start=mode() == "auto")
    except (ServiceUnavailable, OSError):
        return None
    request = {
        "protocol": PROTOCOL,
        "op": "run",
        "argv": argv,
        "cwd": os.getcwd(),
        "env": forwarded_env(os.environ),
        "stdin": stdin_text,
        "code": code_stamp(),
    }
    with sock:
        try:
            send(sock, request)
            return relay(frames(sock), sys.stdout.write, sys.stderr.write)
        except (OSError, ValueError):
            return None


def relay(
    answer: Iterator[dict[str, Any]], out: Callable[[str], Any], err: Callable[[str], Any]
) -> int | None:
    """Write the service's output as it comes; its exit code, or None when it broke off
    before saying anything (the call is then safe to run here)."""
    said = False
    for frame in answer:
        if "exit" in frame:
            return int(frame["exit"])
        if "out" in frame:
            out(frame["out"])
            said = True
        elif "err" in frame:
            err(frame["err"])
            said = True
    if not said:
        return None
    err("retriever: the resident service stopped before it finished answering\n")
    return 2
