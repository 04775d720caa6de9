"""Model2Vec's mean pooling as one sparse product: the hot loop of an index run.

``StaticModel.encode`` gathers every token's vector into a (texts, tokens, dim) array and
averages it. On win32-17k (85k passages) that is half of the 29 s of encoding; the other
half is tokenising, in Rust on every core. The same average is a sparse (texts x tokens)
matrix of ``weight / length`` times the rows of the embedding table the batch uses, which
costs almost nothing beside the tokenising. The vectors match ``encode``'s to its float16
rounding (a test holds the two side by side).

Truncation is Model2Vec's own: the text is cut at ``max_length x median_token_length``
characters and the tokenizer at ``max_length`` tokens. A model this cannot read the same
way (no such attributes, an integer table) keeps ``encode``: :func:`pooler_for` says so by
returning None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class SparsePooler:
    """Encodes batches exactly as the model's ``encode`` does, faster (see module doc)."""

    def __init__(self, model: Any, max_chars: int | None) -> None:
        self._model = model
        self._max_chars = max_chars
        self._mapping = model.token_mapping
        self._weights = model.weights
        self._normalize = bool(model.normalize)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        from scipy.sparse import csr_matrix  # an index run's cost only, not a search's

        if self._max_chars is not None:
            texts = [t[: self._max_chars] for t in texts]
        ids = self._model.tokenize(list(texts))
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        tokens = np.fromiter((t for x in ids for t in x), dtype=np.int64, count=int(lengths.sum()))
        per_token = np.repeat(1.0 / np.maximum(lengths, 1), lengths)
        if self._weights is not None:
            per_token = per_token * self._weights[tokens]
        rows = tokens if self._mapping is None else self._mapping[tokens]
        used, column = np.unique(rows, return_inverse=True)
        indptr = np.concatenate(([0], np.cumsum(lengths)))
        shares = csr_matrix(
            (per_token.astype(np.float32), column, indptr), shape=(len(ids), len(used))
        )
        out = np.asarray(shares @ self._model.embedding[used].astype(np.float32))
        if self._normalize:
            out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-32
        return out


def pooler_for(model: Any) -> SparsePooler | None:
    """A pooler for ``model``, or None when its encoding is not plain float mean pooling."""
    needed = ("tokenize", "embedding", "token_mapping", "weights", "normalize", "max_length")
    if not all(hasattr(model, a) for a in needed) or model.embedding.dtype.kind != "f":
        return None
    max_length = model.max_length
    if max_length is None:
        return SparsePooler(model, None)
    median = getattr(model, "median_token_length", None)
    if not isinstance(median, int | float) or median <= 0:
        return None
    return SparsePooler(model, int(max_length * median))
