"""Embedder protocol, vector validation and the real Model2Vec loader."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retriever.embed import (
    Embedder,
    EmbedderUnavailable,
    InvalidVectorError,
    Model2VecEmbedder,
    load_embedder,
    validate_vectors,
)
from retriever.embed.model2vec import load_static_model, model2vec_fingerprint
from retriever.embed.pooling import WordIds, pooler_for
from retriever.windows import WINDOW_WORDS, embedding_windows, window_starts
from tests.conftest import TEST_VAULT


def test_valid_vectors_pass() -> None:
    arr = validate_vectors([[0.1, 0.2], [0.0, 1.0]], 2, 2)
    assert arr.dtype == np.float32 and arr.shape == (2, 2)


@pytest.mark.parametrize(
    ("vectors", "n", "dim", "message"),
    [
        ([[float("nan"), 1.0]], 1, 2, "NaN"),
        ([[float("inf"), 1.0]], 1, 2, "NaN or infinity"),
        ([[0.0, 0.0]], 1, 2, "zeros"),
        ([[1.0, 2.0, 3.0]], 1, 2, "dimension"),
        ([[1.0, 2.0]], 2, 2, "expected 2 vectors"),
        ([1.0, 2.0], 1, 2, "2-D"),
        ([["a", "b"]], 1, 2, "numeric"),
    ],
)
def test_invalid_vectors_are_refused(vectors: object, n: int, dim: int, message: str) -> None:
    with pytest.raises(InvalidVectorError, match=message):
        validate_vectors(vectors, n, dim)


def test_model2vec_loads_a_local_model(model_dir: Path) -> None:
    embedder = load_embedder(str(model_dir))
    assert isinstance(embedder, Model2VecEmbedder)
    assert isinstance(embedder, Embedder)
    vectors = embedder.embed(["restic backup retention", "sourdough starter"])
    assert vectors.shape == (2, embedder.dimension)
    assert np.isfinite(vectors).all()
    assert embedder.fingerprint == load_embedder(str(model_dir)).fingerprint


def test_text_the_model_cannot_embed_is_refused(model_dir: Path) -> None:
    embedder = load_embedder(str(model_dir))
    with pytest.raises(InvalidVectorError):
        embedder.embed(["zzzqqqxxx"])  # no known word: a zero vector must not be stored


def test_unreachable_model_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(EmbedderUnavailable, match="cannot load Model2Vec model"):
        load_embedder(str(tmp_path / "missing-model"))
    with pytest.raises(EmbedderUnavailable, match="turned off"):
        load_embedder("none")


class _Scripted:
    """An embedder whose vectors follow the text: "blank ..." reads nothing (all zeros),
    "nan ..." is broken output, anything else a unit vector."""

    model_id = "scripted"
    dimension = 4
    fingerprint = "scripted:4"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.ones((len(texts), 4), dtype=np.float32)
        for i, text in enumerate(texts):
            if text.startswith("blank"):
                out[i] = 0.0
            elif text.startswith("nan"):
                out[i] = np.nan
        return validate_vectors(out, len(texts), 4)

    def close(self) -> None:
        pass


def test_passages_a_model_reads_nothing_in_do_not_make_it_look_broken() -> None:
    from retriever.encode import BROKEN_AFTER, _embed_rows
    from retriever.index import IndexReport, TierReport

    def run(texts: list[str]) -> tuple[int, list[bytes], str | None]:
        rows = [(bytes([i]), t) for i, t in enumerate(texts)]
        refused: list[bytes] = []
        tier = TierReport("primary", "scripted")
        kept, vectors = _embed_rows(_Scripted(), rows, refused, IndexReport(vault="v"), tier)
        assert len(kept) == len(vectors)
        return len(kept), refused, tier.error

    blanks = ["blank ---"] * (BROKEN_AFTER + 4)
    kept, refused, error = run([*blanks, "a note", "another"])
    assert (kept, len(refused), error) == (2, BROKEN_AFTER + 4, None)
    broken = ["nan"] * BROKEN_AFTER
    kept, refused, error = run([*broken, "a note", "another"])
    assert kept == 0 and len(refused) == BROKEN_AFTER
    assert error is not None and "in a row" in error
    mixed = ["nan", "blank"] * BROKEN_AFTER  # blank passages neither count nor reset
    kept, refused, error = run([*mixed, "a note"])
    assert kept == 0 and error is not None
    kept, refused, error = run(["nan", "a note"] * BROKEN_AFTER)  # a good vector resets
    assert kept == BROKEN_AFTER and error is None


def _vault_texts() -> list[str]:
    """Passages of every length, some past the model's truncation, some unreadable."""
    texts = []
    for path in sorted(TEST_VAULT.rglob("*.md")):
        body = path.read_text(encoding="utf-8", errors="replace")
        texts += [p for p in body.split("\n\n") if p.strip()]
        texts.append(body * 8)  # long: cut by characters and by tokens, as encode cuts it
    separated = [f"restic{c}backup{c}{c}retention" for c in _SEPARATORS]
    return [*texts, *separated, "zzzqqq xxxyyy", "Élève café résumé"]


