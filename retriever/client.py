"""The thin client: hand a CLI or hook call to the resident service over a Unix socket.

Imported by the console script before anything heavy, so it uses the standard library
only. It answers ``None`` whenever the call should run in this process instead (the
service is off, cannot be reached or started, or the command is not one it serves).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from retriever.request_context import forwarded_env

PROTOCOL = 1
# Commands the service runs; the others (mcp, watch, serve, eval, db) always run here.
SERVED_COMMANDS = frozenset({"search", "status", "health", "index", "hook", "calibrate", "gc"})
START_WAIT_SECONDS = 15.0
MODES = ("auto", "connect", "off")  # RETRIEVER_SERVICE: start if needed, only use, never


class ServiceUnavailable(Exception):
    """No service answered (and none could be started)."""


def home() -> Path:
    """RETRIEVER_HOME as the settings resolve it (without importing them)."""
    configured = os.environ.get("RETRIEVER_HOME")
    if configured:
        return Path(configured).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir("retriever")).resolve()


def socket_path(home_dir: Path) -> Path:
    """``<home>/service.sock``, or a short name in the runtime folder when that path is
    too long for a Unix socket (about 108 bytes)."""
    path = home_dir / "service.sock"
    if len(os.fsencode(path)) < 100:
        return path
    digest = hashlib.sha256(os.fsencode(home_dir)).hexdigest()[:16]
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"retriever-{os.getuid()}-{digest}.sock"


def code_stamp() -> str:
    """Which code is installed: a service started before an upgrade (or an edit) must not
    keep answering with the old code. Sizes and mtimes of the package's modules."""
    root = Path(__file__).parent
    digest = hashlib.sha256()
    for folder in (root, root / "embed"):
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.name.endswith(".py"):
                    st = entry.stat()
                    digest.update(f"{entry.path}:{st.st_size}:{st.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]


def log_path(home_dir: Path) -> Path:
    return home_dir / "service.log"


def mode() -> str:
    value = os.environ.get("RETRIEVER_SERVICE", "auto").strip().lower()
    return value if value in MODES else "auto"


def command_of(argv: list[str]) -> str | None:
    """The subcommand: the first argument that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def connect(path: Path, timeout: float | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(os.fspath(path))
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


def ask(op: str, home_dir: Path | None = None, timeout: float = 5.0) -> dict[str, Any]:
    """A control request (``status``, ``stop``) and its one-frame answer."""
    sock = connect(socket_path(home_dir or home()), timeout)
    with sock:
        send(sock, {"protocol": PROTOCOL, "op": op})
        for frame in frames(sock):
            return frame
    raise ServiceUnavailable("the service closed the connection without answering")


def start_service(home_dir: Path) -> subprocess.Popen[bytes]:
    """Start a detached service that logs to ``<home>/service.log``."""
    home_dir.mkdir(parents=True, exist_ok=True)
    with open(log_path(home_dir), "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "retriever.cli", "serve", "--detach"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # survives the caller; no terminal signals
            close_fds=True,
            env={**os.environ, "RETRIEVER_HOME": str(home_dir)},
        )


def reach(home_dir: Path, *, may_start: bool) -> socket.socket:
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
    if mode() == "off" or command_of(argv) not in SERVED_COMMANDS:
        return None
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
        elif "err" in frame:
            err(frame["err"])
        said = True
    if not said:
        return None
    err("retriever: the resident service stopped before it finished answering\n")
    return 2
