"""The embedded PostgreSQL a long-running command started always stops: on SIGTERM, SIGHUP
and SIGINT, and even after an earlier user of it was killed without a word (kill -9)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.conftest import retriever_exe, run_retriever

pytestmark = pytest.mark.server


def _embedded_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a command on ``home``'s embedded server (no DATABASE_URL)."""
    env = {**os.environ, "RETRIEVER_HOME": str(home), "RETRIEVER_EMBED_MODEL": "none", **extra}
    env.pop("DATABASE_URL", None)
    env.pop("RETRIEVER_DATABASE_URL", None)
    return env


def _postmaster(home: Path) -> psutil.Process | None:
    pidfile = home / "pgdata" / "postmaster.pid"
    try:
        pid = int(pidfile.read_text().split()[0])
        proc = psutil.Process(pid)
        return proc if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE else None
    except (OSError, ValueError, IndexError, psutil.Error):
        return None


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_watch(home: Path, vault: Path, command: str = "watch") -> subprocess.Popen[str]:
    env = _embedded_env(home)
    args = {
        "watch": ["watch", str(vault)],
        "mcp": ["mcp", str(vault), "--http", "--port", str(_free_port())],
    }[command]
    # As from a terminal: a test runner started in the background inherits SIGINT ignored,
    # and a child would inherit that too (Python then never raises KeyboardInterrupt).
    proc = subprocess.Popen(
        [retriever_exe(), *args],
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 120
    handles = home / "pgdata" / ".handle_pids.json"
    while time.monotonic() < deadline:  # up when the server runs and lists this process
        if (
            _postmaster(home)
            and handles.exists()
            and proc.pid in json.loads(handles.read_text() or "[]")
        ):
            return proc
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the embedded server did not come up")


def _wait_gone(home: Path, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _postmaster(home) is None:
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sig-home")


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sig-vault")
    (root / "note.md").write_text("# Note\n\nsome text\n", "utf-8")
    return root


@pytest.mark.parametrize("command", ["watch", "mcp"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_the_embedded_server_stops_with_the_command(
    home: Path, vault: Path, sig: int, command: str
) -> None:
    proc = _start_watch(home, vault, command)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert _wait_gone(home), f"postgres still running after {signal.Signals(sig).name}"


def test_a_user_killed_with_kill_9_does_not_keep_the_server_alive(home: Path, vault: Path) -> None:
    first = _start_watch(home, vault)
    first.kill()  # no exit handlers run: its pid stays in the wheel's list of users
    first.wait(timeout=30)
    second = _start_watch(home, vault)  # joins (or restarts) the server, forgets the dead
    second.send_signal(signal.SIGTERM)
    second.wait(timeout=60)
    assert _wait_gone(home), "a dead user's stale pid kept postgres running"


def test_two_vaults_keep_two_indexes_on_the_embedded_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = _embedded_env(home)
    vaults = {}
    for name, word in (("a", "sourdough"), ("b", "telescope")):
        vaults[name] = tmp_path / name
        vaults[name].mkdir()
        (vaults[name] / f"{word}.md").write_text(f"# {word}\n\nall about the {word}\n", "utf-8")

    def run(*args: str) -> dict[str, object]:
        done = run_retriever([*args, "--json"], env)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        return json.loads(done.stdout)

    assert run("index", str(vaults["a"]))["files_changed"] == 1
    assert run("index", str(vaults["b"]))["files_changed"] == 1  # not refused, not a wipe
    assert run("index", str(vaults["a"]))["files_changed"] == 0  # a's index is still there
    found = run("search", "--vault", str(vaults["a"]), "sourdough", "--mode", "lexical")
    assert [h["path"] for h in found["hits"]] == ["sourdough.md"]  # type: ignore[index]
    other = run("search", "--vault", str(vaults["b"]), "sourdough", "--mode", "lexical")
    assert other["hits"] == []
    listed = run("status", str(vaults["a"]))["vaults"]
    assert [(v["vault"], v["notes"]) for v in listed] == [  # type: ignore[union-attr]
        (str(vaults["a"].resolve()), 1),
        (str(vaults["b"].resolve()), 1),
    ]
    assert _wait_gone(home)


def _index(home: Path, vault: Path) -> subprocess.CompletedProcess[str]:
    return _run_once(home, vault, ["index", str(vault), "--json"])


def _run_once(
    home: Path, vault: Path, args: list[str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = _embedded_env(home, RETRIEVER_SERVICE="off", RETRIEVER_VAULT=str(vault))
    return run_retriever(args, env, stdin=stdin)


def test_a_command_has_stopped_its_server_when_it_exits(home: Path, vault: Path) -> None:
    # The exit handler waits for the shutdown, as pg_ctl stop does: the next command never
    # meets a server that is still going down.
    for _ in range(2):
        done = _index(home, vault)
        assert done.returncode in (0, 1), done.stderr
        assert not (home / "pgdata" / "postmaster.pid").exists()
        assert _postmaster(home) is None


@pytest.mark.parametrize(
    ("args", "event"),
    [
        (["hook", "prompt"], {"session_id": "s", "prompt": "where is some text kept?"}),
        (
            ["hook", "pre-tool"],
            {"session_id": "s", "tool_name": "Grep", "tool_input": {"pattern": "some text"}},
        ),
    ],
)
def test_a_hook_has_stopped_its_server_when_it_exits(
    home: Path, vault: Path, args: list[str], event: dict[str, object]
) -> None:
    assert _index(home, vault).returncode in (0, 1)
    event = {**event, "session_id": uuid.uuid4().hex}  # a repeated call says nothing
    done = _run_once(home, vault, args, json.dumps(event))
    assert done.returncode == 0, done.stderr
    assert "some text" in done.stdout  # it searched the index (the note holds it)
    assert not (home / "pgdata" / "postmaster.pid").exists()
    assert _postmaster(home) is None


def test_a_command_leaves_the_server_to_its_other_users(home: Path, vault: Path) -> None:
    watch = _start_watch(home, vault)
    try:
        server = _postmaster(home)
        assert server is not None
        done = _index(home, vault)
        assert done.returncode in (0, 1), done.stderr
        assert _postmaster(home) == server, "a command stopped the server its watch still uses"
        users = json.loads((home / "pgdata" / ".handle_pids.json").read_text())
        assert users == [watch.pid]
    finally:
        watch.send_signal(signal.SIGTERM)
        watch.wait(timeout=60)
    assert _wait_gone(home)


def test_a_failed_background_start_is_reported_by_the_command(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from retriever import db

    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("18\n", "utf-8")  # looks initialised, is not
    db.start_early(None, tmp_path)
    for thread in threading.enumerate():
        if thread.name == "retriever-embedded-start":
            thread.join(timeout=60)
    with pytest.raises(db.DatabaseError, match=r"could not start .*CalledProcessError"):
        db.start_embedded(tmp_path)  # the background start's own error, not tried again
    assert caplog.text.count("Failed to start server") == 1  # the wheel's log of a try
    shutil.rmtree(pgdata)  # the home repaired: the next try starts a server
    assert db.start_embedded(tmp_path).startswith("postgresql://")
    db._release(db._embedded.pop(pgdata.resolve()))


def test_the_exit_handler_returns_once_the_server_is_down(tmp_path: Path) -> None:
    from retriever import db

    db.start_embedded(tmp_path)
    datadir = (tmp_path / "pgdata").resolve()
    server = db._embedded.pop(datadir)
    assert _postmaster(tmp_path) is not None
    db._release(server)  # what runs at exit (the wheel's handler, with a quicker stop)
    assert not (datadir / "postmaster.pid").exists()
    assert _postmaster(tmp_path) is None
    assert json.loads((datadir / ".handle_pids.json").read_text()) == []


UNGUARDED_CLI = """
import sys
from retriever.cli import main

sys.argv = ["retriever", "index", {vault!r}, "--json"]
main()
"""


def test_an_unguarded_script_running_the_cli_leaves_no_server_behind(tmp_path: Path) -> None:
    """Index workers import the caller's main module first: a script without the
    ``__main__`` guard runs the command again in each. There it must not start (or join)
    the server before the app refuses, or the workers' pids, which never leave the
    server's list of users, keep it running after the script."""
    from tests.test_index import PARALLEL_THRESHOLD, make_big_vault

    home = tmp_path / "home"
    vault = make_big_vault(tmp_path / "big", PARALLEL_THRESHOLD)
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED_CLI.format(vault=str(vault)), "utf-8")
    env = _embedded_env(home)
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode != 0
    assert 'if __name__ == \\"__main__\\":' in done.stdout  # a worker's --json answer
    assert json.loads((home / "pgdata" / ".handle_pids.json").read_text()) == []
    assert _postmaster(home) is None