# Every character Python's str.split() splits at (the word cache's separators).
_SEPARATORS = [c for c in map(chr, range(0x3001)) if c.isspace()]


def _models(model_dir: Path) -> list[Any]:
    """The test model (float32); the same in float16 (the released models' type); and
    vocabulary-quantised: token ids mapped onto fewer rows, each token weighted (the
    layout of Model2Vec's quantised models)."""
    from model2vec import StaticModel

    plain = StaticModel.from_pretrained(str(model_dir))
    n = len(plain.tokens)
    mapping = np.arange(n) % max(2, n // 3)
    weights = np.linspace(0.5, 1.5, n).astype(np.float32)
    quantised = StaticModel(
        plain.embedding[: mapping.max() + 1],
        plain.tokenizer,
        normalize=True,
        weights=weights,
        token_mapping=mapping,
        max_length=64,
    )
    half = StaticModel(plain.embedding.astype(np.float16), plain.tokenizer, normalize=True)
    return [plain, half, quantised]


def test_a_model_folder_is_read_as_model2vec_reads_it(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants
    from model2vec import StaticModel

    texts = _vault_texts()
    for n, model in enumerate(_models(model_dir)):  # plain, float16, vocabulary-quantised
        folder = tmp_path / f"m{n}"
        model.save_pretrained(folder)
        ours, theirs = load_static_model(str(folder)), StaticModel.from_pretrained(str(folder))
        for name in ("normalize", "max_length", "median_token_length", "unk_token_id", "config"):
            assert getattr(ours, name) == getattr(theirs, name), name
        for name in ("embedding", "weights", "token_mapping"):
            mine, model2vec = getattr(ours, name), getattr(theirs, name)
            if mine is None or model2vec is None:
                assert mine is None and model2vec is None, name
            else:
                assert mine.dtype == model2vec.dtype and np.array_equal(mine, model2vec), name
        assert ours.tokenizer.to_str() == theirs.tokenizer.to_str()
        got = ours.encode(texts, use_multiprocessing=False)
        assert np.array_equal(got, theirs.encode(texts, use_multiprocessing=False))
    # A hub id found in the local hub cache: its latest snapshot, read the same way.
    snapshots = tmp_path / "hub" / "models--org--tiny" / "snapshots"
    shutil.copytree(tmp_path / "m2", snapshots / "new")
    (snapshots / "old").mkdir()
    os.utime(snapshots / "old", (1, 1))  # older (and empty): not the one picked
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    hub, local = Model2VecEmbedder("org/tiny"), Model2VecEmbedder(str(tmp_path / "m2"))
    assert np.array_equal(hub.embed(texts[:8]), local.embed(texts[:8]))
    assert hub.fingerprint == model2vec_fingerprint("org/tiny", hub.dimension)


def test_mean_pooling_gives_the_model_s_own_vectors(model_dir: Path) -> None:
    texts = _vault_texts()
    for model in _models(model_dir):
        pooler = pooler_for(model)
        assert pooler is not None
        expected = model.encode(texts, use_multiprocessing=False).astype(np.float32)
        got = pooler.encode(texts)
        assert np.array_equal(got, expected)  # bit for bit
        assert not got[-2].any()  # no known word: zero, as encode gives (and is refused)


def test_a_text_gets_the_same_vector_in_any_batch(model_dir: Path) -> None:
    """Bit for bit: an interrupted index run resumes with other batches, and must store
    the vectors a single run stores."""
    from model2vec import StaticModel

    pooler = pooler_for(StaticModel.from_pretrained(str(model_dir)))
    assert pooler is not None
    every = _vault_texts()
    readable = pooler.encode(every).any(axis=1)  # a text of unknown words is refused
    texts = [t for t, ok in zip(every, readable, strict=True) if ok]
    embedder = load_embedder(str(model_dir))
    whole = embedder.embed(texts)
    one_by_one = np.stack([embedder.embed([t])[0] for t in texts[:40]])
    shifted = embedder.embed(texts[7:60])
    assert np.array_equal(whole[:40], one_by_one)
    assert np.array_equal(whole[7:60], shifted)


def test_a_model_that_is_not_float_mean_pooling_keeps_encode(model_dir: Path) -> None:
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(str(model_dir))
    model.embedding = (model.embedding * 100).astype(np.int8)
    assert pooler_for(model) is None


def _tokenizer_ids(model: Any, texts: Sequence[str]) -> list[list[int]]:
    return [list(map(int, ids)) for ids in model.tokenize(list(texts))]


def _cached_ids(words: WordIds, texts: Sequence[str]) -> list[list[int]]:
    flat, lengths = words.ids(texts)
    ends = np.cumsum(lengths)
    return [flat[end - n : end].tolist() for n, end in zip(lengths, ends, strict=True)]


def test_word_cached_ids_are_the_tokenizer_s_own(model_dir: Path) -> None:
    """Past the model's cut too, with unknown words (dropped after the cut, as Model2Vec
    drops them) and with every separator; a cache that starts over changes nothing."""
    texts = _vault_texts()
    for model in _models(model_dir):
        words = WordIds.for_model(model)
        assert words is not None  # the test model's tokenizer splits at whitespace
        assert _cached_ids(words, texts) == _tokenizer_ids(model, texts)
        small = WordIds.for_model(model, limit=50)
        assert small is not None
        assert _cached_ids(small, texts[:30]) + _cached_ids(small, texts[30:]) == (
            _tokenizer_ids(model, texts)
        )


def test_a_separator_the_tokenizer_deletes_sends_the_text_to_it_whole(model_dir: Path) -> None:
    """BERT deletes U+001C where str.split() splits: a text holding it is not read word
    by word."""
    from model2vec import StaticModel
    from tokenizers import normalizers

    model = StaticModel.from_pretrained(str(model_dir))
    model.tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Replace("\x1c", ""), model.tokenizer.normalizer]
    )
    texts = ["restic\x1cbackup retention", "restic backup"]
    words = WordIds.for_model(model)
    assert words is not None
    assert _cached_ids(words, texts) == _tokenizer_ids(model, texts)
    assert _tokenizer_ids(model, texts[:1]) != _tokenizer_ids(model, ["restic backup retention"])


