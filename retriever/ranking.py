"""Fusion of the arms into one ranking (pure: no database, no model).

The search path and the calibration run the same function, so what calibration measures
is exactly what a search does. Arms: chunk-level BM25 and cosine lists per query, a
document-level title/alias arm, and the link-graph walk seeded from the fused top.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from retriever.fuse import RankedList, interleave, linear_normalised, normalise, rrf
from retriever.query_words import QueryWords

Method = Literal["linear", "rrf", "interleave", "lexical", "semantic"]
GRAPH_SEEDS = 10  # best hits whose notes seed the walk
GRAPH_NEIGHBOURS = 10  # neighbour notes the walk may lift
GRAPH_SCALE = 0.25  # the first neighbour gains this share of the top score per unit weight
GRAPH_ON_WEIGHT = 0.5  # the walk's weight when asked for but calibrated off
# A note whose second-best passage also matches gains this share of that passage's score
# (score-based fusions only: RRF and interleave scores are ranks). A note that answers
# with more than one passage is usually the note the question is about; counting only
# the second passage keeps a hub that mentions everything from adding up every mention.
# Development sets, both models: +0.02/+0.03 nDCG@10 on Dendron, +0.005/+0.009 on the
# test vault, no change where notes are one passage (Cranfield, CISI).
SECOND_PASSAGE = 0.3
# A passage's score is multiplied by 1 + LINK_PRIOR * its note's link prior (in [0, 1]:
# how many notes cite it, see graph.link_prior). It is what keeps a transcript, a
# changelog or a meeting log that happens to use the question's words from outranking the
# note the vault's other notes point to for that topic. Development sets (the calibrated
# ranking with and without it): Dendron +0.028 nDCG@10 with the static model and +0.012
# with all-MiniLM; the test vault -0.003 to +0.002; no change where nothing links
# (Cranfield, CISI). It is fixed, not calibrated: pseudo-queries are drawn evenly over the
# notes, cited or not, so they cannot see what real questions, which ask about the vault's
# topics, gain from it. At 0.5 it loses on Dendron with all-MiniLM (0.481 against 0.494).
LINK_PRIOR = 0.2

Walk = Callable[[Mapping[int, float]], list[int]]  # seed doc weights -> neighbour docs


@dataclass(frozen=True, slots=True)
class Ranking:
    """How the arms are combined. ``semantic_weight`` is relative to lexical (1.0): the
    linear mix is sw / (sw + 1) semantic; for RRF it weights the semantic lists; for
    interleave it is the number of semantic hits taken per lexical one (at least 1)."""

    method: Method = "linear"
    semantic_weight: float = 0.5
    rrf_k: float = 60.0
    title_weight: float = 0.0
    graph_weight: float = 1.0
    identifier_lean: float = 2.0  # lexical weight multiplier for identifier-like queries
    second_passage: float = SECOND_PASSAGE  # see SECOND_PASSAGE; linear and single arms
    link_prior: float = LINK_PRIOR  # see LINK_PRIOR
    query_words: QueryWords = "all"  # what the semantic arm embeds (retriever.query_words)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ranking:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def with_(self, **changes: Any) -> Ranking:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def apply(self, overrides: Mapping[str, Any]) -> Ranking:
        """Settings and flags over this ranking; ``graph: True`` turns a walk that
        calibration switched off back on at the default weight."""
        changes = {k: v for k, v in overrides.items() if k != "graph"}
        out = self.with_(**changes)
        if overrides.get("graph") and not out.graph_weight:
            out = replace(out, graph_weight=GRAPH_ON_WEIGHT)
        return out

    def label(self) -> str:
        """Short human name, e.g. ``linear(sw=0.5)+title0.5+graph1``."""
        if self.method in ("lexical", "semantic"):
            head = f"{self.method} only"
        elif self.method == "linear":
            head = f"linear(sw={self.semantic_weight:g})"
        elif self.method == "rrf":
            head = f"rrf(k={self.rrf_k:g},sw={self.semantic_weight:g})"
        else:
            head = f"interleave({max(1, round(self.semantic_weight))}:1)"
        if self.title_weight:
            head += f"+title{self.title_weight:g}"
        if self.graph_weight:
            head += f"+graph{self.graph_weight:g}"
        if self.identifier_lean != 1.0:
            head += f"+ident{self.identifier_lean:g}"
        if self.link_prior != LINK_PRIOR:
            head += f"+prior{self.link_prior:g}"
        if self.query_words != "all":
            head += f"+{self.query_words}-words"
        return head


@dataclass(slots=True)
class Arms:
    """What the retrieval arms found for one search (all ids are database ids)."""

    lexical: list[dict[int, float]] = field(default_factory=list)  # chunk -> BM25, best first
    semantic: list[dict[int, float]] = field(default_factory=list)  # chunk -> cosine
    title: dict[int, float] = field(default_factory=dict)  # doc -> title score, best first
    doc_of: dict[int, int] = field(default_factory=dict)  # chunk -> doc, every chunk above
    identifier: bool = False  # the query looks like code: lexical leans in
    feedback: bool = False  # a lexical list ran on a query expanded by feedback
    # The lists on linear fusion's scale ("lexical", "semantic"), made on first use and
    # shared by copies: calibration fuses one query's arms with dozens of rankings.
    normalised: dict[str, list[dict[int, float]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def chunks(self) -> set[int]:
        out: set[int] = set()
        for lists in (self.lexical, self.semantic):
            for ranked in lists:
                out.update(ranked)
        return out

    def copy(self) -> Arms:
        """A copy whose ``doc_of`` fusion may extend (it records title and graph chunks)."""
        return Arms(
            self.lexical,
            self.semantic,
            self.title,
            dict(self.doc_of),
            self.identifier,
            self.feedback,
            self.normalised,
        )

    def without_chunk(self, chunk: int) -> Arms:
        """The arms with one passage left out (the inverse-cloze pseudo-queries)."""
        return self._keep(lambda c: c != chunk, dict(self.title))

    def without_doc(self, doc: int) -> Arms:
        """The arms as they would be if note ``doc`` did not exist (leave-one-out)."""
        title = {d: s for d, s in self.title.items() if d != doc}
        return self._keep(lambda c: self.doc_of.get(c) != doc, title)

    def _keep(self, keep: Callable[[int], bool], title: dict[int, float]) -> Arms:
        return Arms(
            lexical=[{c: s for c, s in r.items() if keep(c)} for r in self.lexical],
            semantic=[{c: s for c, s in r.items() if keep(c)} for r in self.semantic],
            title=title,
            doc_of={c: d for c, d in self.doc_of.items() if keep(c)},
            identifier=self.identifier,
            feedback=self.feedback,
        )


# Uncalibrated default (a vault too small to calibrate, or before the first calibration):
# fixed linear fusion at semantic weight 0.5 was within 0.01 nDCG@10 of the best fixed
# ranking on seven of the eight development (set, model) pairs (CISI with the static model:
# 0.015 behind BM25 alone); RRF at k=60 trailed by up to 0.05.
DEFAULT_RANKING = Ranking(
    method="linear", semantic_weight=0.5, title_weight=0.5, graph_weight=0.5, identifier_lean=2.0
)

# What ``--fusion`` / RETRIEVER_FUSION name; "auto" keeps the calibrated choice.
Fusion = Literal["auto", "linear", "rrf", "rrf30", "interleave", "lexical", "semantic"]
FUSION_CHOICES: dict[Fusion, dict[str, Any]] = {
    "auto": {},
    "linear": {"method": "linear"},
    "rrf": {"method": "rrf", "rrf_k": 60.0},
    "rrf30": {"method": "rrf", "rrf_k": 30.0},
    "interleave": {"method": "interleave"},
    "lexical": {"method": "lexical"},
    "semantic": {"method": "semantic"},
}


def fuse(
    arms: Arms,
    ranking: Ranking,
    *,
    first_chunk: Callable[[int], int | None],
    walk: Walk | None = None,
    prior: Mapping[int, float] | None = None,
) -> tuple[dict[int, float], list[int]]:
    """Chunk scores (higher is better) and the chunks the graph walk lifted, in order.

    ``first_chunk`` gives a note's opening chunk, which stands for a note that an arm
    found only at the document level (title, graph) and no chunk list holds. ``prior``:
    each note's link prior (graph.link_prior), applied at ``ranking.link_prior``."""
    scores = _base(arms, ranking)
    if ranking.method not in ("rrf", "interleave") and ranking.second_passage:
        _credit_second_passage(scores, arms.doc_of, ranking.second_passage)
    _lift_titles(scores, arms, ranking, first_chunk)
    lifted: list[int] = []
    if walk is not None and ranking.graph_weight > 0 and scores:
        lifted = _lift_neighbours(scores, arms, ranking, first_chunk, walk)
    if prior and ranking.link_prior > 0:
        _apply_prior(scores, arms.doc_of, prior, ranking.link_prior)
    return scores, lifted


