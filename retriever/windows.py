"""Embedding windows of a long passage (pure).

A passage is embedded whole, and a passage longer than ``WINDOW_WORDS`` words also as
overlapping windows of that many words, each with the passage's heading context. The
semantic arm rescores the passages nearest by their whole vector with their best window
(``retriever.vector``). One vector per long section blurs it: a static model averages every
word, a transformer reads only the first 256 tokens, so a question about one detail in the
middle of a long section ranked it low.

Measured on the Dendron cases (50 questions; the semantic arm alone, nDCG@10): all-MiniLM
through Ollama 0.406 -> 0.436, the static m2v-minilm-256 0.258 -> 0.302 (calibrated hybrid
0.494 -> 0.507 and 0.403 -> 0.413). Offline, 64-word windows every 32 words beat 64 every
64 (searching every window: MiniLM 0.471 against 0.444, static 0.317 against 0.294) and 96
every 48 (static 0.269). On abstracts (Cranfield, CISI), which are rarely longer than a
window's reach, little changes.

The windows are part of how vectors are made: changing these constants needs a migration
that drops the stored vectors (as 0005 did), so every passage is embedded again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retriever.prepare import embedding_input

WINDOW_WORDS = 64
WINDOW_STRIDE = 32  # half a window: a sentence cut by one window's edge is whole in the next
MAX_WINDOWS = 16  # a huge table or code block gets windows spread over it, not hundreds


def window_starts(n_words: int) -> list[int]:
    """Where each window starts, for a passage of ``n_words`` words: none when the whole
    passage fits in one window; else every ``WINDOW_STRIDE`` words, the last one ending at
    the passage's end, and at most ``MAX_WINDOWS`` spread evenly."""
    if n_words <= WINDOW_WORDS:
        return []
    last = n_words - WINDOW_WORDS
    count = min(MAX_WINDOWS, -(-last // WINDOW_STRIDE) + 1)
    return [round(i * last / (count - 1)) for i in range(count)]


def embedding_windows(context: str, text: str) -> list[str]:
    """What the embedder sees for each window of a passage (empty for a short passage)."""
    words = text.split()
    return [
        embedding_input(context, " ".join(words[start : start + WINDOW_WORDS]))
        for start in window_starts(len(words))
    ]


def pack_windows(vectors: np.ndarray) -> bytes:
    """A passage's window vectors (one per row, valid: finite, non-zero) as one blob of
    int8 codes, each row scaled so that its largest component is +-127. They only rescore
    passages by cosine, which divides every scale out, so none is kept: a quarter of
    float32's size (half of halfvec's), and one row per passage instead of one per window.
    The rounding moves a window's cosine by 3e-4 (all-MiniLM, 384 dimensions) to 7e-4
    (m2v-minilm-256, whose few large components coarsen the scale) on average, at most
    4e-3, measured on Dendron's windows and questions."""
    rows = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(rows).max(axis=1, keepdims=True)
    return np.rint(rows / peak * 127.0).astype(np.int8).tobytes()


def unpack_windows(blob: bytes, dim: int) -> np.ndarray:
    """The window vectors of ``pack_windows``, up to each row's scale (float32)."""
    return np.frombuffer(blob, dtype=np.int8).reshape(-1, dim).astype(np.float32)


def best_window_cosines(blobs: Sequence[bytes], query: np.ndarray) -> np.ndarray:
    """For each blob of ``pack_windows``, the highest cosine between ``query`` and one of
    its windows."""
    q = np.asarray(query, dtype=np.float32).ravel()
    rows = unpack_windows(b"".join(blobs), q.shape[0])
    cos = rows @ q / (np.linalg.norm(rows, axis=1) * float(np.linalg.norm(q)))
    starts = np.cumsum([0] + [len(b) // q.shape[0] for b in blobs[:-1]])
    return np.maximum.reduceat(cos, starts)
