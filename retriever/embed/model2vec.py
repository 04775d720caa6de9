"""In-process static embeddings with Model2Vec (a hub id or a local folder)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retriever.embed.base import EmbedderUnavailable, fingerprint_of, validate_vectors
from retriever.embed.pooling import Windowed, pooler_for, windows_as_texts


class Model2VecEmbedder:
    """In-process static embeddings (Model2Vec). ``model_id`` is a hub id or a local path."""

    kind = "model2vec"

    def __init__(self, model_id: str, *, setting: str = "RETRIEVER_EMBED_MODEL") -> None:
        """``setting``: the variable that chose this model, named in the advice if it
        cannot load."""
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
                raise EmbedderUnavailable(
                    HUB_UNREACHABLE.format(model=model_id, advice=OFFLINE_ADVICE[setting])
                ) from exc
            raise EmbedderUnavailable(
                f"cannot load Model2Vec model {model_id!r}: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
            ) from exc
        self.dimension: int = int(self._model.dim)
        self._pooler = pooler_for(self._model)
        self._source = source
        self.fingerprint: str = model2vec_fingerprint(model_id, self.dimension)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self._pooler is not None:  # encode's vectors, faster (retriever.embed.pooling)
            vectors = self._pooler.encode(texts)
        else:
            vectors = self._model.encode(list(texts), use_multiprocessing=False)
        return validate_vectors(vectors, len(texts), self.dimension)

    def embed_windows(self, passages: Sequence[Windowed], width: int) -> list[np.ndarray]:
        """Each passage's window vectors, ``(context, words, starts)`` as in
        ``MeanPooler.encode_windows`` (its faster way when the model allows). Not validated:
        the caller leaves out a zero window and refuses a passage with a non-finite one."""
        if self._pooler is not None:
            return self._pooler.encode_windows(passages, width)

        def encode(texts: Sequence[str]) -> np.ndarray:
            return np.asarray(self._model.encode(list(texts), use_multiprocessing=False))

        return windows_as_texts(encode, passages, width)

    def close(self) -> None:
        pass  # the model is plain memory


def model2vec_fingerprint(model_id: str, dimension: int) -> str:
    """The fingerprint of the Model2Vec model ``model_id`` names: its name, dimension and
    weights file size (a hub id: name and dimension). Computed without loading the model,
    so a run with nothing to embed can tell that the stored vectors are still its own."""
    path = Path(model_id).expanduser()
    weights = (path.resolve() if path.exists() else Path(model_id)) / "model.safetensors"
    stamp = weights.stat().st_size if weights.exists() else ""
    return fingerprint_of("model2vec", Path(model_id).name or model_id, dimension, stamp)


HUB_UNREACHABLE = "the model hub is unreachable and {model!r} is not cached: {advice}"
OFFLINE_ADVICE = {
    "RETRIEVER_EMBED_MODEL": "set RETRIEVER_EMBED_MODEL to a local Model2Vec folder (or "
    "ollama:<model>; none for lexical search only)",
    "RETRIEVER_FALLBACK_MODEL": "set RETRIEVER_FALLBACK_MODEL to a local Model2Vec folder "
    "(or none: no second tier)",
}
_OFFLINE_ERRORS = {
    "OfflineModeIsEnabled",
    "LocalEntryNotFoundError",
    "ConnectError",
    "ConnectTimeout",
    "ConnectionError",
    "NameResolutionError",
}


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
