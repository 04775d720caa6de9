"""Which words of a query the semantic arm embeds: the content-word form, its place in the
ranking, and calibration's choice between the two forms."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from retriever.calibrate import WORDS_PROBE, choose_words
from retriever.query_words import content_words, embedding_text
from retriever.ranking import Ranking


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How do I merge two notes?", "merge two notes?"),
        ("Is there a way to archive a whole hierarchy", "way archive whole hierarchy"),
        ("Comment est-ce que je fusionne deux notes ?", "Comment fusionne deux notes"),
        ("qu'il faut pour l'équipe", "faut l'équipe"),
        ("What changed in Windows 7 and v2.1?", "changed Windows 7 v2.1?"),
        ("where is dendron.yml, and parseConfigFile", "dendron.yml, parseConfigFile"),
        ("  e-mail set-up  ", "e-mail set-up"),
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
