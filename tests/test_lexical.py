"""The normaliser (pure) and BM25 scored in Postgres against a reference implementation."""

from __future__ import annotations

import math
import unicodedata
from pathlib import Path

import psycopg
import pytest
from rank_bm25 import BM25Okapi

from retriever import lexical
from retriever.app import Retriever
from retriever.lexical import (
    BM25Params,
    _score_sql,
    _stats,
    bm25_rescore,
    bm25_search,
    idf,
    named_words,
    query_terms,
    tokenize,
)
from tests.conftest import AppFactory


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("parseConfigFile", ["parseconfigfile", "pars", "config", "fil"]),
        ("snake_case_name", ["snake_case_name", "snak", "cas", "nam"]),
        ("--kebab-case-flag", ["kebab-case-flag", "kebab", "cas", "flag"]),
        ("os.path.join", ["os.path.join", "os", "path", "join"]),
        ("HTTPServer", ["httpserver", "http", "serv"]),
        ("v2.14.1 and 2024", ["v2.14.1", "2024"]),
    ],
)
def test_identifiers_split_and_kept_whole(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_accents_folded_and_french_stopwords_dropped() -> None:
    assert tokenize("Les sauvegardes chiffrées de l'œuvre à Noël") == [
        "sauvega",
        "chiffr",
        "oeuvr",
        "noel",
    ]
    assert tokenize("sauvegarde") == tokenize("Sauvegardé")


def test_english_stopwords_and_inflections() -> None:
    assert tokenize("the backups") == tokenize("backup")
    assert tokenize("What is it?") == []


def test_query_terms_survive_hostile_text() -> None:
    for text in ["", "   ", "& | ! : * ( ) \\", "\x00\x01\x02", "🙂🙃", "a" * 100_000, "שלום עולם"]:
        assert isinstance(query_terms(text), dict)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("What did I think of Dune?", ["dun"]),
        ("Which GPU is in my gaming PC?", ["gpu", "pc"]),
        ("How do I set up WireGuard?", ["wireguard"]),
        ("Restoring notes fails. Backups are there", []),  # sentence starts say nothing
        ("I use Linux. Where are my backups?", ["linux"]),
        ("Lisbon Sintra Day Trip", []),  # Title Case says nothing
        ("sourdough starter feeding", []),
        ("", []),
    ],
)
def test_named_words_are_the_words_a_query_writes_as_names(text: str, names: list[str]) -> None:
    found = named_words(text)
    assert [tokens[0] for tokens in found] == names  # each name's whole (stemmed) word first
    assert all(tokens == tuple(tokenize(tokens[0])) or len(tokens) > 1 for tokens in found)


def test_named_words_survive_hostile_text() -> None:
    for text in ["& | ! : * ( )", "\x00\x01", "🙂 Émile", "Word " * 50_000, "a. B. C."]:
        assert isinstance(named_words(text), list)


def test_idf_never_negative() -> None:
    assert idf(10, 10) > 0
    assert math.isclose(idf(100, 1), math.log(1 + 99.5 / 1.5))


class LuceneBM25(BM25Okapi):
    """rank-bm25's Okapi scorer with Lucene's IDF, the formula retriever uses."""

    def _calc_idf(self, nd: dict[str, int]) -> None:  # type: ignore[override]
        self.idf = {
            w: math.log(1 + (self.corpus_size - f + 0.5) / (f + 0.5)) for w, f in nd.items()
        }


NOTES = {
    "alpha.md": "Restic backups run nightly to the NAS. Backups are pruned weekly.",
    "beta.md": "The NAS has four disks in RAID. Disk health is checked by SMART.",
    "gamma.md": "Sourdough bread needs a levain, flour, water and salt. Bake hot.",
    "delta.md": "Nightly jobs: restic backup, disk scrub, and certificate renewal.",
    "epsilon.md": "Pruning old snapshots keeps the backup repository small.",
}


