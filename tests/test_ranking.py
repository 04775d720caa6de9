"""Pure ranking stages: fusion with the title and graph arms, the title index, pseudo-queries,
and the absence thresholds (no database, no model)."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.absence import (
    NAME_SHARE,
    UNKNOWN_SHARE,
    AbsenceModel,
    fit,
    foreign,
    signals,
    unknown_name,
    unknown_share,
)
from retriever.calibrate import Chooser, corrected, lexical_twin
from retriever.fuse import linear
from retriever.lexical import tokenize
from retriever.pseudo import NoteSample, Section, make_queries, note_order, plain_text
from retriever.ranking import DEFAULT_RANKING, Arms, Ranking, doc_rank, fuse, ranked_docs
from retriever.search import SearchOptions, default_absent
from retriever.titles import TitleIndex, note_names


def _arms() -> Arms:
    # Chunks 1-2 belong to note 10 (a hub), chunk 3 to note 20, chunk 4 to note 30.
    return Arms(
        lexical=[{1: 9.0, 3: 5.0, 4: 1.0}],
        semantic=[{2: 0.8, 3: 0.7, 4: 0.6}],
        doc_of={1: 10, 2: 10, 3: 20, 4: 30},
    )


def _first(doc: int) -> int | None:
    return {10: 1, 20: 3, 30: 4, 40: 5}.get(doc)


def test_fusion_prefers_what_both_arms_found() -> None:
    # Chunk 3 is second in both arms; chunks 1 and 2 top one arm each.
    rrf, lifted = fuse(_arms(), Ranking("rrf", 1.0, 60.0, graph_weight=0.0), first_chunk=_first)
    assert ranked_docs(rrf, _arms().doc_of)[0] == 20 and lifted == []
    # Linear fusion keeps how far ahead a hit is: a lexical-heavy mix follows BM25's lead.
    lin, _ = fuse(_arms(), Ranking("linear", 0.25, graph_weight=0.0), first_chunk=_first)
    assert ranked_docs(lin, _arms().doc_of)[0] == 10


def test_a_second_matching_passage_counts_for_its_note() -> None:
    # Note 10 answers with two passages (chunks 1, 2); note 20 with one stronger passage.
    arms = Arms(lexical=[{3: 10.0, 1: 8.0, 2: 7.0}], doc_of={1: 10, 2: 10, 3: 20})
    plain, _ = fuse(arms, Ranking("lexical", second_passage=0.0), first_chunk=_first)
    assert ranked_docs(plain, arms.doc_of)[0] == 20
    credited, _ = fuse(arms, Ranking("lexical", second_passage=0.5), first_chunk=_first)
    assert ranked_docs(credited, arms.doc_of)[0] == 10
    # Rank-based fusions leave it alone: their scores are ranks, not evidence.
    rrf, _ = fuse(arms, Ranking("rrf", second_passage=0.5), first_chunk=_first)
    assert rrf == fuse(arms, Ranking("rrf", second_passage=0.0), first_chunk=_first)[0]


def test_the_link_prior_lifts_a_cited_note_over_an_uncited_one() -> None:
    # Note 10 (say a transcript nothing cites) is slightly ahead of note 20, which other
    # notes cite; note 30 is far behind.
    arms = Arms(lexical=[{1: 10.0, 3: 9.5, 4: 2.0}], doc_of={1: 10, 3: 20, 4: 30})
    prior = {20: 1.0, 30: 1.0}
    plain, _ = fuse(arms, Ranking("lexical", link_prior=0.0), first_chunk=_first, prior=prior)
    assert ranked_docs(plain, arms.doc_of) == [10, 20, 30]
    lifted, _ = fuse(arms, Ranking("lexical", link_prior=0.2), first_chunk=_first, prior=prior)
    # A multiplier: the close call flips, the far-behind note stays behind.
    assert ranked_docs(lifted, arms.doc_of) == [20, 10, 30]
    assert lifted[3] == pytest.approx(9.5 / 10.0 * 1.2) and lifted[1] == plain[1]
    # No prior (a vault without links) or no weight: the scores are untouched.
    assert fuse(arms, Ranking("lexical"), first_chunk=_first, prior={})[0] == plain
    assert "+prior0" in Ranking(link_prior=0.0).label() and "prior" not in Ranking().label()


def test_single_arm_rankings_use_only_their_arm() -> None:
    lexical, _ = fuse(_arms(), Ranking("lexical", graph_weight=0.0), first_chunk=_first)
    assert max(lexical, key=lexical.__getitem__) == 1
    semantic, _ = fuse(_arms(), Ranking("semantic", graph_weight=0.0), first_chunk=_first)
    assert max(semantic, key=semantic.__getitem__) == 2
    # A search that ran only one arm uses it whatever the ranking says.
    only_semantic = Arms(semantic=[{2: 0.8, 4: 0.5}], doc_of={2: 10, 4: 30})
    scores, _ = fuse(only_semantic, Ranking("lexical"), first_chunk=_first)
    assert set(scores) == {2, 4}


def test_title_arm_lifts_the_named_note_to_the_top() -> None:
    arms = _arms()
    arms.title = {30: 1.0}
    without, _ = fuse(_arms(), Ranking("rrf", 1.0, graph_weight=0.0), first_chunk=_first)
    assert ranked_docs(without, _arms().doc_of)[0] == 20
    scores, _ = fuse(
        arms, Ranking("rrf", 1.0, title_weight=1.0, graph_weight=0.0), first_chunk=_first
    )
    assert ranked_docs(scores, arms.doc_of)[0] == 30


def test_title_arm_adds_a_note_no_chunk_list_found() -> None:
    arms = _arms()
    arms.title = {40: 0.9}
    scores, _ = fuse(
        arms, Ranking("rrf", 1.0, title_weight=2.0, graph_weight=0.0), first_chunk=_first
    )
    assert 5 in scores and arms.doc_of[5] == 40


def test_graph_walk_lifts_neighbours_by_weight() -> None:
    def walk(seeds: dict[int, float]) -> list[int]:
        assert 10 in seeds  # the best hits seed the walk
        return [40]

    r = Ranking("rrf", 1.0, graph_weight=1.0)
    scores, lifted = fuse(_arms(), r, first_chunk=_first, walk=walk)
    assert lifted == [5] and scores[5] > 0
    none, lifted_none = fuse(_arms(), r.with_(graph_weight=0.0), first_chunk=_first, walk=walk)
    assert lifted_none == [] and 5 not in none


def test_ranking_overrides_and_labels() -> None:
    calibrated = Ranking("linear", 0.5, graph_weight=0.0, title_weight=0.5)
    assert calibrated.apply({"method": "rrf", "rrf_k": 30.0}).method == "rrf"
    assert calibrated.apply({"graph": True}).graph_weight > 0  # asked for: back on
    assert calibrated.apply({"graph_weight": 0.0}).graph_weight == 0.0
    assert Ranking.from_dict(calibrated.to_dict()) == calibrated
    assert DEFAULT_RANKING.label().startswith("linear(sw=0.5)")
    assert calibrated.label() == "linear(sw=0.5)+title0.5+ident2"


def test_leave_one_out_and_hidden_chunk() -> None:
    arms = _arms()
    loo = arms.without_doc(10)
    assert all(10 not in loo.doc_of.values() for _ in [0]) and 1 not in loo.lexical[0]
    hidden = arms.without_chunk(3)
    assert 3 not in hidden.lexical[0] and 3 not in hidden.semantic[0]


def _random_arms(rng: np.random.Generator) -> Arms:
    """Two queries' lists over 40 chunks of 12 notes, with tied scores."""
    chunks = rng.permutation(40)[: rng.integers(5, 40)]

    def lists(scale: float) -> list[dict[int, float]]:
        return [
            {int(c): float(rng.integers(1, 6)) * scale for c in rng.choice(chunks, 15)}
            for _ in range(2)
        ]

    return Arms(lists(2.5), lists(0.1), doc_of={int(c): int(c) % 12 for c in range(40)})


