"""Fault 1: kill -9 of the indexer alone (not its process group): its fork server, workers
and resource tracker must not outlive it, and the next run converges to a clean index.

(tests/test_index.py::test_kill_9_converges_to_a_clean_index kills the whole group at each
commit point; it is part of this suite too.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from retriever.index import PARALLEL_THRESHOLD
from retriever.lifeline import EXIT_CODE
from tests.faults.dump import differences, dump_index, lost_and_duplicated
from tests.faults.harness import amcheck, env_for, run_json, session_members, wait_until
from tests.faults.table import record
from tests.test_index import Watch, make_big_vault, start_index

pytestmark = pytest.mark.faults

ORPHAN_GRACE_S = 10.0  # a worker exits within this after its owner dies


def test_a_bound_worker_exits_when_its_owner_dies(tmp_path: Path) -> None:
    """The pool initializer alone: a process bound to an owner exits once the owner does."""
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    code = f"from retriever.lifeline import bind_to_owner; bind_to_owner({owner.pid}); import time; time.sleep(60)"
    worker = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).parents[2])
    try:
        time.sleep(1.0)
        assert worker.poll() is None, "the worker exited while its owner lived"
        owner.kill()
        owner.wait()
        assert worker.wait(timeout=10) == EXIT_CODE
    finally:
        for p in (owner, worker):
            if p.poll() is None:
                p.kill()


def workers_of(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def test_workers_exit_when_the_indexer_is_killed(
    db_url: str, tmp_path: Path, clean_index: Callable[..., dict[str, Any]], faults_full: bool
) -> None:
    vault = make_big_vault(tmp_path / "big", 2 * PARALLEL_THRESHOLD)
    env = env_for(tmp_path / "home", db_url)
    moments = ["workers up"] + (
        ["first batch written", "at 0.5 s", "at 1.5 s"] if faults_full else []
    )
    watch = Watch(db_url)
    left_behind: list[str] = []
    try:
        for moment in moments:
            watch.started_at = watch.conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
            proc = start_index(vault, env, "--full")
            started = time.monotonic()

            def due(moment: str = moment, proc: Any = proc, started: float = started) -> bool:
                if proc.poll() is not None:
                    return True
                if moment == "workers up":
                    return len(workers_of(proc.pid)) >= 3  # fork server + workers
                if moment == "first batch written":
                    return watch.state()["written"] > 0
                return time.monotonic() - started >= float(moment.split()[1])

            assert wait_until(due, 120) is not None, f"{moment}: never reached"
            if proc.poll() is not None:
                print(f"{moment}: the run finished first")
                continue
            helpers = len(workers_of(proc.pid))
            os.kill(proc.pid, signal.SIGKILL)  # the indexer only, as the OOM killer would
            proc.wait(timeout=30)
            gone = wait_until(lambda pid=proc.pid: not session_members(pid), ORPHAN_GRACE_S)
            survivors = [" ".join(p.cmdline()[:4])[:120] for p in session_members(proc.pid)]
            for p in session_members(proc.pid):
                p.kill()
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()
            print(f"kill -9 at '{moment}' ({helpers} helpers): gone after {gone} s; {survivors}")
            record(
                "kill -9 indexer alone: helpers exit",
                converged=not survivors,
                recovery_s=gone,
                note="fork server, workers, resource tracker",
            )
            if survivors:
                left_behind.append(f"{moment}: {survivors}")
    finally:
        watch.close()
    assert not left_behind, f"processes outlived the killed indexer: {left_behind}"
    if not faults_full:
        return  # convergence after kill -9 is tests/test_index.py's kill test in `make test`

    started = time.monotonic()
    code, data, stderr = run_json(["index", str(vault)], env)
    took = time.monotonic() - started
    assert code in (0, 1) and data["interrupted"] is False, stderr[-2000:]
    got, want = dump_index(db_url), clean_index(vault)
    lost, dup = lost_and_duplicated(got, want)
    diff = differences(got, want)
    amcheck(db_url)
    record("kill -9 indexer alone: next run", converged=not diff, lost=lost + dup, recovery_s=took)
    assert not diff, diff


def blocks_sigint(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False


def test_ctrl_c_to_the_group_always_ends(db_url: str, tmp_path: Path, faults_full: bool) -> None:
    """Ctrl-C at a terminal reaches the indexer, its fork server, workers and resource
    tracker at once. At every moment the run must stop cleanly (interrupted, what was done
    committed) and leave no process behind. A worker that got the Ctrl-C before it could
    ignore it used to break the pool: exit 2, "BrokenProcessPool", and a hang at times."""
    n = (4 if faults_full else 2) * PARALLEL_THRESHOLD
    moments = ["workers starting"]
    if faults_full:
        moments += ["first batch written", "half written", "all written"]
    vault = make_big_vault(tmp_path / "big", n)
    env = env_for(tmp_path / "home", db_url)
    watch = Watch(db_url)
    hung: list[str] = []
    try:
        for moment in moments:
            watch.started_at = watch.conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
            proc = start_index(vault, env, "--full")

            def due(moment: str = moment, proc: Any = proc) -> bool:
                if proc.poll() is not None:
                    return True
                if moment == "workers starting":
                    return len(workers_of(proc.pid)) >= 3  # tracker, fork server, a worker
                want = {"first batch written": 1, "half written": n // 2, "all written": n}
                return watch.state()["written"] >= want[moment]

            # Poll fast: the first moment is a worker still starting up.
            assert wait_until(due, 120, step=0.002) is not None
            landed = proc.poll() is None
            if moment == "workers starting" and landed:
                # Deterministic half of the check: every worker is born with Ctrl-C blocked.
                servers = [p for p in workers_of(proc.pid) if "forkserver" in " ".join(p.cmdline())]
                assert servers and all(blocks_sigint(p.pid) for p in servers[:1]), (
                    "fork server takes Ctrl-C"
                )
            os.killpg(proc.pid, signal.SIGINT)
            sent = time.monotonic()
            try:
                _, err = proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                hung.append(moment)
                for p in session_members(proc.pid):
                    p.kill()
                proc.communicate()
                continue
            ended = time.monotonic() - sent
            gone = wait_until(lambda pid=proc.pid: not session_members(pid), 10)
            print(
                f"Ctrl-C to the group at '{moment}' (landed {landed}): exit {proc.returncode} "
                f"after {ended:.2f} s; helpers gone after {gone}"
            )
            assert proc.returncode in (0, 1), err.decode()[-2000:]
            assert "Traceback" not in err.decode()
            record(
                f"Ctrl-C to the indexer's group ({len(moments)} moments)",
                converged=gone is not None,
                recovery_s=ended,
                note="time = Ctrl-C to exit",
            )
    finally:
        watch.close()
    assert not hung, f"the run never ended after Ctrl-C at: {hung}"
