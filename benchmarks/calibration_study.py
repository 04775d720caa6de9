"""Does calibration transfer? Pseudo-query nDCG against real-question nDCG, per candidate.

    python -m benchmarks.calibration_study --home H --model M --vault V --cases CASES.jsonl
    python -m benchmarks.calibration_study --home H --model M --beir DIR

The vault must be indexed already (``retriever index`` / ``retriever eval`` with the same
RETRIEVER_HOME and model). Every candidate ranking of the calibration grid (and the fixed
configurations of the ablation) is scored on the held-back pseudo-queries and on the real
cases, from arms gathered once; the table shows what calibration chose and where the real
questions would have wanted it. A development tool: it reads the library's internals.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from retriever import calibrate as cal
from retriever.app import Retriever
from retriever.config import settings_from
from retriever.evaluate import ABLATIONS, Case, load_beir, load_cases
from retriever.pseudo import make_queries
from retriever.query_words import QueryWords
from retriever.ranking import Arms, Ranking, ranked_docs
from retriever.search import Scope


def _ndcg(docs: list[int], grades: dict[int, int]) -> float:
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(docs[:10]))
    ideal = sorted(grades.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def real_scores(
    app: Retriever, conn: Any, cases: list[Case], words: QueryWords
) -> tuple[list[Arms], list[dict[int, int]]]:
    searcher = app._searcher
    embedder, _ = app.embedder()
    model, _ = searcher.semantic_model(conn, embedder, None)
    ids = dict(conn.execute("SELECT path, id FROM documents").fetchall())
    arms, grades = [], []
    for case in cases:
        vectors = (
            searcher.query_vectors(embedder, case.queries, words) if embedder and model else []
        )
        mode = "hybrid" if model else "lexical"
        arms.append(
            searcher.gather(conn, case.queries, mode, model, vectors, Scope("", {}), app.bm25())
        )
        grades.append({int(ids[p]): g for p, g in case.relevant.items() if p in ids})
    return arms, grades


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--vault")
    ap.add_argument("--cases")
    ap.add_argument("--beir")
    a = ap.parse_args()
    if a.beir:
        _, cases = load_beir(Path(a.beir))
        vault = Path(a.home) / "eval" / Path(a.beir).name / "vault"
        home = Path(a.home) / "eval" / Path(a.beir).name
    else:
        cases, vault, home = load_cases(Path(a.cases)), Path(a.vault), Path(a.home)
    cases = [c for c in cases if c.relevant]
    app = Retriever(settings_from(vault=vault, home=home, embed_model=a.model))
    searcher = app._searcher
    embedder, _ = app.embedder()
    with app.db.connection() as conn:
        model, _ = searcher.semantic_model(conn, embedder, None)
        notes, shared, common, _ = cal.load_notes(conn, cal.MAX_QUERIES)
        queries = make_queries(
            notes,
            limit=cal.MAX_QUERIES,
            shared_names=shared,
            common_headings=common,
            rarity=cal._rarity(conn, notes),
        )
        titles = searcher.titles.get(conn).preload(conn)
        arms = cal.run_arms(
            conn, searcher, queries, embedder=embedder, model=model, bm25=app.bm25()
        )
        walker, prior = searcher.links(conn, Scope("", {}))
        walk = cal.CachedWalk(walker)
        split = {
            s: [i for i, q in enumerate(queries) if q.split == s] for s in ("choose", "report")
        }

        def chooser_of(arm_lists: list[Arms]) -> cal.Chooser:
            bench = cal.Workbench(queries, arm_lists, titles.first_chunk, walk, prior)
            return cal.Chooser(bench, split["choose"], split["report"])

        def content() -> cal.Chooser:
            again = cal.run_arms(
                conn,
                searcher,
                queries,
                embedder=embedder,
                model=model,
                bm25=app.bm25(),
                words="content",
                semantic_only=True,
            )
            return chooser_of([cal.with_semantic(a, c) for a, c in zip(arms, again, strict=True)])

        # The query words as calibration chooses them, for the pseudo and the real queries.
        few = model is None or cal._too_few_to_choose(queries)
        words, _, chooser = cal.query_form(chooser_of(arms), content, forced=None, few=few)
        bench = chooser.bench
        chosen = cal.corrected(cal.choose_ranking(chooser, hybrid=model is not None))
        chosen = chosen.with_(query_words=words)
        real_arms, grades = real_scores(app, conn, cases, words)

        def real(r: Ranking) -> float:
            out = []
            for arms_i, g in zip(real_arms, grades, strict=True):
                copy = arms_i.copy()
                scores = bench.fused(copy, r)
                out.append(_ndcg(ranked_docs(scores, copy.doc_of), g))
            return float(np.mean(out))

        rows = [(r, float(s.mean()), real(r)) for r, s in chooser.seen.items()]
        for config in ABLATIONS:
            if config.ranking is not None:
                r = config.ranking
                rows.append((r, float(chooser.score(r).mean()), real(r)))
        chosen_real = real(chosen)
        refs = {
            "lex": Ranking("lexical", graph_weight=0.0),
            "sem": Ranking("semantic", graph_weight=0.0),
            "lin.5": Ranking("linear", 0.5, graph_weight=0.0),
            "lin1": Ranking("linear", 1.0, graph_weight=0.0),
            "rrf.5": Ranking("rrf", 0.5, graph_weight=0.0),
            "rrf1": Ranking("rrf", 1.0, graph_weight=0.0),
            "rrf2": Ranking("rrf", 2.0, graph_weight=0.0),
        }
        kinds = sorted({q.kind for q in queries})
        print("kind      n   " + " ".join(f"{k:>7}" for k in refs))
        for kind in kinds:
            idx = [i for i, q in enumerate(queries) if q.kind == kind]
            print(
                f"{kind:<8}{len(idx):>4}  "
                + " ".join(f"{bench.ndcg(r, idx).mean():7.3f}" for r in refs.values())
            )
        print(f"{'REAL':<8}{len(cases):>4}  " + " ".join(f"{real(r):7.3f}" for r in refs.values()))
    rows.sort(key=lambda x: -x[2])
    pseudo = np.array([x[1] for x in rows])
    actual = np.array([x[2] for x in rows])
    rank_corr = np.corrcoef(np.argsort(np.argsort(pseudo)), np.argsort(np.argsort(actual)))[0, 1]
    print(f"{len(queries)} pseudo-queries; {len(cases)} real cases; spearman {rank_corr:.2f}")
    print(
        f"chosen {chosen.label()}: real {chosen_real:.4f}; best real {rows[0][0].label()} {rows[0][2]:.4f}"
    )
    for r, p, q in rows[:40]:
        print(f"  {r.label():<48} pseudo {p:.4f}  real {q:.4f}")
    app.close()


if __name__ == "__main__":
    main()
