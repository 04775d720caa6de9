"""Which words of a query the semantic arm embeds: the content-word form, its place in the
ranking, and calibration's choice between the two forms."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from retriever.calibrate import WORDS_PROBE, choose_words, with_semantic
from retriever.query_words import content_words, embedding_text
from retriever.ranking import Arms, Ranking


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How do I merge two notes?", "merge two notes?"),
        ("Is there a way to archive a whole hierarchy", "way archive whole hierarchy"),
        ("Comment est-ce que je fusionne deux notes ?", "Comment est-ce fusionne deux notes"),
        ("qu'il faut pour l'équipe", "faut l'équipe"),
        ("What changed in Windows 7 and v2.1?", "changed Windows 7 v2.1?"),
        ("where is dendron.yml, and parseConfigFile", "dendron.yml, parseConfigFile"),
        ("  e-mail set-up  ", "e-mail set-up"),
        ("a to-do list for the how-to guide", "to-do list how-to guide"),
        ("R vs Python for plan B", "R vs Python plan B"),
        ("notes not tagged, ne pas supprimer", "notes not tagged, ne pas supprimer"),
        ("backup before the upgrade", "backup before upgrade"),
        ("What is IT for in the US?", "IT US?"),
        ("x = z + 1", "x z 1"),
        ("where is **bold** in the _docs_", "**bold** _docs_"),
        ("猫 的 照片 🔥", "猫 的 照片"),
        ("vitamin D deficiency", "vitamin D deficiency"),
        ("A question about pointers in C", "question pointers C"),
        ("I think I need the I/O docs", "think need I/O docs"),
    ],
)
def test_content_words_drop_stopwords_and_keep_the_rest_as_written(
    query: str, expected: str
) -> None:
    assert content_words(query) == expected


@pytest.mark.parametrize("query", ["What is it?", "how do I", "— ? !", "l'"])
def test_a_query_of_stopwords_only_is_embedded_as_written(query: str) -> None:
    assert content_words(query) == query


def test_embedding_text_follows_the_form() -> None:
    query = "How do I merge two notes?"
    assert embedding_text(query, "all") == query
    assert embedding_text(query, "content") == "merge two notes?"


def test_with_semantic_takes_the_other_arms_semantic_lists_only() -> None:
    every = Arms(
        lexical=[{1: 3.0, 2: 1.0}],
        semantic=[{1: 0.9, 3: 0.5}],
        title={10: 0.7},
        doc_of={1: 10, 2: 20, 3: 30},
        identifier=True,
    )
    content = Arms(semantic=[{4: 0.8, 2: 0.6}], doc_of={4: 40, 2: 20})
    mixed = with_semantic(every, content)
    assert mixed.lexical == every.lexical and mixed.title == every.title
    assert mixed.semantic == content.semantic and mixed.identifier
    assert mixed.doc_of == {1: 10, 2: 20, 3: 30, 4: 40}
    assert every.doc_of == {1: 10, 2: 20, 3: 30}  # the arms it came from are untouched


def test_the_form_is_part_of_the_ranking_and_its_label() -> None:
    assert Ranking().query_words == "all"
    assert Ranking.from_dict({"method": "linear"}).query_words == "all"  # stored before it
    content = Ranking().with_(query_words="content")
    assert content.label().endswith("+content-words")
    assert "words" not in Ranking().label()
    assert Ranking.from_dict(content.to_dict()) == content
    assert content.apply({"query_words": "all"}).query_words == "all"


@dataclass
class _Scored:
    """A chooser's two answers: per-query nDCG on the choose half, a report mean."""

    choose: list[float]
    report: float = 0.5
    asked: list[Ranking] = field(default_factory=list)

    def score(self, ranking: Ranking) -> np.ndarray:
        self.asked.append(ranking)
        return np.array(self.choose)

    def report_score(self, ranking: Ranking) -> float:
        return self.report


def test_content_words_are_chosen_only_when_they_clearly_win() -> None:
    rng = np.random.default_rng(7)
    base = rng.uniform(0.0, 1.0, 200)
    every = _Scored(list(base))
    clear = _Scored(list(base + 0.1 + rng.normal(0.0, 0.05, 200)))
    words, report = choose_words(every, clear)  # type: ignore[arg-type]
    assert words == "content" and report["chosen"] == "content"
    assert set(report["semantic_only"]) == {"all", "content"}
    assert every.asked and all(r == WORDS_PROBE for r in every.asked + clear.asked)
    # Within the noise (or behind), the query is embedded as written.
    noisy = _Scored(list(base + 0.01 + rng.normal(0.0, 0.3, 200)))
    assert choose_words(every, noisy)[0] == "all"  # type: ignore[arg-type]
    behind = _Scored(list(base - 0.1))
    assert choose_words(every, behind)[0] == "all"  # type: ignore[arg-type]
    tiny = _Scored(list(base + 0.001))  # every query a hair better: under the noise floor
    assert choose_words(every, tiny)[0] == "all"  # type: ignore[arg-type]
