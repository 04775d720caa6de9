"""Calibration against a real PostgreSQL: it runs after indexing, searches use it, settings
override it, a small vault keeps the defaults, a model change or a vault that changed
materially recalibrates, and status, health, eval and the CLI show it."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path
from unittest.mock import ANY

import pytest

from retriever.absence import NAME_SHARE, UNKNOWN_SHARE
from retriever.calibrate import MIN_NOTES, Lexicon, _doc_term_counts, lexical_twin
from retriever.evaluate import Case, evaluate
from retriever.lexical import query_terms
from retriever.query_words import content_words
from retriever.ranking import Ranking
from tests.conftest import cli_env, retriever_exe
from tests.model_factory import build_model

TOPICS = [
    "sourdough",
    "espresso",
    "kayak",
    "telescope",
    "beehive",
    "compost",
    "violin",
    "bonsai",
    "aquarium",
    "pottery",
    "chess",
    "origami",
    "marathon",
    "climbing",
    "birdwatching",
    "knitting",
    "woodworking",
    "photography",
    "calligraphy",
    "gardening",
    "cycling",
    "sailing",
    "fermentation",
    "astronomy",
    "beekeeping",
    "archery",
    "fencing",
    "juggling",
    "skiing",
    "surfing",
    "yoga",
    "meditation",
    "podcasting",
    "soldering",
    "welding",
    "embroidery",
    "glassblowing",
    "mushrooms",
    "saxophone",
    "harmonica",
]


def _write_vault(root: Path, topics: list[str], *, edition: int = 0) -> Path:
    for i, topic in enumerate(topics):
        nxt = topics[(i + 1) % len(topics)]
        text = f"""# {topic.title()} notes

## Getting started with {topic}

My first {topic} session needed patience. The {topic} club meets on Tuesday evenings
near the old library, and the beginner kit costs about {20 + i} euros. Edition {edition}.

## Common {topic} mistakes

