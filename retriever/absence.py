"""``likely_absent``: does the vault answer this query at all? (pure: numpy only)

Several signals, none of them tied to one model's cosine scale: how many query terms the
best passage holds, the best cosine and how far it stands above the tenth, how far the
best BM25 score stands above the tenth, and whether both arms agree on the top notes. Calibration fits a small logistic model per (vault,
model) on pseudo-queries whose answer is there against the same queries with their note
left out, and sets the threshold so that a bounded share of answerable queries is flagged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from retriever.ranking import Arms

# The title signal is left out: title pseudo-queries name their note by construction, so a
# model fitted on them would call every question that names no note unanswerable.
HYBRID_FEATURES = ("coverage", "best_cosine", "cosine_gap", "lexical_gap", "agreement")
LEXICAL_FEATURES = ("coverage", "lexical_gap")
GAP_DEPTH = 10  # compare the best score with the one at this rank
AGREEMENT_DEPTH = 5
L2 = 1.0  # ridge on standardised features: keeps the fit stable on a few hundred queries


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
    """Logistic model: P(answerable) from standardised signals; absent below threshold."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float

    def probability(self, sig: Mapping[str, float]) -> float:
        x = np.array([sig.get(f, 0.0) for f in self.features], dtype=np.float64)
        z = (x - np.array(self.mean)) / np.array(self.scale)
        return float(1.0 / (1.0 + np.exp(-(z @ np.array(self.weights) + self.bias))))

    def absent(self, sig: Mapping[str, float]) -> bool:
        return self.probability(sig) < self.threshold

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AbsenceModel:
        return cls(
            features=tuple(data["features"]),
            mean=tuple(data["mean"]),
            scale=tuple(data["scale"]),
            weights=tuple(data["weights"]),
            bias=float(data["bias"]),
            threshold=float(data["threshold"]),
        )


def fit(
    present: Sequence[Mapping[str, float]],
    missing: Sequence[Mapping[str, float]],
    features: Sequence[str],
    *,
    max_false_rate: float,
) -> AbsenceModel:
    """Fit on signals of queries whose note is there (``present``) and left out
    (``missing``); the threshold flags at most ``max_false_rate`` of ``present``."""
    x = np.array([[s.get(f, 0.0) for f in features] for s in [*present, *missing]], dtype=float)
    y = np.array([1.0] * len(present) + [0.0] * len(missing))
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    w, b = _logistic(z, y)
    model = AbsenceModel(tuple(features), tuple(mean.tolist()), tuple(scale.tolist()),
                         tuple(w.tolist()), b, 0.0)  # fmt: skip
    probs = sorted(model.probability(s) for s in present)
    k = int(max_false_rate * len(probs))
    threshold = probs[k] if probs and k < len(probs) else 0.0
    return AbsenceModel(model.features, model.mean, model.scale, model.weights, b, threshold)


def _logistic(z: np.ndarray, y: np.ndarray, iterations: int = 25) -> tuple[np.ndarray, float]:
    """Ridge-regularised logistic regression by Newton's method (a handful of features)."""
    n, d = z.shape
    a = np.hstack([z, np.ones((n, 1))])
    beta = np.zeros(d + 1)
    ridge = np.eye(d + 1) * L2
    ridge[d, d] = 0.0  # the intercept is not shrunk
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(a @ beta)))
        grad = a.T @ (p - y) + ridge @ beta
        hess = (a * (p * (1 - p))[:, None]).T @ a + ridge + np.eye(d + 1) * 1e-9
        step = np.linalg.solve(hess, grad)
        beta -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return beta[:d], float(beta[d])


def rates(model: AbsenceModel, present: Sequence[Mapping[str, float]],
          missing: Sequence[Mapping[str, float]]) -> dict[str, float]:  # fmt: skip
    """Share of answerable queries wrongly flagged, and of left-out ones flagged."""
    wrong = sum(model.absent(s) for s in present) / len(present) if present else 0.0
    caught = sum(model.absent(s) for s in missing) / len(missing) if missing else 0.0
    return {"answerable_flagged": round(wrong, 4), "absent_flagged": round(caught, 4)}