def _plain_linear(arms: Arms, ranking: Ranking) -> dict[int, float]:
    """What fusion gives without title, graph and second passage: ``linear`` itself."""
    lex, sem = [x for x in arms.lexical if x], [x for x in arms.semantic if x]
    if ranking.method == "lexical":
        return linear(lex, [], alpha=0.0)
    if ranking.method == "semantic":
        return linear([], sem, alpha=1.0)
    lean = ranking.identifier_lean if arms.identifier else 1.0
    return linear(lex, sem, alpha=ranking.semantic_weight / (ranking.semantic_weight + lean))


def test_normalised_lists_are_reused_only_by_copies_of_the_same_arms() -> None:
    rng = np.random.default_rng(7)
    plain = {"graph_weight": 0.0, "second_passage": 0.0}
    rankings = [
        Ranking("linear", sw, identifier_lean=lean, **plain)
        for sw in (0.25, 1.0, 4.0)
        for lean in (1.0, 2.0)
    ] + [Ranking("lexical", **plain), Ranking("semantic", **plain)]
    for _ in range(30):
        arms = _random_arms(rng)
        arms.identifier = bool(rng.integers(0, 2))
        shared = arms.copy()
        for ranking in rankings:  # one arms, normalised once, fused many ways
            got = fuse(shared.copy(), ranking, first_chunk=lambda d: None)[0]
            assert got == _plain_linear(arms, ranking)
        assert shared.normalised and arms.normalised is shared.normalised
        # A note left out or a passage hidden: other lists, normalised afresh.
        first = next(iter(arms.lexical[0] or arms.doc_of))
        for other in (arms.without_doc(arms.doc_of[first]), arms.without_chunk(first)):
            assert not other.normalised
            for ranking in rankings:
                got = fuse(other.copy(), ranking, first_chunk=lambda d: None)[0]
                assert got == _plain_linear(other, ranking)


