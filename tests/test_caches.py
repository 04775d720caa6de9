"""What a search keeps between index runs (title index, link graph, link resolver) against a
real PostgreSQL: kept when an edit moved nothing they are built from, rebuilt when it did,
and always answering as a fresh build would."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import psycopg
import pytest

from retriever import index, lexical, store
from retriever.app import Retriever
from retriever.graph import load_graph
from retriever.lexical import query_terms, term_idf
from retriever.ranking import Ranking
from retriever.search import Scope
from retriever.titles import TitleIndex
from tests.conftest import AppFactory, count_walks


def _doc_id(conn: psycopg.Connection, path: str) -> int:
    row = conn.execute("SELECT id FROM documents WHERE path = %s", (path,)).fetchone()
    assert row is not None
    return int(row[0])


def _first_chunk(conn: psycopg.Connection, doc: int) -> int:
    row = conn.execute(
        "SELECT id FROM chunks WHERE doc_id = %s ORDER BY ordinal LIMIT 1", (doc,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def _fresh_titles(conn: psycopg.Connection) -> TitleIndex:
    rows = conn.execute("SELECT id, path, title, aliases FROM documents").fetchall()
    fresh = TitleIndex.build((int(r[0]), r[1], r[2], r[3]) for r in rows)
    fresh.set_idf(*term_idf(conn, list(fresh.postings)))
    return fresh


def _fresh_search(conn: psycopg.Connection, fresh: TitleIndex, query: str) -> dict[int, float]:
    """What a fresh build's title arm answers: query words no name holds weighed too."""
    words = sorted(t for t in query_terms(query) if t not in fresh.passage_idf)
    if words:
        fresh.weigh(*term_idf(conn, words), words)
    return fresh.search(query)


def _weighed_names(titles: TitleIndex) -> list[tuple[int, list[str], float]]:
    """Each name with its weight, in an order that does not depend on the rows' order."""
    return sorted(
        (doc, sorted(words), info)
        for (doc, words), info in zip(titles.names, titles.name_info, strict=True)
    )


def _indexed(make_app: AppFactory, vault: Path) -> tuple[Retriever, TitleIndex, nx.Graph]:
    """An indexed app, and the title index and link graph its searches use now."""
    app = make_app(vault)
    app.index()
    with app.db.connection() as conn:
        titles, graph = app._searcher.titles.get(conn), app._searcher.graph.get(conn)
        conn.commit()
    return app, titles, graph


def _append(note: Path, text: str) -> None:
    note.write_text(note.read_text(encoding="utf-8") + text, encoding="utf-8")


def test_a_body_edit_keeps_the_names_and_the_graph_but_not_the_weights_or_openings(
    make_app: AppFactory, vault_copy: Path
) -> None:
    app, titles, graph = _indexed(make_app, vault_copy)
    searcher = app._searcher
    with app.db.connection() as conn:
        shakshuka = _doc_id(conn, "cooking/Shakshuka.md")
        titles.load_openings(conn, [shakshuka])
        opening = titles.first_chunk(shakshuka)
        assert opening == _first_chunk(conn, shakshuka)
        before = _fresh_titles(conn)
        conn.commit()
    # New words (their IDF moves) and a new opening chunk; no name, no link changes.
    note = vault_copy / "cooking" / "Shakshuka.md"
    note.write_text(
        note.read_text(encoding="utf-8").replace(
            "# Shakshuka\n",
            "# Shakshuka\n\nHarissa zhoug labneh, a brunch classic, nothing like a dashi.\n",
        ),
        encoding="utf-8",
    )
    assert app.index().files_changed == 1
    with app.db.connection() as conn:
        kept, same_graph = searcher.titles.get(conn), searcher.graph.get(conn)
        fresh = _fresh_titles(conn)
        assert kept is not titles and kept.names is titles.names  # names not rebuilt
        assert same_graph is graph
        # Nothing is weighed or opened until a search needs it ...
        assert not kept.weighed and kept.first_chunk(shakshuka) is None
        for query in ("shakshuka", "harissa brunch", "dashi stock", "shakshuka dashi"):
            found = searcher._titles(conn, kept, [query], Scope("", {}))
            assert found == _fresh_search(conn, fresh, query), query
        # ... then only what it needed, weighed as a fresh build weighs it.
        assert 0 < len(kept.weighed) < len(kept.postings)
        names = kept.weighed & set(kept.postings)
        assert {w: kept.weight(w) for w in names} == {w: fresh.weight(w) for w in names}
        assert kept.weight("dashi") != before.weight("dashi")  # the weights did move
        kept.load_openings(conn, [shakshuka])
        new_opening = kept.first_chunk(shakshuka)
        assert new_opening == _first_chunk(conn, shakshuka) and new_opening != opening
        kept.preload(conn)  # everything at once, as calibration asks
        assert {w: kept.weight(w) for w in kept.postings} == {
            w: fresh.weight(w) for w in kept.postings
        }
        assert _weighed_names(kept) == _weighed_names(fresh)
        conn.commit()