Rushing the warm-up ruins a {topic} afternoon. Keep a small notebook of every {topic}
attempt, and compare it with [[{nxt.title()} notes]] when the weather turns.
"""
        (root / f"{topic.title()} notes.md").write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def hobby_vault_dir(tmp_path: Path) -> Path:
    vault = tmp_path / "hobbies"
    vault.mkdir()
    return _write_vault(vault, TOPICS)


@pytest.fixture(scope="module")
def hobby_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = tmp_path_factory.mktemp("corpus")
    return build_model(_write_vault(corpus, TOPICS), tmp_path_factory.mktemp("m") / "model")


def test_index_calibrates_and_search_uses_the_calibration(
    make_app, hobby_vault_dir, hobby_model
) -> None:
    app = make_app(hobby_vault_dir, model=hobby_model, calibrate=True)
    report = app.index()
    assert report.calibration and report.calibration["status"] == "calibrated"
    cal = report.calibration
    assert cal["queries"] >= 2 * 15 and cal["choose"] and cal["report"]
    assert cal["candidates"] and all(
        {"ranking", "choose", "report"} <= set(r) for r in cal["candidates"]
    )
    assert "hybrid" in cal["absence"]  # thresholds fitted for this model
    result = app.search("beginner kit for the kayak club")
    assert result.calibration == "calibrated"
    assert result.ranking == cal["label"]
    assert result.hits[0].path == "Kayak notes.md"
    # A second index run with nothing changed does not recalibrate.
    assert app.index().calibration == {"status": "current", "model": app.embedder()[0].fingerprint}


def test_settings_override_the_calibrated_choice(make_app, hobby_vault_dir, hobby_model) -> None:
    make_app(hobby_vault_dir, model=hobby_model, calibrate=True).index()
    app = make_app(hobby_vault_dir, model=hobby_model, fusion="rrf30", title_weight=0.0)
    result = app.search("beginner kit for the kayak club")
    assert result.calibration == "calibrated, with overrides"
    assert result.ranking.startswith("rrf(k=30") and "title" not in result.ranking
    flag = app.search("beginner kit for the kayak club", fusion="interleave")
    assert flag.ranking.startswith("interleave")


def test_the_query_words_setting_decides_what_the_semantic_arm_embeds(
    make_app, hobby_vault_dir, hobby_model
) -> None:
    make_app(hobby_vault_dir, model=hobby_model, calibrate=True).index()
    every = make_app(hobby_vault_dir, model=hobby_model, query_words="all")
    content = make_app(hobby_vault_dir, model=hobby_model, query_words="CONTENT ")
    question = "what is the beginner kit of the kayak club"
    asked = content.search(question)
    assert asked.ranking.endswith("+content-words")
    assert asked.hits[0].path == "Kayak notes.md"
    # The same vector as the content words asked with every word: nothing else embedded.
    direct = every.search("beginner kit kayak club")
    assert asked.best_cosine == pytest.approx(direct.best_cosine, abs=1e-6)
    whole = every.search(question)
    assert "words" not in whole.ranking
    assert whole.best_cosine != pytest.approx(asked.best_cosine, abs=1e-4)
    # A fixed ranking (the eval's ablation) carries its own form.
    fixed = every.search(question, ranking=Ranking("linear", query_words="content"))
    assert fixed.best_cosine == pytest.approx(asked.best_cosine, abs=1e-6)


def _many_topics(tmp_path: Path) -> Path:
    vault = tmp_path / "many"
    vault.mkdir()
    return _write_vault(vault, TOPICS + [f"{t} club" for t in TOPICS])


def test_calibration_reports_both_query_forms_and_keeps_the_better_one(
    make_app, tmp_path: Path, hobby_model, db_url: str
) -> None:
    vault = _many_topics(tmp_path)
    app = make_app(vault, model=hobby_model, calibrate=True)
    cal = app.index().calibration
    assert cal and cal["status"] == "calibrated" and cal["ranking_source"] == "pseudo-queries"
    words = cal["query_words"]
    scores = words["semantic_only"]
    assert set(scores) == {"all", "content"}
    for form in scores.values():
        assert 0.0 <= form["choose"] <= 1.0 and 0.0 <= form["report"] <= 1.0
    # This vault's frames are its own words ("club", "notes"): dropping stopwords loses.
    assert scores["content"]["choose"] < scores["all"]["choose"]
    assert words["chosen"] == "all" == cal["ranking"]["query_words"]
    assert app.search("what is the beginner kit of the kayak club").ranking == cal["label"]
    # The semantic weight was doubled exactly when the fusion beat BM25 alone (with the
    # same settings) on the choose half; the report shows both, and says which it did.
    scores = {row["ranking"]: row["choose"] for row in cal["candidates"]}
    twin = lexical_twin(Ranking.from_dict(cal["ranking"])).label()
    earned = scores[cal["pseudo_best"]] > scores[twin]
    assert cal["semantic_correction"] == (2.0 if earned else 1.0)
    assert (cal["label"] != cal["pseudo_best"]) == earned
    env = {**cli_env(db_url, tmp_path / "home"), "RETRIEVER_EMBED_MODEL": str(hobby_model)}
    shown = subprocess.run(
        [retriever_exe(), "calibrate", str(vault)], env=env, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert "query words: all (semantic arm alone, choose/report: all " in shown.stdout
    assert ("did not beat BM25 alone on the pseudo-queries" in shown.stdout) == (not earned)


def test_calibration_fits_the_query_words_searches_embed(
    make_app, tmp_path: Path, hobby_model
) -> None:
    vault = _many_topics(tmp_path)
    chosen = make_app(vault, model=hobby_model, calibrate=True).index().calibration
    assert chosen and chosen["query_words"]["chosen"] == "all"
    # The setting imposes the other form: the next index run calibrates again, on it.
    forced = make_app(vault, model=hobby_model, calibrate=True, query_words="content")
    cal = forced.index().calibration
    assert cal and cal["status"] == "calibrated"
    assert cal["query_words"] == {"chosen": "content", "set": True}
    assert cal["ranking"]["query_words"] == "content" and cal["label"].endswith("+content-words")
    assert forced.index().calibration == {"status": "current", "model": ANY}  # settled
    # Its absence threshold was read off the content words' cosines, not every word's.
    cosine = "best_cosine"
    before = chosen["absence"]["hybrid"]["model"]["thresholds"][cosine]
    assert cal["absence"]["hybrid"]["model"]["thresholds"][cosine] != before
    # A search with no setting follows the stored choice: the content words' vector.
    question = "what is the beginner kit of the kayak club"
    calibrated = make_app(vault, model=hobby_model).search(question)
    assert calibrated.calibration == "calibrated" and calibrated.ranking == cal["label"]
    every = make_app(vault, model=hobby_model, query_words="all")
    direct = every.search(content_words(question))
    assert calibrated.best_cosine == pytest.approx(direct.best_cosine, abs=1e-6)
    # Without a semantic arm nothing was embedded, and the label does not pretend it was.
    assert "words" not in forced.search(question, mode="lexical").ranking
    # The setting gone, the next index run lets calibration choose again.
    again = make_app(vault, model=hobby_model, calibrate=True).index().calibration
    assert again and again["status"] == "calibrated"
    assert again["query_words"]["chosen"] == "all" and "set" not in again["query_words"]


def test_a_small_vault_keeps_the_defaults_and_says_so(make_app, tmp_path: Path) -> None:
    vault = tmp_path / "small"
    vault.mkdir()
    _write_vault(vault, TOPICS[: MIN_NOTES - 5])
    app = make_app(vault, calibrate=True)
    report = app.index()
    assert report.calibration and report.calibration["status"] == "too_small"
    assert "too few to calibrate" in report.calibration["message"]
    result = app.search("kayak club")
    assert result.calibration == "default (not calibrated)"
    assert app.status().calibration["state"] == "default"


def test_a_model_change_triggers_recalibration(
    make_app, hobby_vault_dir, hobby_model, tmp_path
) -> None:
    first = make_app(hobby_vault_dir, calibrate=True)  # no model: lexical only
    assert first.index().calibration["status"] == "calibrated"
    assert first.search("kayak club").ranking.startswith("lexical only")
    second = make_app(hobby_vault_dir, model=hobby_model, calibrate=True)
    report = second.index()
    assert report.calibration["status"] == "calibrated"  # new model: calibrated again
    assert report.calibration["model"] == second.embedder()[0].model_id
    assert second.search("kayak club").calibration == "calibrated"


def test_a_run_with_nothing_to_embed_never_loads_the_model(
    make_app, hobby_vault_dir, hobby_model
) -> None:
    first = make_app(hobby_vault_dir, model=hobby_model, calibrate=True)
    first.index()
    fingerprint = first.embedder()[0].fingerprint
    again = make_app(hobby_vault_dir, model=hobby_model, calibrate=True)  # a new process
    report = again.index()
    assert again.tiers.primary.loaded() is None  # every vector there: the model stays on disk
    assert report.model == str(hobby_model) and report.passages_pending == 0
    assert report.tiers[0].error is None and report.tiers[0].pending == 0
    assert report.calibration == {"status": "current", "model": fingerprint}
    (hobby_vault_dir / "Kite notes.md").write_text("# Kite\n\nKitesurfing off the pier.\n")
    report = again.index()  # a new passage: now it is loaded and embeds it
    assert again.tiers.primary.loaded() is not None
    assert report.passages_embedded == 1 and report.passages_pending == 0


def test_an_edit_loads_the_model_while_its_links_resolve(
    make_app, hobby_vault_dir, hobby_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a run has written passages its model has no vector for, the model loads in
    the background (0.2-0.3 s for Model2Vec) while the run resolves links: here the load
    cannot finish before links resolve, and does. A moved note, written again with every
    passage embedded, loads nothing, and counts the missing vectors once."""
    from retriever import index, store, tiers

    make_app(hobby_vault_dir, model=hobby_model).index()
    again = make_app(hobby_vault_dir, model=hobby_model)  # a new process: nothing loaded
    order: list[str] = []
    links_resolving = threading.Event()
    real_load, real_resolve = tiers.load_embedder, index._resolve_links

    def gated_load(*args, **kwargs):  # type: ignore[no-untyped-def]
        order.append("loaded after links" if links_resolving.wait(10) else "loaded first")
        return real_load(*args, **kwargs)

    def resolving(*args, **kwargs):  # type: ignore[no-untyped-def]
        order.append("links")
        links_resolving.set()
        return real_resolve(*args, **kwargs)

    counts: list[int | None] = []
    real_count = store.count_pending

    def counted(conn, model):  # type: ignore[no-untyped-def]
        counts.append(model)
        return real_count(conn, model)

    monkeypatch.setattr(tiers, "load_embedder", gated_load)
    monkeypatch.setattr(index, "_resolve_links", resolving)
    monkeypatch.setattr(store, "count_pending", counted)
    (hobby_vault_dir / "moved").mkdir()
    (hobby_vault_dir / "Kayak notes.md").rename(hobby_vault_dir / "moved" / "Kayak notes.md")
    report = again.index()
    assert report.files_changed == 1 and report.files_deleted == 1
    assert order == ["links"] and again.tiers.primary.loaded() is None
    assert len(counts) == 1 and counts[0] is not None
    assert report.passages_embedded == 0 and report.passages_pending == 0
    order.clear()
    links_resolving.clear()
    (hobby_vault_dir / "Kite notes.md").write_text("# Kite\n\nKitesurfing off the pier.\n")
    report = again.index()
    assert sorted(order) == ["links", "loaded after links"]
    assert again.tiers.primary.loaded() is not None
    assert report.passages_embedded == 1 and report.passages_pending == 0


