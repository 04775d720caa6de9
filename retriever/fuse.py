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


def linear(
    lexical: Sequence[Mapping[Hashable, float]],
    semantic: Sequence[Mapping[Hashable, float]],
    *,
    alpha: float = 0.3,
) -> dict[Hashable, float]:
    """Convex combination of per-query normalised scores: (1 - alpha) * BM25 / max BM25
    + alpha * min-max normalised cosine. Unlike RRF it keeps how far ahead a hit is, so a
    weak arm cannot outvote a confident one. Queries are averaged."""
    scores: dict[Hashable, float] = {}
    for weight, lists, cosine in ((1 - alpha, lexical, False), (alpha, semantic, True)):
        for ranked in lists:
            if not ranked:
                continue
            hi, lo = max(ranked.values()), min(ranked.values())
            span = (hi - lo) if cosine else hi
            for key, value in ranked.items():
                norm = ((value - lo) if cosine else value) / span if span > 0 else 1.0
                scores[key] = scores.get(key, 0.0) + weight * norm / max(1, len(lists))
    return scores