def _indexed(make_app: AppFactory, tmp_path: Path, notes: dict[str, str]) -> Retriever:
    """A vault of ``notes`` (name -> text), indexed (each short note is one chunk)."""
    vault = tmp_path / "v"
    vault.mkdir()
    for name, text in notes.items():
        (vault / name).write_text(text, encoding="utf-8")
    app = make_app(vault)
    app.index()
    return app


def _without_intarray(conn: psycopg.Connection) -> None:
    """Inside the caller's transaction (rolled back after): BM25 as on a server without
    contrib, where migration 0004 could not install intarray."""
    conn.execute("DROP EXTENSION intarray")


@pytest.mark.parametrize("lookup", ["intarray.idx", "array_position"])
def test_bm25_matches_reference_implementation(make_app, tmp_path: Path, lookup: str) -> None:
    app = _indexed(make_app, tmp_path, {name: body + "\n" for name, body in NOTES.items()})
    # Each note is one chunk: title (file stem, weight 2) + body (weight 1); no headings/tags.
    corpus = {name: tokenize(Path(name).stem) * 2 + tokenize(body) for name, body in NOTES.items()}
    names = list(corpus)
    reference = LuceneBM25([corpus[n] for n in names], k1=1.2, b=0.75)
    with app.db.connection() as conn:
        if lookup == "array_position":
            _without_intarray(conn)
        assert _stats(conn, ["x"]).position == lookup
        ids = dict(
            conn.execute(
                "SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"
            ).fetchall()
        )
        for query in ["restic backup nightly", "disk NAS", "bread", "backup backup prune"]:
            terms = query_terms(query)
            ours = {ids[c]: s for c, s in bm25_search(conn, terms, limit=10, params=BM25Params())}
            expected = reference.get_scores(tokenize(query))
            for name, score in zip(names, expected, strict=True):
                if score > 0:
                    assert ours[name] == pytest.approx(score, abs=1e-6), (query, name)
                else:
                    assert name not in ours
        conn.rollback()


@pytest.mark.parametrize("lookup", ["intarray.idx", "array_position"])
def test_bm25_scores_long_passages_stored_out_of_line(
    make_app, tmp_path: Path, lookup: str
) -> None:
    """A long passage's term arrays are compressed or stored out of line (TOAST); the
    statement unpacks each once per row and must still read each term's own frequency:
    every score equals BM25 computed here from the stored rows."""
    syllables = ["ba", "ke", "lo", "mi", "nu", "ri", "so", "tu"]
    words = [a + b + c for a in syllables for b in syllables for c in syllables]
    notes = {
        f"long{n}.md": "\n\n".join(
            " ".join(words[(n * 97 + i * 7 + j) % len(words)] for j in range(450)) + " zorblax"
            for i in range(2)
        )
        + "\n"
        for n in range(4)
    }
    notes["short.md"] = "A short note: zorblax bakelo.\n"
    app = _indexed(make_app, tmp_path, notes)
    params = BM25Params()
    with app.db.connection() as conn:
        if lookup == "array_position":
            _without_intarray(conn)
        compressed = conn.execute(  # compressed inline or out of line: TOAST either way
            "SELECT count(*) FROM chunks WHERE pg_column_compression(tfs) IS NOT NULL"
            " OR pg_column_compression(terms) IS NOT NULL"
        ).fetchone()
        assert compressed and compressed[0] > 0
        rows = conn.execute("SELECT id, terms, tfs, len FROM chunks").fetchall()
        vocab = dict(conn.execute("SELECT term, id FROM lexicon").fetchall())
        n, total = conn.execute("SELECT n_chunks, sum_len FROM lex_stats").fetchone()
        df = dict(conn.execute("SELECT id, df FROM lexicon").fetchall())
        for query in ["zorblax bakelo", "mikeso nurilo tutuba", "bakelo bakelo sokemi"]:
            q = query_terms(query)
            expected: dict[int, float] = {}
            for cid, terms, tfs, length in rows:
                tf_of = dict(zip(terms, tfs, strict=True))
                norm = 1 - params.b + params.b * length / (total / n)
                score = sum(
                    idf(n, df[vocab[t]])
                    * k
                    * tf_of[vocab[t]]
                    * (params.k1 + 1)
                    / (tf_of[vocab[t]] + params.k1 * norm)
                    for t, k in q.items()
                    if t in vocab and vocab[t] in tf_of
                )
                if score > 0:
                    expected[cid] = score
            ours = dict(bm25_search(conn, q, limit=1000, params=params))
            assert ours.keys() == expected.keys(), query
            for cid, score in expected.items():
                assert ours[cid] == pytest.approx(score, abs=1e-6), (query, cid)
        conn.rollback()


