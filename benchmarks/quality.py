"""Ranking quality: nDCG@10 (and R@10) of the reference and of ours, per mode.

    python -m benchmarks.quality --corpus DIR --model PATH --cases JSONL
    python -m benchmarks.quality --beir DIR --model PATH

A BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv) is first written as a vault of
``<_id>.md`` notes (``# title`` + text) so that both systems index the same notes. Both
are judged at the document level (each note at its best chunk's rank) with ir_measures.
Dendron-style cases: ``relevant`` paths are the judgements; ``absent`` cases (nothing
relevant) are left out of the averages.
"""

from __future__ import annotations

import argparse
import atexit
import csv
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import ir_measures
from ir_measures import R, nDCG

from benchmarks.common import beir_vault, load_cases, open_app, print_table, report
from benchmarks.reference_sqlite import ReferenceIndex

MODES = ("hybrid", "lexical", "semantic")
MEASURES = [nDCG @ 10, R @ 10]
DEPTH = 10

Judged = tuple[dict[str, str], list[Any]]  # (query id -> text, qrels)


def cases_judgements(path: Path) -> Judged:
    queries, qrels = {}, []
    for case in load_cases(path):
        if case.get("relevant"):
            queries[case["id"]] = case["query"]
            qrels += [ir_measures.Qrel(case["id"], p, 1) for p in case["relevant"]]
    return queries, qrels


def beir_judgements(beir: Path) -> Judged:
    with (beir / "queries.jsonl").open(encoding="utf-8") as fh:
        queries = {q["_id"]: q["text"] for q in map(json.loads, fh)}
    with (beir / "qrels.tsv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    qrels = [ir_measures.Qrel(r["query-id"], f"{r['corpus-id']}.md", int(r["score"])) for r in rows]
    judged = {q.query_id for q in qrels if q.relevance > 0}
    return {k: v for k, v in queries.items() if k in judged}, qrels


def our_ranking(app: Any, query: str, mode: str) -> list[str]:
    # Lexical/semantic compare arm to arm (no link-graph lift); hybrid as a user gets it.
    extra = {} if mode == "hybrid" else {"graph": False}
    result = app.search([query], budget_tokens=1200, mode=mode, **extra)
    paths = getattr(result, "ranked_paths", None) or [h.path for h in result.hits]
    return list(dict.fromkeys(paths))[:DEPTH]


def evaluate(rank: Any, queries: dict[str, str], qrels: list[Any]) -> dict[str, dict[str, float]]:
    out = {}
    for mode in MODES:
        run = [  # a judged query missing from the run counts as 0 in ir_measures
            ir_measures.ScoredDoc(qid, path, float(DEPTH - i))
            for qid, text in queries.items()
            for i, path in enumerate(rank(text, mode))
        ]
        scores = ir_measures.calc_aggregate(MEASURES, qrels, run)
        out[mode] = {str(m): round(float(scores.get(m, 0.0)), 4) for m in MEASURES}
    return out


def lead_evaluate(app: Any, args: argparse.Namespace) -> dict[str, Any] | None:
    """The project's own ``retriever.evaluate`` ablations on the same index, if present."""
    try:
        from retriever import evaluate as ev
    except ImportError:
        return None
    cases = ev.load_beir(args.beir)[1] if args.beir else ev.load_cases(args.cases)
    results = ev.evaluate(app, cases, ablate=True)["results"]
    keys = ("ndcg@10", "recall@10", "mrr", "latency_ms")
    return {r["config"]: {k: r.get(k) for k in keys} for r in results}


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-quality-"))
    atexit.register(shutil.rmtree, work, True)  # registered first: runs after pg stops
    if args.beir:
        vault = beir_vault(args.beir, work / "vault")
        queries, qrels = beir_judgements(args.beir)
    else:
        vault = args.corpus.resolve()
        queries, qrels = cases_judgements(args.cases)
    out: dict[str, Any] = {"collection": str(args.beir or args.cases), "queries": len(queries)}
    ref = ReferenceIndex(work / "reference.db", args.model)
    out["ref_build"] = ref.build(vault)
    out["reference"] = evaluate(lambda q, m: ref.search_docs(q, m, DEPTH), queries, qrels)
    ref.close()
    if not args.reference_only:
        app = open_app(vault, args.home or work / "home", args.model, args.database_url)
        app.index()
        out["ours"] = evaluate(lambda q, m: our_ranking(app, q, m), queries, qrels)
        out["ours_evaluate"] = lead_evaluate(app, args)
        app.close()
    return out


def show(r: dict[str, Any]) -> None:
    print(f"{r['collection']}: {r['queries']} judged queries, document-level")
    rows = []
    for mode in MODES:
        for m in map(str, MEASURES):
            ref = r["reference"][mode][m]
            ours = r["ours"][mode][m] if "ours" in r else None
            delta = f"{ours - ref:+.4f}" if ours is not None else ""
            rows.append((mode, m, ours if ours is not None else "-", ref, delta))
    print_table(rows, ("mode", "measure", "ours", "reference", "ours-ref"))
    if r.get("ours_evaluate"):
        print("\nours through retriever.evaluate (its ablations, same index):")
        rows = [
            (name, v["ndcg@10"], v["recall@10"], v["mrr"], (v["latency_ms"] or {}).get("p50"))
            for name, v in r["ours_evaluate"].items()
        ]
        print_table(rows, ("config", "nDCG@10", "R@10", "MRR", "p50 ms"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--cases", type=Path, help="JSONL cases {id, query, relevant} (--corpus)")
    src.add_argument("--beir", type=Path, help="BEIR folder: corpus.jsonl, queries, qrels.tsv")
    ap.add_argument("--corpus", type=Path, help="the vault the cases refer to")
    ap.add_argument("--model", required=True)
    ap.add_argument("--home", type=Path, help="where our index goes (default: temporary)")
    ap.add_argument("--database-url", help="an external Postgres instead of the embedded one")
    ap.add_argument("--reference-only", action="store_true", help="skip ours")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.cases and not args.corpus:
        ap.error("--cases needs --corpus")
    report(run(args), args.json, show)


if __name__ == "__main__":
    main()
