"""Which language a vault is written in, and which languages a known model covers.

A cheap guess, good enough to warn that the configured embedding model does not read the
vault's language: count each language's most common function words in a sample of
passages. Models declare their languages in a small table; a model not in the table is
unknown and never warned about.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

# The most frequent function words, chosen not to be common words of the other languages
# listed (no "a", "de", "en", "die", "la", "son" ...).
STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "the and of to is that with for are this was have from they which would there "
        "their been has what when were will can about into than them these should".split()
    ),
    "fr": frozenset(
        "le les des est une dans pour qui pas sur avec sont nous vous ils leur "
        "cette aux ont été être fait comme tout peut sans aussi très".split()
    ),
    "de": frozenset(
        "der und ist nicht mit sich auf für ein eine dem den wird sind auch nach "
        "wie oder aber werden bei kann noch über zum zur".split()
    ),
    "es": frozenset(
        "los las del por con es son pero más sus muy también "
        "cuando hay este esta todo sobre entre ser".split()
    ),
    "it": frozenset(
        "il della che per non sono gli nel alla dei delle anche più questo "
        "questa essere tra sul hanno degli nella".split()
    ),
    "pt": frozenset(
        "os dos uma com não são mais pelo pela muito isso esse essa quando seu sua".split()
    ),
    "nl": frozenset(
        "het een van niet zijn voor met ook maar wordt bij nog deze dat worden naar "
        "heeft kan wel geen hebben zoals".split()
    ),
}
NAMES = {
    "en": "English",
    "fr": "French",
    "de": "German",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
}
ANY = frozenset({"*"})  # a multilingual model
ENGLISH = frozenset({"en"})

# Known models by name (Ollama names without their tag; Model2Vec hub ids or folder names).
MODEL_LANGUAGES: dict[str, frozenset[str]] = {
    # Model2Vec
    "minishlab/potion-base-2m": ENGLISH,
    "minishlab/potion-base-4m": ENGLISH,
    "minishlab/potion-base-8m": ENGLISH,
    "minishlab/potion-base-32m": ENGLISH,
    "minishlab/potion-retrieval-32m": ENGLISH,
    "minishlab/m2v_base_output": ENGLISH,
    "minishlab/potion-multilingual-128m": ANY,
    "minishlab/m2v_multilingual_output": ANY,
    "m2v-minilm-256": ENGLISH,  # distilled from all-MiniLM-L6-v2
    # Ollama
    "all-minilm": ENGLISH,
    "nomic-embed-text": ENGLISH,
    "mxbai-embed-large": ENGLISH,
    "snowflake-arctic-embed": ENGLISH,
    "bge-large": ENGLISH,
    "bge-m3": ANY,
    "snowflake-arctic-embed2": ANY,
    "paraphrase-multilingual": ANY,
    "jeffh/intfloat-multilingual-e5-large": ANY,
}

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
MIN_HITS = 3  # function words a passage needs before its language is guessed


def _clear_lead(text: str, lists: Mapping[str, frozenset[str]], min_hits: int) -> str | None:
    """The language whose ``lists`` words ``text`` holds at least ``min_hits`` of, and more
    than twice as many as any other's; None when too short or mixed."""
    counts: Counter[str] = Counter()
    for word in _WORD.findall(text.lower()):
        for lang, words in lists.items():
            if word in words:
                counts[lang] += 1
    if not counts:
        return None
    (best, hits), *rest = counts.most_common(2)
    if hits < min_hits or (rest and rest[0][1] * 2 > hits):
        return None
    return best


def guess(text: str) -> str | None:
    """The passage's language code, or None when too few function words say."""
    return _clear_lead(text, STOPWORDS, MIN_HITS)


def dominant(texts: Iterable[str]) -> tuple[str | None, float, int]:
    """(language of most passages, its share of the passages with a guess, how many had one)."""
    found = Counter(lang for t in texts if (lang := guess(t)) is not None)
    total = sum(found.values())
    if not total:
        return None, 0.0, 0
    lang, n = found.most_common(1)[0]
    return lang, n / total, total


def model_languages(model: str) -> frozenset[str] | None:
    """What a configured model covers (ANY: multilingual), or None when it is unknown."""
    name = model.strip().lower().removeprefix("ollama:")
    if model.strip().lower().startswith("ollama:"):
        name = name.split(":", 1)[0]  # bge-m3:567m -> bge-m3
    else:
        name = name.rstrip("/")
    if name in MODEL_LANGUAGES:
        return MODEL_LANGUAGES[name]
    base = name.rsplit("/", 1)[-1]
    for known, langs in MODEL_LANGUAGES.items():
        if known.rsplit("/", 1)[-1] == base:
            return langs
    return None


def covers(languages: frozenset[str] | None, lang: str) -> bool | None:
    """Whether a model with ``languages`` reads ``lang`` (None: unknown model)."""
    if languages is None:
        return None
    return languages == ANY or lang in languages


# A query is short: its question words and articles say more than the passage lists above
# (which leave out words other languages share). Only the languages the normaliser knows.
QUERY_WORDS: dict[str, frozenset[str]] = {
    "en": STOPWORDS["en"] | frozenset("how what why where who does do did my in on it".split()),
    "fr": STOPWORDS["fr"]
    | frozenset(
        "comment quel quelle quels quelles pourquoi combien où de la du un mes mon ma je".split()
    ),
}
MIN_QUERY_HITS = 2
MIN_VAULT_SHARE = 0.05  # a language this rare among the vault's passages is not the vault's


def query_language(text: str) -> str | None:
    """The query's language when its function words clearly say so (None: unsure)."""
    return _clear_lead(text, QUERY_WORDS, MIN_QUERY_HITS)


def present(texts: Iterable[str]) -> tuple[str, ...]:
    """The languages of at least MIN_VAULT_SHARE of the passages that have a guess."""
    found = Counter(lang for t in texts if (lang := guess(t)) is not None)
    total = sum(found.values())
    return tuple(sorted(lang for lang, n in found.items() if n >= MIN_VAULT_SHARE * total))
