"""The eval command: metrics from ir-measures on JSONL cases and BEIR folders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from retriever.evaluate import ABLATIONS, evaluate, load_beir, load_cases, write_beir_vault
from tests.conftest import write_beir

TESTS = Path(__file__).parent


def test_load_cases_parses_the_test_set() -> None:
    cases = load_cases(TESTS / "vault-cases.jsonl")
    assert len(cases) >= 40
    assert {c.kind for c in cases} >= {"keyword", "paraphrase", "absent"}
    assert all(c.queries for c in cases)
    absent = [c for c in cases if c.kind == "absent"]
    assert absent and all(not c.relevant for c in absent)


def test_bad_case_file_gets_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "cases.jsonl"
    bad.write_text('{"id": 1, "query": "x", "relevant": []}\nnot json\n', "utf-8")
    with pytest.raises(ValueError, match=r"cases\.jsonl:2"):
        load_cases(bad)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("[1, 2]", "JSON object"),
        ('"just a string"', "JSON object"),
        ('{"query": 5, "relevant": []}', '"query"'),
        ('{"relevant": ["a.md"]}', '"query"'),
        ('{"query": "x", "relevant": 5}', '"relevant"'),
        ('{"query": "x", "relevant": {"a.md": "high"}}', '"relevant"'),
        ('{"query": "x", "relevant": ["a.md"], "lines": {"a.md": [1]}}', '"lines"'),
        ('{"query": "x", "relevant": ["a.md"], "lines": {"a.md": 5}}', '"lines"'),
    ],
)
def test_each_malformed_case_names_its_line_and_field(tmp_path: Path, line: str, says: str) -> None:
    bad = tmp_path / "cases.jsonl"
    bad.write_text('{"id": 1, "query": "x", "relevant": []}\n' + line + "\n", "utf-8")
    with pytest.raises(ValueError, match=r"cases\.jsonl:2: .*" + re.escape(says)):
        load_cases(bad)


def test_an_empty_case_file_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "cases.jsonl"
    empty.write_text("\n\n", "utf-8")
    with pytest.raises(ValueError, match="holds no cases"):
        load_cases(empty)


def test_a_malformed_beir_folder_names_its_file_and_line(tmp_path: Path) -> None:
    beir = write_beir(
        tmp_path / "mini", {"d1": ("T", "text")}, {"q1": "a query"}, [("q1", "d1", 1)]
    )
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "ok"}\n{"_id": "q2"}\n', "utf-8")
    with pytest.raises(ValueError, match=r'queries\.jsonl:2: needs an "_id" and a "text"'):
        load_beir(beir)
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "ok"}\n', "utf-8")
    (beir / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\n", "utf-8")
    with pytest.raises(ValueError, match=r"qrels\.tsv:2"):
        load_beir(beir)


def test_eval_on_the_test_vault_reports_every_metric(
    make_app, vault_copy: Path, model_dir: Path
) -> None:
    app = make_app(vault_copy, model=model_dir)
    app.index()
    report = evaluate(app, load_cases(TESTS / "vault-cases.jsonl"), ablate=True)
    names = [r["config"] for r in report["results"]]
    assert names == [c.name for c in ABLATIONS]
    by_name = {r["config"]: r for r in report["results"]}
    for r in report["results"]:
        for key in (
            "ndcg@10",
            "recall@10",
            "mrr",
            "hit@1",
            "hit@3",
            "citation_hit_rate",
            "absent_flagged",
            "answerable_flagged_absent",
        ):
            assert 0.0 <= r[key] <= 1.0, (r["config"], key)
        assert r["latency_ms"]["p95"] >= r["latency_ms"]["p50"] > 0
        assert "per_kind" in r
    assert by_name["lexical"]["modes_used"] == ["lexical"]
    assert by_name["semantic"]["modes_used"] == ["semantic"]
    assert by_name["calibrated-lexical"]["modes_used"] == ["lexical"]
    # Keyword questions are easy: a working engine gets most of them at rank 1.
    assert by_name["lexical"]["per_kind"]["keyword"]["hit@1"] >= 0.7


def test_eval_on_a_beir_folder(make_app, tmp_path: Path) -> None:
    docs = {
        "d1": ("Wing flutter", "Flutter of swept wings at transonic speed."),
        "d2": ("Boundary layer", "Laminar boundary layer transition on flat plates."),
        "d3": ("Heat transfer", "Heat transfer in hypersonic flow over blunt bodies."),
    }
    queries = {"q1": "transition of laminar boundary layers", "q2": "flutter of swept wings"}
    beir = write_beir(tmp_path / "mini", docs, queries, [("q1", "d2", 2), ("q2", "d1", 1)])
    corpus, cases = load_beir(beir)
    assert {c.id: c.relevant for c in cases} == {"q1": {"d2.md": 2}, "q2": {"d1.md": 1}}
    vault = tmp_path / "vault"
    write_beir_vault(corpus, vault)
    assert (vault / "d1.md").read_text("utf-8").startswith("# Wing flutter")
    app = make_app(vault)
    app.index()
    report = evaluate(app, cases, ablate=False)
    [result] = report["results"]
    assert result["ndcg@10"] == pytest.approx(1.0)
    assert result["hit@1"] == pytest.approx(1.0)


def test_eval_of_a_cases_file_without_vault_refuses_and_indexes_nothing(
    tmp_path: Path, db_url: str
) -> None:
    import subprocess

    from tests.conftest import cli_env, retriever_exe

    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": 1, "query": "x", "relevant": ["a.md"]}\n', "utf-8")
    (tmp_path / "stray.md").write_text("# Not a vault\n", "utf-8")
    env = cli_env(db_url, tmp_path / "home")
    done = subprocess.run(
        [retriever_exe(), "eval", str(cases), "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "--vault" in json.loads(done.stdout)["error"]
    import psycopg

    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM documents").fetchone() == (0,)
