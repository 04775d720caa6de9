"""Encoding a batch of passages: whole vectors and window vectors, with the passages a
model refuses isolated and a failing model noticed. Pure (no database), and light to import:
the index's encoding worker processes (``embed_pool``) import this, not the indexer."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from retriever.embed import Embedder, EmbedderError, InvalidVectorError, ZeroVectorError
from retriever.prepare import embedding_input
from retriever.windows import WINDOW_WORDS, embedding_windows, window_starts

log = logging.getLogger("retriever.index")  # what the index run logs, wherever it runs

BROKEN_AFTER = 8  # invalid vectors in a row after which a model is taken for broken

Rows = list[tuple[bytes, str, str]]  # (hash, context, text) of the passages of a batch


@dataclass(slots=True)
class Encoded:
    """One batch's vectors, keyed by (hash, part), and what the encoding noted."""

    keys: list[tuple[bytes, int]]
    vectors: np.ndarray
    refused: list[bytes] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # the embedder failed: the batch's rest stays pending


class Reporting(Protocol):
    warnings: list[str]  # what the run's report says beside its figures


class Failing(Protocol):
    error: str | None  # why the tier's embedder stopped, once it did


@dataclass(slots=True)
class _Noted:
    warnings: list[str] = field(default_factory=list)
    error: str | None = None


def encode_batch(embedder: Embedder, rows: Rows) -> Encoded:
    """A batch's whole and window vectors, keyed by (hash, part), with the passages
    refused, the warnings and the embedder's failure: what a worker sends back."""
    report, tier = _Noted(), _Noted()
    refused: list[bytes] = []
    wholes = [(h, embedding_input(context, text)) for h, context, text in rows]
    hashes, vectors = _embed_rows(embedder, wholes, refused, report, tier)
    keys, vectors = _with_windows(embedder, rows, hashes, vectors, refused, report, tier)
    return Encoded(keys, vectors, refused, report.warnings, tier.error)


def _embed_rows(
    embedder: Embedder,
    rows: Sequence[tuple[bytes, str]],
    refused: list[bytes],
    report: Reporting,
    tier: Failing,
    read_nothing: list[bytes] | None = None,
) -> tuple[list[bytes], np.ndarray]:
    """Vectors for ``rows``; refused passages join ``refused`` (and ``read_nothing`` when
    the model read nothing in them: an all-zero vector)."""
    texts = [r[1] for r in rows]
    try:
        return [r[0] for r in rows], embedder.embed(texts)
    except InvalidVectorError as exc:
        if len(rows) == 1:
            refused.append(rows[0][0])
            if read_nothing is not None and isinstance(exc, ZeroVectorError):
                read_nothing.append(rows[0][0])
            report.warnings.append(f"refused a vector for passage {rows[0][0].hex()[:12]}: {exc}")
            return [], np.zeros((0, embedder.dimension), dtype=np.float32)
        log.warning("embedder returned invalid vectors (%s); isolating the bad passages", exc)
    except EmbedderError as exc:  # unreachable, not invalid: the passages stay pending
        tier.error = str(exc)
        return [], np.zeros((0, embedder.dimension), dtype=np.float32)
    # Isolate invalid vectors one passage at a time so the good ones are still stored.
    keep: list[bytes] = []
    vecs: list[np.ndarray] = []
    blank: list[bytes] = []
    in_a_row = 0
    for h, text in rows:
        n_blank = len(blank)
        got_h, got_v = _embed_rows(embedder, [(h, text)], refused, report, tier, blank)
        # A passage the model reads nothing in (only symbols, or words it does not know)
        # says nothing about the model either way: only other invalid vectors count.
        if got_h:
            in_a_row = 0
        elif len(blank) == n_blank:
            in_a_row += 1
        if in_a_row >= BROKEN_AFTER:
            # The model is broken (e.g. the NaN regression), not these passages: stop
            # instead of asking passage by passage; the rest stay pending.
            tier.error = (
                f"{embedder.model_id} returned invalid vectors for {in_a_row} passages in "
                "a row; the rest stay pending"
            )
        if tier.error:
            break
        if got_h:
            keep.extend(got_h)
            vecs.append(got_v)
    stacked = np.vstack(vecs) if vecs else np.zeros((0, embedder.dimension), dtype=np.float32)
    return keep, stacked


