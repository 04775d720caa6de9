"""Query feedback: the expansion (pure), when it applies, and what it changes in a real
search against Postgres with a real Model2Vec model."""

from __future__ import annotations

from pathlib import Path

import pytest

from retriever.app import Retriever
from retriever.config import Settings
from retriever.feedback import PASSAGES, Feedback, expanded, wanted
from retriever.lexical import BM25Params
from retriever.search import Scope
from tests.conftest import AppFactory

# --- the expansion (pure) --------------------------------------------------------------


def test_the_most_distinctive_passage_terms_join_the_query_at_a_lower_weight() -> None:
    query = {"crash": 1, "edit": 2}
    passages = [
        {"stash": 3, "apply": 1, "crash": 4},  # 8 terms
        {"stash": 1, "git": 1},  # 2 terms
    ]
    idfs = {"stash": 2.0, "apply": 1.0, "git": 0.5, "crash": 3.0}
    out = expanded(query, passages, idfs, terms=2, weight=0.5)
    # stash: 3/8*2 + 1/2*2 = 1.75; git: 1/2*0.5 = 0.25; apply: 1/8*1 = 0.125.
    assert out == pytest.approx({"crash": 1.0, "edit": 2.0, "stash": 0.5, "git": 0.5 * 0.25 / 1.75})


def test_query_terms_keep_their_weight_and_unknown_terms_are_never_added() -> None:
    out = expanded({"crash": 1}, [{"crash": 5, "zzyzx": 5, "stash": 1}], {"crash": 1, "stash": 1})
    assert out == {"crash": 1.0, "stash": 0.5}


def test_no_passage_or_no_known_term_leaves_the_query_as_it_was() -> None:
    assert expanded({"crash": 2}, [], {"crash": 1.0}) == {"crash": 2.0}
    assert expanded({"crash": 2}, [{"crash": 3}, {}], {"crash": 1.0}) == {"crash": 2.0}
    assert expanded({"a": 1}, [{"b": 1}], {"b": 0.0}) == {"a": 1.0}  # no strength at all


def test_equal_strengths_are_broken_by_the_term_so_the_choice_is_deterministic() -> None:
    passages = [{"delta": 1, "alpha": 1, "charlie": 1, "bravo": 1}]
    idfs = dict.fromkeys(("alpha", "bravo", "charlie", "delta"), 1.0)
    assert set(expanded({}, passages, idfs, terms=2)) == {"alpha", "bravo"}


@pytest.mark.parametrize(
    "query",
    [
        "what does enableAutoFoldFrontmatter do",  # camelCase
        "how to use --overrides with dendron publish",  # a flag
        "where is max_file_bytes set",  # snake_case
        "what goes in dendron.yml",  # a dotted name
        "what does `retriever gc` remove",  # backticks
        "std::vector growth",
        "when is init() called",
    ],
)
def test_a_query_that_writes_code_gets_no_feedback(query: str) -> None:
    assert not Feedback().applies(query)


def test_a_question_in_words_gets_feedback_unless_in_another_language() -> None:
    english = "how do I get my lost edits back after the editor crashed"
    french = "comment récupérer les modifications perdues après un plantage"
    assert Feedback().applies(english) and Feedback(("en",)).applies(english)
    assert Feedback().applies(french)  # the vault's languages are not known yet
    assert Feedback(("fr",)).applies(french) and Feedback(("en", "fr")).applies(french)
    assert not Feedback(("en",)).applies(french)


def test_auto_means_contextual_models_only() -> None:
    from retriever.embed.model2vec import Model2VecEmbedder
    from retriever.embed.ollama import OllamaEmbedder

    assert OllamaEmbedder.contextual and not Model2VecEmbedder.contextual
    assert wanted("auto", OllamaEmbedder) and not wanted("auto", Model2VecEmbedder)
    assert wanted("on", Model2VecEmbedder) and not wanted("off", OllamaEmbedder)
    assert not wanted("auto", object())  # an embedder that does not say is not contextual


def test_the_setting_folds_case_and_refuses_other_words() -> None:
    from pydantic import ValidationError

    assert Settings(query_feedback=" ON ").query_feedback == "on"  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Settings(query_feedback="sometimes")  # type: ignore[arg-type]


# --- in a real search ------------------------------------------------------------------

NOTES = {
    "Crash recovery.md": "# Crash recovery\n\nWhen the editor crashes during a sync, your lost"
    " edits are kept in a git stash. Run git stash apply to restore the stash.\n",
    "Stash reference.md": "# Stash reference\n\ngit stash list shows every stash; git stash"
    " apply restores one stash and git stash drop deletes a stash.\n",
    "Sourdough.md": "# Sourdough\n\nFeed the starter flour and water, then bake the loaf in"
    " a hot oven until the crust is dark.\n",
    "Lisbon trip.md": "# Lisbon trip\n\nTrams climb the hills; the castle view at sunset and"
    " the custard tarts in Belem were the best part.\n",
    "Bicycle.md": "# Bicycle\n\nPump the tyres, oil the chain and check the brake pads"
    " before a long ride in the hills.\n",
    "Garden.md": "# Garden\n\nWater the tomatoes in the evening and mulch the beds so the"
    " soil keeps its water in summer.\n",
}
QUERY = "the editor crashes and I lost my edits"