def test_a_note_only_the_title_arm_or_the_walk_finds_is_delivered_after_an_edit(
    make_app: AppFactory, vault_copy: Path
) -> None:
    """Openings are looked up per generation as searches need them: a note no passage
    list holds (named by its file name; linked from the only match) still answers."""
    (vault_copy / "cooking" / "Zorblax.md").write_text(
        "---\ntitle: Kitchen ideas\n---\nOnions, slowly, in butter.\n", encoding="utf-8"
    )
    app = make_app(vault_copy)
    app.index()
    app.search("warm the caches up", fresh=False)
    _append(vault_copy / "cooking" / "Dashi.md", "\nQuxbrine pairs with [[Shakshuka]].\n")
    assert app.index().files_changed == 1  # a new generation: nothing looked up yet
    named = app.search("zorblax", mode="lexical", fresh=False)
    assert [h.path for h in named.hits] == ["cooking/Zorblax.md"]
    walked = app.search(
        "quxbrine", fresh=False, ranking=Ranking("lexical", graph_weight=1.0, title_weight=0.0)
    )
    assert walked.ranked_paths[0] == "cooking/Dashi.md"
    assert "cooking/Shakshuka.md" in walked.ranked_paths  # lifted by the walk alone


def test_a_long_lived_app_weighs_the_rest_of_the_titles_after_a_search(
    make_app: AppFactory, vault_copy: Path
) -> None:
    """The search after an edit fetches only its own weights; a long-lived app (the
    service, the MCP server) then weighs the rest in the background, as a fresh build."""
    short = make_app(vault_copy)
    short.index()
    short.search("dashi", mode="lexical", fresh=False)
    assert short._searcher.warming is None  # a one-off command does not warm anything
    short.search("shakshuka", mode="lexical", fresh=False)
    assert short._searcher.warming is not None  # ... one that keeps searching does
    short._searcher.warming.result(timeout=60)
    app = make_app(vault_copy)
    app.long_lived = True
    app.search("dashi", mode="lexical", fresh=False)
    assert app._searcher.warming is not None
    app._searcher.warming.result(timeout=60)
    index = app._searcher.titles.latest()
    assert index.complete and not index.warming
    with app.db.connection() as conn:
        fresh = _fresh_titles(conn)
        assert _weighed_names(index) == _weighed_names(fresh)
        shakshuka = _doc_id(conn, "cooking/Shakshuka.md")
        assert index.first_chunk(shakshuka) == _first_chunk(conn, shakshuka)
        conn.commit()
    plan = index.plan("shakshuka kombu brunch")
    assert index.to_weigh([plan]) <= set(plan.qwords) - set(index.postings)  # names: none
    assert app._searcher.warm_titles(app.db.spare, eager=True) is None  # done: not again


def test_a_new_title_or_a_new_link_rebuilds_what_depends_on_it(
    make_app: AppFactory, vault_copy: Path
) -> None:
    app, titles, graph = _indexed(make_app, vault_copy)
    searcher = app._searcher
    note = vault_copy / "cooking" / "Dashi.md"
    note.write_text(
        note.read_text(encoding="utf-8").replace("title: Dashi", "title: Kombu Stock"),
        encoding="utf-8",
    )
    _append(note, "\nSee also [[Shakshuka]] for a weekend brunch.\n")
    app.index()
    with app.db.connection() as conn:
        rebuilt, regraphed = searcher.titles.get(conn), searcher.graph.get(conn)
        dashi = _doc_id(conn, "cooking/Dashi.md")
        shakshuka = _doc_id(conn, "cooking/Shakshuka.md")
        assert rebuilt.names is not titles.names
        assert dashi in rebuilt.search("kombu stock")
        assert regraphed is not graph and regraphed.has_edge(dashi, shakshuka)
        assert sorted(regraphed.edges) == sorted(load_graph(conn).edges)
        conn.commit()


