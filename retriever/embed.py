"""Embedders: the protocol, vector validation, and the in-process Model2Vec implementation.

Every vector leaving an embedder has been validated: finite, non-zero, the expected
dimension, one per input. Anything else raises :class:`InvalidVectorError` so that
nothing invalid is ever stored; the passages simply stay pending.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

log = logging.getLogger(__name__)


class EmbedderError(RuntimeError):
    """The embedder cannot work (model missing, server down, ...)."""


class EmbedderUnavailable(EmbedderError):
    """The model cannot be loaded or reached; search degrades to lexical."""


class InvalidVectorError(EmbedderError):
    """The embedder returned vectors that must not be stored."""


@runtime_checkable
class Embedder(Protocol):
    model_id: str

    @property
    def dimension(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


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
        raise InvalidVectorError(f"{int(zero.sum())} vector(s) are all zeros")
    return arr


def _fingerprint(*parts: object) -> str:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:16]
    return f"{parts[0]}:{parts[1]}:{digest}"


class Model2VecEmbedder:
    """In-process static embeddings (Model2Vec). ``model_id`` is a hub id or a local path."""

    kind = "model2vec"

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        try:
            from model2vec import StaticModel

            path = Path(model_id).expanduser()
            if not path.exists() and model_id.startswith(("/", ".", "~")):
                raise FileNotFoundError(f"no model folder at {model_id}")
            if path.exists():
                self._model = StaticModel.from_pretrained(str(path.resolve()))
                source = str(path.resolve())
            else:
                # Never hang on a hub that is out of reach: fail fast when offline is forced.
                self._model = StaticModel.from_pretrained(model_id, force_download=False)
                source = model_id
        except Exception as exc:  # any loader failure means "no vectors", never a crash
            if not Path(model_id).expanduser().exists() and _hub_unreachable(exc):
                raise EmbedderUnavailable(HUB_UNREACHABLE.format(model=model_id)) from exc
            raise EmbedderUnavailable(
                f"cannot load Model2Vec model {model_id!r}: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
            ) from exc
        self._dim = int(self._model.dim)
        self._source = source
        weights = Path(source) / "model.safetensors"
        stamp = weights.stat().st_size if weights.exists() else ""
        self._fp = _fingerprint("model2vec", Path(model_id).name or model_id, self._dim, stamp)

    @property
    def dimension(self) -> int:
        return self._dim

    @property
    def fingerprint(self) -> str:
        return self._fp

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = self._model.encode(list(texts), use_multiprocessing=False)
        return validate_vectors(vectors, len(texts), self._dim)


HUB_UNREACHABLE = (
    "the model hub is unreachable and {model!r} is not cached: set RETRIEVER_EMBED_MODEL "
    "to a local Model2Vec folder (or ollama:<model>; none for lexical search only)"
)
_OFFLINE_ERRORS = {"OfflineModeIsEnabled", "LocalEntryNotFoundError", "ConnectError",
                   "ConnectTimeout", "ConnectionError", "NameResolutionError"}  # fmt: skip


def _hub_unreachable(exc: BaseException) -> bool:
    """Whether a load failed for want of the network (any exception in the chain)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ in _OFFLINE_ERRORS or isinstance(current, ConnectionError):
            return True
        current = current.__cause__ or current.__context__
    return False


def load_embedder(model: str, *, ollama_url: str | None = None, timeout: float = 60.0) -> Embedder:
    """Build the configured embedder. ``ollama:<name>`` selects Ollama, anything else Model2Vec.

    Raises EmbedderUnavailable with a human reason when it cannot work.
    """
    if model.startswith("ollama:"):
        from retriever.embed_ollama import OllamaEmbedder

        return OllamaEmbedder(
            model.removeprefix("ollama:"),
            host=ollama_url or os.environ.get("OLLAMA_HOST", "http://127.0.0.1:11434"),
            timeout=timeout,
        )
    if model.lower() in {"none", "off", "lexical"}:
        raise EmbedderUnavailable("embeddings are turned off (RETRIEVER_EMBED_MODEL=none)")
    return Model2VecEmbedder(model)
