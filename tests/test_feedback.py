"""Query feedback: the expansion (pure), when it applies, and what it changes in a real
search against Postgres with a real Model2Vec model."""

from __future__ import annotations

from pathlib import Path

import pytest

from retriever.app import Retriever
from retriever.config import Settings
from retriever.feedback import (
    PASSAGES,
    Feedback,
    contextual,
    expanded,
    wanted,
)
from retriever.lexical import BM25Params, query_terms
from retriever.ranking import Arms
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


@pytest.mark.parametrize(
    "query",
    [
        "e.g. a note about cats",
        "the laws of the U.S. and Canada",
        "my Ph.D. notes from 5 p.m.",
        "a dose of 2.5 mg",
        "python 3.11 install",
        "my PhD thesis",
        "YouTube playlist and McDonald's receipts",
        "-40 degrees in winter",
        "a well-known trick -- or not",
        "list the note(s) I wrote",
    ],
)
def test_prose_that_only_looks_dotted_or_capitalised_still_gets_feedback(query: str) -> None:
    assert Feedback().applies(query)


def test_auto_means_contextual_models_only() -> None:
    from retriever.embed.model2vec import Model2VecEmbedder
    from retriever.embed.ollama import OllamaEmbedder

    assert contextual(OllamaEmbedder) and not contextual(Model2VecEmbedder)
    assert not contextual(object())  # an embedder that does not say is not contextual
    assert wanted("auto", True) and not wanted("auto", False)
    assert wanted("on", False) and not wanted("off", True)


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


def _vault_app(make_app: AppFactory, folder: Path, notes: dict[str, str]) -> Retriever:
    from tests.model_factory import build_model

    vault = folder / "vault"
    for name, text in notes.items():
        (vault / name).parent.mkdir(parents=True, exist_ok=True)
        (vault / name).write_text(text, "utf-8")
    model = build_model(vault, folder / "model", dim=8)
    app = make_app(vault, model=model, fresh_interval=0.0)
    app.index()
    return app


@pytest.fixture
def stash_app(make_app: AppFactory, tmp_path: Path) -> Retriever:
    return _vault_app(make_app, tmp_path, NOTES)


def _gather(
    app: Retriever,
    queries: list[str],
    feedback: Feedback | None,
    folder: str | None = None,
    bm25: BM25Params | None = None,
) -> tuple[Arms, dict]:
    """The arms of ``queries`` (as a search gathers them, within ``folder``) and every
    note's path by id."""
    from retriever.doc_filter import DocFilter

    searcher = app._searcher
    embedder, _ = app.embedder()
    assert embedder is not None
    with app.db.connection() as conn:
        model, _ = searcher.semantic_model(conn, embedder, None)
        vectors = searcher.query_vectors(embedder, queries)
        scope = Scope(*DocFilter.of(folder=folder).sql())
        arms = searcher.gather(
            conn, queries, "hybrid", model, vectors, scope, bm25 or BM25Params(), feedback=feedback
        )
        paths = dict(conn.execute("SELECT id, path FROM documents").fetchall())
        conn.rollback()
    return arms, paths


def _lexical_notes(app: Retriever, feedback: Feedback | None) -> tuple[set[str], list[str]]:
    """The notes of the lexical arm's list for QUERY, and the semantic arm's notes in order."""
    arms, paths = _gather(app, [QUERY], feedback)
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


def _expansions(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, float]]:
    """From now on, every expanded query (one entry per expansion)."""
    from retriever import search

    made: list[dict[str, float]] = []
    real = search.expanded

    def spy(*args, **kw):  # type: ignore[no-untyped-def]
        made.append(real(*args, **kw))
        return made[-1]

    monkeypatch.setattr(search, "expanded", spy)
    return made