@pytest.mark.parametrize("lookup", ["intarray.idx", "array_position"])
def test_bm25_pruning_is_exact(make_app, tmp_path: Path, lookup: str) -> None:
    """With a tiny candidate cap the MaxScore pruning must still return the exact top-k
    (the first pass over the rare term, then the widening over the common one, which
    scores only the chunks the first pass did not)."""
    notes = {}
    for i in range(60):
        words = ["common"] * (1 + i % 5) + (["rare"] if i % 17 == 0 else []) + [f"w{i}"]
        notes[f"n{i}.md"] = " ".join(words) + "\n"
    app = _indexed(make_app, tmp_path, notes)
    with app.db.connection() as conn:
        if lookup == "array_position":
            _without_intarray(conn)
        q = query_terms("common rare")
        exact = bm25_search(conn, q, limit=10, candidate_cap=10_000)
        pruned = bm25_search(conn, q, limit=10, candidate_cap=1)
        conn.rollback()
    assert len(exact) == 10
    assert [c for c, _ in pruned] == [c for c, _ in exact]
    assert [s for _, s in pruned] == [s for _, s in exact]  # the same floats, not close ones


@pytest.mark.parametrize("lookup", ["intarray.idx", "array_position"])
def test_rescoring_gives_the_searchs_own_scores_for_the_chunks_it_is_given(
    make_app, tmp_path: Path, lookup: str
) -> None:
    """Feedback re-ranks a few candidates by its expanded query: each gets exactly the
    score a search of the whole vault gives it (weighted terms included), best first,
    and a candidate holding none of the query's terms is left out."""
    app = _indexed(make_app, tmp_path, {name: body + "\n" for name, body in NOTES.items()})
    with app.db.connection() as conn:
        if lookup == "array_position":
            _without_intarray(conn)
        ids = dict(
            conn.execute(
                "SELECT d.path, c.id FROM chunks c JOIN documents d ON d.id = c.doc_id"
            ).fetchall()
        )
        query = {
            **query_terms("restic backup nightly"),
            "nas": 0.4,
            **dict.fromkeys(query_terms("pruned"), 0.25),
        }
        params = BM25Params(k1=0.9, b=0.4)
        whole = dict(bm25_search(conn, query, limit=100, params=params))
        among = [ids[n] for n in ("epsilon.md", "beta.md", "delta.md", "alpha.md")]
        owners: dict[int, int] = {}
        got = bm25_rescore(conn, query, among, params=params, owners=owners)
        bread = bm25_rescore(conn, query, [ids["gamma.md"]], params=params)
        assert bm25_rescore(conn, query, []) == []
        conn.rollback()
    assert ids["gamma.md"] not in whole and bread == []  # the bread note holds no term
    expected = sorted(((c, whole[c]) for c in among), key=lambda r: (-r[1], r[0]))
    assert got == expected and len(got) == 4  # the same floats, in the same order
    assert set(owners) == set(among)