def test_a_run_with_nothing_to_embed_counts_the_missing_vectors_once(
    make_app, hobby_vault_dir, hobby_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count reads every passage (25-45 ms on 87,000): the run's own count tells the
    calibration check that the model has every vector, and a tier that still lacks some
    is counted again there (it is not current)."""
    from retriever import store

    make_app(hobby_vault_dir, model=hobby_model, calibrate=True).index()
    counts: list[int | None] = []
    real = store.count_pending

    def counted(conn, model):  # type: ignore[no-untyped-def]
        counts.append(model)
        return real(conn, model)

    monkeypatch.setattr(store, "count_pending", counted)
    report = make_app(hobby_vault_dir, model=hobby_model, calibrate=True).index()
    assert report.calibration["status"] == "current" and len(counts) == 1

    counts.clear()
    report = make_app(hobby_vault_dir, model=hobby_model, calibrate=True).index(embed=False)
    assert report.calibration["status"] == "current"
    assert counts[0] is None and counts[1:] == [counts[-1]] and counts[-1] is not None
    # (the run counted the passages, with no model; the check counted the model's vectors)


def test_a_current_model_still_gets_its_vector_index(
    make_app, hobby_vault_dir, hobby_model, monkeypatch
) -> None:
    from retriever import index

    monkeypatch.setattr(index, "HNSW_THRESHOLD", 1)
    first = make_app(hobby_vault_dir, model=hobby_model)
    first.index()
    with first.db.connection() as conn:  # as if the run had stopped before building it
        conn.execute("DROP INDEX embeddings_hnsw_m1")
        conn.commit()
    again = make_app(hobby_vault_dir, model=hobby_model)
    again.index()
    assert again.tiers.primary.loaded() is None  # nothing to embed
    with again.db.connection() as conn:
        assert conn.execute("SELECT to_regclass('embeddings_hnsw_m1')").fetchone()[0]


def test_a_model_that_cannot_load_is_loaded_and_says_so(
    make_app, hobby_vault_dir, tmp_path
) -> None:
    model = build_model(hobby_vault_dir, tmp_path / "model", dim=16)
    make_app(hobby_vault_dir, model=model).index()
    wrong_dim = make_app(hobby_vault_dir, model=model, embed_dim=32).index()
    assert wrong_dim.embed_error and "32" in wrong_dim.embed_error
    (model / "tokenizer.json").unlink()  # the weights unchanged, the model broken
    broken = make_app(hobby_vault_dir, model=model).index()
    assert broken.embed_error and broken.model is None


def test_a_model_changed_in_place_is_loaded_and_embeds_everything_again(
    make_app, hobby_vault_dir, tmp_path
) -> None:
    model = build_model(hobby_vault_dir, tmp_path / "model", dim=16)
    first = make_app(hobby_vault_dir, model=model, calibrate=True)
    n = first.index().passages_embedded
    old = first.embedder()[0].fingerprint
    shutil.rmtree(model)
    build_model(hobby_vault_dir, model, dim=24)  # same folder, another model
    again = make_app(hobby_vault_dir, model=model, calibrate=True)
    report = again.index()
    assert again.tiers.primary.loaded() is not None
    assert report.passages_embedded == n and report.passages_pending == 0
    assert report.calibration["status"] == "calibrated"
    assert (
        report.calibration["model"] == model.as_posix() and again.embedder()[0].fingerprint != old
    )


def test_a_vault_that_changed_materially_recalibrates(make_app, hobby_vault_dir) -> None:
    app = make_app(hobby_vault_dir, calibrate=True)
    assert app.index().calibration["status"] == "calibrated"
    _write_vault(hobby_vault_dir, TOPICS[:5], edition=1)  # 5 of 40 notes: not material
    assert app.index().calibration["status"] == "current"
    _write_vault(hobby_vault_dir, TOPICS[:12], edition=2)  # 12 more: past 20 % in all
    assert app.index().calibration["status"] == "calibrated"


def test_status_health_and_eval_show_the_calibration(
    make_app, hobby_vault_dir, hobby_model
) -> None:
    from retriever.health import run_health

    app = make_app(hobby_vault_dir, model=hobby_model, calibrate=True)
    app.index()
    status = app.status().calibration
    assert status["state"] == "calibrated" and status["ranking"] and status["ndcg_report"] > 0
    health = run_health(app)
    ranking = health.check("ranking")
    assert ranking is not None and ranking.status == "ok" and "calibrated" in ranking.detail
    cases = [Case("k", ["beginner kit for the kayak club"], {"Kayak notes.md": 1})]
    report = evaluate(app, cases, ablate=True)
    names = [r["config"] for r in report["results"]]
    assert "calibrated" in names and "hybrid-rrf60" in names and "lexical" in names
    assert report["calibration"]["label"] == status["ranking"]


def test_cli_calibrate_reports_and_exits_0(hobby_vault_dir, db_url: str, tmp_path: Path) -> None:
    env = cli_env(db_url, tmp_path / "home")
    subprocess.run(
        [retriever_exe(), "index", str(hobby_vault_dir), "--json"],
        env=env,
        capture_output=True,
        check=False,
    )
    done = subprocess.run(
        [retriever_exe(), "calibrate", str(hobby_vault_dir), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] and data["status"] == "calibrated" and data["label"].startswith("lexical")
    due = subprocess.run(
        [retriever_exe(), "calibrate", str(hobby_vault_dir), "--if-due"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert due.returncode == 0 and "current" in due.stdout
    status = subprocess.run(
        [retriever_exe(), "status", str(hobby_vault_dir)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "ranking   calibrated: lexical" in status.stdout


def test_a_vault_with_few_pseudo_queries_keeps_the_default_ranking_but_calibrates_absence(
    make_app, tmp_path: Path, hobby_model: Path
) -> None:
    vault = tmp_path / "few"
    vault.mkdir()
    _write_vault(vault, TOPICS[:32])  # 32 notes: at most 96 pseudo-queries
    app = make_app(vault, model=hobby_model, calibrate=True)
    cal = app.index().calibration
    assert cal is not None and cal["status"] == "calibrated"
    assert cal["ranking_source"].startswith("default") and cal["queries"] < 100
    assert cal["absence"]["hybrid"]["model"]["thresholds"]["best_cosine"] > 0
    result = app.search("beginner kit for the kayak club")
    assert result.calibration == "default ranking, calibrated absence"
    assert result.ranking == cal["label"]


def test_gc_drops_the_calibrations_of_removed_models(
    make_app, hobby_vault_dir: Path, hobby_model: Path, tmp_path: Path
) -> None:
    other = build_model(hobby_vault_dir, tmp_path / "other", dim=32)  # another fingerprint
    first = make_app(hobby_vault_dir, model=hobby_model, calibrate=True)
    first.index()
    old = first.embedder()[0].fingerprint
    second = make_app(hobby_vault_dir, model=other, calibrate=True)
    second.index()
    assert second.gc()["calibrations_removed"] == 1
    with second.db.connection() as conn:
        keys = {r[0] for r in conn.execute("SELECT model FROM calibrations")}
    assert old not in keys and second.embedder()[0].fingerprint in keys


def test_absence_knows_which_words_the_vault_holds(make_app, hobby_vault_dir, hobby_model) -> None:
    (hobby_vault_dir / "Kite notes.md").write_text("# Kite\n\nKitesurfing off the pier.\n")
    app = make_app(hobby_vault_dir, model=hobby_model, calibrate=True)
    app.index()
    assert app.search("beginner kit for the kayak club").signals["unknown"] == 0.0
    unheard = app.search("paragliding harness inspection for the club")
    assert unheard.signals["unknown"] >= UNKNOWN_SHARE
    # Calibration's left-out queries: the note's words leave the vault with it.
    with app.db.connection() as conn:
        lex = Lexicon.load(conn, {"kitesur", "club"})
        row = conn.execute("SELECT id FROM documents WHERE path = 'Kite notes.md'").fetchone()
        left_out = _doc_term_counts(conn, [row[0]])[row[0]]
    query = query_terms("kitesurfing club")
    assert lex.unknown(query, None) == 0.0
    assert lex.unknown(query, left_out) > 0.0


def test_absence_flags_a_name_the_vault_never_mentions_and_spares_another_language(
    make_app, hobby_vault_dir, hobby_model
) -> None:
    kite = "# Kite\n\nKitesurfing off the Brighton pier.\n"
    (hobby_vault_dir / "Kite notes.md").write_text(kite)
    app = make_app(hobby_vault_dir, model=hobby_model, calibrate=True)
    app.index()
    stored = app.calibration()
    assert stored is not None
    assert stored["absence"]["hybrid"]["model"]["languages"] == ["en"]
    # Every word but the name is the vault's: only the name says the answer is not there.
    named = app.search("Which Torquay club meets on Tuesday evenings near the library?")
    assert named.signals["unknown_name"] >= NAME_SHARE and named.likely_absent
    known = app.search("Which Brighton club meets on Tuesday evenings near the library?")
    assert known.signals["unknown_name"] == 0.0 and not known.likely_absent
    # The thresholds know how long the pseudo-queries they came from were (a longer
    # query is not flagged on them: see test_ranking).
    models = stored["absence"]
    assert all(models[k]["model"]["max_terms"] >= 5 for k in ("hybrid", "lexical"))
    assert named.signals["terms"] == len(query_terms(named.queries[0]))
    # French words miss an English vault by translation: no verdict from them.
    french = app.search("Quel est le prix du kit pour les débutants dans le club ?")
    assert french.signals["foreign"] == 1.0 and not french.likely_absent
    # Calibration's left-out queries: the name leaves the vault with its note.
    with app.db.connection() as conn:
        (term,) = query_terms("Brighton")
        lex = Lexicon.load(conn, {term})
        row = conn.execute("SELECT id FROM documents WHERE path = 'Kite notes.md'").fetchone()
        left_out = _doc_term_counts(conn, [row[0]])[row[0]]
    assert lex.holds(None)(term) and not lex.holds(left_out)(term)


def test_pseudo_queries_on_two_connections_give_the_same_arms_as_on_one(
    make_app, hobby_vault_dir, hobby_model
) -> None:
    from retriever import calibrate as cal
    from retriever import store

    app = make_app(hobby_vault_dir, model=hobby_model)
    app.index()
    embedder = app.embedder()[0]
    assert embedder is not None
    with app.db.connection() as conn:
        notes, shared, common, _ = cal.load_notes(conn, cal.MAX_QUERIES)
        queries = cal.make_queries(
            notes,
            limit=cal.MAX_QUERIES,
            shared_names=shared,
            common_headings=common,
            rarity=cal._rarity(conn, notes),
        )
        model = store.model_row(conn, embedder.fingerprint)
        app._searcher.titles.get(conn)
        conn.commit()
        args = {"embedder": embedder, "model": model, "bm25": app.bm25()}
        one = cal.run_arms(conn, app._searcher, queries, **args)
        conn.commit()
        used: list[bool] = []
        real_spare = app.db.spare

        def counted_spare():  # type: ignore[no-untyped-def]
            used.append(True)
            return real_spare()

        two = cal.run_arms(conn, app._searcher, queries, spare=counted_spare, **args)
        conn.commit()
    assert len(queries) > 20 and used == [True]
    assert [(a.lexical, a.semantic, a.title, a.doc_of) for a in one] == [
        (a.lexical, a.semantic, a.title, a.doc_of) for a in two
    ]