def test_doc_rank_is_the_notes_place_in_ranked_docs() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        scores = {int(c): float(rng.integers(0, 4)) for c in rng.choice(50, 30)}  # ties
        doc_of = {c: c % 9 for c in scores if c % 7}  # some chunks have no note
        docs = ranked_docs(scores, doc_of)
        for doc in range(10):
            expected = docs.index(doc) if doc in docs else None
            assert doc_rank(scores, doc_of, doc) == expected


# --- titles ---------------------------------------------------------------------------


def _titles() -> TitleIndex:
    return TitleIndex.build(
        [
            (1, "Tags.md", "Tags", []),
            (2, "Glossary.md", "Glossary", []),
            (3, "dendron.md", "Dendron", []),
            (4, "dendron.topic.lookup.modifiers.md", "Lookup Modifiers", ["filters"]),
            (5, "Café crème.md", "Café crème", []),
            (6, "Restic backups.md", "Restic backups", ["offsite copies"]),
        ]
    )


def test_note_names_cover_title_alias_file_and_dendron_label() -> None:
    names = note_names("a/dendron.topic.lookup.md", "Lookup", ["finder"])
    assert names == ["Lookup", "finder", "dendron.topic.lookup"]
    assert note_names("x.y.md", "Title", []) == ["Title", "x.y", "y"]


@pytest.mark.parametrize(
    ("path", "stem"),
    [
        ("a.md", "a"),
        ("d/a.b.c.md", "a.b.c"),
        (".hidden", ".hidden"),
        ("d/.md", ".md"),
        ("d/foo.", "foo."),
        ("d/foo.bar.", "foo.bar."),
        ("noext", "noext"),
        ("x/y.tar.gz", "y.tar"),
        ("..md", "."),
        ("a..md", "a."),
        ("d/é l.MD", "é l"),
        ("a/b/c", "c"),
    ],
)
def test_a_notes_file_name_is_its_path_stem(path: str, stem: str) -> None:
    # As PurePosixPath(path).stem before Python 3.14 (which reads "foo." and "..md" anew).
    assert note_names(path, "Title", [])[1] == stem


def test_name_weights_follow_the_passage_idf_they_are_given() -> None:
    index = TitleIndex.build([(6, "Restic backups.md", "Restic backups", [])])
    assert index.search("restic") == {6: 0.5}  # before any IDF: every word weighs 1
    (restic,) = tokenize("restic")
    (backups,) = tokenize("backups")
    index.set_idf({restic: 3.0, backups: 0.5}, max_idf=5.0)
    assert index.search("restic") == {6: pytest.approx(3 / 3.5)}  # the rare word names it
    assert index.search("backups") == {}  # 0.5 / 3.5 of the name's information: not named


def test_a_query_that_names_a_note_finds_it() -> None:
    index = _titles()
    assert next(iter(index.search("tags"))) == 1
    assert next(iter(index.search("tag"))) == 1  # singular
    assert next(iter(index.search("cafe creme"))) == 5  # accents
    assert next(iter(index.search("lookup modifers"))) == 4  # a typo
    assert next(iter(index.search("filters"))) == 4  # an alias
    assert next(iter(index.search("restic backup"))) == 6


def test_a_long_question_merely_containing_a_name_does_not_name_it() -> None:
    index = _titles()
    others = ["crash", "fetch", "remot", "git", "chang", "uncommi", "edit", "vanish"]
    index.weigh(dict.fromkeys(others, 5.0), index.max_idf, others)  # rare words, no names
    found = index.search(
        "dendron crashed while fetching remote git changes and my uncommitted edits vanished"
    )
    assert 3 not in found
    assert index.search("zebra") == {}


