"""Which words of a query the semantic arm embeds (pure: no database, no model).

A static model (Model2Vec) embeds a text as the mean of its words' vectors, so the
question's frame ("how do I ... in my ...?") pulls every query toward the same common
direction; a transformer reads those words as syntax and needs them. Calibration measures
both forms on the vault's pseudo-queries and keeps the content words only where they
clearly win (Dendron's pseudo-queries, semantic arm alone: 0.169 -> 0.249 nDCG@10 with
m2v-minilm-256, 0.300 -> 0.272 with all-MiniLM-L6-v2, which therefore keeps every word).
Pseudo-queries are asked as questions, so they measure what the frame costs; queries
written as statements gain less, or lose (see the README's measurements).
"""

from __future__ import annotations

from typing import Literal

from retriever.lexical import STOPWORDS, fold

QueryWords = Literal["all", "content"]
_EDGE = "\"'`.,;:!?¡¿()[]{}<>«»“”‘’…*_~"  # stripped from a word's ends before the check
_ELISION = ("'", "’")  # l'été, qu'il: an elided article or pronoun is a stopword
# Stopwords that carry the meaning of a question ("notes not tagged", "ne pas supprimer",
# "backup before upgrade"): kept, though BM25 drops them.
_MEANINGFUL = frozenset({"not", "no", "nor", "ne", "pas", "ni", "before", "after"})


def content_words(query: str) -> str:
    """The query without its stopwords (the English and French list BM25 drops, except
    negations and before/after), words kept as written; an acronym in capitals (IT, US,
    WHO) or a capital letter inside the query is kept. The query itself when nothing
    would be left."""
    words = query.split()
    kept = [w for i, w in enumerate(words) if not _is_stopword(w.strip(_EDGE), first=i == 0)]
    return " ".join(kept) if kept else query


def _is_stopword(core: str, *, first: bool) -> bool:
    """Bare punctuation, or a word made only of stopwords and elided articles (``I``,
    ``l'``, ``qu'il``). A capital inside the query names something ("vitamin D",
    "plan B", "pointers in C"), unless it is "I"."""
    if core.isupper() and (len(core) > 1 or (not first and core != "I")):
        return False
    folded = fold(core)
    for mark in _ELISION:
        folded = folded.replace(mark, " ")
    parts = folded.split()
    return all(
        (part in STOPWORDS and part not in _MEANINGFUL) or not any(c.isalnum() for c in part)
        for part in parts
    )


def embedding_text(query: str, words: QueryWords) -> str:
    """What the semantic arm embeds for ``query``."""
    return content_words(query) if words == "content" else query
