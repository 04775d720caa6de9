"""Embedding tiers with a real transformer primary (a benchmark, never part of CI).

The primary tier is all-MiniLM-L6-v2 served through Ollama's HTTP API by
``../shared/tools/ollama_compat_server.py`` (started and stopped here, from its own
virtualenv: torch never enters ours); the fallback tier is a Model2Vec folder.

    python -m benchmarks.bench_tiers index   --vault V --server-python P --model-dir M ...
    python -m benchmarks.bench_tiers quality --vault V --cases C --server-python P ...
    python -m benchmarks.bench_tiers switch  --vault V --cases C --server-python P ...

``index``: full index of the vault with the primary tier alone, then with both tiers
(fresh homes, alternating, ``--runs`` times each): wall time, ratio. ``quality``:
``retriever eval`` with the primary up, with it stopped (the fallback answers), the
fallback model alone and lexical only. ``switch``: searches through a warm app (as the
resident service and the MCP server hold it) while the primary is stopped and started
twice: every answer's mode and tier.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[2] / "shared"


class CompatServer:
    """The Ollama-compatible server as a child process (stopping it = Ollama going away)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.cmd = [
            args.server_python,
            args.server_script,
            "--model-dir",
            args.model_dir,
            "--name",
            args.name,
            "--port",
            str(args.port),
            *args.server_arg,
        ]
        self.url = f"http://127.0.0.1:{args.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180.0) -> float:
        started = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise SystemExit(f"the compat server exited ({self.proc.returncode}): {self.cmd}")
            try:
                urllib.request.urlopen(f"{self.url}/api/tags", timeout=1).read()
                return time.monotonic() - started
            except OSError:
                time.sleep(0.3)
        raise SystemExit(f"the compat server did not answer within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        self.proc = None


def env_for(args: argparse.Namespace, home: Path, *, primary: str, fallback: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRIEVER_")}
    env.update(
        RETRIEVER_HOME=str(home),
        RETRIEVER_SERVICE="off",
        RETRIEVER_EMBED_MODEL=primary,
        RETRIEVER_FALLBACK_MODEL=fallback,
        RETRIEVER_OLLAMA_URL=f"http://127.0.0.1:{args.port}",
    )
    return env


def retriever(*argv: str, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    exe = Path(sys.executable).parent / "retriever"
    started = time.perf_counter()
    done = subprocess.run([str(exe), *argv, "--json"], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"retriever {' '.join(argv)} failed: {done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout)


# --------------------------------------------------------------------------- index


def bench_index(args: argparse.Namespace) -> dict[str, Any]:
    server = CompatServer(args)
    server.start()
    primary = f"ollama:{args.name}"
    rows: list[dict[str, Any]] = []
    try:
        for run in range(args.runs):
            for config, fallback in (("primary", "none"), ("both", args.fallback)):
                home = Path(args.home) / f"index-{config}-{run}"
                subprocess.run(["rm", "-rf", str(home)], check=True)
                env = env_for(args, home, primary=primary, fallback=fallback)
                env["RETRIEVER_CALIBRATE"] = "true" if args.calibrate else "false"
                wall, report = retriever("index", args.vault, env=env)
                tiers = {t["tier"]: t for t in report["tiers"]}
                row = {
                    "config": config,
                    "run": run,
                    "wall_s": round(wall, 1),
                    "index_s": report["seconds"],
                    "embed_s": {k: t["seconds"] for k, t in tiers.items()},
                    "pending": {k: t["pending"] for k, t in tiers.items()},
                    "passages": report["passages_embedded"] + report["passages_pending"],
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        server.stop()
    summary: dict[str, Any] = {"runs": rows}
    for key in ("wall_s", "index_s"):
        alone = statistics.median(r[key] for r in rows if r["config"] == "primary")
        both = statistics.median(r[key] for r in rows if r["config"] == "both")
        summary[key] = {"primary": alone, "both": both, "ratio": round(both / alone, 3)}
    return summary


# --------------------------------------------------------------------------- quality


def _calibrated(report: dict[str, Any]) -> dict[str, Any]:
    row = next(r for r in report["results"] if r["config"] == "calibrated")
    kinds = row.get("per_kind") or {}
    return {
        "ndcg@10": row.get("ndcg@10"),
        "recall@10": row.get("recall@10"),
        "french_ndcg@10": (kinds.get("french") or {}).get("ndcg@10"),
        "modes": row.get("modes_used"),
        "tiers": row.get("tiers_used"),
        "p50_ms": row["latency_ms"]["p50"],
    }


def bench_quality(args: argparse.Namespace) -> dict[str, Any]:
    server = CompatServer(args)
    primary = f"ollama:{args.name}"
    home = Path(args.reuse) if args.reuse else Path(args.home) / "quality"
    out: dict[str, Any] = {}
    server.start()
    try:
        env = env_for(args, home, primary=primary, fallback=args.fallback)
        out["both tiers, primary up"] = _calibrated(
            retriever("eval", args.cases, "--vault", args.vault, env=env)[1]
        )
    finally:
        server.stop()
    out["both tiers, primary stopped"] = _calibrated(
        retriever("eval", args.cases, "--vault", args.vault, env=env)[1]
    )
    alone = env_for(
        args, Path(args.home) / "quality-fallback", primary=args.fallback, fallback="none"
    )
    out["fallback model alone"] = _calibrated(
        retriever("eval", args.cases, "--vault", args.vault, env=alone)[1]
    )
    lexical = env_for(args, Path(args.home) / "quality-lexical", primary="none", fallback="none")
    out["lexical only"] = _calibrated(
        retriever("eval", args.cases, "--vault", args.vault, env=lexical)[1]
    )
    return out


# --------------------------------------------------------------------------- switch


def bench_switch(args: argparse.Namespace) -> dict[str, Any]:
    """Searches through one warm app while the primary is stopped and started twice."""
    from retriever.app import Retriever
    from retriever.config import Settings

    home = Path(args.reuse) if args.reuse else Path(args.home) / "quality"  # both tiers
    server = CompatServer(args)
    server.start()
    settings = Settings(
        vault=Path(args.vault),
        home=home,
        embed_model=f"ollama:{args.name}",
        fallback_model=args.fallback,
        ollama_url=server.url,
        fresh_search=False,
    )
    app = Retriever(settings)
    app.index()
    cases = [
        json.loads(line)["query"] for line in Path(args.cases).read_text().splitlines() if line
    ]
    phases = ["up", "down", "up", "down", "up"]
    per_phase = args.searches // len(phases)
    answers: list[dict[str, Any]] = []
    events: list[str] = []
    try:
        for n, phase in enumerate(phases):
            if phase == "down":
                server.stop()
                events.append(f"stopped before search {len(answers) + 1}")
            elif n:
                took = server.start()
                events.append(f"started before search {len(answers) + 1} ({took:.0f} s to load)")
            phase_started = time.monotonic()
            for i in range(per_phase):
                query = f"{cases[(n * per_phase + i) % len(cases)]} ({n}.{i})"  # never cached
                started = time.perf_counter()
                result = app.search(query)
                answers.append(
                    {
                        "phase": phase,
                        "mode": result.mode,
                        "tier": result.tier,
                        "reason": result.degraded_reason,
                        "hits": len(result.hits),
                        "ms": round((time.perf_counter() - started) * 1000, 1),
                        "t": round(time.monotonic() - phase_started, 1),
                    }
                )
                time.sleep(args.pace)
    finally:
        server.stop()
        app.close()
    return _switch_summary(answers, events)


def _switch_summary(answers: list[dict[str, Any]], events: list[str]) -> dict[str, Any]:
    down_primary = [a for a in answers if a["phase"] == "down" and a["tier"] != "fallback"]
    back = []
    for i, a in enumerate(answers):
        if a["phase"] == "up" and i and answers[i - 1]["phase"] == "down":
            first = next((b for b in answers[i:] if b["tier"] == "primary"), None)
            back.append(first["t"] if first else None)
    reasons = sorted({a["reason"].split(" since ")[0] for a in answers if a["reason"]})
    return {
        "answers": len(answers),
        "hybrid": sum(a["mode"] == "hybrid" for a in answers),
        "with_hits": sum(a["hits"] > 0 for a in answers),
        "tiers": {t: sum(a["tier"] == t for a in answers) for t in ("primary", "fallback")},
        "down_answered_by_primary": len(down_primary),
        "seconds_to_primary_after_restart": back,
        "ms_p50": statistics.median(a["ms"] for a in answers),
        "ms_max": max(a["ms"] for a in answers),
        "reasons": reasons,
        "events": events,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["index", "quality", "switch"])
    parser.add_argument("--vault", default=str(SHARED / "corpora" / "dendron-vault"))
    parser.add_argument("--cases", default=str(SHARED / "corpora" / "dendron-vault-cases.jsonl"))
    parser.add_argument("--fallback", default=str(SHARED / "models" / "m2v-minilm-256"))
    parser.add_argument("--server-python", required=True, help="python of the torch virtualenv")
    parser.add_argument(
        "--server-script", default=str(SHARED / "tools" / "ollama_compat_server.py")
    )
    parser.add_argument("--model-dir", required=True, help="the all-MiniLM-L6-v2 folder")
    parser.add_argument("--server-arg", action="append", default=[], help="e.g. --delay=0.1")
    parser.add_argument("--name", default="all-minilm")
    parser.add_argument("--port", type=int, default=11437)
    parser.add_argument("--home", default=".retriever/bench-tiers")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--reuse", help="quality/switch: a home indexed with both tiers")
    parser.add_argument("--calibrate", action="store_true", help="index: calibrate too")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--pace", type=float, default=0.25, help="switch: seconds between searches")
    args = parser.parse_args()
    result = {"index": bench_index, "quality": bench_quality, "switch": bench_switch}[args.what](
        args
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