@pytest.fixture
def stash_app(make_app: AppFactory, tmp_path: Path) -> Retriever:
    from tests.model_factory import build_model

    vault = tmp_path / "vault"
    vault.mkdir()
    for name, text in NOTES.items():
        (vault / name).write_text(text, "utf-8")
    model = build_model(vault, tmp_path / "model", dim=8)
    app = make_app(vault, model=model, fresh_interval=0.0)
    app.index()
    return app


def _lexical_notes(app: Retriever, feedback: Feedback | None) -> tuple[set[str], list[str]]:
    """The notes of the lexical arm's list for QUERY, and the semantic arm's notes in order."""
    searcher = app._searcher
    embedder, _ = app.embedder()
    assert embedder is not None
    with app.db.connection() as conn:
        model, _ = searcher.semantic_model(conn, embedder, None)
        vectors = searcher.query_vectors(embedder, [QUERY])
        arms = searcher.gather(
            conn, [QUERY], "hybrid", model, vectors, Scope("", {}), BM25Params(), feedback=feedback
        )
        paths = dict(conn.execute("SELECT id, path FROM documents").fetchall())
        conn.rollback()
    lexical = {paths[arms.doc_of[c]] for c in arms.lexical[0]}
    semantic = list(dict.fromkeys(paths[arms.doc_of[c]] for c in arms.semantic[0]))
    return lexical, semantic


def test_feedback_finds_the_note_in_the_vaults_words_that_bm25_alone_misses(
    stash_app: Retriever,
) -> None:
    """The question shares no word with the stash reference; the passage the model finds
    nearest (the crash note) calls the fix "stash" and "apply", and with feedback BM25
    finds the reference through them."""
    plain, semantic = _lexical_notes(stash_app, None)
    assert semantic[0] == "Crash recovery.md"
    assert plain == {"Crash recovery.md"}
    fed, _ = _lexical_notes(stash_app, Feedback())
    assert {"Crash recovery.md", "Stash reference.md"} <= fed


def test_a_hidden_passage_never_feeds_back(
    stash_app: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calibration hides a passage from its own query: its words must not come back
    through feedback (they would find the note by construction). The next nearest
    passages feed back instead."""
    from retriever import search

    fed_from: list[list[int]] = []
    real = search._fed_terms

    def spy(conn, query, near, lookup):  # type: ignore[no-untyped-def]
        fed_from.append(list(near))
        return real(conn, query, near, lookup)

    monkeypatch.setattr(search, "_fed_terms", spy)
    _lexical_notes(stash_app, Feedback())
    nearest = fed_from.pop()
    assert len(nearest) == PASSAGES
    _lexical_notes(stash_app, Feedback(hide=nearest[0]))
    without = fed_from.pop()
    assert nearest[0] not in without and without[0] == nearest[1] and len(without) == PASSAGES


def test_the_policy_decides_per_search_and_auto_leaves_a_static_model_alone(
    stash_app: Retriever,
) -> None:
    def lexical_rank(feedback: str) -> int | None:
        result = stash_app.search(QUERY, fresh=False, feedback=feedback)  # type: ignore[arg-type]
        assert result.feedback is (feedback == "on")
        assert result.to_dict()["feedback"] is result.feedback
        hits = {h.path: h for h in result.hits}
        assert "Stash reference.md" in hits or feedback != "on"
        hit = hits.get("Stash reference.md")
        return hit.ranks["lexical"] if hit is not None else None

    assert lexical_rank("on") is not None
    assert lexical_rank("auto") is None  # Model2Vec is static: auto means off
    assert lexical_rank("off") is None


def test_calibration_records_whether_searches_use_feedback(
    make_app: AppFactory, vault_copy: Path, model_dir: Path
) -> None:
    from retriever.calibration_store import summary
    from retriever.cli import describe_calibration

    for policy, expected in (("on", True), ("auto", False)):
        app = make_app(vault_copy, model=model_dir, query_feedback=policy)
        app.index()
        result = app.calibrate()
        assert result["status"] == "calibrated" and result["feedback"] is expected
        line = describe_calibration(summary(app.calibration()))
        assert ("with query feedback" in line) is expected


def test_an_unknown_feedback_word_is_refused_in_one_line(stash_app: Retriever) -> None:
    from retriever.query_input import SearchInputError

    with pytest.raises(SearchInputError, match="feedback must be one of auto, on, off"):
        stash_app.search(QUERY, fresh=False, feedback="sometimes")  # type: ignore[arg-type]
