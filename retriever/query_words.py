"""Which words of a query the semantic arm embeds (pure: no database, no model).

A static model (Model2Vec) embeds a text as the mean of its words' vectors, so the
question's frame ("how do I ... in my ...?") pulls every query toward the same common
direction; a transformer reads those words as syntax and needs them. Calibration measures
both forms on the vault's pseudo-queries and keeps the content words only where they
clearly win (Dendron's pseudo-queries, semantic arm alone: 0.169 -> 0.250 nDCG@10 with
m2v-minilm-256, 0.300 -> 0.279 with all-MiniLM-L6-v2, which therefore keeps every word).
"""

from __future__ import annotations

from typing import Literal

from retriever.lexical import STOPWORDS, fold

QueryWords = Literal["all", "content"]
_EDGE = "\"'`.,;:!?¡¿()[]{}<>«»“”‘’…"  # stripped from a word's ends before the check
_JOINERS = ("'", "’", "-")  # elision (l'été, qu'il) and French inversion (est-ce)


def content_words(query: str) -> str:
    """The query without its stopwords (English and French, as BM25 drops them), words
    kept as written; the query itself when nothing would be left."""
    kept = [word for word in query.split() if not _is_stopword(word.strip(_EDGE))]
    return " ".join(kept) if kept else query


def _is_stopword(core: str) -> bool:
    """A word made only of stopwords and single letters (``I``, ``l'``, ``qu'il``,
    ``est-ce``); bare punctuation counts as one. Digits are content ("Windows 7")."""
    folded = fold(core)
    for mark in _JOINERS:
        folded = folded.replace(mark, " ")
    return all(part in STOPWORDS or _letter(part) for part in folded.split())


def _letter(part: str) -> bool:
    return len(part) == 1 and not part.isdigit()


def embedding_text(query: str, words: QueryWords) -> str:
    """What the semantic arm embeds for ``query``."""
    return content_words(query) if words == "content" else query