def test_a_long_lived_process_rebuilds_a_stale_resolver_once_and_keeps_it(
    make_app: AppFactory, vault_copy: Path
) -> None:
    """A retitled note moves the notes' stamp without renaming or adding a note: the next
    edit of a process that holds a resolver rebuilds it for the whole vault and keeps it
    (reading only the notes an edit's links name is for a process that holds none)."""
    app = make_app(vault_copy)
    app.index()
    kept = index._RESOLVERS[app.db.url]
    note = vault_copy / "cooking" / "Dashi.md"
    note.write_text(
        note.read_text(encoding="utf-8").replace("title: Dashi", "title: Kombu Stock"),
        encoding="utf-8",
    )
    app.index()
    _append(vault_copy / "cooking" / "Dashi.md", "\nPairs with [[Pain au levain]].\n")
    app.index()
    rebuilt = index._RESOLVERS[app.db.url]
    with app.db.connection() as conn:
        assert rebuilt is not kept and rebuilt.stamp == store.notes_stamp(conn)
        conn.commit()
    _append(vault_copy / "cooking" / "Dashi.md", "\nAnd [[Shakshuka]].\n")
    app.index()
    assert index._RESOLVERS[app.db.url] is rebuilt


def test_links_of_an_edit_resolve_with_the_kept_resolver_and_new_notes_with_a_new_one(
    make_app: AppFactory, vault_copy: Path
) -> None:
    app = make_app(vault_copy)
    app.index()
    kept = index._RESOLVERS[app.db.url]
    source = vault_copy / "cooking" / "Dashi.md"
    _append(source, "\nPairs with [[Pain au levain]].\n")
    app.index()
    assert index._RESOLVERS[app.db.url] is kept  # no note added, renamed or re-aliased
    (vault_copy / "cooking" / "Ramen.md").write_text("# Ramen\n\nStarts from dashi.\n")
    _append(source, "\nAnd [[Ramen]] starts from it.\n")
    app.index()
    assert index._RESOLVERS[app.db.url] is not kept
    with app.db.connection() as conn:
        dashi = _doc_id(conn, "cooking/Dashi.md")
        resolved = dict(
            conn.execute(
                "SELECT target, resolved FROM links WHERE doc_id = %s", (dashi,)
            ).fetchall()
        )
        assert resolved["Pain au levain"] == _doc_id(conn, "cooking/Pain au levain.md")
        assert resolved["Ramen"] == _doc_id(conn, "cooking/Ramen.md")
        conn.commit()


def test_the_stamps_move_with_what_they_sum_up(make_app: AppFactory, vault_copy: Path) -> None:
    app = make_app(vault_copy)
    app.index()
    with app.db.connection() as conn:
        notes, links = store.notes_stamp(conn), store.links_stamp(conn)
        conn.execute("UPDATE documents SET aliases = '{Broth}' WHERE path = 'cooking/Dashi.md'")
        assert store.notes_stamp(conn) != notes and store.links_stamp(conn) == links
        conn.execute(
            "DELETE FROM links WHERE resolved IS NOT NULL AND ctid IN "
            "(SELECT ctid FROM links WHERE resolved IS NOT NULL LIMIT 1)"
        )
        assert store.links_stamp(conn) != links
        conn.rollback()


