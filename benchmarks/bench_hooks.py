"""Hook benchmark: tokens before/after compression per fixture, and whole-process latency of
``retriever hook pre-tool``, ``hook post-tool`` and ``hook prompt``.

    python -m benchmarks.bench_hooks [--vault tests/vault] [--runs 30] [--model PATH] [--json]

The vault is indexed into a temporary home on its own embedded PostgreSQL (DATABASE_URL is
ignored, so no real index is touched), with the test-made Model2Vec model unless --model is
given. This process keeps the server up; each hook run joins it, as a real session would.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import open_app, percentile, print_table
from retriever.compress import compress
from tests.tool_outputs import ToolOutput, all_outputs, suite_run

ROOT = Path(__file__).resolve().parent.parent


def token_rows() -> list[dict[str, Any]]:
    rows = []
    for o in all_outputs():
        started = time.perf_counter()
        extract = compress(o.text, o.task, context=" ".join(o.tool_input.values()))
        took = (time.perf_counter() - started) * 1000
        rows.append(
            {
                "fixture": o.name,
                "tokens_before": extract.tokens_before,
                "tokens_after": extract.tokens_after,
                "saved_pct": round(100 * (1 - extract.tokens_after / extract.tokens_before), 1),
                "kept_all_needed": all(n in extract.text for n in o.must_keep),
                "compress_ms": round(took, 1),
            }
        )
    return rows


def _post_event(o: ToolOutput) -> dict[str, Any]:
    return {
        "session_id": "bench-post",
        "hook_event_name": "PostToolUse",
        "tool_name": o.tool_name,
        "tool_input": o.tool_input,
        "tool_response": {"stdout": o.text, "stderr": "", "interrupted": False},
    }


def _events() -> dict[str, tuple[list[str], Any]]:
    """Hook -> (command, event for run i): distinct sessions so no run is a 'repeat'."""
    pre = {
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": "/code/ops/restic_backup.sh"},
        "cwd": "/tmp",
    }
    trivial = {**pre, "tool_name": "Bash", "tool_input": {"command": "ls -la"}}
    prompt = {
        "hook_event_name": "UserPromptSubmit",
        "prompt": "How do I restore a single file from the restic backup?",
    }
    post = _post_event(suite_run())
    return {
        "pre-tool (search)": (["pre-tool"], lambda i: {**pre, "session_id": f"b-pre-{i}"}),
        "pre-tool (trivial: ls)": (["pre-tool"], lambda i: {**trivial, "session_id": f"b-{i}"}),
        "post-tool (40 KB test run)": (["post-tool"], lambda i: post),
        "prompt": (["prompt"], lambda i: {**prompt, "session_id": f"b-prompt-{i}"}),
    }


def _exe() -> str:
    found = Path(sys.executable).parent / "retriever"
    return str(found) if found.exists() else (shutil.which("retriever") or "retriever")


def latency_rows(env: dict[str, str], runs: int) -> list[dict[str, Any]]:
    rows = []
    for name, (args, event_of) in _events().items():
        times: list[float] = []
        outputs = 0
        for i in range(runs + 1):  # run 0 warms the page cache, not counted
            payload = json.dumps(event_of(i))
            started = time.perf_counter()
            done = subprocess.run(
                [_exe(), "hook", *args],
                input=payload,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            took = (time.perf_counter() - started) * 1000
            if i:
                times.append(took)
                outputs += bool(done.stdout.strip())
            if done.returncode != 0:
                raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr[-500:]}")
        rows.append(
            {
                "hook": name,
                "runs": runs,
                "p50_ms": round(percentile(times, 50), 1),
                "p95_ms": round(percentile(times, 95), 1),
                "with_output": outputs,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="bench_hooks")
    p.add_argument("--vault", type=Path, default=ROOT / "tests" / "vault")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--model", help="Model2Vec path (default: one made from the vault)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("RETRIEVER_DATABASE_URL", None)
    tokens = token_rows()
    home = Path(tempfile.mkdtemp(prefix="retriever-bench-hooks-"))
    try:
        model = args.model
        if not model:
            from tests.model_factory import build_model

            model = str(build_model(args.vault, home / "model"))
        app = open_app(args.vault.resolve(), home, model)
        app.index()
        env = {
            **os.environ,
            "RETRIEVER_HOME": str(home),
            "RETRIEVER_EMBED_MODEL": model,
            "RETRIEVER_VAULT": str(args.vault.resolve()),
        }
        latency = latency_rows(env, args.runs)
        app.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if args.json:
        print(json.dumps({"tokens": tokens, "latency": latency}, indent=2))
        return
    print_table([tuple(r.values()) for r in tokens], tuple(tokens[0]))
    print()
    print_table([tuple(r.values()) for r in latency], tuple(latency[0]))


if __name__ == "__main__":
    main()
