"""Helpers shared by the benchmarks: our app, queries, timing, memory, BEIR vaults."""

from __future__ import annotations

import json
import random
import re
import resource
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.reference_sqlite import split_note

_WORD = re.compile(r"[A-Za-z][\w'-]*")
_MARKUP = re.compile(r"\[([^\]]*)\]\([^)]*\)|[*_`#>|\\]")


def open_app(corpus: Path, home: Path, model: str, database_url: str | None = None) -> Any:
    """Our library API with on-demand freshness off (benchmarks index explicitly)."""
    from retriever.app import Retriever
    from retriever.config import Settings

    settings = Settings(
        vault=corpus, home=home, embed_model=model, database_url=database_url, fresh_search=False
    )
    return Retriever(settings)


def derive_queries(vault: Path, n: int, seed: int = 7) -> list[str]:
    """Deterministic queries from the corpus: a random note's title or first sentence,
    shortened by dropping words (so neither side gets an exact-string match for free)."""
    rng = random.Random(seed)
    paths = [p.relative_to(vault).as_posix() for p in sorted(vault.rglob("*.md"))]
    queries: list[str] = []
    for path in rng.sample(paths, min(len(paths), n * 2)):
        chunks = split_note(path, (vault / path).read_text("utf-8", errors="replace"))
        if not chunks:
            continue
        source = chunks[0].title if len(queries) % 2 == 0 else _first_sentence(chunks)
        words = _WORD.findall(_MARKUP.sub(r"\1", source))
        if len(words) > 3:
            drop = set(rng.sample(range(len(words)), len(words) // 4))
            words = [w for i, w in enumerate(words) if i not in drop][:12]
        if words:
            queries.append(" ".join(words))
        if len(queries) == n:
            break
    return queries


def _first_sentence(chunks: list[Any]) -> str:
    for chunk in chunks:
        for line in chunk.body.splitlines():
            if len(line.split()) >= 5 and not line.lstrip().startswith(("`", "|", "<", "-", "*")):
                return re.split(r"(?<=[.!?])\s", line.strip())[0]
    return chunks[0].title


def load_cases(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (no interpolation), in the values' unit."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def hwm_rss_mb() -> float:
    """This process's own peak RSS since it started (VmHWM; unlike ru_maxrss it is reset
    by exec, so a spawned child does not inherit its parent's peak)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def self_peak_rss_mb() -> float:
    """Peak RSS of this process plus its waited-for children (ru_maxrss is in KiB on Linux)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round((own + kids) / 1024, 1)


class MemorySampler:
    """Samples peak summed PSS of the embedded server (postmaster + backends) and of this
    process's own tree (us + index workers) while running.

    The server is not our child (pg_ctl daemonises it), so getrusage never sees it; PSS
    splits shared pages (e.g. shared buffers) between processes, so sums are not inflated."""

    def __init__(self, pgdata: Path | None, interval: float = 0.5) -> None:
        self.pgdata, self.interval = pgdata, interval
        self.postgres_peak_mb = 0.0
        self.tree_peak_mb = 0.0
        self.available = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> MemorySampler:
        try:
            import psutil  # noqa: F401
        except ImportError:
            self.available = False
            return self
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    @staticmethod
    def _pss_mb(root: Any) -> float:
        import psutil

        total = 0
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0.0
        for proc in procs:
            try:
                info = proc.memory_full_info()
                total += getattr(info, "pss", info.rss)
            except psutil.Error:
                pass
        return total / 2**20

    def _postmaster(self) -> Any:
        import psutil

        try:
            assert self.pgdata is not None
            return psutil.Process(int((self.pgdata / "postmaster.pid").read_text().split()[0]))
        except (AssertionError, OSError, ValueError, IndexError, psutil.Error):
            return None

    def _loop(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop.is_set():
            self.tree_peak_mb = max(self.tree_peak_mb, round(self._pss_mb(me), 1))
            pm = self._postmaster()
            if pm is not None:
                self.postgres_peak_mb = max(self.postgres_peak_mb, round(self._pss_mb(pm), 1))
            self._stop.wait(self.interval)


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def copy_corpus(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, dirs_exist_ok=True)
    return dst


def beir_vault(beir_dir: Path, vault: Path) -> Path:
    """Write a BEIR corpus as one ``<_id>.md`` note per document (``# title`` + text)."""
    vault.mkdir(parents=True, exist_ok=True)
    with (beir_dir / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            title = (doc.get("title") or "").strip() or str(doc["_id"])
            body = (doc.get("text") or "").strip()
            (vault / f"{doc['_id']}.md").write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
    return vault


def print_table(rows: list[tuple[object, ...]], header: tuple[str, ...]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format(*header))
    print(line.format(*("-" * w for w in widths)))
    for row in rows:
        print(line.format(*(str(x) for x in row)))


def table_sizes_mb(conn: Any) -> dict[str, dict[str, float]]:
    """Per table of the public schema: heap, TOAST and each index, in MiB (largest first)."""
    rows = conn.execute(
        """
        SELECT c.relname, pg_relation_size(c.oid),
               coalesce(pg_total_relation_size(c.reltoastrelid), 0)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind = 'r'
        """
    ).fetchall()
    out: dict[str, dict[str, float]] = {}
    for name, heap, toast in rows:
        entry = {"heap": round(heap / 2**20, 1), "toast": round(toast / 2**20, 1)}
        for idx, size in conn.execute(
            "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index"
            " WHERE indrelid = %s::regclass",
            (name,),
        ).fetchall():
            entry[f"idx {idx}"] = round(size / 2**20, 1)
        entry["total"] = round(sum(entry.values()), 1)
        out[name] = entry
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["total"]))


def report(result: dict[str, Any], as_json: bool, show: Callable[[dict[str, Any]], None]) -> None:
    """Print a benchmark's result: JSON on request, else its table."""
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        show(result)