def _apply_prior(
    scores: dict[int, float], doc_of: Mapping[int, int], prior: Mapping[int, float], weight: float
) -> None:
    """Every chunk's score times 1 + weight * its note's prior (scores are never negative)."""
    for cid, score in scores.items():
        boost = prior.get(doc_of.get(cid, -1), 0.0)
        if boost:
            scores[cid] = score * (1.0 + weight * boost)


def _base(arms: Arms, r: Ranking) -> dict[int, float]:
    lex = [x for x in arms.lexical if x]
    sem = [x for x in arms.semantic if x]
    lean = r.identifier_lean if arms.identifier else 1.0
    # A single-arm ranking uses its arm when it has one; a mode that ran one arm uses it.
    if (r.method == "lexical" and lex) or not sem:
        return linear_normalised(_normalised(arms, "lexical", lex), [], alpha=0.0)
    if r.method == "semantic" or not lex:
        return linear_normalised([], _normalised(arms, "semantic", sem), alpha=1.0)
    if r.method == "linear":
        alpha = r.semantic_weight / (r.semantic_weight + lean)
        lexn, semn = _normalised(arms, "lexical", lex), _normalised(arms, "semantic", sem)
        return linear_normalised(lexn, semn, alpha=alpha)
    if r.method == "interleave":
        ratio = max(1, round(r.semantic_weight / lean))
        return dict(interleave([list(x) for x in sem], [list(x) for x in lex], ratio=ratio))  # type: ignore[arg-type]
    lists = [RankedList("lexical", list(x), lean) for x in lex]
    lists += [RankedList("semantic", list(x), r.semantic_weight) for x in sem]
    return dict(rrf(lists, k=r.rrf_k))  # type: ignore[arg-type]


