"""What every embedder shares: the protocol, its errors, and vector validation.

Every vector leaving an embedder has been validated: finite, non-zero, the expected
dimension, one per input. Anything else raises :class:`InvalidVectorError` so that
nothing invalid is ever stored; the passages simply stay pending.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from retriever.errors import UnavailableError


class EmbedderError(UnavailableError):
    """The embedder cannot work (model missing, server down, ...)."""


class EmbedderUnavailable(EmbedderError):
    """The model cannot be loaded or reached; search degrades to lexical."""


class InvalidVectorError(EmbedderError):
    """The embedder returned vectors that must not be stored."""


class ZeroVectorError(InvalidVectorError):
    """An all-zero vector: a static model's answer for text with no word it knows. Not a
    fault of the model (a query of unknown words simply has no semantic arm)."""


@runtime_checkable
class Embedder(Protocol):
    model_id: str

    @property
    def dimension(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def close(self) -> None:
        """Release what the embedder holds (an HTTP client, a model)."""


def validate_vectors(vectors: object, expected_n: int, expected_dim: int | None) -> np.ndarray:
    """Return ``vectors`` as a float32 (n, dim) array or raise InvalidVectorError."""
    try:
        arr = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidVectorError(f"vectors are not numeric: {exc}") from exc
    if arr.ndim != 2:
        raise InvalidVectorError(f"expected a 2-D batch of vectors, got shape {arr.shape}")
    if arr.shape[0] != expected_n:
        raise InvalidVectorError(f"expected {expected_n} vectors, got {arr.shape[0]}")
    if expected_dim is not None and arr.shape[1] != expected_dim:
        raise InvalidVectorError(f"expected dimension {expected_dim}, got {arr.shape[1]}")
    if arr.shape[1] == 0:
        raise InvalidVectorError("vectors have dimension 0")
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        raise InvalidVectorError(f"{int(bad.sum())} vector(s) contain NaN or infinity")
    zero = ~np.any(arr != 0, axis=1)
    if zero.any():
        raise ZeroVectorError(f"{int(zero.sum())} vector(s) are all zeros")
    return arr


def fingerprint_of(*parts: object) -> str:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:16]
    return f"{parts[0]}:{parts[1]}:{digest}"
