"""``likely_absent``: does the vault answer this query at all? (pure: numpy only)

Signals of one search: how many query terms the best passage holds, the best cosine and
how far it stands above the tenth, how far the best BM25 score stands above the tenth,
whether both arms agree on the top notes, how strongly the query names a note, whether it
names something (Barcelona, WireGuard) no passage mentions, and whether it is written in a
language the vault is not. Every search reports them (``signals``); calibration turns them
into thresholds per (vault, model): a cosine threshold learned from the vault's own
answerable pseudo-queries instead of one constant that suits one model's cosine scale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from retriever import languages
from retriever.ranking import Arms

GAP_DEPTH = 10  # compare the best score with the one at this rank
AGREEMENT_DEPTH = 5
# "The vault has never heard of it": at least this share of the query's IDF mass is in
# words no passage holds (Dune, croissant, Readwise). Lexical, so no model owns it.
UNKNOWN_SHARE = 0.5
# ... and then the model only has to be unconvinced, not weak: a best cosine (or BM25
# lead) below the median of what answerable pseudo-queries reach.
UNKNOWN_QUANTILE = 0.5
# "It names something the vault never mentions": names no passage holds make at least this
# share of the query's distinct terms (1 in 10: the subject of a question, not one detail
# of a pasted abstract). Lexical, so no model owns it.
NAME_SHARE = 0.1
# Only for a query whose words mostly miss the best passage: "restic backup ops" with one
# unheard word still names what it wants.
UNKNOWN_MAX_COVERAGE = 0.5


def unknown_share(terms: Mapping[str, int], idfs: Mapping[str, float], unknown_idf: float) -> float:
    """Share of the query's IDF mass (``terms``: term -> count) in terms absent from
    ``idfs`` (the terms some passage holds)."""
    weights = {t: n * idfs.get(t, unknown_idf) for t, n in terms.items()}
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(w for t, w in weights.items() if t not in idfs) / total


def unknown_name(
    names: Sequence[tuple[str, ...]], known: Callable[[str], bool], terms: Iterable[str]
) -> float:
    """Share of the query's distinct ``terms`` that belong to a word it writes as a name
    (``lexical.named_words``) none of whose tokens is ``known``: a name no passage
    mentions. A share, not a yes/no: in a short question such a name is the subject
    (Dune, WireGuard); in a pasted abstract it is one detail among many."""
    distinct = set(terms)
    unknown = {t for tokens in names if not any(known(t) for t in tokens) for t in tokens}
    return len(unknown & distinct) / len(distinct) if distinct else 0.0


def foreign(queries: Sequence[str], vault_languages: Sequence[str]) -> float:
    """1.0 when every query is clearly in a language that is not the vault's (unknown
    vault languages: never). Its words then miss the vault by translation, not because
    the vault lacks the subject, so coverage and unknown words say nothing."""
    if not vault_languages or not queries:
        return 0.0
    langs = [languages.query_language(q) for q in queries]
    return float(all(lang is not None and lang not in vault_languages for lang in langs))


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


def signals(
    arms: Arms,
    coverage: float,
    unknown: float = 0.0,
    *,
    named: float = 0.0,
    foreign: float = 0.0,
    terms: int = 0,
) -> dict[str, float]:
    """The absence signals of one search (``coverage``: share of the query's terms that
    the best passage holds; ``unknown``: see ``unknown_share``; ``named``: see
    ``unknown_name``; ``foreign``: see ``foreign``; ``terms``: the query's distinct
    terms)."""
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
        "unknown": unknown,
        "unknown_name": named,
        "foreign": foreign,
        "terms": float(terms),
        "best_cosine": cosines[0] if cosines else 0.0,
        "cosine_gap": _gap(cosines, relative=False),
        "lexical_gap": lex_gap if lexical else 0.0,
        "agreement": min(1.0, agreement),
        "title": max(arms.title.values(), default=0.0),
    }


def model_free_verdict(sig: Mapping[str, float], *, max_terms: int) -> bool | None:
    """What the signals no model owns decide on their own: True for a name no passage
    mentions, False for a query in a language the vault is not written in or longer than
    ``max_terms`` (0: no limit); None when the thresholds must decide."""
    if sig.get("unknown_name", 0.0) >= NAME_SHARE:
        return True
    if sig.get("foreign", 0.0) >= 1.0:
        return False
    if max_terms and sig.get("terms", 0.0) > max_terms:
        return False
    return None


@dataclass(frozen=True, slots=True)
class AbsenceModel:
    """Flag a search as likely unanswered when the query names something no passage
    mentions (``unknown_name`` at least NAME_SHARE: evidence no model has to weigh).
    Otherwise, a query in a language the vault is not written in (``foreign``;
    ``languages``: the vault's) is never flagged: its coverage and unknown words say
    nothing, and a model's cosine across languages is not on the scale the thresholds were
    read from. A query longer than every answerable pseudo-query the thresholds were read
    from (``max_terms``; a pasted paragraph) is not flagged either: its coverage and score
    lead are on another scale. Otherwise, when either rule holds:

    - every signal is below its threshold: few query terms in the best passage, and a
      best cosine (or, lexical only, a BM25 lead) that is low *for this vault and model*:
      below the ``quantile`` of what answerable pseudo-queries reach;
    - the vault has never heard of the query's subject (``unknown`` at least
      UNKNOWN_SHARE), fewer than half the query's terms are in the best passage, and the
      model signal is below its ``unknown_limits`` (a looser
      quantile): a paraphrase in new words still convinces the model, an unknown subject
      does not.

    Thresholds read off the data, not constants that belong to one model's scale."""

    thresholds: dict[str, float]
    quantile: float
    unknown_limits: dict[str, float] = field(default_factory=dict)
    languages: tuple[str, ...] = ()
    max_terms: int = 0  # 0: no limit (a model stored before it was learnt)

    def absent(self, sig: Mapping[str, float]) -> bool:
        verdict = model_free_verdict(sig, max_terms=self.max_terms)
        if verdict is not None:
            return verdict
        if all(sig.get(name, 0.0) < limit for name, limit in self.thresholds.items()):
            return True
        return (
            bool(self.unknown_limits)
            and sig.get("unknown", 0.0) >= UNKNOWN_SHARE
            and sig.get("coverage", 0.0) < UNKNOWN_MAX_COVERAGE
            and all(sig.get(name, 0.0) < limit for name, limit in self.unknown_limits.items())
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AbsenceModel:
        return cls(
            dict(data["thresholds"]),
            float(data["quantile"]),
            dict(data.get("unknown_limits") or {}),
            tuple(data.get("languages") or ()),
            int(data.get("max_terms") or 0),
        )


def fit(
    answerable: Sequence[Mapping[str, float]],
    *,
    semantic: bool,
    coverage: float,
    quantile: float,
    vault_languages: Sequence[str] = (),
) -> AbsenceModel:
    """Thresholds from the signals of answerable pseudo-queries: the query-term coverage
    is a fixed share (it does not depend on the model); the model-dependent signal's
    threshold is its ``quantile`` over ``answerable`` (UNKNOWN_QUANTILE for the
    unknown-subject rule)."""
    name = "best_cosine" if semantic else "lexical_gap"
    values = [s.get(name, 0.0) for s in answerable]

    def limit(q: float) -> float:
        return round(float(np.quantile(values, q)), 4) if values else 0.0

    loose = max(quantile, UNKNOWN_QUANTILE)
    return AbsenceModel(
        {"coverage": coverage, name: limit(quantile)},
        quantile,
        {name: limit(loose)},
        tuple(vault_languages),
        int(max((s.get("terms", 0.0) for s in answerable), default=0.0)),
    )


def rates(
    model: AbsenceModel,
    present: Sequence[Mapping[str, float]],
    missing: Sequence[Mapping[str, float]],
) -> dict[str, float]:
    """Share of answerable queries wrongly flagged, and of left-out ones flagged."""
    wrong = sum(model.absent(s) for s in present) / len(present) if present else 0.0
    caught = sum(model.absent(s) for s in missing) / len(missing) if missing else 0.0
    return {"answerable_flagged": round(wrong, 4), "absent_flagged": round(caught, 4)}