def test_feedback_reranks_the_arms_candidates_with_the_searchs_own_scores(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The expanded query re-ranks the plain BM25 list (FEEDBACK_DEPTH deep) and the
    semantic one: each candidate scores what BM25 over the whole vault gives it, best
    first, ARM_DEPTH of them. Cut to one chunk per arm, the editor note is a candidate only
    through BM25, and a chunk in neither list is not searched for."""
    from retriever import search

    editor = "# Editor themes\n\nThe editor has a dark theme and a light one, in settings.\n"
    app = _vault_app(make_app, tmp_path, {**NOTES, "Editor themes.md": editor})
    made = _expansions(monkeypatch)
    searched: list[tuple[dict[str, float], int]] = []
    reranked: list[list[int]] = []
    real_search, real_rescore = search.bm25_search, search.bm25_rescore

    def search_spy(conn, query, **kw):  # type: ignore[no-untyped-def]
        searched.append((dict(query), kw["limit"]))
        return real_search(conn, query, **kw)

    def rescore_spy(conn, query, among, **kw):  # type: ignore[no-untyped-def]
        reranked.append(list(among))
        return real_rescore(conn, query, among, **kw)

    monkeypatch.setattr(search, "bm25_search", search_spy)
    monkeypatch.setattr(search, "bm25_rescore", rescore_spy)
    bm25 = BM25Params(k1=0.9, b=0.4)  # the search's own parameters, not the defaults
    code = "git_stash apply"
    full, _ = _gather(app, [QUERY, code], Feedback(), bm25=bm25)
    # The plain queries only, the one with feedback deeper: the expanded one re-ranks.
    assert searched == [
        (query_terms(QUERY), search.FEEDBACK_DEPTH),
        (query_terms(code), search.ARM_DEPTH),
    ]
    with app.db.connection() as conn:
        whole = real_search(conn, made.pop(), limit=1000, params=bm25)
        path_of = dict(
            conn.execute(
                "SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"
            ).fetchall()
        )
        conn.rollback()
    assert list(full.lexical[0].items()) == whole[: search.ARM_DEPTH]  # every chunk a candidate

    monkeypatch.setattr(search, "ARM_DEPTH", 1)
    monkeypatch.setattr(search, "FEEDBACK_DEPTH", 2)
    searched.clear()
    cut, _ = _gather(app, [QUERY], Feedback(), bm25=bm25)
    with app.db.connection() as conn:
        whole = real_search(conn, made.pop(), limit=1000, params=bm25)
        plain = real_search(conn, query_terms(QUERY), limit=2, params=bm25)
        conn.rollback()
    candidates = {c for c, _ in plain} | set(cut.semantic[0])
    assert set(reranked[-1]) == candidates
    only_bm25 = {path_of[c] for c, _ in plain if c not in cut.semantic[0]}
    assert only_bm25 == {"Editor themes.md"}
    scores = dict(whole)
    ranked = sorted(((c, scores[c]) for c in candidates), key=lambda r: (-r[1], r[0]))
    assert len(ranked) == 2 and list(cut.lexical[0].items()) == ranked[:1]
    missed = [path_of[c] for c, _ in whole if c not in candidates]
    assert missed == ["Stash reference.md"]  # the added words reach it: not searched for


def _fed_passages(monkeypatch: pytest.MonkeyPatch) -> list[list[frozenset[str]]]:
    """From now on, the terms of the passages each expansion reads (one entry per call)."""
    from retriever import search

    calls: list[list[frozenset[str]]] = []
    real = search.expanded

    def spy(query, passages, idfs, **kw):  # type: ignore[no-untyped-def]
        calls.append([frozenset(p) for p in passages])
        return real(query, passages, idfs, **kw)

    monkeypatch.setattr(search, "expanded", spy)
    return calls


def test_a_passage_two_notes_share_feeds_back_once(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copies of a note (a template, a pasted paragraph) rank their shared passage ten
    times in a row: feedback reads it once, then the next distinct passage."""
    copies = {f"Copy {i}/Crash recovery.md": NOTES["Crash recovery.md"] for i in range(9)}
    copied = {**NOTES, **copies}
    app = _vault_app(make_app, tmp_path, copied)
    calls = _fed_passages(monkeypatch)
    arms, paths = _gather(app, [QUERY], Feedback())
    nearest = list(arms.semantic[0])
    assert {paths[arms.doc_of[c]] for c in nearest[:10]} == {"Crash recovery.md", *copies}
    fed = calls.pop()
    assert len(fed) == PASSAGES and fed[0] != fed[1]


def test_each_query_of_a_search_gets_its_own_list(stash_app: Retriever) -> None:
    """Several queries in one search: the ones feedback applies to are expanded, the
    others (code) keep their plain list, each in its place."""
    code = "git_stash apply"
    both, _ = _gather(stash_app, [QUERY, code], Feedback())
    alone, _ = _gather(stash_app, [QUERY], Feedback())
    plain, _ = _gather(stash_app, [QUERY, code], None)
    assert both.feedback and both.lexical == [alone.lexical[0], plain.lexical[1]]
    assert both.lexical[0] != plain.lexical[0]


def test_a_query_without_a_vector_turns_feedback_off_for_the_search(stash_app: Retriever) -> None:
    """A query of words the model does not know has no vector, so the semantic lists no
    longer line up with the queries: no query is expanded."""
    queries = [QUERY, "zzyzx qwfp"]
    fed, _ = _gather(stash_app, queries, Feedback())
    plain, _ = _gather(stash_app, queries, None)
    assert len(fed.semantic) == 1
    assert not fed.feedback and fed.lexical == plain.lexical


def test_feedback_reads_only_passages_inside_the_searchs_folder(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kitchen = ("Sourdough.md", "Garden.md")
    notes = {("kitchen/" + k if k in kitchen else k): v for k, v in NOTES.items()}
    app = _vault_app(make_app, tmp_path, notes)
    calls = _fed_passages(monkeypatch)
    result = app.search("water the loaf", fresh=False, feedback="on", folder="kitchen")
    assert result.hits and result.feedback
    assert all(h.path.startswith("kitchen/") for h in result.hits)
    read = set().union(*calls.pop())
    assert {"flour", "tomato"} & read  # the kitchen's words (stemmed as BM25 stems them)
    assert not {"stash", "tram", "chain", "editor"} & read  # nothing from outside it
    arms, paths = _gather(app, ["water the loaf in the hills"], Feedback(), folder="kitchen")
    assert arms.feedback and arms.lexical[0]
    assert all(paths[arms.doc_of[c]].startswith("kitchen/") for c in arms.lexical[0])


def test_a_query_of_stopwords_only_is_not_expanded(stash_app: Retriever) -> None:
    """With no term of its own, an expanded query would be nothing but the nearest
    passages' words: BM25 would only echo the semantic arm."""
    arms, _ = _gather(stash_app, ["what is this about"], Feedback())
    plain, _ = _gather(stash_app, ["what is this about"], None)
    assert not arms.feedback and arms.lexical == plain.lexical == [{}]


def test_a_query_none_of_whose_words_the_vault_holds_is_not_expanded(
    make_app: AppFactory, tmp_path: Path
) -> None:
    """ "zeppelin" is only in a See also section (no passage holds it; the model, made from
    the notes' text, knows it): the plain BM25 finds nothing, and the added words alone
    would only echo the semantic arm."""
    see_also = "# Bicycle\n\nPump the tyres and oil the chain.\n\n## See also\n\nzeppelin rides\n"
    app = _vault_app(make_app, tmp_path, {**NOTES, "Bicycle.md": see_also})
    arms, _ = _gather(app, ["zeppelin"], Feedback())
    assert arms.semantic[0] and arms.lexical == [{}] and not arms.feedback


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


def test_calibration_chooses_on_the_plain_arms_even_when_searches_expand(
    make_app: AppFactory, vault_copy: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pseudo-queries cannot judge feedback, so calibration never expands them, even
    when searches do; it stores the vault's languages, which feedback reads."""
    from retriever.search import Searcher

    given: list[Feedback | None] = []
    real = Searcher.gather

    def spy(self, *args, feedback=None, **kw):  # type: ignore[no-untyped-def]
        given.append(feedback)
        return real(self, *args, feedback=feedback, **kw)

    monkeypatch.setattr(Searcher, "gather", spy)
    app = make_app(vault_copy, model=model_dir, query_feedback="on")
    app.index()
    result = app.calibrate()
    assert result["status"] == "calibrated" and result["vault_languages"]
    assert given and all(f is None for f in given)
    embedder, _ = app.embedder()
    assert embedder is not None
    with app.db.connection() as conn:
        found = app._searcher.calibrations.get(conn, embedder.fingerprint)
        conn.rollback()
    assert found is not None and found.languages == tuple(result["vault_languages"])


def test_an_unknown_feedback_word_is_refused_in_one_line(stash_app: Retriever) -> None:
    from retriever.query_input import SearchInputError

    with pytest.raises(SearchInputError, match="feedback must be one of auto, on, off"):
        stash_app.search(QUERY, fresh=False, feedback="sometimes")  # type: ignore[arg-type]


def test_feedback_that_adds_no_word_is_not_reported(make_app: AppFactory, tmp_path: Path) -> None:
    """The nearest passages hold only the query's own words: nothing is added, BM25 runs
    on the query as it was, and the search does not claim feedback."""
    notes = {
        "Loaf.md": "the sourdough loaf, and a sourdough loaf\n",
        "Loaves.md": "a loaf of sourdough, the loaf of sourdough\n",
        **{k: v for k, v in NOTES.items() if k != "Sourdough.md"},
    }
    app = _vault_app(make_app, tmp_path, notes)
    arms, paths = _gather(app, ["sourdough loaf"], Feedback())
    plain, _ = _gather(app, ["sourdough loaf"], None)
    assert {paths[arms.doc_of[c]] for c in list(arms.semantic[0])[:2]} == {"Loaf.md", "Loaves.md"}
    assert not arms.feedback and arms.lexical == plain.lexical


def test_words_in_more_than_a_twentieth_of_a_large_vaults_passages_are_not_added() -> None:
    from retriever.feedback import too_common

    assert too_common(501, 10_000) and not too_common(500, 10_000)
    assert not too_common(50, 60)  # a small vault keeps its words
    out = expanded(
        {"crash": 1}, [{"stash": 2, "note": 5}], {"stash": 2.0, "note": 1.0}, skip={"note"}
    )
    assert out == {"crash": 1.0, "stash": 0.5}