def _normalised(arms: Arms, arm: str, lists: list[dict[int, float]]) -> list[dict[int, float]]:
    """``lists`` (the arm's non-empty lists) normalised, once per arms (see Arms.normalised)."""
    found = arms.normalised.get(arm)
    if found is None:
        found = arms.normalised[arm] = normalise(lists, cosine=arm == "semantic")
    return found


def _credit_second_passage(
    scores: dict[int, float], doc_of: Mapping[int, int], share: float
) -> None:
    """Each note's best chunk gains ``share`` of its second-best chunk's score."""
    first: dict[int, tuple[float, int]] = {}  # doc -> (score, -chunk): ties to the lower id
    second: dict[int, tuple[float, int]] = {}
    for cid, score in scores.items():
        doc = doc_of.get(cid)
        if doc is None:
            continue
        key = (score, -cid)
        best = first.get(doc)
        if best is None:
            first[doc] = key
        elif key > best:
            second[doc], first[doc] = best, key
        elif doc not in second or key > second[doc]:
            second[doc] = key
    for doc, (runner_up, _) in second.items():
        scores[-first[doc][1]] += share * runner_up


def _best_chunk_of(
    scores: Mapping[int, float], doc_of: Mapping[int, int], docs: Collection[int]
) -> dict[int, int]:
    """The best-scoring chunk of each note in ``docs`` that has one (the first of equals)."""
    best: dict[int, int] = {}
    for cid, score in scores.items():
        doc = doc_of.get(cid, -1)
        if doc in docs and (doc not in best or score > scores[best[doc]]):
            best[doc] = cid
    return best