def test_bm25_keeps_the_gin_index_when_intarray_is_on_the_search_path(
    make_app, tmp_path: Path
) -> None:
    """A user's own intarray in ``public`` claims ``int[] && int[]`` (an operator the GIN
    index on ``terms`` cannot serve): our SQL names the built-in one, so the index stays in
    use and the scores stay the same."""
    app = _indexed(make_app, tmp_path, {name: body + "\n" for name, body in NOTES.items()})
    q = query_terms("restic backup nightly")
    with app.db.connection() as conn:
        before = bm25_search(conn, q, limit=10)
        conn.execute("DROP EXTENSION intarray")
        conn.execute("CREATE EXTENSION intarray SCHEMA public")
        assert _stats(conn, ["x"]).position == "public.idx"
        assert bm25_search(conn, q, limit=10) == before
        conn.execute("SET LOCAL enable_seqscan = off")  # tiny table: ask for the index
        stats = _stats(conn, list(q))
        ids = [stats.found[t][0] for t in q]
        plan = conn.execute(
            "EXPLAIN " + _score_sql(len(ids), "", stats.position),
            {"k1": 1.2, "b": 0.75, "avg": stats.avg, "essential": ids, "limit": 10}
            | {f"t{i}": v for i, v in enumerate(ids)}
            | {f"w{i}": 1.0 for i in range(len(ids))},
        ).fetchall()
        conn.rollback()
    assert "chunks_terms_gin" in "\n".join(r[0] for r in plan)


@pytest.mark.parametrize("setting", ["on", "off"])
def test_bm25_reads_its_candidates_through_the_term_index(
    make_app, tmp_path: Path, setting: str
) -> None:
    """Every chunk holds "shared": as candidates are most of this table, the planner would
    scan it whole, testing each row's terms against the query's. The scoring statements
    read the GIN index instead (their plans as the server ran them, by auto_explain), and
    the setting is as it was afterwards, for the rest of the transaction."""
    notes = {f"n{i}.md": f"Shared word{i} filler.\n" for i in range(40)}
    app = _indexed(make_app, tmp_path, notes)
    with app.db.connection() as conn:
        conn.execute("SELECT set_config('enable_seqscan', %s, false)", (setting,))
        plans = _plans_as_run(conn)
        hits = bm25_search(conn, query_terms("shared word3"), limit=3)
        after = conn.execute("SHOW enable_seqscan").fetchone()
        path = conn.execute(
            "SELECT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = %s",
            (hits[0][0],),
        ).fetchone()
        conn.rollback()
    scoring = [p for p in plans if "FROM chunks t" in p]
    assert len(scoring) == 1
    assert "Bitmap Index Scan on chunks_terms_gin" in scoring[0]
    assert "Seq Scan on chunks" not in scoring[0]
    assert after == (setting,)
    assert path == ("n3.md",) and len(hits) == 3


def test_bm25_on_an_autocommit_connection(make_app, tmp_path: Path) -> None:
    """Outside a transaction too: the pipeline's three statements are one implicit
    transaction, so the index is used and the setting is back afterwards (twice: the
    second run finds our own setting left empty by the first)."""
    notes = {f"n{i}.md": f"Shared word{i} filler.\n" for i in range(40)}
    app = _indexed(make_app, tmp_path, notes)
    with psycopg.connect(app.db.url, autocommit=True) as conn:
        plans = _plans_as_run(conn)
        first = bm25_search(conn, query_terms("shared word3"), limit=3)
        again = bm25_search(conn, query_terms("shared word3"), limit=3)
        assert conn.execute("SHOW enable_seqscan").fetchone() == ("on",)
    assert first == again and len(first) == 3
    scoring = [p for p in plans if "FROM chunks t" in p]
    assert len(scoring) == 2 and all("Bitmap Index Scan on chunks_terms_gin" in p for p in scoring)


def test_a_scoped_bm25_statement_keeps_the_planners_choice(make_app, tmp_path: Path) -> None:
    """With a folder filter the index is not imposed: that would also take the notes'
    table off its full scan (a folder filter on win32-17k went 7 -> 13 ms)."""
    notes = {f"n{i}.md": f"Shared word{i} filler.\n" for i in range(40)}
    app = _indexed(make_app, tmp_path, notes)
    scope = "AND t.doc_id IN (SELECT d.id FROM documents d WHERE d.path LIKE %(p)s)"
    with app.db.connection() as conn:
        plans = _plans_as_run(conn)
        hits = bm25_search(
            conn, query_terms("shared word3"), limit=3, extra_sql=scope, extra_params={"p": "n3.md"}
        )
        conn.rollback()
    scoring = [p for p in plans if "FROM chunks t" in p]
    assert len(scoring) == 1 and "Seq Scan on documents" in scoring[0]
    assert len(hits) == 1


