"""Embedding windows: which windows a passage gets, how they are stored, how search uses them."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import numpy as np
import psycopg
import pytest

from retriever.embed import EmbedderUnavailable
from retriever.encode import BROKEN_AFTER, _with_windows
from retriever.index import IndexReport, TierReport
from retriever.passage_text import unpack
from retriever.vector import vector_search
from retriever.windows import (
    MAX_WINDOWS,
    WINDOW_STRIDE,
    WINDOW_WORDS,
    best_window_cosines,
    embedding_windows,
    pack_windows,
    unpack_windows,
    window_starts,
)
from tests.test_embed import _Scripted as ScriptedEmbedder


@pytest.mark.parametrize("n", [0, 1, WINDOW_WORDS])
def test_a_passage_that_fits_one_window_has_none(n: int) -> None:
    assert window_starts(n) == []


@pytest.mark.parametrize("n", [WINDOW_WORDS + 1, 100, 2 * WINDOW_WORDS, 301, 5000])
def test_windows_cover_every_word_evenly(n: int) -> None:
    starts = window_starts(n)
    assert starts[0] == 0 and starts[-1] + WINDOW_WORDS == n  # no word left out
    assert starts == sorted(set(starts))
    gaps = {b - a for a, b in pairwise(starts)}
    assert max(gaps) <= (WINDOW_STRIDE if len(starts) < MAX_WINDOWS else n // (MAX_WINDOWS - 2))
    assert max(gaps) - min(gaps) <= 1  # spread evenly
    assert len(starts) <= MAX_WINDOWS


def test_windows_keep_the_heading_context_and_the_words_in_order() -> None:
    words = [f"w{i}" for i in range(WINDOW_WORDS + 10)]
    text = "\n".join(" ".join(words[i : i + 7]) for i in range(0, len(words), 7))
    windows = embedding_windows("Title > Section", text)
    assert len(windows) == 2
    assert windows[0] == "Title > Section\n\n" + " ".join(words[:WINDOW_WORDS])
    assert windows[1].endswith(" ".join(words[-WINDOW_WORDS:]))
    assert embedding_windows("", " ".join(words[:WINDOW_WORDS])) == []


class _Scripted(ScriptedEmbedder):
    """test_embed's scripted vectors ("nan ..." broken, "blank ..." reads nothing), and
    after ``gone_after`` calls an unreachable embedder."""

    def __init__(self, gone_after: int | None = None) -> None:
        self.calls, self.gone_after = 0, gone_after

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.gone_after is not None and self.calls > self.gone_after:
            raise EmbedderUnavailable("scripted embedder is down or unreachable")
        return super().embed(texts)


def _rows(*bodies: str) -> list[tuple[bytes, str, str]]:
    return [(bytes([i]), "", body) for i, body in enumerate(bodies)]


def _run(
    embedder: _Scripted, rows: list[tuple[bytes, str, str]]
) -> tuple[list[tuple[bytes, int]], list[bytes], TierReport]:
    tier = TierReport("primary", "scripted")
    hashes = [h for h, _, _ in rows]
    refused: list[bytes] = []
    keys, vectors = _with_windows(
        embedder, rows, hashes, np.ones((len(rows), 4)), refused, IndexReport(vault="v"), tier
    )
    assert len(keys) == len(vectors)
    return keys, refused, tier


LONG = " ".join(["word"] * (WINDOW_WORDS + 1))  # two windows


def test_whole_vectors_and_windows_are_keyed_by_part() -> None:
    keys, refused, tier = _run(_Scripted(), _rows("short text", LONG))
    assert tier.error is None and refused == []
    assert sorted(keys) == [(b"\x00", 0), (b"\x01", 0), (b"\x01", 1), (b"\x01", 2)]


def test_a_window_the_model_reads_nothing_in_is_left_out_alone() -> None:
    blank_start = "blank " + " ".join(["word"] * WINDOW_WORDS)  # first window "blank ..."
    keys, refused, tier = _run(_Scripted(), _rows(blank_start))
    assert tier.error is None and refused == []
    assert sorted(keys) == [(b"\x00", 0), (b"\x00", 2)]


def test_a_passage_is_stored_with_all_its_vectors_or_not_at_all() -> None:
    # The embedder goes away before the windows: the short passage is stored, the long one
    # not at all (it stays pending: the next run embeds it again, windows included).
    keys, refused, tier = _run(_Scripted(gone_after=0), _rows("short text", LONG))
    assert tier.error is not None and "unreachable" in tier.error
    assert keys == [(b"\x00", 0)] and refused == []
    # An invalid window vector refuses its passage, as an invalid whole vector would.
    nan_tail = " ".join(["word"] * WINDOW_WORDS) + " nan"  # the second window starts "word"
    nan_start = "nan " + " ".join(["word"] * WINDOW_WORDS)
    keys, refused, tier = _run(_Scripted(), _rows("short text", nan_start, LONG, nan_tail))
    assert tier.error is None
    assert refused == [b"\x01"]
    assert sorted({h for h, _ in keys}) == [b"\x00", b"\x02", b"\x03"]


def test_a_model_that_keeps_breaking_on_windows_is_given_up_on() -> None:
    broken = [f"nan {i} " + " ".join(["word"] * WINDOW_WORDS) for i in range(BROKEN_AFTER + 2)]
    keys, refused, tier = _run(_Scripted(), _rows("short text", *broken))
    assert tier.error is not None and "in a row" in tier.error
    assert keys == [(b"\x00", 0)]
    assert len(refused) == BROKEN_AFTER  # the rest were not tried: they stay pending


class _Pooling(_Scripted):
    """The scripted vectors through ``embed_windows`` (as Model2Vec pools them), unchecked:
    a window "blank ..." comes back zero, "nan ..." not finite."""

    def embed_windows(
        self, passages: Sequence[tuple[str, Sequence[str], Sequence[int]]], width: int
    ) -> list[np.ndarray]:
        self.calls += 1
        if self.gone_after is not None and self.calls > self.gone_after:
            raise EmbedderUnavailable("scripted embedder is down or unreachable")
        out = []
        for _, words, starts in passages:
            vectors = np.ones((len(starts), 4), dtype=np.float32)
            for j, start in enumerate(starts):
                first = words[start]
                vectors[j] = 0.0 if first == "blank" else np.nan if first == "nan" else 1.0
            out.append(vectors)
        return out


def test_pooled_windows_are_kept_refused_and_left_pending_as_text_windows_are() -> None:
    keys, refused, tier = _run(_Pooling(), _rows("short text", LONG))
    assert tier.error is None and refused == []
    assert sorted(keys) == [(b"\x00", 0), (b"\x01", 0), (b"\x01", 1), (b"\x01", 2)]
    blank_start = "blank " + " ".join(["word"] * WINDOW_WORDS)
    keys, refused, tier = _run(_Pooling(), _rows(blank_start))
    assert refused == [] and sorted(keys) == [(b"\x00", 0), (b"\x00", 2)]
    nan_start = "nan " + " ".join(["word"] * WINDOW_WORDS)
    keys, refused, tier = _run(_Pooling(), _rows("short text", nan_start, LONG))
    assert tier.error is None and refused == [b"\x01"]
    assert sorted({h for h, _ in keys}) == [b"\x00", b"\x02"]
    # The embedder goes away at the windows (the whole vectors were made): the long passage
    # is not stored at all, and not refused either: it stays pending.
    keys, refused, tier = _run(_Pooling(gone_after=0), _rows("short text", LONG))
    assert tier.error is not None and "unreachable" in tier.error
    assert keys == [(b"\x00", 0)] and refused == []


def test_search_scores_a_long_passage_by_its_best_window(
    make_app, vault_copy: Path, db_url: str, model_dir: Path
) -> None:
    """A detail at the end of a long passage: the passage's semantic score is its best
    window's cosine, higher than its whole vector's."""
    filler = " ".join(["The pantry shelf holds flour, rice, lentils and dried beans."] * 30)
    detail = "Kombu and katsuobushi simmer gently to make dashi stock for miso soup."
    note = vault_copy / "Pantry notes.md"
    note.write_text(f"# Pantry notes\n\n{filler} {detail}\n", encoding="utf-8")
    app = make_app(vault_copy, model=model_dir)
    app.index()
    embedder, _ = app.embedder()
    assert embedder is not None
    query = "dashi stock kombu katsuobushi"
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT p.context, p.ztext, c.id FROM chunks c JOIN passages p"
            " ON p.hash = c.passage_hash JOIN documents d ON d.id = c.doc_id"
            " WHERE d.path = 'Pantry notes.md'"
        ).fetchone()
    assert row is not None
    context, packed, chunk_id = row
    text = unpack(packed)
    windows = embedding_windows(context, text)
    assert len(windows) >= 3
    vectors = embedder.embed([f"{context}\n\n{text}", *windows])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    q = embedder.embed([query])[0]
    cosines = vectors @ (q / np.linalg.norm(q))
    assert cosines[1:].max() > cosines[0] + 0.05  # the window sees the detail
    with app.db.connection() as conn:
        model, dim = conn.execute("SELECT id, dim FROM models").fetchone()
        found = dict(vector_search(conn, model, dim, q, limit=50))
    assert found[chunk_id] == pytest.approx(float(cosines[1:].max()), abs=0.01)
    hits = app.search(query, mode="semantic", fresh=False, graph=False).hits
    assert "Pantry notes.md" in [h.path for h in hits[:3]]  # with the vault's own dashi note


def test_packed_windows_keep_each_window_s_direction() -> None:
    """int8 codes keep what a cosine reads: each window's direction, in order."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(5, 256)).astype(np.float32) * rng.uniform(0.1, 9, (5, 1))
    blob = pack_windows(vectors)
    assert len(blob) == 5 * 256  # one byte per dimension
    back = unpack_windows(blob, 256)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = (back / np.linalg.norm(back, axis=1, keepdims=True)) @ unit.T
    assert np.allclose(np.diag(cos), 1.0, atol=2e-4)
    assert (cos.argmax(axis=1) == np.arange(5)).all()


def test_best_window_cosines_take_each_passage_s_best_window() -> None:
    rng = np.random.default_rng(11)
    query = rng.normal(size=64).astype(np.float32)
    passages = [rng.normal(size=(n, 64)).astype(np.float32) for n in (1, 4, 2)]
    passages[1][2] = query * 3  # a window pointing where the query does
    got = best_window_cosines([pack_windows(p) for p in passages], query)
    want = [
        max(float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query))) for v in p)
        for p in passages
    ]
    assert np.allclose(got, want, atol=5e-3)
    assert got[1] == pytest.approx(1.0, abs=1e-3)
