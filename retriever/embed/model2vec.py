"""In-process static embeddings with Model2Vec (a hub id or a local folder)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retriever.embed.base import EmbedderUnavailable, fingerprint_of, validate_vectors
from retriever.embed.pooling import Windowed, pooler_for, windows_as_texts


class Model2VecEmbedder:
    """In-process static embeddings (Model2Vec). ``model_id`` is a hub id or a local path."""

    kind = "model2vec"
    contextual = False  # one vector per token, averaged: see retriever.feedback

    def __init__(self, model_id: str, *, setting: str = "RETRIEVER_EMBED_MODEL") -> None:
        """``setting``: the variable that chose this model, named in the advice if it
        cannot load."""
        self.model_id = model_id
        try:
            path = Path(model_id).expanduser()
            if not path.exists() and model_id.startswith(("/", ".", "~")):
                raise FileNotFoundError(f"no model folder at {model_id}")
            self._model = load_static_model(model_id)
            source = str(path.resolve()) if path.exists() else model_id
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


# Model2Vec's own folder layout (its loader's first choice): read here directly.
OWN_LAYOUT = ("model.safetensors", "tokenizer.json", "config.json")


def load_static_model(model_id: str) -> Any:
    """The ``StaticModel`` a local folder or a hub id in the local cache holds. A folder in
    Model2Vec's own layout is read here, as Model2Vec's loader reads it (weights, token
    mapping, normalize and max_length from its config); anything else goes to that loader.
    Reading it here skips importing the loader's module, which brings in the hub client
    and model cards: 0.2 s of every command that loads the model. The README's metadata
    (base model, language: model-card fields) is not read; the vectors do not use it."""
    from model2vec import StaticModel

    folder = own_layout_folder(model_id)
    if folder is None:
        path = Path(model_id).expanduser()
        if path.exists():
            return StaticModel.from_pretrained(str(path.resolve()))
        # Never hang on a hub that is out of reach: fail fast when offline is forced.
        return StaticModel.from_pretrained(model_id, force_download=False)
    from safetensors import safe_open
    from tokenizers import Tokenizer

    with safe_open(str(folder / "model.safetensors"), framework="numpy") as tensors:
        names = set(tensors.keys())
        if "embeddings" not in names:
            return StaticModel.from_pretrained(str(folder))
        vectors = tensors.get_tensor("embeddings")
        weights = tensors.get_tensor("weights") if "weights" in names else None
        mapping = tensors.get_tensor("mapping") if "mapping" in names else None
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return StaticModel(
        vectors=vectors,
        tokenizer=Tokenizer.from_file(str(folder / "tokenizer.json")),
        config=config,
        normalize=config.get("normalize", False),
        weights=weights,
        token_mapping=mapping,
        max_length=config.get("max_length", 512),
    )


def own_layout_folder(model_id: str) -> Path | None:
    """The folder holding ``model_id`` when it is in Model2Vec's own layout: the path, or
    for a hub id the latest snapshot in the local hub cache (the one Model2Vec picks)."""
    path = Path(model_id).expanduser()
    folder = path.resolve() if path.exists() else _cached_snapshot(model_id)
    if folder is None or not all((folder / name).is_file() for name in OWN_LAYOUT):
        return None
    return folder


def _cached_snapshot(model_id: str) -> Path | None:
    if model_id.count("/") != 1:
        return None
    from huggingface_hub import constants

    snapshots = (
        Path(constants.HF_HUB_CACHE) / f"models--{model_id.replace('/', '--')}" / "snapshots"
    )
    found = [p for p in snapshots.iterdir() if p.is_dir()] if snapshots.is_dir() else []
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


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
