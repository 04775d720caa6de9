"""Index benchmark: full build, no-op refresh, one-edited-file refresh; ours vs the reference.

    python -m benchmarks.bench_index --corpus DIR [--model PATH] [--home DIR] [--json]

The corpus is copied to a temporary folder first (one note gets edited). Our index goes to a
fresh home (a temporary one by default); the SQLite reference is built in a child process
on the same copy so that its memory is measured apart from ours.
"""

from __future__ import annotations

import argparse
import atexit
import json
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.common import (
    MemorySampler,
    copy_corpus,
    hwm_rss_mb,
    open_app,
    print_table,
    report,
    self_peak_rss_mb,
    table_sizes_mb,
)
from benchmarks.reference_sqlite import ReferenceIndex


def _reference_build(db_path: str, model: str, vault: str) -> dict[str, Any]:
    ref = ReferenceIndex(db_path, model)
    stats: dict[str, Any] = ref.build(vault)
    ref.close()
    stats["peak_rss_mb"] = hwm_rss_mb()
    stats["cpu_s"] = round(_own_cpu_s(), 1)
    return stats


def _own_cpu_s() -> float:
    """CPU seconds of this process and every process under it, alive or reaped: the index
    workers are the fork server's children, which getrusage(RUSAGE_CHILDREN) never sees."""
    try:
        import psutil
    except ImportError:
        me = resource.getrusage(resource.RUSAGE_SELF)
        return me.ru_utime + me.ru_stime
    return _tree_cpu_s(psutil.Process())


def _tree_cpu_s(root: Any) -> float:
    import psutil

    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def _server_cpu_s(pgdata: Path) -> float | None:
    """CPU seconds the embedded server has used so far (postmaster, live backends, and the
    backends that have exited): on a shared machine, work done is steadier than wall time."""
    try:
        import psutil

        return _tree_cpu_s(psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0])))
    except (ImportError, OSError, ValueError, IndexError):
        return None


def run(corpus: Path, model: str, home: Path | None, database_url: str | None) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-index-"))
    atexit.register(shutil.rmtree, work, True)  # registered first, so it runs after pg stops
    vault, t = work / "vault", time.perf_counter()
    copy_corpus(corpus, vault)
    out: dict[str, Any] = {"corpus": str(corpus), "copy_s": round(time.perf_counter() - t, 2)}
    home = home or work / "home"
    if home.exists() and any(home.iterdir()):
        raise SystemExit(f"--home {home} is not empty: the benchmark needs a fresh one")

    app = open_app(vault, home, model, database_url)
    t = time.perf_counter()
    app.db  # noqa: B018 - start (or connect to) the server and migrate, timed apart
    out["db_start_s"] = round(time.perf_counter() - t, 2)
    stages: dict[str, list[float]] = {}

    started = time.perf_counter()

    def progress(stage: str, done: int, total: int) -> None:
        now = time.perf_counter() - started
        stages.setdefault(stage, [now, now])[1] = now

    cpu0, pg0 = _own_cpu_s(), _server_cpu_s(home / "pgdata")
    with MemorySampler(home / "pgdata") as mem:
        started = time.perf_counter()
        report = app.index(progress=progress)
        out["full_s"] = round(time.perf_counter() - started, 2)
    pg1 = _server_cpu_s(home / "pgdata")
    out["cpu_s"] = round(_own_cpu_s() - cpu0, 1)  # us and the prepare workers
    out["server_cpu_s"] = round(pg1 - pg0, 1) if pg0 is not None and pg1 is not None else None
    out["phases_s"] = report.phases
    # Where the time went: until the last note is written, embedding, and the rest
    # (link resolution, passage GC before embedding; the HNSW build after it).
    out["stages_s"] = {k: [round(a, 1), round(b, 1)] for k, (a, b) in stages.items()}
    out["postgres_peak_mb"] = mem.postgres_peak_mb if mem.available and not database_url else None
    out["tree_peak_mb"] = mem.tree_peak_mb if mem.available else None
    out.update(
        files=report.files_seen,
        chunks=report.chunks_added,
        passages_embedded=report.passages_embedded,
        errors=len(report.errors),
    )
    out["files_per_s"] = round(report.files_seen / out["full_s"], 1)
    out["python_peak_mb"] = self_peak_rss_mb()  # getrusage: self + waited-for children
    out["python_hwm_mb"] = hwm_rss_mb()
    with app.db.connection() as conn:
        row = conn.execute(
            "SELECT pg_database_size(current_database()),"
            " (SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'embeddings_hnsw%%')"
        ).fetchone()
        conn.commit()
    out["db_mb"], out["hnsw_index"] = round(row[0] / 2**20, 1), bool(row[1])
    with app.db.connection() as conn:
        out["tables_mb"] = table_sizes_mb(conn)
        conn.commit()

    t = time.perf_counter()
    noop = app.index()
    out["noop_refresh_s"] = round(time.perf_counter() - t, 3)
    out["noop_changed"] = noop.files_changed
    notes = sorted(vault.rglob("*.md"))
    edited = notes[len(notes) // 2]
    with edited.open("a", encoding="utf-8") as fh:
        fh.write("\nAn extra line appended by the benchmark, with a new word: zyzzogeton.\n")
    t = time.perf_counter()
    edit = app.index()
    out["edit_refresh_s"] = round(time.perf_counter() - t, 3)
    out["edit_changed"], out["edit_embedded"] = edit.files_changed, edit.passages_embedded
    app.close()
    if not database_url:  # what a user waits for: the whole `retriever index` command
        out.update(_whole_commands(vault, home, model, edited))

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx) as pool:
        ref = pool.submit(_reference_build, str(work / "ref.db"), model, str(vault)).result()
    out["reference"] = ref
    out["ratio_full"] = round(out["full_s"] / ref["seconds"], 2)
    return out


