"""Pure stages: rank fusion and token budgeting."""

from __future__ import annotations

from retriever.budget import allocate, estimate_tokens
from retriever.fuse import RankedList, interleave, rrf


def test_rrf_rewards_agreement_and_weights() -> None:
    scores = rrf([RankedList("lexical", ["a", "b", "c"]), RankedList("semantic", ["b", "d"])], k=60)
    assert max(scores, key=scores.get) == "b"  # type: ignore[arg-type]
    assert scores["a"] == 1 / 61
    weighted = rrf([RankedList("lexical", ["a"], 2.0), RankedList("semantic", ["b"], 1.0)], k=60)
    assert weighted["a"] == 2 * weighted["b"]


def test_interleave_two_semantic_then_one_lexical() -> None:
    scores = interleave([["s1", "s2", "s3", "s4"]], [["l1", "s1", "l2"]], ratio=2)
    order = sorted(scores, key=lambda k: -scores[k])
    assert order == ["s1", "s2", "l1", "s3", "s4", "l2"]


def test_interleave_drains_the_longer_arm_after_the_shorter_runs_out() -> None:
    scores = interleave([["s1"]], [["l1", "s1", "l2", "l3"]], ratio=2)
    assert sorted(scores, key=lambda k: -scores[k]) == ["s1", "l1", "l2", "l3"]
    scores = interleave([["s1", "s2", "s3"]], [[]], ratio=1)
    assert sorted(scores, key=lambda k: -scores[k]) == ["s1", "s2", "s3"]


def test_interleave_round_robins_several_queries() -> None:
    scores = interleave([["a", "b"], ["c", "a"]], [[]], ratio=2)
    assert sorted(scores, key=lambda k: -scores[k]) == ["a", "c", "b"]


def test_budget_best_passage_of_each_document_first() -> None:
    hits = [("d1", 100), ("d1", 100), ("d2", 100), ("d3", 100), ("d1", 10)]
    plan = allocate(hits, budget=320, doc_of=lambda h: h[0], tokens_of=lambda h: h[1])
    assert plan.kept == [0, 2, 3, 4]  # the second d1 passage does not fit, the small one does
    assert plan.used_tokens == 310
    assert plan.dropped == 1


def test_budget_always_delivers_the_best_hit() -> None:
    plan = allocate([("d", 5000)], budget=100, doc_of=lambda h: h[0], tokens_of=lambda h: h[1])
    assert plan.kept == [0]


def test_token_estimate_is_consistent() -> None:
    assert estimate_tokens("") == 1
    assert estimate_tokens("abcd" * 100) == 100
