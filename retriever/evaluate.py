"""Retrieval evaluation: JSONL cases or a BEIR folder, metrics via ir-measures.

Reports nDCG@10, Recall@10, MRR, Hit@1/3, citation hit rate, absence detection (share of
unanswerable cases flagged vs answerable ones wrongly flagged), per kind, and latency.
``ablate`` runs every arm and fusion choice in one run so they are compared side by side.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ir_measures
from ir_measures import RR, R, Success, nDCG

from retriever.app import Retriever
from retriever.feedback import Policy
from retriever.ranking import Ranking
from retriever.search import SearchResult

MEASURES = [nDCG @ 10, R @ 10, RR, Success @ 1, Success @ 3]
NAMES = {
    "nDCG@10": "ndcg@10",
    "R@10": "recall@10",
    "RR": "mrr",
    "Success@1": "hit@1",
    "Success@3": "hit@3",
}


@dataclass(slots=True)
class Case:
    id: str
    queries: list[str]
    relevant: dict[str, int]  # path -> grade
    lines: dict[str, tuple[int, int]] = field(default_factory=dict)
    kind: str = "default"


@dataclass(frozen=True, slots=True)
class Config:
    name: str
    mode: str = "hybrid"
    ranking: Ranking | None = None  # fixed; None: the calibrated ranking
    overrides: tuple[tuple[str, float | str], ...] = ()  # over the calibrated ranking
    feedback: Policy | None = None  # query feedback; None: as the settings say


_FIXED = Ranking("rrf", 1.0, 60.0, title_weight=0.0, graph_weight=0.0)
CALIBRATED = Config("calibrated")
ABLATIONS = [
    Config("lexical", mode="lexical", ranking=Ranking("lexical", graph_weight=0.0)),
    Config("semantic", mode="semantic", ranking=Ranking("semantic", graph_weight=0.0)),
    Config("hybrid-linear", ranking=Ranking("linear", 0.5, graph_weight=0.0)),
    Config("hybrid-rrf60", ranking=_FIXED),
    Config("hybrid-rrf30", ranking=_FIXED.with_(rrf_k=30.0)),
    Config("hybrid-interleave", ranking=Ranking("interleave", 2.0, graph_weight=0.0)),
    Config("hybrid-linear+graph", ranking=Ranking("linear", 0.5, graph_weight=1.0)),
    Config("hybrid-rrf60+graph", ranking=_FIXED.with_(graph_weight=1.0)),
    Config("hybrid-rrf60+title", ranking=_FIXED.with_(title_weight=0.5)),
    Config("hybrid-rrf60+title+graph", ranking=_FIXED.with_(title_weight=0.5, graph_weight=0.5)),
    CALIBRATED,
    Config("calibrated-title", overrides=(("title_weight", 0.0),)),
    Config("calibrated-graph", overrides=(("graph_weight", 0.0),)),
    Config("calibrated-2nd-passage", overrides=(("second_passage", 0.0),)),
    Config("calibrated-prior", overrides=(("link_prior", 0.0),)),
    Config("calibrated-feedback", feedback="off"),
    Config("calibrated-content-words", overrides=(("query_words", "all"),)),
    # What a search answers while the model is down: the lexical calibration and absence.
    Config("calibrated-lexical", mode="lexical"),
]


def load_cases(path: Path) -> list[Case]:
    """The cases of a JSONL file, one object per line; a malformed line is a ValueError
    that names the file, the line and what is wrong with it."""
    cases: list[Case] = []
    for n, raw in _jsonl_values(path):
        try:
            cases.append(_case(raw, n))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path.name}:{n}: {exc}") from None
    if not cases:
        raise ValueError(f"{path.name} holds no cases (one JSON object per line)")
    return cases


def _case(raw: object, n: int) -> Case:
    if not isinstance(raw, dict):
        raise ValueError('each line must be a JSON object like {"query": "...", "relevant": [...]}')
    query = raw.get("query") or raw.get("queries")
    queries = [query] if isinstance(query, str) else query
    if not isinstance(queries, list) or not queries or not all(isinstance(q, str) for q in queries):
        raise ValueError('"query" must be a string (or "queries" a list of strings)')
    rel = raw.get("relevant") or []
    if isinstance(rel, list) and all(isinstance(p, str) for p in rel):
        relevant = {p: 1 for p in rel}
    elif isinstance(rel, dict) and all(isinstance(v, int) for v in rel.values()):
        relevant = {str(k): int(v) for k, v in rel.items()}
    else:
        raise ValueError('"relevant" must be a list of paths or an object of path -> grade')
    spans = raw.get("lines") or {}
    if not isinstance(spans, dict) or not all(_is_span(v) for v in spans.values()):
        raise ValueError('"lines" must be an object of path -> [first line, last line]')
    lines = {str(k): (int(v[0]), int(v[1])) for k, v in spans.items()}
    kind = raw.get("kind") or ("absent" if not relevant else "default")
    return Case(str(raw.get("id", n)), queries, relevant, lines, str(kind))


def _is_span(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in value)
    )


def load_beir(folder: Path) -> tuple[dict[str, tuple[str, str]], list[Case]]:
    """(corpus id -> (title, text), cases) from a BEIR folder."""
    corpus: dict[str, tuple[str, str]] = {}
    for n, doc in _jsonl(folder / "corpus.jsonl"):
        if not isinstance(doc.get("_id"), str | int):
            raise ValueError(f'corpus.jsonl:{n}: needs an "_id"')
        corpus[str(doc["_id"])] = (str(doc.get("title") or ""), str(doc.get("text") or ""))
    queries: dict[str, str] = {}
    for n, q in _jsonl(folder / "queries.jsonl"):
        if not isinstance(q.get("_id"), str | int) or not isinstance(q.get("text"), str):
            raise ValueError(f'queries.jsonl:{n}: needs an "_id" and a "text"')
        queries[str(q["_id"])] = q["text"]
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for n, line in enumerate((folder / "qrels.tsv").read_text().splitlines()):
        parts = line.split("\t") if "\t" in line else line.split()
        if not parts or (n == 0 and not parts[-1].lstrip("-").isdigit()):
            continue  # a blank line, the header
        if len(parts) < 3 or not parts[-1].lstrip("-").isdigit():
            raise ValueError(f"qrels.tsv:{n + 1}: needs query-id, corpus-id and a score")
        qid, did, score = parts[0], parts[1], int(parts[-1])
        if score > 0:
            qrels[qid][beir_note_name(did)] = score
    cases = [
        Case(qid, [queries[qid]], rel, kind="beir") for qid, rel in qrels.items() if qid in queries
    ]
    if not cases:
        raise ValueError("no query of queries.jsonl has a positive judgement in qrels.tsv")
    return corpus, cases


def _jsonl_values(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, value) of each non-blank line of a JSONL file."""
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path.name}:{n}: not JSON ({exc.msg})") from exc


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line of a JSONL file of objects."""
    for n, value in _jsonl_values(path):
        if not isinstance(value, dict):
            raise ValueError(f"{path.name}:{n}: each line must be a JSON object")
        yield n, value


_SAFE_NAME_CHARS = frozenset("-_,()' ")


def beir_note_name(doc_id: str) -> str:
    """The note file of a BEIR document id: ids may hold ``/`` or ``:`` (DBpedia-Entity),
    so anything unsafe in a file name, and ``%`` itself, is percent-encoded (reversible
    with :func:`beir_doc_id`). Dots are kept except a leading one (hidden file)."""
    out = []
    for i, ch in enumerate(doc_id):
        if ch.isalnum() or ch in _SAFE_NAME_CHARS or (ch == "." and i > 0):
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
    return "".join(out) + ".md"


def beir_doc_id(note_name: str) -> str:
    """The BEIR document id back from its note file name."""
    from urllib.parse import unquote

    return unquote(note_name.removesuffix(".md"), errors="strict")


def write_beir_vault(corpus: dict[str, tuple[str, str]], vault: Path) -> None:
    """Materialise a BEIR corpus as notes (``<id>.md`` with the title as H1)."""
    vault.mkdir(parents=True, exist_ok=True)
    for doc_id, (title, text) in corpus.items():
        path = vault / beir_note_name(doc_id)
        body = f"# {title.strip() or doc_id}\n\n{text.strip()}\n"
        if not path.exists() or path.read_text(encoding="utf-8") != body:
            path.write_text(body, encoding="utf-8")


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def run_config(
    app: Retriever, cases: Sequence[Case], config: Config, budget: int
) -> dict[str, Any]:
    qrels = [ir_measures.Qrel(c.id, p, g) for c in cases for p, g in c.relevant.items()]
    run: list[ir_measures.ScoredDoc] = []
    latencies: list[float] = []
    per_case: dict[str, dict[str, Any]] = {}
    for case in cases:
        started = time.perf_counter()
        result = app.search(
            case.queries,
            budget_tokens=budget,
            mode=config.mode,
            ranking=config.ranking,
            overrides=dict(config.overrides),
            fresh=False,
            feedback=config.feedback,
        )
        latencies.append((time.perf_counter() - started) * 1000)
        for rank, path in enumerate(result.ranked_paths[:100], start=1):
            run.append(ir_measures.ScoredDoc(case.id, path, 1.0 / rank))
        per_case[case.id] = _case_outcome(case, result)
    metrics = _answer_metrics(cases, qrels, run, per_case)
    metrics["latency_ms"] = {
        "p50": round(statistics.median(latencies), 2),
        "p95": round(_percentile(latencies, 95), 2),
    }
    metrics["modes_used"] = sorted({v["mode"] for v in per_case.values()})
    metrics["tiers_used"] = sorted({v["tier"] for v in per_case.values() if v["tier"]})
    metrics["cases"] = len(cases)
    return {"config": config.name, **metrics, "_per_case": per_case}


def _case_outcome(case: Case, result: SearchResult) -> dict[str, Any]:
    """What one search did for a case: flagged absent, cited the right lines, how."""
    cited = None
    if case.lines:
        cited = any(
            h.path in case.lines and _overlaps((h.start_line, h.end_line), case.lines[h.path])
            for h in result.hits
        )
    return {
        "kind": case.kind,
        "absent": result.likely_absent,
        "cited": cited,
        "mode": result.mode,
        "tier": result.tier,
        "coverage": result.coverage,
        "best_cosine": result.best_cosine,
    }


def _answer_metrics(
    cases: Sequence[Case],
    qrels: list[ir_measures.Qrel],
    run: list[ir_measures.ScoredDoc],
    per_case: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Ranking measures (overall and per kind), citations and both absence rates."""
    answerable = [c for c in cases if c.relevant]
    absent = [c for c in cases if not c.relevant]
    metrics: dict[str, Any] = {}
    if answerable:
        metrics.update(_aggregate(qrels, run))
        by_kind: dict[str, set[str]] = defaultdict(set)
        for c in answerable:
            by_kind[c.kind].add(c.id)
        if len(by_kind) > 1:
            metrics["per_kind"] = {
                kind: _aggregate(
                    [q for q in qrels if q.query_id in ids],
                    [r for r in run if r.query_id in ids],
                )
                for kind, ids in sorted(by_kind.items())
            }
        judged = [bool(x) for c in answerable if (x := per_case[c.id]["cited"]) is not None]
        if judged:
            metrics["citation_hit_rate"] = round(sum(judged) / len(judged), 4)
        metrics["answerable_flagged_absent"] = _share_flagged(answerable, per_case)
    if absent:
        metrics["absent_flagged"] = _share_flagged(absent, per_case)
    return metrics


def _share_flagged(cases: Sequence[Case], per_case: dict[str, dict[str, Any]]) -> float:
    return round(sum(per_case[c.id]["absent"] for c in cases) / len(cases), 4)


def _aggregate(qrels: list[ir_measures.Qrel], run: list[ir_measures.ScoredDoc]) -> dict[str, float]:
    values = ir_measures.calc_aggregate(MEASURES, qrels, run)
    return {NAMES[str(m)]: round(float(v), 4) for m, v in values.items()}


def _percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = (len(ordered) - 1) * pct / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def evaluate(
    app: Retriever,
    cases: Sequence[Case],
    *,
    ablate: bool,
    budget: int = 1200,
    keep_per_case: bool = False,
) -> dict[str, Any]:
    configs = ABLATIONS if ablate else [CALIBRATED]
    results = []
    for config in configs:
        r = run_config(app, cases, config, budget)
        if not keep_per_case:
            r.pop("_per_case")
        results.append(r)
    return {"cases": len(cases), "results": results, "calibration": app.calibration()}
