"""Search end to end on the test vault against a real Postgres."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from retriever.app import Retriever
from retriever.notes import NotePathError
from retriever.query_input import SearchInputError

VAULT_LINES_CACHE: dict[Path, list[str]] = {}


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.fixture
def app(make_app, vault_copy: Path, model_dir: Path) -> Retriever:
    app = make_app(vault_copy, model=model_dir, fresh_interval=0.0)
    report = app.index()
    assert report.passages_pending == 0
    return app


def test_hybrid_finds_and_cites_exact_lines(app: Retriever, vault_copy: Path) -> None:
    result = app.search("how do I restore files from a restic backup")
    assert result.mode == "hybrid" and result.degraded_reason is None
    assert result.hits, "expected hits"
    paths = [h.path for h in result.hits]
    assert any("Backups" in p or "Sauvegardes" in p for p in paths[:3])
    for hit in result.hits:
        lines = _lines(vault_copy / hit.path)
        assert 1 <= hit.start_line <= hit.end_line <= len(lines)
        cited = "\n".join(lines[hit.start_line - 1 : hit.end_line])
        # The delivered text is exactly what `sed -n start,endp` shows (modulo trailing spaces).
        first = hit.text.splitlines()[0].strip()
        assert first in cited
        assert hit.citation == f"{hit.path}:{hit.start_line}-{hit.end_line}"
        assert not hit.stale


def test_budget_is_respected_and_documents_diverse(app: Retriever) -> None:
    result = app.search("backup", budget_tokens=300)
    assert result.used_tokens <= 300 or len(result.hits) == 1
    assert len({h.path for h in result.hits}) == len(result.hits) or result.used_tokens <= 300
    big = app.search("backup", budget_tokens=4000)
    assert big.used_tokens >= result.used_tokens
    assert len(big.hits) >= len(result.hits)


def test_identifier_query_finds_the_code_note(app: Retriever) -> None:
    result = app.search("parseConfigFile")
    assert result.hits[0].path.endswith("Bug - config reload.md")
    result = app.search("v2.14.1")
    assert any(h.path.endswith("Changelog.md") for h in result.hits[:2])


def test_french_note_found_for_french_query(app: Retriever) -> None:
    result = app.search("recette du pain au levain", mode="lexical")
    assert result.hits[0].path == "cooking/Pain au levain.md"


def test_multi_query_fuses_phrasings(app: Retriever) -> None:
    single = app.search("sauvegardes chiffrées")
    multi = app.search(["sauvegardes chiffrées", "encrypted backups"])
    assert multi.queries == ["sauvegardes chiffrées", "encrypted backups"]
    assert {h.path for h in multi.hits[:3]} & {"homelab/Backups.md", "homelab/Sauvegardes.md"}
    assert len(multi.hits) >= 1 and len(single.hits) >= 1


def test_modes_are_reported(app: Retriever) -> None:
    for mode in ("lexical", "semantic", "hybrid"):
        result = app.search("sourdough starter feeding", mode=mode)
        assert result.mode == mode
        assert result.hits


def test_no_embedder_degrades_to_lexical_and_says_so(make_app, vault_copy: Path) -> None:
    app = make_app(vault_copy, model=vault_copy / "no-such-model")
    app.index()
    result = app.search("restic backup retention")
    assert result.mode == "lexical"
    assert result.degraded_reason and "embedder unavailable" in result.degraded_reason
    assert result.hits  # degraded is not empty
    semantic = app.search("restic backup retention", mode="semantic")
    assert semantic.mode == "lexical" and semantic.degraded_reason


def test_absence_signal(app: Retriever) -> None:
    present = app.search("restic backup retention policy")
    assert present.coverage >= 0.5
    assert not present.likely_absent
    absent = app.search("zxqv plorbt wubbalubba")
    assert absent.likely_absent
    assert absent.coverage == 0.0


@pytest.mark.parametrize(
    "query",
    [
        "'quoted' \"double\" `back`",
        "\x00\x01 control \x7f chars",
        "emoji 🙂🚀 only",
        "שלום עולם مرحبا",
        "the and of",  # only stopwords
        "a" * 50_000,
        "SELECT * FROM documents; DROP TABLE chunks; --",
        "%_% LIKE \\",
    ],
)
def test_hostile_queries_never_error(app: Retriever, query: str) -> None:
    result = app.search(query)
    assert result.mode in ("hybrid", "lexical")
    with app.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] > 0
        conn.commit()


@pytest.mark.parametrize(
    ("queries", "message"),
    [
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("& | ! : * ( ) \\", "no searchable terms"),
        (["a", "b", "c", "d", "e"], "at most 4"),
        ("x" * 200_000, "100 KB limit"),
    ],
)
def test_bad_input_gets_a_clear_error(app: Retriever, queries: object, message: str) -> None:
    with pytest.raises(SearchInputError, match=message):
        app.search(queries)  # type: ignore[arg-type]


def test_bad_options_get_a_clear_error(app: Retriever) -> None:
    with pytest.raises(SearchInputError, match="mode"):
        app.search("x", mode="fuzzy")
    with pytest.raises(SearchInputError, match="budget"):
        app.search("x", budget_tokens=10)
    with pytest.raises(SearchInputError, match="ISO"):
        app.search("x", modified_after="last tuesday")


def test_filters(app: Retriever) -> None:
    result = app.search("setup", folder="homelab")
    assert result.hits and all(h.path.startswith("homelab/") for h in result.hits)
    # A folder the vault lacks is said, not answered "likely absent" (test_edges has more).
    with pytest.raises(NotePathError, match="no folder 'nope-no-such-folder' in the vault"):
        app.search("setup", folder="nope-no-such-folder")


def test_fresh_search_sees_a_note_written_a_moment_ago(app: Retriever, vault_copy: Path) -> None:
    note = vault_copy / "Fresh idea.md"
    note.write_text("# Fresh idea\n\nQuokkas photosynthesize marmalade on Tuesdays.\n", "utf-8")
    result = app.search("quokkas marmalade")
    assert result.refreshed_files >= 1
    assert result.hits[0].path == "Fresh idea.md"
    assert result.hits[0].start_line == 1


def test_stale_flag_when_file_changed_since_indexed(app: Retriever, vault_copy: Path) -> None:
    target = vault_copy / "homelab" / "Backups.md"
    before = app.search("restic backup retention", fresh=False)
    assert any(h.path == "homelab/Backups.md" for h in before.hits)
    time.sleep(0.01)
    target.write_text(target.read_text("utf-8") + "\nappended line\n", "utf-8")
    os.utime(target, None)
    after = app.search("restic backup retention", fresh=False)
    assert any(h.stale for h in after.hits if h.path == "homelab/Backups.md")


def test_a_touched_but_unchanged_file_is_not_stale(app: Retriever, vault_copy: Path) -> None:
    # A copy, a checkout or a sync tool gives files a new mtime without changing them.
    target = vault_copy / "homelab" / "Backups.md"
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    after = app.search("restic backup retention", fresh=False)
    ours = [h for h in after.hits if h.path == "homelab/Backups.md"]
    assert ours and not any(h.stale for h in ours)


def test_a_same_size_edit_is_stale(app: Retriever, vault_copy: Path) -> None:
    target = vault_copy / "homelab" / "Backups.md"
    raw = target.read_bytes()
    i = raw.index(b"restic")
    target.write_bytes(raw[:i] + b"RESTIC" + raw[i + 6 :])  # same size, new bytes
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    after = app.search("restic backup retention", fresh=False)
    assert any(h.stale for h in after.hits if h.path == "homelab/Backups.md")


def test_graph_lifts_a_linked_note_sharing_no_words(app: Retriever) -> None:
    # Daily/2024-05-12.md links to cooking/Shakshuka.md (see tests/vault-cases.jsonl "graph").
    query = "Tomás birthday dinner"
    with_graph = app.search(query, graph=True, budget_tokens=3000)
    ranks = [h.ranks.get("graph") for h in with_graph.hits if h.path == "cooking/Shakshuka.md"]
    assert ranks and ranks[0] is not None


def test_explain_ranks_present(app: Retriever) -> None:
    result = app.search("restic backup")
    top = result.hits[0]
    assert set(top.ranks) == {"lexical", "semantic", "graph", "title"}
    assert top.ranks["lexical"] is not None or top.ranks["semantic"] is not None


def test_a_note_other_notes_cite_outranks_a_transcript_using_the_same_words(
    make_app, tmp_path: Path
) -> None:
    vault = tmp_path / "linked"
    vault.mkdir()
    (vault / "Levain.md").write_text(
        "# Levain\n\nFeed the sourdough starter twice a day: flour and water, weighed on the scale.\n"
    )
    (vault / "Call transcript.md").write_text(
        "# Call transcript\n\nFeed the sourdough starter twice a day.\n"
    )
    for name in ("Bread", "Baking log", "Pantry"):
        (vault / f"{name}.md").write_text(f"# {name}\n\nSee [[Levain]] for the routine.\n")
    plain = make_app(vault, link_prior=0.0, graph=False)
    plain.index()
    query = "feed the sourdough starter twice a day"
    # Without the prior the shorter transcript passage wins on BM25 alone.
    assert plain.search(query).ranked_paths[0] == "Call transcript.md"
    cited = make_app(vault, graph=False)  # the default prior
    assert cited.search(query).ranked_paths[:2] == ["Levain.md", "Call transcript.md"]


def test_arms_run_side_by_side_on_the_searchs_own_snapshot(app: Retriever) -> None:
    from contextlib import contextmanager

    from retriever.lexical import BM25Params
    from retriever.search import Scope

    searcher, db = app._searcher, app.db
    embedder, _ = app.embedder()
    assert embedder is not None
    query = ["how do I restore files from a restic backup"]
    used: list[bool] = []

    @contextmanager
    def spare():  # type: ignore[no-untyped-def]
        with db.spare() as conn:
            used.append(conn is not None)
            yield conn

    with db.connection() as conn:
        model, _ = searcher.semantic_model(conn, embedder, None)
        vectors = searcher.query_vectors(embedder, query)
        alone = searcher.gather(conn, query, "hybrid", model, vectors, Scope("", {}), BM25Params())
        conn.rollback()
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT count(*) FROM embeddings")  # the search's snapshot starts here
        with db.connection() as other:  # a re-index removes every vector meanwhile
            other.execute("DELETE FROM embeddings")
            other.commit()
        args = (conn, query, "hybrid", model, vectors, Scope("", {}), BM25Params())
        beside = searcher.gather(*args, spare=spare)
        conn.rollback()
    # The second connection ran the semantic and title arms, and saw what the search's
    # own connection sees (before the delete): the same arms as one connection alone.
    assert used == [True]
    assert beside.semantic and beside.semantic == alone.semantic
    assert (beside.lexical, beside.title, beside.doc_of) == (
        alone.lexical,
        alone.title,
        alone.doc_of,
    )


def test_coverage_from_the_fetched_terms_equals_the_lexicon_lookup(app: Retriever) -> None:
    """A search reads its coverage from the best chunk's terms, fetched with the chunks it
    delivers, matched to the query's terms by lexicon id: the same share as asking the
    lexicon which of the query's terms that chunk holds, for every chunk of the vault."""
    from retriever import store
    from retriever.search import _coverage

    searcher = app._searcher
    queries = [
        ["dashi kombu bonito"],
        ["restic backup nightly to the NAS", "zorblax"],
        ["how long does dashi keep", "sourdough levain"],
        ["the and of"],
    ]
    with app.db.connection() as conn:
        lookup = searcher.terms.lookup(searcher.generation(conn).index)
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM chunks ORDER BY id").fetchall()]
        held = 0
        for cid in ids:
            with_terms = store.fetch_chunks(conn, [cid], terms_of=cid)[cid]
            without = store.fetch_chunks(conn, [cid])[cid]
            assert with_terms.terms is not None and without.terms is None
            for qs in queries:
                fetched = _coverage(conn, with_terms, qs, lookup)
                assert fetched == _coverage(conn, without, qs, lookup), (cid, qs)
                held += fetched > 0
        conn.rollback()
    assert held > 5  # the queries do match some chunks


def test_a_search_begins_on_one_snapshot_and_reads_its_generation(app: Retriever) -> None:
    """``Searcher.begin``: BEGIN, REPEATABLE READ and the generation in one round trip; an
    index run committing meanwhile moves neither what the search sees nor its generation."""
    from retriever import store
    from retriever.calibration_store import CALIBRATION_VERSION

    with app.db.connection() as conn:
        gen = app._searcher.begin(conn)
        assert conn.execute("SHOW transaction_isolation").fetchone() == ("repeatable read",)
        assert gen == store.read_generation(conn, CALIBRATION_VERSION)
        assert gen.index is not None and "last_index" in gen.vectors
        with app.db.connection() as other:
            store.set_meta(other, "last_index", {"at": 0.0, "vault": "elsewhere"})
            other.commit()
        assert store.read_generation(conn, CALIBRATION_VERSION) == gen
        conn.rollback()
        assert store.read_generation(conn, CALIBRATION_VERSION).index != gen.index
        conn.rollback()
