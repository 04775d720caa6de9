"""Model2Vec's mean pooling, without its (texts, tokens, dim) intermediate: an index run's
hot loop, and the same vector for a text in any batch.

``StaticModel.encode`` gathers every token's vector into a (texts, tokens, dim) float16
array and averages it: on win32-17k (87k passages) that was a third of the 35 s spent
encoding; the rest is tokenising, in Rust on every core. Here each batch converts only
the table rows it uses to float32 once (exactly), and each text's rows are summed in
order, as ``encode``'s float32 mean sums them: the same vectors bit for bit (a test holds
them side by side) in three quarters of the time. A text's vector never depends on what
else shares its batch (an interrupted, resumed index run stores what one run stores).

Truncation is Model2Vec's own: the text is cut at ``max_length x median_token_length``
characters and the tokenizer at ``max_length`` tokens. A model this cannot read the same
way (no such attributes, an integer table) keeps ``encode``: :func:`pooler_for` says so by
returning None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# A passage as its windows are pooled: the whole text embedded, where its heading context
# ends (that prefix joins every window), and each window's (start, end) characters in it.
PassageSpans = tuple[str, int, Sequence[tuple[int, int]]]


class MeanPooler:
    """Encodes texts as the model's ``encode`` does, faster (see the module doc)."""

    def __init__(self, model: Any, max_chars: int | None) -> None:
        self._model = model
        self._max_chars = max_chars
        self._mapping = model.token_mapping
        self._weights = model.weights
        self._normalize = bool(model.normalize)
        cut = getattr(model.tokenizer, "truncation", None)
        self._max_tokens: int | None = cut["max_length"] if cut else None  # tokenizer's own
        self._unk = getattr(model, "unk_token_id", None)
        self._reader: Any = None  # the tokenizer without truncation, made on first use

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._as_encode_returns(self._means(texts))

    def _means(self, texts: Sequence[str]) -> np.ndarray:
        if self._max_chars is not None:
            texts = [t[: self._max_chars] for t in texts]
        ids = self._model.tokenize(list(texts))
        out = np.zeros((len(ids), self._model.embedding.shape[1]), dtype=np.float32)
        for i, vectors in enumerate(self._token_vectors(ids)):
            if len(vectors):
                out[i] = np.add.reduce(vectors, axis=0) / len(vectors)
        return out

    def _token_vectors(self, ids: Sequence[Sequence[int] | np.ndarray]) -> list[np.ndarray]:
        """Each text's token vectors (weighted), in order: the table rows a batch uses are
        converted to float32 once (float16 -> float32 is exact)."""
        arrays = [np.asarray(x, dtype=np.int64) for x in ids]
        tokens = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
        rows = tokens if self._mapping is None else self._mapping[tokens]
        used, position = np.unique(rows, return_inverse=True)
        table = self._model.embedding[used].astype(np.float32)
        out, start = [], 0
        for text_ids in arrays:
            n = len(text_ids)
            vectors = table[position[start : start + n]]
            if self._weights is not None:
                vectors = vectors * self._weights[tokens[start : start + n], None]
            out.append(vectors)
            start += n
        return out

    def encode_passages(self, passages: Sequence[PassageSpans]) -> list[np.ndarray]:
        """For each passage, its whole vector then one per window, all from one reading of
        its text: a window is the mean of the context's tokens and its own, as ``encode``
        of the window's text gives for a tokenizer that splits at whitespace (a caller
        checks that it does: ``retriever.embed.model2vec``). The whole vector is
        ``encode``'s bit for bit; a text longer than ``encode`` reads is cut as it cuts."""
        encodings = self._full_reader().encode_batch(
            [text for text, _, _ in passages], add_special_tokens=False
        )
        ids, starts, whole_counts = [], [], []
        for encoding in encodings:
            got = np.asarray(encoding.ids, dtype=np.int64)
            where = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)[:, 0]
            known = got != self._unk  # encode drops the unknown token too
            ids.append(got[known])
            starts.append(where[known])
            whole_counts.append(int(known[: self._max_tokens].sum()))  # cut, then dropped
        means = []
        for (text, head, spans), vectors, where, n in zip(
            passages, self._token_vectors(ids), starts, whole_counts, strict=True
        ):
            means.append(self._whole_mean(text, vectors[:n])[None])
            means.append(_span_means(vectors, where, head, spans))
        out = self._as_encode_returns(np.vstack(means)) if means else np.zeros((0, 0))
        counts = np.cumsum([1 + len(spans) for _, _, spans in passages])
        return np.split(out, counts[:-1])

    def _whole_mean(self, text: str, vectors: np.ndarray) -> np.ndarray:
        """The whole text's mean, summed in ``encode``'s order (the same bits)."""
        if self._max_chars is not None and len(text) > self._max_chars:
            return self._means([text])[0]  # cut mid-word: read again as encode reads it
        if not len(vectors):
            return np.zeros(vectors.shape[1], dtype=np.float32)
        return np.add.reduce(vectors, axis=0) / len(vectors)

    def _full_reader(self) -> Any:
        """The model's tokenizer without its truncation: windows past ``max_length``
        tokens are read too."""
        if self._reader is None:
            from tokenizers import Tokenizer

            self._reader = Tokenizer.from_str(self._model.tokenizer.to_str())
            self._reader.no_truncation()
        return self._reader

    def _as_encode_returns(self, means: np.ndarray) -> np.ndarray:
        """``encode``'s last steps: the means in the table's type, normalised in float32
        and cast back (float16 for most models), so the vectors are its vectors."""
        kind = self._model.embedding.dtype
        out = means.astype(kind)
        if self._normalize:
            wide = out.astype(np.float32)
            out = (wide / (np.linalg.norm(wide, axis=1, keepdims=True) + 1e-32)).astype(kind)
        return out.astype(np.float32)


def _span_means(
    vectors: np.ndarray, starts: np.ndarray, head: int, spans: Sequence[tuple[int, int]]
) -> np.ndarray:
    """The mean of the tokens starting before ``head`` and of those starting in each
    span: the vectors of a passage's windows, from its tokens' offsets."""
    out = np.zeros((len(spans), vectors.shape[1]), dtype=np.float32)
    if not len(spans):
        return out
    h = int(np.searchsorted(starts, head))
    context = np.add.reduce(vectors[:h], axis=0)
    bounds = np.searchsorted(starts, np.asarray(spans, dtype=np.int64))
    for i, (a, b) in enumerate(bounds):
        if h + b - a:
            out[i] = (context + np.add.reduce(vectors[a:b], axis=0)) / (h + b - a)
    return out


def pooler_for(model: Any) -> MeanPooler | None:
    """A pooler for ``model``, or None when its encoding is not plain float mean pooling."""
    needed = ("tokenize", "embedding", "token_mapping", "weights", "normalize", "max_length")
    if not all(hasattr(model, a) for a in needed) or model.embedding.dtype.kind != "f":
        return None
    max_length = model.max_length
    if max_length is None:
        return MeanPooler(model, None)
    median = getattr(model, "median_token_length", None)
    if not isinstance(median, int | float) or median <= 0:
        return None
    return MeanPooler(model, int(max_length * median))
