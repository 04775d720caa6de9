"""Search latency, ours vs the reference, per mode; plus the HNSW recall of our index.

    python -m benchmarks.bench_search --corpus DIR --model PATH [--queries 200]
        [--home DIR] [--cases JSONL] [--json]

Ours and the reference answer the same query back to back (alternating which goes first),
so the machine's noise hits both alike. With ``--home`` the index (and ``reference.db``
beside it) is reused when present, else built; without it both go to a temporary folder.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import derive_queries, load_cases, open_app, percentile, print_table, report
from benchmarks.reference_sqlite import ReferenceIndex
from retriever.vector import EF_SEARCH

# (row name, our search options, reference mode). Our lexical/semantic rows switch the
# link-graph arm off so they compare arm to arm; "hybrid" is what a user gets by default.
CONFIGS: list[tuple[str, dict[str, Any], str]] = [
    ("hybrid", {"mode": "hybrid"}, "hybrid"),
    ("hybrid-nograph", {"mode": "hybrid", "graph": False}, "hybrid"),
    ("lexical", {"mode": "lexical", "graph": False}, "lexical"),
    ("semantic", {"mode": "semantic", "graph": False}, "semantic"),
]
WARMUP = 10
RECALL_K = 30


def build_queries(corpus: Path, n: int, cases: Path | None) -> list[str]:
    """The cases' queries first (if any), topped up with queries derived from the corpus;
    all distinct, so that no side is served from a cache."""
    queries = list(dict.fromkeys(c["query"] for c in load_cases(cases))) if cases else []
    for q in derive_queries(corpus, n * 2):
        if len(queries) >= n:
            break
        if q not in queries:
            queries.append(q)
    return queries[:n]


def _forget_query_vectors(app: Any) -> None:
    """Empty our query-vector cache so one row does not profit from the previous one."""
    searcher = getattr(app, "_searcher", None)
    if searcher is not None and hasattr(searcher, "vectors"):
        searcher.vectors = type(searcher.vectors)()


def time_configs(app: Any, ref: ReferenceIndex, queries: list[str], warmup: list[str]) -> dict:
    out: dict[str, Any] = {}
    for name, opts, ref_mode in CONFIGS:
        for q in warmup:  # caches, plans, model pages; not among the timed queries
            app.search([q], budget_tokens=1200, **opts)
            ref.search(q, ref_mode)
        _forget_query_vectors(app)
        ours: list[float] = []
        theirs: list[float] = []
        for i, q in enumerate(queries):
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                t = time.perf_counter()
                if side == 0:
                    app.search([q], budget_tokens=1200, **opts)
                else:
                    ref.search(q, ref_mode)
                (ours if side == 0 else theirs).append((time.perf_counter() - t) * 1000)
        row: dict[str, Any] = {"n": len(queries), "ref_mode": ref_mode}
        for side, values in (("ours", ours), ("ref", theirs)):
            row[f"{side}_p50_ms"] = round(percentile(values, 50), 2)
            row[f"{side}_p95_ms"] = round(percentile(values, 95), 2)
            row[f"{side}_max_ms"] = round(max(values), 2)
        row["ratio_p50"] = round(row["ours_p50_ms"] / row["ref_p50_ms"], 2)
        row["ratio_p95"] = round(row["ours_p95_ms"] / row["ref_p95_ms"], 2)
        out[name] = row
    return out


def hnsw_recall(app: Any, queries: list[str], n: int = 100) -> dict[str, Any]:
    """recall@30 of the HNSW index (whole-passage vectors) against an exact scan, at
    ef_search 40, 100, 200, 300 and the product's (``vector.EF_SEARCH``)."""
    embedder, error = app.embedder()
    if embedder is None:
        return {"skipped": f"no embedder: {error}"}
    with app.db.connection() as conn:
        row = conn.execute(
            "SELECT id, dim FROM models WHERE fingerprint = %s", (embedder.fingerprint,)
        ).fetchone()
        name = f"embeddings_hnsw_m{row[0]}" if row else ""
        exists = row and conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        conn.commit()
        if not exists or not exists[0]:
            return {"skipped": "no HNSW index (built from 20,000 vectors up)"}
        model, dim = int(row[0]), int(row[1])
        sql = (
            f"SELECT hash FROM embeddings WHERE model = {model} AND part = 0 "
            f"ORDER BY (vec::halfvec({dim})) <=> %s::halfvec({dim}) LIMIT {RECALL_K}"
        )
        vectors = np.asarray(embedder.embed(queries[:n]), dtype=np.float32)
        qs = [v.tolist() for v in vectors]
        plan = conn.execute("EXPLAIN " + sql, (str(qs[0]),)).fetchall()
        out: dict[str, Any] = {"queries": len(qs), "index_used": name in str(plan)}
        # Plain SET/RESET (SET LOCAL inside a savepoint would outlive it), and prepare=False:
        # a prepared statement would keep a plan made under enable_indexscan=off.
        conn.execute("SET enable_indexscan = off")
        exact = [{r[0] for r in conn.execute(sql, (str(q),), prepare=False)} for q in qs]
        conn.execute("RESET enable_indexscan")
        for ef in sorted({40, 100, 200, 300, EF_SEARCH}):
            conn.execute(f"SET hnsw.ef_search = {ef}")
            t = time.perf_counter()
            got = [{r[0] for r in conn.execute(sql, (str(q),), prepare=False)} for q in qs]
            ms = (time.perf_counter() - t) * 1000 / len(qs)
            hits = sum(len(g & e) for g, e in zip(got, exact, strict=True))
            out[f"recall@{RECALL_K}_ef{ef}"] = round(hits / sum(len(e) for e in exact), 4)
            out[f"ms_per_query_ef{ef}"] = round(ms, 2)
        conn.execute("RESET hnsw.ef_search")
        conn.commit()
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.home:
        home = args.home
    else:
        home = Path(tempfile.mkdtemp(prefix="bench-search-"))
        atexit.register(shutil.rmtree, home, True)  # registered first: runs after pg stops
    corpus = args.corpus.resolve()
    app = open_app(corpus, home, args.model, args.database_url)
    ref = ReferenceIndex(home / "reference.db", args.model)
    out: dict[str, Any] = {"corpus": str(corpus)}
    t = time.perf_counter()
    report = app.index()  # a no-op when --home already holds an up-to-date index
    out["ours_index_s"] = round(time.perf_counter() - t, 2)
    out["ours_files_changed"] = report.files_changed
    out["ref_build"] = "reused" if ref.is_built() else ref.build(corpus)
    queries = build_queries(corpus, args.queries + WARMUP, args.cases)
    queries, warmup = queries[:-WARMUP], queries[-WARMUP:]
    out["queries"] = len(queries)
    out["latency"] = time_configs(app, ref, queries, warmup)
    out["hnsw"] = hnsw_recall(app, queries)
    app.close()
    ref.close()
    return out


def show(r: dict[str, Any]) -> None:
    built = r["ref_build"]
    ref = built if built == "reused" else f"{built['seconds']} s"
    print(f"corpus {r['corpus']}: {r['queries']} queries per row")
    print(f"index: ours {r['ours_index_s']} s (files changed {r['ours_files_changed']}), ref {ref}")
    rows = [
        (
            mode,
            v["ours_p50_ms"],
            v["ref_p50_ms"],
            v["ratio_p50"],
            v["ours_p95_ms"],
            v["ref_p95_ms"],
            v["ratio_p95"],
        )
        for mode, v in r["latency"].items()
    ]
    print_table(rows, ("ours", "ours p50", "ref p50", "ratio", "ours p95", "ref p95", "ratio"))
    print("latencies in ms, ratio = ours/reference")
    print("HNSW:", ", ".join(f"{k}={v}" for k, v in r["hnsw"].items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--home", type=Path, help="reuse/keep our index and reference.db here")
    ap.add_argument("--cases", type=Path, help="JSONL with a 'query' field per line")
    ap.add_argument("--database-url", help="an external Postgres instead of the embedded one")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    report(run(args), args.json, show)


if __name__ == "__main__":
    main()
