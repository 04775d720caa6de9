"""The normaliser (pure) and BM25 scored in Postgres against a reference implementation."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from rank_bm25 import BM25Okapi

from retriever.lexical import BM25Params, bm25_search, idf, query_terms, tokenize


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


def test_bm25_matches_reference_implementation(make_app, tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    for name, body in NOTES.items():
        (vault / name).write_text(body + "\n", encoding="utf-8")
    app = make_app(vault)
    app.index()
    # Each note is one chunk: title (file stem, weight 2) + body (weight 1); no headings/tags.
    corpus = {name: tokenize(Path(name).stem) * 2 + tokenize(body) for name, body in NOTES.items()}
    names = list(corpus)
    reference = LuceneBM25([corpus[n] for n in names], k1=1.2, b=0.75)
    with app.db.connection() as conn:
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
        conn.commit()


def test_bm25_pruning_is_exact(make_app, tmp_path: Path) -> None:
    """With a tiny candidate cap the MaxScore pruning must still return the exact top-k."""
    vault = tmp_path / "v"
    vault.mkdir()
    for i in range(60):
        words = ["common"] * (1 + i % 5) + (["rare"] if i % 17 == 0 else []) + [f"w{i}"]
        (vault / f"n{i}.md").write_text(" ".join(words) + "\n", encoding="utf-8")
    app = make_app(vault)
    app.index()
    with app.db.connection() as conn:
        q = query_terms("common rare")
        exact = bm25_search(conn, q, limit=10, candidate_cap=10_000)
        pruned = bm25_search(conn, q, limit=10, candidate_cap=1)
        conn.commit()
    assert [c for c, _ in pruned] == [c for c, _ in exact]
    assert [s for _, s in pruned] == pytest.approx([s for _, s in exact], abs=1e-9)