def test_a_freshness_pass_indexes_an_edit_from_its_own_scan(
    make_app: AppFactory, vault_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(vault_copy, fresh_interval=0.0)
    app.index()
    _append(vault_copy / "Inbox.md", "\nCall the zorblax locksmith.\n")
    walks = count_walks(monkeypatch)
    assert app.refresh() == 1
    assert len(walks) == 1  # the index run did not walk the vault a second time
    found = app.search("zorblax locksmith", fresh=False)
    assert found.hits and found.hits[0].path == "Inbox.md"


def test_term_statistics_are_kept_per_generation_and_follow_an_edit(
    make_app: AppFactory, vault_copy: Path
) -> None:
    """A search's term statistics come from the process's cache once read, exactly as a
    fresh read gives them, until an index run moves the generation: then new dfs, new
    corpus size, and a word no passage held before (kept as unknown) is known."""
    app = make_app(vault_copy)
    app.index()
    searcher = app._searcher
    terms = sorted(query_terms("zorblax dashi broth shakshuka"))

    def check(conn: psycopg.Connection) -> lexical.TermStats:
        lookup = searcher.terms.lookup(searcher.generation(conn).terms_key())
        first, again, fresh = lookup(conn, terms), lookup(conn, terms), lexical._stats(conn, terms)
        assert first == again == fresh
        return fresh

    with app.db.connection() as conn:
        before = check(conn)
        conn.commit()
    assert "zorblax" not in before.found and "dashi" in before.found
    _append(vault_copy / "Inbox.md", "\nZorblax dashi, a dashi and zorblax broth.\n")
    assert app.index().files_changed == 1
    with app.db.connection() as conn:
        after = check(conn)
        conn.commit()
    assert "zorblax" in after.found
    assert after.found["dashi"][1] == before.found["dashi"][1] + 1
    hits = app.search("zorblax", mode="lexical", fresh=False).hits
    assert hits and hits[0].path == "Inbox.md"


def test_a_repeated_search_reads_only_what_may_have_changed(
    make_app: AppFactory, vault_copy: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a query has run, the same search again reads the generation once (one
    statement for the index stamp, the vectors stamp and the calibrations) and never the
    model row, the term statistics or the chunks' notes: the arms return their notes."""
    app = make_app(vault_copy, model=model_dir)
    app.index()
    query = "how long does dashi keep in the fridge"
    first = app.search(query, fresh=False)
    assert first.mode == "hybrid"
    seen: list[str] = []
    execute = psycopg.Cursor.execute

    def traced(self, query, params=None, **kw):  # type: ignore[no-untyped-def]
        seen.append(" ".join(str(getattr(query, "_obj", query)).split()))
        return execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", traced)
    again = app.search(query, fresh=False)
    assert [h.path for h in again.hits] == [h.path for h in first.hits]

    def count(fragment: str) -> int:
        return sum(fragment in s for s in seen)

    assert count("FROM meta") == 1 and count("FROM calibrations") == 1
    assert count("FROM models") == 0
    assert count("FROM lex_stats s LEFT JOIN lexicon") == 0  # the statistics
    assert count("SELECT id, doc_id FROM chunks") == 0


def test_term_statistics_follow_a_write_that_stamped_no_generation(
    make_app: AppFactory, vault_copy: Path
) -> None:
    """An index run commits its term statistics batch by batch and stamps the index only
    at its end (an interrupted or failed run never does): the cached statistics follow
    every committed write of them all the same."""
    app = make_app(vault_copy)
    app.index()
    searcher = app._searcher
    terms = ["dashi", "zorblax"]

    def cached(conn: psycopg.Connection) -> lexical.TermStats:
        gen = searcher.generation(conn)
        return searcher.terms.lookup(gen.terms_key())(conn, terms)

    with app.db.connection() as conn:
        before = cached(conn)
        conn.commit()
        index_stamp = searcher.generation(conn).index
        # What one batch of a run that then dies commits: counts and a new word, no stamp.
        conn.execute("INSERT INTO lexicon (term, df) VALUES ('zorblax', 1)")
        conn.execute("UPDATE lexicon SET df = df + 1 WHERE term = 'dashi'")
        conn.execute("UPDATE lex_stats SET n_chunks = n_chunks + 1, sum_len = sum_len + 9")
        conn.commit()
        assert searcher.generation(conn).index == index_stamp
        after = cached(conn)
        assert after == lexical._stats(conn, terms) and after != before
        assert "zorblax" in after.found and after.n == before.n + 1
        conn.rollback()


def test_a_model_clean_up_moves_the_vectors_stamp(
    make_app: AppFactory, vault_copy: Path, model_dir: Path
) -> None:
    """Searches cache a model's row per vectors stamp: once the clean-up deletes the row
    (and its vectors), a search says it has no vector instead of passing for hybrid."""
    app = make_app(vault_copy, model=model_dir)
    app.index()
    assert app.search("dashi", fresh=False).mode == "hybrid"
    with app.db.connection() as conn:
        assert store.gc_embeddings(conn, keep=[]) == 1
        conn.commit()
    after = app.search("dashi", fresh=False)
    assert after.mode == "lexical"
    assert "no passage has a vector" in (after.degraded_reason or "")