def test_common_name_words_tied_on_their_counts_seed_the_same_names_in_any_order() -> None:
    """The query's words come from a set, whose order follows the process's hash seed: a
    tie between the most specific common words must not depend on it."""
    notes: list[tuple[int, str, str, list[str]]] = [
        (i, f"alpha {i}.md", f"Alpha {i}", []) for i in range(60)
    ]
    notes += [(100 + i, f"beta {i}.md", f"Beta {i}", []) for i in range(60)]
    index = TitleIndex.build(notes)
    (alpha,), (beta,) = tokenize("alpha"), tokenize("beta")
    assert len(index.postings[alpha]) == len(index.postings[beta]) > 50  # both common
    one = index._candidates({alpha: 1.0, beta: 1.0})
    other = index._candidates({beta: 1.0, alpha: 1.0})
    assert one == other and one


# --- pseudo-queries -------------------------------------------------------------------


def _notes(n: int) -> list[NoteSample]:
    notes = []
    for i in range(n):
        body = (
            f"The pump number {i} moves water through the garden irrigation pipes every "
            f"morning. Cleaning the filter of pump {i} keeps the flow steady and quiet."
        )
        notes.append(
            NoteSample(
                doc=i,
                path=f"pumps/pump-{i}.md",
                title=f"Pump {i} maintenance",
                aliases=(),
                sections=(
                    Section(
                        i * 10, (f"Pump {i}", f"Filter cleaning schedule {i}x"), body, "paragraph"
                    ),
                    Section(i * 10 + 1, (f"Pump {i}", "Winter storage"), body, "paragraph"),
                ),
                anchors=(f"See [[pump-{i}]] before draining the irrigation pipes for winter.",),
            )
        )
    return notes


def test_pseudo_queries_are_deterministic_and_split_by_note() -> None:
    notes = _notes(40)
    first = make_queries(notes, limit=60)
    again = make_queries(list(reversed(notes)), limit=60)
    assert [q.to_dict() for q in first] == [q.to_dict() for q in again]
    assert 0 < len(first) <= 60
    splits: dict[str, set[str]] = {}
    for q in first:
        splits.setdefault(q.path, set()).add(q.split)
    assert all(len(s) == 1 for s in splits.values())  # a note informs one half only
    assert {q.split for q in first} == {"choose", "report"}
    assert {q.kind for q in first} <= {"title", "heading", "anchor", "span"}


def test_adding_a_note_keeps_the_other_notes_queries() -> None:
    notes = _notes(40)
    before = {q.path: q.text for q in make_queries(notes, limit=400)}
    after = {q.path: q.text for q in make_queries([*notes, *_notes(41)[40:]], limit=400)}
    assert all(after[p] == t for p, t in before.items() if p in after)
    assert note_order(["b", "a", "c"]) == note_order(["c", "b", "a"])


def test_span_queries_hide_their_passage_and_anchors_lose_the_link() -> None:
    queries = make_queries(_notes(60), limit=400)
    spans = [q for q in queries if q.kind == "span"]
    assert spans and all(q.hide is not None for q in spans)
    anchors = [q for q in queries if q.kind == "anchor"]
    assert anchors and all("[[" not in q.text and "pump-" not in q.text for q in anchors)
    assert plain_text("see [[a/b|the label]] and [x](y.md)") == "see the label and x"


# --- absence --------------------------------------------------------------------------


def test_absence_threshold_is_a_quantile_of_answerable_signals() -> None:
    answerable = [{"coverage": 0.9, "best_cosine": c / 100} for c in range(50, 100)]
    model = fit(answerable, semantic=True, coverage=0.4, quantile=0.2)
    assert 0.58 < model.thresholds["best_cosine"] < 0.61
    assert model.absent({"coverage": 0.1, "best_cosine": 0.3})
    assert not model.absent({"coverage": 0.9, "best_cosine": 0.3})  # the terms are there
    assert not model.absent({"coverage": 0.1, "best_cosine": 0.9})  # the meaning is there
    assert AbsenceModel.from_dict(model.to_dict()) == model
    lexical = fit([{"lexical_gap": 0.5}], semantic=False, coverage=0.4, quantile=0.2)
    assert set(lexical.thresholds) == {"coverage", "lexical_gap"}