def _lift_titles(
    scores: dict[int, float], arms: Arms, r: Ranking, first_chunk: Callable[[int], int | None]
) -> None:
    """A note the query names gains up to ``title_weight`` times the top score, on its
    best chunk (or its opening when no arm found a chunk of it)."""
    if r.title_weight <= 0 or not arms.title:
        return
    top = max(scores.values(), default=1.0) or 1.0
    best = _best_chunk_of(scores, arms.doc_of, arms.title)
    for doc, strength in arms.title.items():
        chunk = best.get(doc) or first_chunk(doc)
        if chunk is None:
            continue
        arms.doc_of.setdefault(chunk, doc)
        scores[chunk] = scores.get(chunk, 0.0) + r.title_weight * strength * top


def _lift_neighbours(
    scores: dict[int, float],
    arms: Arms,
    r: Ranking,
    first_chunk: Callable[[int], int | None],
    walk: Walk,
) -> list[int]:
    """Notes linked to the best hits gain graph_weight * GRAPH_SCALE * top / rank."""
    top_ids = best_first(scores)[:GRAPH_SEEDS]
    seeds: dict[int, float] = {}
    for cid in top_ids:
        doc = arms.doc_of.get(cid)
        if doc is not None:
            seeds[doc] = seeds.get(doc, 0.0) + scores[cid]
    neighbours = walk(seeds)[:GRAPH_NEIGHBOURS]
    if not neighbours:
        return []
    top = scores[top_ids[0]] or 1.0
    best = _best_chunk_of(scores, arms.doc_of, set(neighbours))
    lifted: list[int] = []
    for rank, doc in enumerate(neighbours, start=1):
        chunk = best.get(doc) or first_chunk(doc)
        if chunk is None:
            continue
        arms.doc_of.setdefault(chunk, doc)
        scores[chunk] = scores.get(chunk, 0.0) + r.graph_weight * GRAPH_SCALE * top / rank
        lifted.append(chunk)
    return lifted


def best_first(scores: Mapping[int, float]) -> list[int]:
    """Chunk ids by score, best first, ties by id: sorted by id, then stably by score (no
    key tuple per chunk; calibration sorts thousands of fused lists)."""
    order = sorted(scores)
    order.sort(key=scores.__getitem__, reverse=True)  # reverse keeps equal keys in order
    return order


def ranked_docs(scores: Mapping[int, float], doc_of: Mapping[int, int]) -> list[int]:
    """Notes in order of their best chunk (ties broken by chunk id: deterministic)."""
    out: list[int] = []
    seen: set[int] = set()
    for cid in best_first(scores):
        doc = doc_of.get(cid)
        if doc is not None and doc not in seen:
            seen.add(doc)
            out.append(doc)
    return out


def doc_rank(scores: Mapping[int, float], doc_of: Mapping[int, int], doc: int) -> int | None:
    """``ranked_docs(scores, doc_of).index(doc)`` (None when the note is not there) in two
    passes instead of a sort: calibration asks it of every fused ranking it scores."""
    best: tuple[float, int] | None = None  # (score, -chunk) of the note's best chunk
    for cid, score in scores.items():
        if doc_of.get(cid) == doc and (best is None or (score, -cid) > best):
            best = (score, -cid)
    if best is None:
        return None
    top, first = best[0], -best[1]
    ahead = {
        d
        for cid, score in scores.items()
        if (score > top or (score == top and cid < first)) and (d := doc_of.get(cid)) is not None
    }
    return len(ahead)