def test_a_tokenizer_whose_tokens_cross_whitespace_gets_no_word_cache(model_dir: Path) -> None:
    from model2vec import StaticModel
    from tokenizers import pre_tokenizers

    model = StaticModel.from_pretrained(str(model_dir))
    model.tokenizer.pre_tokenizer = pre_tokenizers.Split(",", "removed")  # "a b" is one word
    assert WordIds.for_model(model) is None
    pooler = pooler_for(model)
    assert pooler is not None
    texts = ["restic backup, retention", *_vault_texts()[:40]]
    expected = model.encode(texts, use_multiprocessing=False).astype(np.float32)
    assert np.array_equal(pooler.encode(texts), expected)


def _windowed_passages() -> list[tuple[str, str]]:
    """(context, body) of long passages: windows cut by the model's characters and
    tokens, and contexts with and without a separator the tokenizer may read otherwise."""
    long = [t for t in _vault_texts() if len(t.split()) > WINDOW_WORDS][:12]
    path = "restic/backup/retention/snapshots/weekly/monthly/yearly/prune/keep"
    long.append(" ".join(f"{path}/{i}" for i in range(90)))  # windows past the token cut
    # ... and past the character cut: long unknown words (one token each) among known ones
    known = "restic backup retention sourdough starter bread flour garden tomato".split()
    long.append(" ".join("q" * 120 if i % 2 else known[i % 9] for i in range(90)))
    contexts = ["", "Restic > Backups", "Restic\x1cBackups > Retention"]
    return [(contexts[i % len(contexts)], body) for i, body in enumerate(long)]


def test_pooled_windows_are_their_texts_vectors(model_dir: Path) -> None:
    """One product per passage gives each window the vector of its own text (to the
    model's float16 rounding), for every model layout."""
    rows = _windowed_passages()
    passages = [(c, b.split(), window_starts(len(b.split()))) for c, b in rows]
    texts = [t for c, b in rows for t in embedding_windows(c, b)]
    for model in _models(model_dir):
        pooler = pooler_for(model)
        assert pooler is not None
        got = np.vstack(pooler.encode_windows(passages, WINDOW_WORDS))
        expected = model.encode(texts, use_multiprocessing=False).astype(np.float32)
        assert got.shape == expected.shape
        assert np.allclose(got, expected, atol=1e-3)
        readable = expected.any(axis=1)
        a, b = got[readable], expected[readable]
        cosine = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        assert cosine.min() > 0.99999


def test_windows_of_a_model_without_the_pooler_are_encoded_as_texts(model_dir: Path) -> None:
    embedder = load_embedder(str(model_dir))
    assert isinstance(embedder, Model2VecEmbedder)
    embedder._pooler = None
    rows = _windowed_passages()
    passages = [(c, b.split(), window_starts(len(b.split()))) for c, b in rows]
    got = embedder.embed_windows(passages, WINDOW_WORDS)
    assert [len(g) for g in got] == [len(p[2]) for p in passages]
    texts = [t for c, b in rows for t in embedding_windows(c, b)]
    expected = embedder._model.encode(texts, use_multiprocessing=False)
    assert np.array_equal(np.vstack(got), expected)


def test_used_rows_are_numpy_s_unique_with_its_inverse() -> None:
    from retriever.embed.pooling import _used_rows

    for size in (3000, 20):  # marked, and sorted (a query's few tokens)
        rows = np.random.default_rng(7).integers(0, 500, size=size)
        used, position = _used_rows(rows, 600)
        expected_used, expected_position = np.unique(rows, return_inverse=True)
        assert np.array_equal(used, expected_used)
        assert np.array_equal(position, expected_position)
        assert np.array_equal(used[position], rows)