def _with_windows(
    embedder: Embedder,
    rows: Sequence[tuple[bytes, str, str]],
    hashes: list[bytes],
    vectors: np.ndarray,
    refused: list[bytes],
    report: Reporting,
    tier: Failing,
) -> tuple[list[tuple[bytes, int]], np.ndarray]:
    """The whole vectors of ``hashes`` (part 0) and their windows' (parts 1..), keyed by
    (hash, part). A passage is stored with all its vectors or not at all, so the next run
    embeds it again, windows included: one whose windows were cut short by the embedder
    going away stays pending; one with an invalid window vector is refused like one whose
    whole vector is. A window the model reads nothing in is left out alone (a fresh index
    leaves it out too)."""
    kept = set(hashes)
    if callable(getattr(embedder, "embed_windows", None)):
        window_keys, window_vectors, failed, need = _pooled_windows(embedder, rows, kept, tier)
    else:
        items = [
            (h, part, text)
            for h, context, body in rows
            if h in kept
            for part, text in enumerate(embedding_windows(context, body), start=1)
        ]
        window_keys, window_vectors, failed = _window_vectors(embedder, items, tier)
        need = Counter(h for h, _, _ in items)
    for h in sorted(failed):
        refused.append(h)
        report.warnings.append(f"refused the window vectors of passage {h.hex()[:12]}")
    if tier.error:  # what the embedder did not get to is redone by the next run
        got = Counter(h for h, _ in window_keys)
        failed |= {h for h, n in need.items() if got[h] < n}
    keys = [(h, 0) for h in hashes if h not in failed]
    keys += [(h, part) for h, part in window_keys if h not in failed]
    whole = [i for i, h in enumerate(hashes) if h not in failed]
    parts = [i for i, (h, _) in enumerate(window_keys) if h not in failed]
    stacked = (
        [vectors[whole], window_vectors[parts]] if window_vectors is not None else [vectors[whole]]
    )
    return keys, np.vstack(stacked) if keys else vectors[:0]


def _pooled_windows(
    embedder: Embedder, rows: Sequence[tuple[bytes, str, str]], kept: set[bytes], tier: Failing
) -> tuple[list[tuple[bytes, int]], np.ndarray | None, set[bytes], Counter[bytes]]:
    """``_window_vectors`` for an embedder that pools a passage's windows itself
    (Model2Vec's ``embed_windows``: a passage tokenised and gathered once, not once per
    window), and how many windows each passage needs. A window the model reads nothing in
    is left out; a non-finite one refuses its passage."""
    passages = []
    for h, context, body in rows:
        words = body.split()
        starts = window_starts(len(words)) if h in kept else []
        if starts:
            passages.append((h, (context, words, starts)))
    need = Counter({h: len(p[2]) for h, p in passages})
    if tier.error or not passages:
        return [], None, set(), need
    try:
        pooled = embedder.embed_windows([p for _, p in passages], WINDOW_WORDS)  # type: ignore[attr-defined]
    except EmbedderError as exc:
        tier.error = str(exc)
        return [], None, set(), need
    keys: list[tuple[bytes, int]] = []
    vecs: list[np.ndarray] = []
    bad: set[bytes] = set()
    for (h, _), vectors in zip(passages, pooled, strict=True):
        if not np.isfinite(vectors).all():
            bad.add(h)
            continue
        readable = np.flatnonzero(vectors.any(axis=1))
        keys += [(h, int(j) + 1) for j in readable]
        vecs.append(vectors[readable])
    return keys, (np.vstack(vecs) if vecs else None), bad, need


def _window_vectors(
    embedder: Embedder, items: Sequence[tuple[bytes, int, str]], tier: Failing
) -> tuple[list[tuple[bytes, int]], np.ndarray | None, set[bytes]]:
    """Vectors of ``items`` (hash, part, text), and the passages with an invalid one: all
    in one call, or one window at a time when some come back invalid. Sets ``tier.error``
    when the embedder is gone or keeps returning invalid vectors."""
    if tier.error or not items:
        return [], None, set()
    try:
        vectors = embedder.embed([t for _, _, t in items])
        return [(h, part) for h, part, _ in items], vectors, set()
    except InvalidVectorError as exc:
        log.warning("invalid vectors among passage windows (%s); isolating them", exc)
    except EmbedderError as exc:
        tier.error = str(exc)
        return [], None, set()
    keys: list[tuple[bytes, int]] = []
    vecs: list[np.ndarray] = []
    bad: set[bytes] = set()
    in_a_row = 0
    for h, part, text in items:
        if h in bad:
            continue
        try:
            vecs.append(embedder.embed([text]))
        except ZeroVectorError:  # says nothing about the model either way
            continue
        except InvalidVectorError:
            bad.add(h)
            in_a_row += 1
            if in_a_row >= BROKEN_AFTER:
                tier.error = (
                    f"{embedder.model_id} returned invalid vectors for {in_a_row} passages' "
                    "windows in a row; the rest stay pending"
                )
                break
            continue
        except EmbedderError as exc:
            tier.error = str(exc)
            break
        in_a_row = 0
        keys.append((h, part))
    return keys, np.vstack(vecs) if vecs else None, bad
