"""The resident service: the first call starts it, later calls are answered by it with
the client's own vault, environment and stdin, failures keep their one line and exit code,
and it always stops (--stop, idle, signals), taking its embedded PostgreSQL with it."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from retriever import client
from tests.conftest import retriever_exe, run_retriever
from tests.test_signals import _postmaster, _wait_gone

pytestmark = pytest.mark.server


def _env(home: Path, model: Path | str = "none", **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "RETRIEVER_HOME": str(home),
        "RETRIEVER_SERVICE": "auto",
        "RETRIEVER_EMBED_MODEL": str(model),
        "RETRIEVER_CALIBRATE": "false",
        **extra,
    }
    for name in ("DATABASE_URL", "RETRIEVER_DATABASE_URL", "RETRIEVER_VAULT"):
        env.pop(name, None)
    return env


def _run(
    env: dict[str, str],
    *args: str,
    cwd: Path | None = None,
    stdin: str | None = None,
    ok: tuple[int, ...] = (0, 1),
) -> subprocess.CompletedProcess[str]:
    done = run_retriever(args, env, stdin=stdin, cwd=cwd)
    assert done.returncode in ok, done.stdout + done.stderr
    return done


def _json(env: dict[str, str], *args: str, **kw: Any) -> dict[str, Any]:
    return json.loads(_run(env, *args, "--json", **kw).stdout)


def _service_pid(home: Path) -> int | None:
    try:
        return int(client.ask("status", home)["status"]["pid"])
    except (client.ServiceUnavailable, OSError):
        return None


def _services(home: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            serving = "serve" in (proc.info["cmdline"] or [])
            if serving and proc.environ().get("RETRIEVER_HOME") == str(home):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _stop(home: Path) -> None:
    pid = _service_pid(home)
    if pid is None:
        return
    try:
        client.ask("stop", home)
        psutil.Process(pid).wait(timeout=60)
    except (client.ServiceUnavailable, OSError, psutil.Error):
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Iterator[dict[str, Any]]:
    """One service for the module, started by the first call, over the test vault."""
    from tests.conftest import TEST_VAULT

    home = tmp_path_factory.mktemp("svc-home")
    env = _env(home, model_dir)
    first = _json(env, "index", str(TEST_VAULT))
    yield {"home": home, "env": env, "first": first, "vault": TEST_VAULT}
    _stop(home)


def test_the_first_call_starts_the_service_and_the_next_ones_use_it(served: dict) -> None:
    home, env = served["home"], served["env"]
    assert served["first"]["via"] == "service" and served["first"]["files_changed"] > 0
    info = _json(env, "serve", "--status")
    assert info["running"] and psutil.pid_exists(info["pid"])
    assert info["vaults"] == [str(served["vault"].resolve())]
    sock = Path(info["socket"])
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600  # the user's alone
    assert Path(info["log"]).is_file()
    found = _json(env, "search", "--vault", str(served["vault"]), "backups")
    assert found["via"] == "service" and found["mode"] == "hybrid" and found["hits"]
    assert _service_pid(home) == info["pid"]  # the same process answered


def test_the_client_brings_its_folder_and_its_settings(served: dict) -> None:
    vault = served["vault"]
    env = {**served["env"], "RETRIEVER_FUSION": "lexical"}
    found = _json(env, "search", "--vault", vault.name, "backups", cwd=vault.parent)
    assert found["via"] == "service"
    assert found["fusion"] == "lexical"  # this client's environment, not the service's
    assert found["hits"][0]["path"].endswith(".md")
    status = _json(env, "status", cwd=vault)  # the default vault is the client's folder
    assert status["vault"] == str(vault.resolve())


def test_a_bad_command_line_answered_by_the_service_is_one_line(served: dict) -> None:
    """The service parses the command line as the local run does: one line on stderr,
    or the error object with --json, exit 2; and it keeps serving."""
    env = served["env"]
    plain = _run(env, "search", "backups", "--budget", "abc", ok=(2,))
    assert plain.stdout == ""
    [line] = plain.stderr.strip().splitlines()
    assert line.startswith("✗ Invalid value for '--budget'")
    assert line.endswith("(see 'retriever search --help')")
    as_json = _run(env, "search", "backups", "--fusion", "bogus", "--json", ok=(2,))
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and data["ok"] is False and data["via"] == "service"
    assert "Invalid value for '--fusion'" in data["error"]
    assert _json(env, "search", "--vault", str(served["vault"]), "backups")["hits"]


def test_a_hook_reads_its_event_through_the_service(served: dict) -> None:
    event = {"prompt": "how are the database backups configured?", "session_id": "s1"}
    done = _run(
        served["env"],
        "hook",
        "prompt",
        "--vault",
        str(served["vault"]),
        stdin=json.dumps(event),
        ok=(0,),
    )
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Backups.md:" in context


def test_a_failure_keeps_its_one_line_and_exit_code(served: dict, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    done = _run(served["env"], "search", "--vault", str(missing), "x", "--json", ok=(2,))
    assert json.loads(done.stdout) == {
        "ok": False,
        "error": f"vault folder not found: {missing}",
        "via": "service",
    }
    a_file = _run(
        served["env"], "search", "--vault", str(served["vault"] / "Home.md"), "x", ok=(2,)
    )
    assert "must be a folder, not a file" in a_file.stderr
    plain = _run(served["env"], "status", str(missing), ok=(2,))
    assert plain.stderr.strip().count("\n") == 0 and "vault folder not found" in plain.stderr
    assert "Traceback" not in plain.stderr


def test_off_answers_in_process(served: dict) -> None:
    env = {**served["env"], "RETRIEVER_SERVICE": "off"}
    found = _json(env, "search", "--vault", str(served["vault"]), "backups")
    assert found["via"] == "process" and found["hits"]


def test_connect_never_starts_one(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "n.md").write_text("# N\n\nsourdough starter\n", "utf-8")
    env = _env(tmp_path / "home", RETRIEVER_SERVICE="connect")
    found = _json(env, "search", "--vault", str(vault), "sourdough", "--mode", "lexical")
    assert found["via"] == "process"
    assert _service_pid(tmp_path / "home") is None
    assert _wait_gone(tmp_path / "home")


def _started(tmp_path: Path, **extra: str) -> tuple[Path, dict[str, str], Path]:
    home, vault = tmp_path / "home", tmp_path / "vault"
    vault.mkdir()
    (vault / "bread.md").write_text("# Bread\n\nsourdough starter feeding\n", "utf-8")
    env = _env(home, **extra)
    assert _json(env, "index", str(vault))["via"] == "service"
    assert _postmaster(home) is not None
    return home, env, vault


def test_stop_ends_the_service_and_its_database(tmp_path: Path) -> None:
    home, env, _ = _started(tmp_path)
    pid = _service_pid(home)
    stopped = _json(env, "serve", "--stop")
    assert stopped["pid"] == pid
    psutil.Process(pid).wait(timeout=60)
    assert _wait_gone(home)
    assert not Path(client.socket_path(home)).exists()
    assert _json(env, "serve", "--status")["running"] is False


def test_an_idle_service_stops_itself(tmp_path: Path) -> None:
    home, _, _ = _started(tmp_path, RETRIEVER_SERVICE_IDLE="1")
    deadline = time.monotonic() + 30
    while _service_pid(home) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _service_pid(home) is None
    assert _wait_gone(home)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_serve_stops_its_database_on_signals(tmp_path: Path, sig: int) -> None:
    home, env, vault = tmp_path / "home", _env(tmp_path / "home"), tmp_path / "vault"
    vault.mkdir()
    (vault / "n.md").write_text("# N\n\ntext\n", "utf-8")
    proc = subprocess.Popen(
        [retriever_exe(), "serve"],
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while _service_pid(home) is None:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.1)
        assert _json(env, "index", str(vault))["via"] == "service"  # the database is up
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    assert _wait_gone(home), f"postgres left running after {signal.Signals(sig).name}"
    assert not Path(client.socket_path(home)).exists()


def test_a_killed_service_is_replaced_by_the_next_call(tmp_path: Path) -> None:
    home, env, vault = _started(tmp_path)
    old = _service_pid(home)
    assert old is not None
    os.kill(old, signal.SIGKILL)  # no handler runs: the socket file and postgres stay
    psutil.Process(old).wait(timeout=30)
    found = _json(env, "search", "--vault", str(vault), "sourdough", "--mode", "lexical")
    assert found["via"] == "service" and found["hits"]
    new = _service_pid(home)
    assert new not in (None, old)
    _stop(home)
    assert _wait_gone(home)


def test_two_first_calls_at_once_start_one_service(tmp_path: Path) -> None:
    home, vault = tmp_path / "home", tmp_path / "vault"
    vault.mkdir()
    (vault / "n.md").write_text("# N\n\nsourdough\n", "utf-8")
    env = _env(home)
    args = [retriever_exe(), "status", str(vault), "--json"]
    procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    answers = [json.loads(p.communicate(timeout=180)[0]) for p in procs]
    assert [a["via"] for a in answers] == ["service"] * 3
    assert len(_services(home)) == 1
    _stop(home)
    assert _wait_gone(home)


def test_relay_writes_frames_in_order_and_reports_a_broken_answer() -> None:
    out: list[str] = []
    err: list[str] = []
    frames = [{"out": "a"}, {"err": "b"}, {"out": "c"}, {"exit": 1}]
    assert client.relay(iter(frames), out.append, err.append) == 1
    assert out == ["a", "c"] and err == ["b"]
    assert client.relay(iter([]), out.append, err.append) is None  # safe to run here
    err.clear()
    assert client.relay(iter([{"out": "x"}]), out.append, err.append) == 2
    assert "stopped before it finished" in err[0]


def test_a_long_home_gets_a_short_socket_path(tmp_path: Path) -> None:
    long_home = tmp_path / ("h" * 120)
    path = client.socket_path(long_home)
    assert len(os.fsencode(path)) < 108
    assert path == client.socket_path(long_home)  # stable: clients find the service
    assert client.socket_path(tmp_path) == str(tmp_path / "service.sock")


def test_commands_the_service_does_not_serve_run_here() -> None:
    assert client.command_of(["-v", "search", "x"]) == "search"
    assert client.command_of(["mcp", "--http"]) not in client.SERVED_COMMANDS
    assert client.command_of(["--help"]) is None


def test_serve_with_mcp_shares_the_warm_process(tmp_path: Path) -> None:
    import asyncio
    import socket

    from fastmcp import Client

    home, vault = tmp_path / "home", tmp_path / "vault"
    vault.mkdir()
    (vault / "bread.md").write_text("# Bread\n\nsourdough starter feeding\n", "utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = _env(home)
    proc = subprocess.Popen(
        [retriever_exe(), "serve", "--mcp", "--vault", str(vault), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while _service_pid(home) is None:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        assert _json(env, "index", str(vault))["via"] == "service"

        async def ask() -> Any:
            async with Client(f"http://127.0.0.1:{port}/mcp") as mcp:
                return (await mcp.call_tool("search", {"queries": ["sourdough"]})).data

        answer = asyncio.run(ask())
        assert answer["hits"][0]["path"] == "bread.md"
        assert _service_pid(home) == proc.pid  # one process serves both
        _run(env, "serve", "--stop")
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    assert _wait_gone(home)


def test_a_service_running_old_code_makes_way(tmp_path: Path) -> None:
    home, env, vault = _started(tmp_path)
    old = _service_pid(home)
    assert old is not None
    sock = client.connect(client.socket_path(home), timeout=30)
    with sock:
        client.send(
            sock,
            {
                "protocol": client.PROTOCOL,
                "op": "run",
                "code": "old",
                "argv": ["status", str(vault)],
                "cwd": "/",
                "env": {},
            },
        )
        frames = list(client.frames(sock))
    assert frames == [{"mismatch": client.PROTOCOL}]  # the caller then runs it itself
    psutil.Process(old).wait(timeout=60)  # and the stale service stops
    found = _json(env, "status", str(vault))
    assert found["via"] == "service" and _service_pid(home) not in (None, old)
    _stop(home)
    assert _wait_gone(home)


def test_the_thin_client_imports_nothing_heavy() -> None:
    import sys

    heavy = ("psycopg", "numpy", "pydantic", "typer", "rich", "model2vec", "retriever.app")
    code = (
        "import sys, retriever.entry, retriever.client; "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_package_names_its_public_api() -> None:
    import retriever

    for name in retriever.__all__:
        assert getattr(retriever, name) is not None
    with pytest.raises(AttributeError):
        retriever.nothing_here  # noqa: B018


def test_a_client_gone_mid_answer_leaves_no_traceback_and_the_service_serving(
    served: dict,
) -> None:
    """A hook that timed out or a ^C'd command hangs up before its answer is written: the
    command finishes without it, quietly, and the next call is served as usual."""
    from retriever import client

    home, env = served["home"], served["env"]
    log = Path(client.log_path(home))
    before = log.read_text(encoding="utf-8") if log.exists() else ""
    request = {
        "protocol": client.PROTOCOL,
        "op": "run",
        "argv": ["search", "--vault", str(served["vault"]), "--json", "backups restic"],
        "cwd": str(served["vault"]),
        "env": {k: v for k, v in env.items() if k.startswith("RETRIEVER_")},
        "stdin": None,
        "code": client.code_stamp(),
    }
    for _ in range(3):
        sock = client.connect(client.socket_path(home), timeout=10)
        client.send(sock, request)
        sock.shutdown(socket.SHUT_RDWR)  # gone before a byte of the answer is read
        sock.close()
    found = _json(env, "search", "--vault", str(served["vault"]), "backups")
    assert found["via"] == "service" and found["hits"]
    added = log.read_text(encoding="utf-8")[len(before) :]
    assert "Traceback" not in added and "command failed" not in added, added
