"""Token budgeting of results (pure): best passage of each document first, then more.

Tokens are estimated consistently everywhere as ceil(characters / 4), the usual rule of
thumb for English with BPE tokenisers; it needs no tokenizer download and is stable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar


def estimate_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Budgeted:
    kept: list[int]  # indexes into the ranked input, in delivery order
    used_tokens: int
    dropped: int


def allocate(
    ranked: Sequence[T],
    *,
    budget: int,
    doc_of: Callable[[T], str],
    tokens_of: Callable[[T], int],
    per_doc_first: bool = True,
) -> Budgeted:
    """Choose which ranked hits fit in ``budget`` tokens.

    Pass 1 takes the best hit of each document in rank order (document diversity);
    pass 2 fills what is left with further hits, still in rank order. A hit that does
    not fit is skipped, a smaller one later may still fit. The single best hit is always
    delivered (truncation is the caller's job) so an answer is never empty for budget alone.
    """
    kept: list[int] = []
    used = 0
    if not ranked:
        return Budgeted([], 0, 0)
    order = list(range(len(ranked)))
    if per_doc_first:
        seen: set[str] = set()
        firsts: list[int] = []
        rest: list[int] = []
        for i, hit in enumerate(ranked):
            d = doc_of(hit)
            (rest if d in seen else firsts).append(i)
            seen.add(d)
        order = firsts + rest
    for i in order:
        cost = tokens_of(ranked[i])
        if not kept or used + cost <= budget:
            kept.append(i)
            used += cost
    return Budgeted(kept, used, len(ranked) - len(kept))
