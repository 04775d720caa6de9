"""``likely_absent``: does the vault answer this query at all? (pure: numpy only)

Signals of one search: how many query terms the best passage holds, the best cosine and
how far it stands above the tenth, how far the best BM25 score stands above the tenth,
whether both arms agree on the top notes, and how strongly the query names a note. Every
search reports them (``signals``); calibration turns them into thresholds per (vault,
model): a cosine threshold learned from the vault's own answerable pseudo-queries instead
of one constant that suits one model's cosine scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from retriever.ranking import Arms

GAP_DEPTH = 10  # compare the best score with the one at this rank
AGREEMENT_DEPTH = 5


def _merged(lists: Sequence[Mapping[int, float]]) -> list[float]:
    best: dict[int, float] = {}
    for ranked in lists:
        for cid, score in ranked.items():
            best[cid] = max(best.get(cid, score), score)
    return sorted(best.values(), reverse=True)


def _gap(values: Sequence[float], *, relative: bool) -> float:
    if not values:
        return 0.0
    tail = values[min(GAP_DEPTH, len(values)) - 1]
    if relative:
        return 1.0 - tail / values[0] if values[0] > 0 else 0.0
    return values[0] - tail


def _top_docs(lists: Sequence[Mapping[int, float]], doc_of: Mapping[int, int]) -> set[int]:
    out: set[int] = set()
    for ranked in lists:
        docs: list[int] = []
        for cid in ranked:
            doc = doc_of.get(cid)
            if doc is not None and doc not in docs:
                docs.append(doc)
            if len(docs) == AGREEMENT_DEPTH:
                break
        out.update(docs)
    return out


def signals(arms: Arms, coverage: float) -> dict[str, float]:
    """The absence signals of one search (``coverage``: share of the query's terms that
    the best passage holds)."""
    cosines = _merged(arms.semantic)
    lexical = [max(r.values()) for r in arms.lexical if r]
    lex_gap = max(
        (_gap(sorted(r.values(), reverse=True), relative=True) for r in arms.lexical if r),
        default=0.0,
    )
    lex_docs = _top_docs(arms.lexical, arms.doc_of)
    sem_docs = _top_docs(arms.semantic, arms.doc_of)
    agreement = len(lex_docs & sem_docs) / AGREEMENT_DEPTH if lex_docs and sem_docs else 0.0
    return {
        "coverage": coverage,
        "best_cosine": cosines[0] if cosines else 0.0,
        "cosine_gap": _gap(cosines, relative=False),
        "lexical_gap": lex_gap if lexical else 0.0,
        "agreement": min(1.0, agreement),
        "title": max(arms.title.values(), default=0.0),
    }


@dataclass(frozen=True, slots=True)
class AbsenceModel:
    """Flag a search as likely unanswered when every signal is below its threshold: few
    query terms in the best passage, and a best cosine (or, lexical only, a BM25 lead)
    that is low *for this vault and model*: below the ``quantile`` of what answerable
    pseudo-queries reach. A cosine threshold read off the data, not a constant that
    belongs to one model's scale."""

    thresholds: dict[str, float]
    quantile: float

    def absent(self, sig: Mapping[str, float]) -> bool:
        return all(sig.get(name, 0.0) < limit for name, limit in self.thresholds.items())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AbsenceModel:
        return cls(dict(data["thresholds"]), float(data["quantile"]))


def fit(
    answerable: Sequence[Mapping[str, float]],
    *,
    semantic: bool,
    coverage: float,
    quantile: float,
) -> AbsenceModel:
    """Thresholds from the signals of answerable pseudo-queries: the query-term coverage
    is a fixed share (it does not depend on the model); the model-dependent signal's
    threshold is its ``quantile`` over ``answerable``."""
    name = "best_cosine" if semantic else "lexical_gap"
    values = [s.get(name, 0.0) for s in answerable]
    limit = float(np.quantile(values, quantile)) if values else 0.0
    return AbsenceModel({"coverage": coverage, name: round(limit, 4)}, quantile)


def rates(
    model: AbsenceModel,
    present: Sequence[Mapping[str, float]],
    missing: Sequence[Mapping[str, float]],
) -> dict[str, float]:
    """Share of answerable queries wrongly flagged, and of left-out ones flagged."""
    wrong = sum(model.absent(s) for s in present) / len(present) if present else 0.0
    caught = sum(model.absent(s) for s in missing) / len(missing) if missing else 0.0
    return {"answerable_flagged": round(wrong, 4), "absent_flagged": round(caught, 4)}
