"""Rank fusion (pure): reciprocal rank fusion and semantic/lexical interleaving."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class RankedList:
    arm: str  # "lexical" | "semantic" | "graph"
    keys: Sequence[Hashable]  # best first
    weight: float = 1.0


def rrf(lists: Sequence[RankedList], *, k: float = 60.0) -> dict[Hashable, float]:
    """Reciprocal rank fusion: score(d) = sum over lists of weight / (k + rank)."""
    scores: dict[Hashable, float] = {}
    for ranked in lists:
        for rank, key in enumerate(ranked.keys, start=1):
            scores[key] = scores.get(key, 0.0) + ranked.weight / (k + rank)
    return scores


def interleave(
    semantic: Sequence[Sequence[Hashable]],
    lexical: Sequence[Sequence[Hashable]],
    *,
    ratio: int = 2,
) -> dict[Hashable, float]:
    """Take ``ratio`` semantic hits, then one lexical, repeatedly, skipping duplicates.

    Several queries' lists of one arm are merged round-robin first. Scores are
    descending positions (1/position) so they sort like the interleaved order.
    """
    streams = (iter(_round_robin(semantic)), iter(_round_robin(lexical)))
    turns = (0,) * ratio + (1,)  # which stream each step of one round draws from
    order: list[Hashable] = []
    seen: set[Hashable] = set()
    exhausted = [False, False]
    while not all(exhausted):
        for arm in turns:
            key = _next_unseen(streams[arm], seen)
            if key is None:
                exhausted[arm] = True
                continue
            seen.add(key)
            order.append(key)
    return {key: 1.0 / pos for pos, key in enumerate(order, start=1)}


def _next_unseen(stream: Iterator[Hashable], seen: set[Hashable]) -> Hashable | None:
    return next((key for key in stream if key not in seen), None)


def _round_robin(lists: Sequence[Sequence[Hashable]]) -> list[Hashable]:
    out: list[Hashable] = []
    seen: set[Hashable] = set()
    for rank in range(max((len(x) for x in lists), default=0)):
        for keys in lists:
            if rank < len(keys) and keys[rank] not in seen:
                seen.add(keys[rank])
                out.append(keys[rank])
    return out


def normalise(lists: Sequence[Mapping[K, float]], *, cosine: bool) -> list[dict[K, float]]:
    """Each list's scores on linear fusion's scale: BM25 over the list's best, cosine
    min-max normalised. Kept apart from ``linear_normalised`` because calibration fuses
    one query's lists with dozens of weights: they are normalised once."""
    out: list[dict[K, float]] = []
    for ranked in lists:
        if not ranked:
            out.append({})
            continue
        hi, lo = max(ranked.values()), min(ranked.values())
        span = (hi - lo) if cosine else hi
        out.append(
            {k: ((v - lo) if cosine else v) / span if span > 0 else 1.0 for k, v in ranked.items()}
        )
    return out


def linear_normalised(
    lexical: Sequence[Mapping[K, float]], semantic: Sequence[Mapping[K, float]], *, alpha: float
) -> dict[K, float]:
    """``linear`` over lists ``normalise`` has put on its scale."""
    scores: dict[K, float] = {}
    for weight, lists in ((1 - alpha, lexical), (alpha, semantic)):
        n = max(1, len(lists))
        for norms in lists:
            for key, norm in norms.items():
                scores[key] = scores.get(key, 0.0) + weight * norm / n
    return scores


def linear(
    lexical: Sequence[Mapping[K, float]],
    semantic: Sequence[Mapping[K, float]],
    *,
    alpha: float = 0.3,
) -> dict[K, float]:
    """Convex combination of per-query normalised scores: (1 - alpha) * BM25 / max BM25
    + alpha * min-max normalised cosine. Unlike RRF it keeps how far ahead a hit is, so a
    weak arm cannot outvote a confident one. Queries are averaged."""
    return linear_normalised(
        normalise(lexical, cosine=False), normalise(semantic, cosine=True), alpha=alpha
    )