def _plans_as_run(conn: psycopg.Connection) -> list[str]:
    """Every later statement's plan as the server ran it (auto_explain, as a NOTICE), in
    the returned list. The settings end with the caller's rollback, or its connection.
    Loading the module takes a superuser: a test database without one skips the test."""
    try:
        conn.execute("LOAD 'auto_explain'")
    except psycopg.errors.InsufficientPrivilege:
        conn.rollback()
        pytest.skip("auto_explain needs a superuser")
    plans: list[str] = []
    conn.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
    conn.execute("SET auto_explain.log_min_duration = 0")
    conn.execute("SET auto_explain.log_level = notice")
    return plans


class _Counting:
    """The real connection, counting the scoring statements it is given (how many passes
    ran)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn, self.statements = conn, 0

    def execute(self, *args: object, **kwargs: object) -> psycopg.Cursor:
        self.statements += "FROM chunks t" in str(args[0])
        return self.conn.execute(*args, **kwargs)  # type: ignore[arg-type]

    def pipeline(self) -> psycopg.Pipeline:
        return self.conn.pipeline()


def test_widening_that_drops_a_first_pass_term_is_still_exact(
    make_app, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first pass (over "rare") finds two notes holding both words, whose scores beat
    anything "rare" alone can add: the widening drops "rare" (MaxScore) and scores only the
    "mid" notes the first pass did not; the merge must equal one pass over everything."""
    notes = {}
    for i in range(60):
        words = (["mid"] * (1 + i % 5) if i % 2 == 0 else []) + (["rare"] if i % 17 == 0 else [])
        notes[f"n{i}.md"] = " ".join([*words, f"w{i}", "filler"]) + "\n"
    app = _indexed(make_app, tmp_path, notes)
    q = query_terms("rare mid mid mid mid mid")
    widened: list[list[str]] = []
    keep = lexical._terms_that_could_matter
    monkeypatch.setattr(
        lexical, "_terms_that_could_matter", lambda *a: widened.append(keep(*a)) or widened[-1]
    )
    with app.db.connection() as conn:
        exact = bm25_search(conn, q, limit=2, candidate_cap=10_000)
        counting = _Counting(conn)
        pruned = bm25_search(counting, q, limit=2, candidate_cap=1)  # type: ignore[arg-type]
        conn.rollback()
    assert widened == [list(query_terms("mid"))]  # "rare" dropped: only "mid" could matter
    assert counting.statements == 2  # first pass, widening
    assert pruned == exact and len(exact) == 2


def test_bm25_falls_back_when_the_intarray_schema_is_not_usable(make_app, tmp_path: Path) -> None:
    """A role that may not use the schema intarray lives in (a DBA revoked it) still gets
    BM25, through array_position, with the same scores."""
    app = _indexed(make_app, tmp_path, {name: body + "\n" for name, body in NOTES.items()})
    q = query_terms("restic backup nightly")
    with app.db.connection() as conn:
        fast = bm25_search(conn, q, limit=10)
        conn.execute("CREATE ROLE bm25_reader")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO bm25_reader")
        conn.execute("REVOKE USAGE ON SCHEMA intarray FROM PUBLIC")
        conn.execute("SET LOCAL ROLE bm25_reader")
        assert _stats(conn, ["x"]).position == "array_position"
        assert bm25_search(conn, q, limit=10) == fast
        conn.rollback()


def test_accent_folding_deletes_exactly_the_combining_marks() -> None:
    # The table fills itself as characters are met: every code point, in one text.
    table = lexical._CombiningMarks()  # a table of its own: the search's stays small
    every = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000)
    kept = "".join(c for c in every if not unicodedata.combining(c))
    assert every.translate(table) == kept
    assert every.translate(table) == kept  # and once filled
    assert lexical.fold("Élève naïve Ångström") == "eleve naive angstrom"
