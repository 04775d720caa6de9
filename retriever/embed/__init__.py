"""Embedders: the protocol and validation (:mod:`.base`), one module per backend
(:mod:`.model2vec` in-process, :mod:`.ollama` over HTTP), and the factory."""

from __future__ import annotations

import os

from retriever.embed.base import (
    Embedder,
    EmbedderError,
    EmbedderUnavailable,
    InvalidVectorError,
    ZeroVectorError,
    validate_vectors,
)
from retriever.embed.model2vec import HUB_UNREACHABLE, Model2VecEmbedder

__all__ = [
    "HUB_UNREACHABLE",
    "Embedder",
    "EmbedderError",
    "EmbedderUnavailable",
    "InvalidVectorError",
    "Model2VecEmbedder",
    "ZeroVectorError",
    "load_embedder",
    "validate_vectors",
]


def load_embedder(
    model: str,
    *,
    ollama_url: str | None = None,
    timeout: float = 60.0,
    probe_timeout: float | None = None,
    expected_dim: int | None = None,
    setting: str = "RETRIEVER_EMBED_MODEL",
) -> Embedder:
    """Build the configured embedder. ``ollama:<name>`` selects Ollama, anything else Model2Vec.

    ``probe_timeout`` bounds Ollama's start-up listing and query embeddings; ``expected_dim``
    refuses an Ollama model that answers with another dimension; ``setting`` is the variable
    that chose the model (its advice names it). Raises EmbedderUnavailable with a human
    reason when it cannot work.
    """
    if model.startswith("ollama:"):
        from retriever.embed.ollama import OllamaEmbedder

        return OllamaEmbedder(
            model.removeprefix("ollama:"),
            host=ollama_url or os.environ.get("OLLAMA_HOST", "http://127.0.0.1:11434"),
            timeout=timeout,
            probe_timeout=probe_timeout,
            expected_dim=expected_dim,
        )
    if model.lower() in {"none", "off", "lexical"}:
        raise EmbedderUnavailable("embeddings are turned off (RETRIEVER_EMBED_MODEL=none)")
    embedder = Model2VecEmbedder(model, setting=setting)
    if expected_dim is not None and embedder.dimension != expected_dim:
        raise EmbedderUnavailable(
            f"Model2Vec model {model!r} has dimension {embedder.dimension}, expected "
            f"{expected_dim} (RETRIEVER_EMBED_DIM)"
        )
    return embedder