def test_an_unknown_subject_needs_only_an_unconvinced_model() -> None:
    answerable = [{"coverage": 0.9, "best_cosine": c / 100} for c in range(50, 100)]
    model = fit(answerable, semantic=True, coverage=0.4, quantile=0.2)
    loose = model.unknown_limits["best_cosine"]
    assert model.thresholds["best_cosine"] < loose and 0.73 < loose < 0.76  # the median
    heard = {"coverage": 0.45, "unknown": 0.0, "best_cosine": 0.7}
    unheard = {**heard, "unknown": UNKNOWN_SHARE}
    assert not model.absent(heard)  # the terms are there
    assert model.absent(unheard)  # half the query is in words no note holds
    assert not model.absent({**unheard, "coverage": 0.5})  # ... but most words match
    assert not model.absent({**unheard, "best_cosine": 0.8})  # ... but the meaning is there
    assert not model.absent({**unheard, "unknown": UNKNOWN_SHARE - 0.01})
    legacy = AbsenceModel.from_dict({"thresholds": model.thresholds, "quantile": 0.2})
    assert not legacy.absent(unheard)  # a stored model without the rule keeps its behaviour


def test_a_query_naming_what_no_note_mentions_is_flagged_whatever_the_model_says() -> None:
    answerable = [{"coverage": 0.9, "best_cosine": c / 100} for c in range(50, 100)]
    model = fit(answerable, semantic=True, coverage=0.4, quantile=0.2, vault_languages=["en"])
    convinced = {"coverage": 0.7, "unknown": 0.3, "best_cosine": 0.95}
    assert not model.absent(convinced)
    assert model.absent({**convinced, "unknown_name": 1.0})
    assert AbsenceModel.from_dict(model.to_dict()) == model
    assert AbsenceModel.from_dict(model.to_dict()).languages == ("en",)


def test_a_query_in_a_language_the_vault_is_not_written_in_is_not_flagged() -> None:
    answerable = [{"coverage": 0.9, "best_cosine": c / 100} for c in range(50, 100)]
    model = fit(answerable, semantic=True, coverage=0.4, quantile=0.2, vault_languages=["en"])
    weak = {"coverage": 0.1, "unknown": 0.9, "best_cosine": 0.3}
    assert model.absent(weak)
    assert not model.absent({**weak, "foreign": 1.0})  # its words miss by translation
    assert model.absent({**weak, "foreign": 1.0, "unknown_name": 1.0})
    french = "Comment restaurer un fichier depuis la sauvegarde ?"
    assert foreign([french], ["en"]) == 1.0
    assert foreign([french], ["en", "fr"]) == 0.0
    assert foreign([french], []) == 0.0  # the vault's languages are unknown
    assert foreign([french, "How do I restore a file from the backup?"], ["en"]) == 0.0
    assert foreign(["restic"], ["en"]) == 0.0  # too short to tell


def test_unknown_name_is_the_share_of_the_query_in_names_no_passage_holds() -> None:
    known = {"pi", "dendron", "set", "server"}.__contains__
    assert unknown_name([("wireguard",)], known, ["set", "wireguard"]) == 0.5
    assert unknown_name([("dendron",), ("wireguard",)], known, ["dendron", "wireguard"]) == 0.5
    hole = ("pi-hole", "pi", "hole")
    assert unknown_name([hole], known, ["pi-hole", "pi", "hole"]) == 0.0  # "pi" is there
    assert unknown_name([], known, ["set"]) == 0.0
    assert unknown_name([("wireguard",)], known, []) == 0.0
    # In a pasted abstract, one unheard name is a detail, not the subject.
    long_text = ["server", "wireguard", *(f"word{i}" for i in range(20))]
    assert unknown_name([("wireguard",)], known, long_text) < NAME_SHARE


def test_unknown_share_weighs_terms_by_idf() -> None:
    idfs = {"backup": 1.0, "restic": 3.0}
    assert unknown_share({"backup": 1, "restic": 1}, idfs, 5.0) == 0.0
    assert unknown_share({"croissant": 1}, idfs, 5.0) == 1.0
    assert unknown_share({"backup": 1, "croissant": 1}, idfs, 5.0) == 5.0 / 6.0
    assert unknown_share({"restic": 2, "croissant": 1}, idfs, 5.0) == 5.0 / 11.0
    assert unknown_share({}, idfs, 5.0) == 0.0