def _retriever(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    exe = Path(sys.executable).parent / "retriever"
    full_env = dict(os.environ, RETRIEVER_HOME=str(home), **env)
    return subprocess.run([str(exe), *args], env=full_env, capture_output=True, timeout=600)


def _command_s(vault: Path, home: Path, model: str, service: str) -> float:
    """Wall time of one `retriever index VAULT` process (start-up, server, scan, write);
    ``service``: RETRIEVER_SERVICE (off: all in this process; auto: the resident one,
    which must be the one that answered)."""
    t = time.perf_counter()
    done = _retriever(
        home, "index", str(vault), "--json", RETRIEVER_EMBED_MODEL=model, RETRIEVER_SERVICE=service
    )
    took = round(time.perf_counter() - t, 3)
    if done.returncode not in (0, 1):  # 1: degraded, still a full answer
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise RuntimeError(f"retriever index failed (exit {done.returncode}): {tail}")
    via = json.loads(done.stdout).get("via")
    if via != ("process" if service == "off" else "service"):
        raise RuntimeError(f"RETRIEVER_SERVICE={service}, but the {via} answered")
    return took


def _whole_commands(vault: Path, home: Path, model: str, edited: Path) -> dict[str, float]:
    """No-op and one-edit `retriever index` commands, in their own process and answered by
    a warm resident service (its first call, which starts it, reported apart)."""

    def edit() -> None:
        with edited.open("a", encoding="utf-8") as fh:
            fh.write("\nAnother line appended by the benchmark.\n")

    out = {"noop_command_s": _command_s(vault, home, model, "off")}
    edit()
    out["edit_command_s"] = _command_s(vault, home, model, "off")
    out["service_first_call_s"] = _command_s(vault, home, model, "auto")
    out["noop_service_s"] = _command_s(vault, home, model, "auto")
    edit()
    out["edit_service_s"] = _command_s(vault, home, model, "auto")
    _retriever(home, "serve", "--stop")
    return out


def _ratio(ours: object, ref: object) -> object:
    if isinstance(ours, int | float) and isinstance(ref, int | float) and ref:
        return round(ours / ref, 2)
    return ""


def show(r: dict[str, Any]) -> None:
    ref = r["reference"]
    pairs: list[tuple[str, object, object]] = [
        ("files", r["files"], ref["files"]),
        ("chunks", r["chunks"], ref["chunks"]),
        ("full index (s)", r["full_s"], ref["seconds"]),
        ("files/s", r["files_per_s"], round(ref["files"] / ref["seconds"], 1)),
        ("full index CPU, us + workers (s)", r.get("cpu_s", "-"), ref.get("cpu_s", "-")),
        (
            "full index CPU, + postgres (s)",
            round(r["cpu_s"] + (r.get("server_cpu_s") or 0), 1) if "cpu_s" in r else "-",
            ref.get("cpu_s", "-"),
        ),
        ("peak RSS python (MB)", r["python_peak_mb"], ref["peak_rss_mb"]),
        ("peak RSS python, own (MB)", r["python_hwm_mb"], ref["peak_rss_mb"]),
        ("peak PSS us + workers (MB)", r["tree_peak_mb"], ref["peak_rss_mb"]),
        ("peak PSS postgres (MB)", r["postgres_peak_mb"], "-"),
        ("database size (MiB)", r["db_mb"], round(ref["db_bytes"] / 2**20, 1)),
        ("no-op refresh, in process (s)", r["noop_refresh_s"], "-"),
        ("1 edited file refresh, in process (s)", r["edit_refresh_s"], "-"),
        ("no-op refresh, whole command (s)", r.get("noop_command_s", "-"), "-"),
        ("1 edited file, whole command (s)", r.get("edit_command_s", "-"), "-"),
        ("first call, starts the service (s)", r.get("service_first_call_s", "-"), "-"),
        ("no-op refresh, warm service (s)", r.get("noop_service_s", "-"), "-"),
        ("1 edited file, warm service (s)", r.get("edit_service_s", "-"), "-"),
    ]
    rows: list[tuple[object, ...]] = [(k, a, b, _ratio(a, b)) for k, a, b in pairs]
    print(f"corpus {r['corpus']}  (db start {r['db_start_s']} s, HNSW index: {r['hnsw_index']})")
    print_table(rows, ("metric", "ours", "reference", "ours/ref"))
    print("stage spans (s from start):", r["stages_s"])
    if "phases_s" in r:
        print("index phases (s):", r["phases_s"], "(calibration is the rest of the full index)")
    print(f"edit refresh re-indexed {r['edit_changed']} file(s), embedded {r['edit_embedded']}")
    print("per table (MiB):")
    for table, sizes in r.get("tables_mb", {}).items():
        if sizes["total"] >= 0.1:
            parts = ", ".join(f"{k} {v}" for k, v in sizes.items() if k != "total")
            print(f"  {table}: {sizes['total']} ({parts})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--model", default="minishlab/potion-base-8M")
    ap.add_argument("--home", type=Path, help="fresh folder for our index (default: temporary)")
    ap.add_argument("--database-url", help="an external Postgres instead of the embedded one")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    report(run(args.corpus.resolve(), args.model, args.home, args.database_url), args.json, show)


if __name__ == "__main__":
    main()
