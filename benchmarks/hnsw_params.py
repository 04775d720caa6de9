"""HNSW parameters, measured: index size, build time and recall@30 against an exact scan.

    python -m benchmarks.hnsw_params --home DIR --corpus DIR --model PATH [--params 16:64,8:32]

Builds each (m, ef_construction) index in turn on an existing index's embeddings (the one
in --home, built by bench_index/bench_search) and drops it again. The product's own HNSW
index is dropped for the exact scan inside one transaction that is rolled back at the end:
the home keeps its index (no 20 s rebuild on the next index run), and searches on that home
wait for the benchmark instead of running without it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import psycopg

from benchmarks.common import derive_queries
from retriever.db import start_embedded, with_dbname
from retriever.embed import load_embedder

K = 30


def _database(home: Path) -> str:
    uri = start_embedded(home)
    with psycopg.connect(uri, autocommit=True) as conn:
        row = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'vault%'").fetchone()
    assert row, "no vault database in --home"
    return with_dbname(uri, row[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--params", default="16:64,12:48,8:32,16:32")
    ap.add_argument("--ef-search", default="100,200,300")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--workers", type=int, default=0, help="max_parallel_maintenance_workers")
    args = ap.parse_args()
    embedder = load_embedder(args.model)
    queries = derive_queries(args.corpus, args.queries)
    vectors = [str(v.tolist()) for v in np.asarray(embedder.embed(queries), dtype=np.float32)]
    with (
        psycopg.connect(_database(args.home)) as conn,
        conn.transaction(force_rollback=True),
    ):
        model, dim = conn.execute("SELECT id, dim FROM models LIMIT 1").fetchone()  # type: ignore[misc]
        expr = f"(vec::halfvec({dim}))"
        sql = (
            f"SELECT hash FROM embeddings WHERE model = {model} ORDER BY {expr} <=> "
            f"%s::halfvec({dim}) LIMIT {K}"
        )
        for (name,) in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'embeddings_hnsw%%'"
        ).fetchall():
            conn.execute(f"DROP INDEX {name}")
        exact = [{r[0] for r in conn.execute(sql, (v,))} for v in vectors]
        conn.execute("SET LOCAL maintenance_work_mem = '512MB'")
        conn.execute(f"SET LOCAL max_parallel_maintenance_workers = {args.workers}")
        for spec in args.params.split(","):
            m, efc = (int(x) for x in spec.split(":"))
            t = time.perf_counter()
            conn.execute(
                f"CREATE INDEX embeddings_hnsw_test ON embeddings USING hnsw ({expr} "
                f"halfvec_cosine_ops) WITH (m = {m}, ef_construction = {efc}) "
                f"WHERE model = {model}"
            )
            built = time.perf_counter() - t
            size = conn.execute("SELECT pg_relation_size('embeddings_hnsw_test')").fetchone()[0]  # type: ignore[index]
            out = [f"m={m} ef_construction={efc}: build {built:.1f} s, {size / 2**20:.1f} MiB"]
            for ef in (int(x) for x in args.ef_search.split(",")):
                conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                t = time.perf_counter()
                got = [{r[0] for r in conn.execute(sql, (v,))} for v in vectors]
                ms = (time.perf_counter() - t) * 1000 / len(vectors)
                hits = sum(len(g & e) for g, e in zip(got, exact, strict=True))
                out.append(f"ef{ef} recall@{K}={hits / sum(len(e) for e in exact):.4f} {ms:.1f} ms")
            print("; ".join(out), flush=True)
            conn.execute("DROP INDEX embeddings_hnsw_test")


if __name__ == "__main__":
    main()
