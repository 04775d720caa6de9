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


class MeanPooler:
    """Encodes texts as the model's ``encode`` does, faster (see the module doc)."""

    def __init__(self, model: Any, max_chars: int | None) -> None:
        self._model = model
        self._max_chars = max_chars
        self._mapping = model.token_mapping
        self._weights = model.weights
        self._normalize = bool(model.normalize)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._max_chars is not None:
            texts = [t[: self._max_chars] for t in texts]
        ids = self._model.tokenize(list(texts))
        out = np.zeros((len(ids), self._model.embedding.shape[1]), dtype=np.float32)
        tokens = np.fromiter((t for x in ids for t in x), dtype=np.int64)
        if not len(tokens):
            return self._as_encode_returns(out)
        rows = tokens if self._mapping is None else self._mapping[tokens]
        used, position = np.unique(rows, return_inverse=True)
        table = self._model.embedding[used].astype(np.float32)  # float16 -> float32: exact
        start = 0
        for i, text_ids in enumerate(ids):
            n = len(text_ids)
            if n:
                vectors = table[position[start : start + n]]
                if self._weights is not None:
                    vectors = vectors * self._weights[tokens[start : start + n], None]
                out[i] = np.add.reduce(vectors, axis=0) / n
            start += n
        return self._as_encode_returns(out)

    def _as_encode_returns(self, means: np.ndarray) -> np.ndarray:
        """``encode``'s last steps: the means in the table's type, normalised in float32
        and cast back (float16 for most models), so the vectors are its vectors."""
        kind = self._model.embedding.dtype
        out = means.astype(kind)
        if self._normalize:
            wide = out.astype(np.float32)
            out = (wide / (np.linalg.norm(wide, axis=1, keepdims=True) + 1e-32)).astype(kind)
        return out.astype(np.float32)


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
