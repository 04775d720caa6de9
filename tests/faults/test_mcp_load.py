"""Fault 9: the MCP server over HTTP under load (8 clients at once, mixed search,
read_note and list_notes) while a full re-index rewrites every note: no error, no wrong
answer, and the p95 latency reported. `make faults` runs 500 calls per client; `make test`
a short burst."""

from __future__ import annotations

import asyncio
import random
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import TEST_VAULT, retriever_exe
from tests.faults.dump import rows
from tests.faults.harness import amcheck, copy_vault, env_for, run_json
from tests.faults.mcp_clients import call, http_client, http_server
from tests.faults.table import record
from tests.test_index import make_big_vault

pytestmark = pytest.mark.faults

CLIENTS = 8
QUESTIONS = {
    "shakshuka eggs tomato": "cooking/Shakshuka.md",
    "dashi kombu": "cooking/Dashi.md",
    "restic backup snapshots": "homelab/Backups.md",
    "reverse proxy caddy": "homelab/Reverse Proxy.md",
    "lisbon weekend": "travel/Lisbon Weekend.md",
}


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


async def client_loop(
    url: str, seed: int, calls: int, paths: list[str], total: int
) -> list[tuple[str, float, str]]:
    """(tool, seconds, problem or '') for each call of one client."""
    rng = random.Random(seed)
    out: list[tuple[str, float, str]] = []
    async with http_client(url) as client:
        for _ in range(calls):
            tool = rng.choice(["search", "search", "read_note", "list_notes"])
            if tool == "search":
                q = rng.choice(list(QUESTIONS))
                a = await call(client, "search", {"queries": q, "budget_tokens": 300})
                ok = a.ok and a.data.get("hits") and a.data["hits"][0]["path"] == QUESTIONS[q]
            elif tool == "read_note":
                path = rng.choice(paths)
                a = await call(client, "read_note", {"path": path, "end_line": 20})
                ok = a.ok and a.data.get("path") == path
            else:
                a = await call(client, "list_notes", {"limit": rng.choice([5, 50, 200])})
                ok = a.ok and a.data.get("total") == total  # no note vanishes mid-rewrite
            out.append((tool, a.seconds, "" if ok else str(a.data)[:300]))
    return out


def test_mcp_under_load_while_reindexing(
    db_url: str, tmp_path: Path, model_dir: Path, faults_full: bool
) -> None:
    vault = copy_vault(TEST_VAULT, tmp_path / "vault")
    if faults_full:  # a re-index that takes a while
        make_big_vault(vault / "bulk", 400)
    env = env_for(
        tmp_path / "home",
        db_url,
        model_dir,
        RETRIEVER_VAULT=str(vault),
        RETRIEVER_FRESH_SEARCH="false",
    )
    code, _, stderr = run_json(["index", str(vault)], env)
    assert code == 0, stderr[-2000:]
    total = int(rows(db_url, "SELECT count(*) FROM documents")[0][0])
    paths = [r[0] for r in rows(db_url, "SELECT path FROM documents ORDER BY path")][
        :: max(1, total // 50)
    ]
    calls = 500 if faults_full else 8
    reindexes = 0

    with http_server(env) as (url, server):

        async def load() -> list[tuple[str, float, str]]:
            tasks = [client_loop(url, seed, calls, paths, total) for seed in range(CLIENTS)]
            results = await asyncio.gather(*tasks)
            return [r for rs in results for r in rs]

        started = time.monotonic()
        indexer = subprocess.Popen(
            [retriever_exe(), "index", str(vault), "--full", "--json"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        reindexes = 1

        async def with_reindexing() -> list[tuple[str, float, str]]:
            nonlocal indexer, reindexes
            job = asyncio.ensure_future(load())
            while not job.done():  # keep a full re-index running the whole time
                if indexer.poll() is not None:
                    assert indexer.returncode == 0, indexer.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
                    indexer = subprocess.Popen(
                        [retriever_exe(), "index", str(vault), "--full", "--json"],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                    )
                    reindexes += 1
                await asyncio.sleep(0.2)
            return await job

        results = asyncio.run(with_reindexing())
        took = time.monotonic() - started
        indexer.wait(timeout=300)
        assert server.poll() is None, "the MCP server died under load"
    amcheck(db_url)
    problems = [r for r in results if r[2]]
    by_tool = {
        t: [r[1] for r in results if r[0] == t] for t in ("search", "read_note", "list_notes")
    }
    summary = ", ".join(f"{t} p95 {p95(v) * 1000:.0f} ms" for t, v in by_tool.items() if v)
    overall = p95([r[1] for r in results]) * 1000
    print(
        f"MCP load: {len(results)} calls in {took:.1f} s during {reindexes} full re-index(es); "
        f"p95 {overall:.0f} ms ({summary}); problems {problems[:3]}"
    )
    record(
        f"MCP HTTP load, {CLIENTS} clients x {calls} calls, re-indexing",
        converged=not problems,
        wrong=len(problems),
        note=f"p95 {overall:.0f} ms overall; {summary}; {reindexes} re-index runs",
    )
    assert len(results) == CLIENTS * calls
    assert not problems, problems[:5]