def test_signals_of_a_search() -> None:
    sig = signals(_arms(), coverage=0.5)
    assert sig["coverage"] == 0.5 and sig["best_cosine"] == 0.8
    assert 0 < sig["cosine_gap"] <= 0.2 + 1e-9 and 0 < sig["lexical_gap"] < 1
    assert sig["agreement"] > 0


# --- calibration's choice -------------------------------------------------------------


def _chooser(scores: dict[Ranking, list[float]]) -> Chooser:
    chooser = Chooser(bench=None, choose=[], report=[])  # type: ignore[arg-type]
    chooser.seen.update({r: np.array(s) for r, s in scores.items()})  # scored already
    return chooser


def test_each_fusion_keeps_its_best_semantic_weight_whatever_the_grid_order() -> None:
    low, high = Ranking("linear", 0.25), Ranking("linear", 0.5)
    rrf_low, rrf_high = Ranking("rrf", 0.5, 60.0), Ranking("rrf", 1.0, 60.0)
    rrf20 = Ranking("rrf", 0.5, 20.0)
    scores = {
        low: [0.50, 0.52],
        high: [0.51, 0.52],
        rrf_low: [0.4, 0.4],
        rrf_high: [0.3, 0.3],
        rrf20: [0.2, 0.2],
    }
    chooser = _chooser(scores)
    assert chooser.best_weights([low, high, rrf_low, rrf_high, rrf20]) == [high, rrf_low, rrf20]
    assert chooser.best_weights([high, low]) == [high]  # a weight listed first gains nothing
    # Across fusions the simpler one (listed first) still wins within the noise.
    assert chooser.pick(chooser.best_weights([low, high, rrf_low])) == high


def test_the_semantic_weight_is_doubled_only_when_the_fusion_beat_bm25_alone() -> None:
    fusion = Ranking("linear", 0.125, title_weight=0.5, query_words="content")
    bm25 = lexical_twin(fusion)
    assert bm25 == Ranking("lexical", 0.125, title_weight=0.5)  # same title, graph, lean
    earned = _chooser({fusion: [0.6, 0.5], bm25: [0.5, 0.5]})
    assert corrected(fusion, earned) == fusion.with_(semantic_weight=0.25)
    # BM25 alone as good (or better): the fusion stays only because one arm must win
    # clearly to replace it, and its weight is left as the pseudo-queries chose it.
    for lexical in ([0.55, 0.55], [0.6, 0.6]):
        assert corrected(fusion, _chooser({fusion: [0.6, 0.5], bm25: lexical})) == fusion
    # A single arm has no weight to correct.
    alone = Ranking("lexical")
    assert corrected(alone, _chooser({alone: [0.5], lexical_twin(alone): [0.5]})) == alone


def test_the_uncalibrated_rule_also_flags_a_name_no_note_mentions() -> None:
    opts = SearchOptions()
    convinced = {"coverage": 0.8, "unknown": 0.2, "best_cosine": 0.9}
    assert not default_absent(convinced, opts, semantic=True)
    assert default_absent({**convinced, "unknown_name": 1.0}, opts, semantic=True)
    assert default_absent({**convinced, "unknown_name": 1.0}, opts, semantic=False)


def test_a_query_longer_than_every_pseudo_query_is_not_flagged_on_weak_signals() -> None:
    answerable = [
        {"coverage": 0.9, "best_cosine": c / 100, "terms": 4 + c % 9} for c in range(50, 100)
    ]
    model = fit(answerable, semantic=True, coverage=0.4, quantile=0.2)
    assert model.max_terms == 12  # the longest answerable pseudo-query
    weak = {"coverage": 0.2, "best_cosine": 0.3, "terms": 12.0}
    assert model.absent(weak)
    pasted = {**weak, "terms": 40.0}  # a pasted paragraph: coverage is low by length
    assert not model.absent(pasted)
    assert model.absent({**pasted, "unknown_name": 1.0})
    assert AbsenceModel.from_dict(model.to_dict()).max_terms == 12
    legacy = AbsenceModel.from_dict({"thresholds": model.thresholds, "quantile": 0.2})
    assert legacy.max_terms == 0 and legacy.absent(pasted)  # stored before: no limit


def test_the_uncalibrated_rule_leaves_pasted_paragraphs_alone() -> None:
    opts = SearchOptions()
    weak = {"coverage": 0.1, "unknown": 0.0, "best_cosine": 0.2}
    assert default_absent({**weak, "terms": 10.0}, opts, semantic=True)
    assert not default_absent({**weak, "terms": 40.0}, opts, semantic=True)
    assert not default_absent({**weak, "terms": 40.0}, opts, semantic=False)
