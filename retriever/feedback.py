"""Query feedback: the vault's own words for what a question means (pure: no database).

A question written in the user's words ("get my uncommitted edits back after a crash")
often shares few words with the note that answers it ("stash", "restore"), so BM25 ranks
whatever shares the question's incidental words. A contextual model's nearest passages
are usually on topic. Their most distinctive terms (term frequency times IDF, the
query's own terms left out) join the query at a lower weight, and BM25 on that re-ranks
both arms' candidates (pseudo-relevance feedback, as in RM3, fed by the semantic arm; the
re-ranking instead of a second search is ``search.Searcher.gather``'s).

Calibration does not use it: it chooses the fusion on the plain arms, and searches then
expand. Pseudo-queries cannot judge feedback: they keep the note's own words, which
feedback dilutes (on Dendron they score 0.02-0.03 nDCG@10 lower with it, with either
model), and calibrated on expanded arms they choose a semantic weight that real questions
pay for (Dendron with MiniLM 0.518 against 0.550 calibrated on the plain arms, before
COMMON_SHARE).

Measured on the development sets with all-MiniLM-L6-v2 through Ollama (calibrated
nDCG@10 without and with feedback): Dendron 0.498 -> 0.559 (paraphrase Hit@1 0.22 ->
0.44), the test vault 0.909 -> 0.924, Cranfield 0.414 -> 0.432, CISI 0.470 -> 0.480.
With the static m2v-minilm-256 it loses on three of the four (Dendron -0.014, the test
vault -0.063, CISI -0.023; Cranfield +0.001): a static model's nearest passages share the
question's words more than its meaning, so feedback only repeats and dilutes them.
Hence ``auto`` uses it with contextual models only.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from retriever import languages

Policy = Literal["auto", "on", "off"]  # auto: with contextual models (see above)
POLICIES: tuple[Policy, ...] = ("auto", "on", "off")

PASSAGES = 2  # nearest passages read (2-3 gain on every set; 5 less, -0.002 on the test vault)
TERMS = 10  # terms added (5-20 gain on every set)
# The best added term's weight, relative to a query term (0.3 and 0.5 gain; 1 loses on CISI).
WEIGHT = 0.5
# Words in more than one passage in twenty (and in more than COMMON_FLOOR passages, so a
# small vault keeps its words) are not added: they say little about a topic, and their
# postings are what an expanded query costs. MiniLM, nDCG@10 against no limit: Dendron
# 0.550 -> 0.559, the test vault 0.924 (no word that common), Cranfield 0.433 -> 0.432,
# CISI 0.481 -> 0.480. win32-17k, feedback forced on, 100 queries: p95 +8.5 ms over no
# feedback against +10 ms without the limit; p50 +12 against +14 (noisy).
COMMON_SHARE, COMMON_FLOOR = 0.05, 50
# Words written as code: the query names something exact, and added words only dilute it.
# Prose that merely looks dotted or capitalised (e.g., U.S., Ph.D., 2.5 mg, PhD, YouTube,
# -40) is not code.
_CODE = re.compile(
    r"\b[a-z]+[A-Z]\w*"  # lowerCamel: enableAutoFold, getUser
    r"|\b[A-Z][a-z]+[A-Z][a-z]+[A-Z]\w*"  # PascalCase of three humps (not YouTube)
    r"|\w_\w"  # snake_case, __init__
    r"|\b[A-Za-z_]\w+\.[A-Za-z_]\w+"  # dotted names, two characters each side: dendron.yml
    r"|\b\d+\.\d+\.\d+"  # versions x.y.z
    r"|::|->|\(\)|\b\w+\(\w{2,}[^)]*\)"  # init(), print(xs); not note(s)
    r"|(?:^|\s)--?[A-Za-z][\w-]*"  # --flag, -v; not -40
    r"|`|https?://"
)


@dataclass(frozen=True, slots=True)
class Feedback:
    """Feedback for one search: ``languages`` are the vault's (a query in another
    language is left alone: the model's neighbours of a translation are a guess)."""

    languages: tuple[str, ...] = ()

    def applies(self, query: str) -> bool:
        """Whether ``query`` gets feedback: not code, and in the vault's language."""
        if _CODE.search(query):
            return False
        lang = languages.query_language(query)
        return lang is None or not self.languages or lang in self.languages


def contextual(embedder: object) -> bool:
    """Whether ``embedder`` reads words in context (an attribute of the embedder classes;
    one that does not say is taken as static)."""
    return bool(getattr(embedder, "contextual", False))


def wanted(policy: Policy, is_contextual: bool) -> bool:
    """Whether searches use feedback under ``policy`` with a model that is (or is not)
    contextual."""
    return policy == "on" or (policy == "auto" and is_contextual)


def too_common(df: int, passages: float) -> bool:
    """Whether a word in ``df`` of the vault's ``passages`` is too common to add."""
    return df > max(COMMON_SHARE * passages, COMMON_FLOOR)


def expanded(
    query: Mapping[str, float],
    passages: Sequence[Mapping[str, int]],
    idfs: Mapping[str, float],
    *,
    terms: int = TERMS,
    weight: float = WEIGHT,
    skip: Collection[str] = (),
) -> dict[str, float]:
    """``query`` (term -> count) with the ``terms`` most distinctive terms of
    ``passages`` (term -> count, each passage's terms) added: a term's strength is its
    share of each passage's terms times its IDF, summed; the strongest gets ``weight``,
    the others in proportion. Terms no passage of the vault holds (no IDF), and those in
    ``skip``, are left out."""
    strength: dict[str, float] = {}
    for counts in passages:
        total = sum(counts.values())
        for term, n in counts.items():
            if term not in query and term in idfs and term not in skip and total:
                strength[term] = strength.get(term, 0.0) + n / total * idfs[term]
    out = {t: float(n) for t, n in query.items()}
    chosen = sorted(strength.items(), key=lambda kv: (-kv[1], kv[0]))[:terms]
    if not chosen or chosen[0][1] <= 0:
        return out
    top = chosen[0][1]
    for term, value in chosen:
        out[term] = weight * value / top  # not a query term: see above
    return out
