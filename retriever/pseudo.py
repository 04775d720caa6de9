"""Pseudo-queries: a labelled query set made from the vault itself (pure, deterministic).

Four kinds, each asking for one note:
- ``title``: a name of the note (title, alias, Dendron label), as a user names a page;
- ``heading``: a distinctive section heading of the note;
- ``anchor``: a sentence of *another* note that links to it, the link reduced to its
  label: how people describe a note in their own words (the classic anchor-text query);
- ``span``: a sentence of one of its passages, some content words dropped (the rarest
  most often), asked with that passage *left out* of the index (the inverse cloze task):
  the note must be found through its other passages, so matching the sentence's own
  words does not win by construction and both arms compete on what the note is about.
Notes are taken in a fixed pseudo-random order (a hash of their path), so the set changes
only where the vault does; each note's queries fall wholly in one half, ``choose`` (where
calibration chooses) or ``report`` (where it reports), so no note informs both.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from retriever.lexical import tokenize
from retriever.titles import note_names

SEED = "retriever-pseudo-1"
KIND_SHARES = (("title", 0.15), ("heading", 0.25), ("anchor", 0.35), ("span", 0.25))
# Chance that a span's content word is dropped, by rarity tercile (rarest first): a
# question rarely repeats the passage's most specific words; it keeps the common ones.
DROP_BY_RARITY = (0.85, 0.5, 0.2)
ANCHOR_DROP_BY_RARITY = (0.5, 0.25, 0.1)  # anchors are other words already: thin them less
MIN_KEPT, MAX_KEPT = 3, 12  # content words a span query keeps
MAX_PER_NOTE = 3
_SKIP_TYPES = {"code", "table", "frontmatter"}
# People ask questions: the general words around the topic ("is there a way to", "set
# up", "find") distract BM25 and barely move an embedding, as in real questions.
_FRAMES_EN = (
    "how do I {}?",
    "how can I set up {} properly?",
    "is there a way to {}?",
    "what happens when {}?",
    "where can I find out about {}?",
    "what is the recommended way to handle {}?",
    "why does {} keep happening to me?",
    "what should I know before I start with {}?",
    "I want to {}, how does that work?",
    "I keep running into trouble with {}, any advice?",
    "can you explain {} in simple terms?",
    "my colleague asked me about {}, what is the answer?",
)
_FRAMES_FR = (
    "comment faire pour {} ?",
    "est-il possible de {} ?",
    "où trouver des informations sur {} ?",
    "que se passe-t-il quand {} ?",
    "quelle est la meilleure façon de gérer {} ?",
    "j'ai un problème avec {}, une idée ?",
)
_FR_HINTS = frozenset("le la les des une est pour dans avec sur que qui pas vous nous".split())
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WIKILINK = re.compile(r"!?\[\[([^\]|#]*)(?:#[^\]|]*)?(?:\|([^\]]*))?\]\]")
_MDLINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKUP = re.compile(r"[`*_>#~|]+|^\s*[-+]\s+|^\s*\d+[.)]\s+", re.M)
_WORD = re.compile(r"\S+")
_NUMERIC = re.compile(r"\d{2,}")  # dates and versions make poor headings to ask about


@dataclass(frozen=True, slots=True)
class Section:
    chunk: int
    trail: tuple[str, ...]
    text: str
    content_type: str


@dataclass(frozen=True, slots=True)
class NoteSample:
    doc: int
    path: str
    title: str
    aliases: tuple[str, ...]
    sections: tuple[Section, ...] = field(default_factory=tuple)
    anchors: tuple[str, ...] = ()  # lines of other notes that link here


@dataclass(frozen=True, slots=True)
class PseudoQuery:
    id: str
    text: str
    doc: int
    path: str
    kind: str
    split: str  # "choose" | "report"
    hide: int | None = None  # a chunk left out of the arms while this query runs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def stable_hash(*parts: str) -> int:
    digest = hashlib.sha1("\x1f".join((SEED, *parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def note_order(paths: Iterable[str]) -> list[str]:
    """A fixed pseudo-random order of notes: adding a note does not reshuffle the rest."""
    return sorted(paths, key=lambda p: (stable_hash("order", p), p))


def split_of(path: str) -> str:
    return "choose" if stable_hash("split", path) % 2 == 0 else "report"


def plain_text(markdown: str) -> str:
    """Passage text without link and emphasis syntax (a query has none)."""
    text = _WIKILINK.sub(lambda m: m.group(2) or _label(m.group(1)), markdown)
    text = _MDLINK.sub(lambda m: m.group(1), text)
    return " ".join(_MARKUP.sub(" ", text).split())


def _label(target: str) -> str:
    """How a bare link target reads: its last path or hierarchy segment, as words."""
    last = target.rsplit("/", 1)[-1].removesuffix(".md").rsplit(".", 1)[-1]
    return last.replace("-", " ").replace("_", " ")


def make_queries(
    notes: Sequence[NoteSample],
    *,
    limit: int,
    shared_names: set[str] | None = None,
    common_headings: set[str] | None = None,
    rarity: Mapping[str, float] | None = None,
) -> list[PseudoQuery]:
    """Up to ``limit`` queries, at most MAX_PER_NOTE per note, notes in ``note_order``.

    ``shared_names`` (normalised names that several notes carry) and ``common_headings``
    (headings many notes repeat, like "Usage") are never used: they name no one note.
    ``rarity`` (a term's IDF) steers which words a span query drops."""
    by_path = {n.path: n for n in notes}
    order = note_order(by_path)
    per_note = max(1, min(MAX_PER_NOTE, -(-limit // max(len(order), 1))))
    out: list[PseudoQuery] = []
    for path in order:
        note = by_path[path]
        rng = random.Random(stable_hash("note", path))
        made = 0
        for i in range(per_note * 2):  # a few tries: some kinds find nothing usable
            if made == per_note or len(out) == limit:
                break
            kind = _pick_kind(rng.random())
            made_query = _make(
                kind, note, rng, shared_names or set(), common_headings or set(), rarity or {}
            )
            if made_query is None:
                continue
            text, hide = made_query
            if text and all(q.text != text for q in out[-made:] if made):
                out.append(
                    PseudoQuery(
                        f"{stable_hash('id', path, str(i)):x}",
                        text,
                        note.doc,
                        path,
                        kind,
                        split_of(path),
                        hide,
                    )
                )
                made += 1
        if len(out) == limit:
            break
    return out


def _pick_kind(u: float) -> str:
    for kind, share in KIND_SHARES:
        if u < share:
            return kind
        u -= share
    return KIND_SHARES[-1][0]


def _make(
    kind: str,
    note: NoteSample,
    rng: random.Random,
    shared: set[str],
    common: set[str],
    rarity: Mapping[str, float],
) -> tuple[str, int | None] | None:
    """(query text, chunk to hide) of one kind for the note, or None."""
    if kind == "title":
        text, hide = _title(note, rng, shared), None
        return (text, None) if text else None
    if kind == "span":
        found = _span(note, rng, rarity)
        text, hide = found if found else (None, None)
    elif kind == "anchor":
        text, hide = _anchor(note, rng, rarity), None
    else:
        text, hide = _heading(note, rng, common), None
    return (_ask(text, rng), hide) if text else None


def _ask(text: str, rng: random.Random) -> str:
    """The words as a question, in French when they look French."""
    words = {w.lower() for w in _WORD.findall(text)}
    frames = _FRAMES_FR if len(words & _FR_HINTS) >= 2 else _FRAMES_EN
    return rng.choice(frames).format(text.rstrip("?.! "))


def _title(note: NoteSample, rng: random.Random, shared: set[str]) -> str | None:
    """A name people would type: the title, an alias or a label, not the file name."""
    stem = note.path.rsplit("/", 1)[-1].removesuffix(".md")
    names = [
        n
        for n in note_names(note.path, note.title, note.aliases)
        if n != stem and tokenize(n) and name_key(n) not in shared
    ]
    if not names:
        return None
    name = rng.choice(names)
    return name if " " in name else _label(name)


def _heading(note: NoteSample, rng: random.Random, common: set[str]) -> str | None:
    """A section heading of two words or more that few other notes repeat."""
    title = name_key(note.title)
    headings = {
        h
        for s in note.sections
        for h in s.trail[1:]
        if len(tokenize(h)) >= 2
        and not _NUMERIC.search(h)
        and name_key(h) not in (common | {title})
    }
    return rng.choice(sorted(headings)) if headings else None


def name_key(text: str) -> str:
    """Names and headings compare by their normalised words, in any order."""
    return " ".join(sorted(set(tokenize(text))))


def _thin(
    words: list[str],
    rng: random.Random,
    rarity: Mapping[str, float],
    chances: tuple[float, float, float],
) -> tuple[list[str], int] | None:
    """Drop content words, rarer ones more often (unknown words count as rarest); keep
    MIN_KEPT..MAX_KEPT of them. Returns the words left and how many content words."""
    content = [i for i, w in enumerate(words) if tokenize(w)]
    if len(content) < MIN_KEPT:
        return None

    def rare(j: int) -> float:
        return max(rarity.get(t, math.inf) for t in tokenize(words[j]))

    order = sorted(content, key=lambda j: (-rare(j), j))
    tercile = {j: min(2, 3 * n // len(order)) for n, j in enumerate(order)}
    dropped = {i for i in content if rng.random() < chances[tercile[i]]}
    kept = [i for i in content if i not in dropped]
    while len(kept) < MIN_KEPT:  # put back dropped words, in a seeded order
        back = rng.choice(sorted(dropped))
        dropped.discard(back)
        kept = sorted([*kept, back])
    kept = kept[:MAX_KEPT]
    return [w for i, w in enumerate(words[: kept[-1] + 1]) if i not in dropped], len(kept)


def _anchor(note: NoteSample, rng: random.Random, rarity: Mapping[str, float]) -> str | None:
    sentences = []
    for line in note.anchors:
        # The link itself goes: its label is usually the note's name (a title query); the
        # words around it are how someone else describes the note.
        text = plain_text(_MDLINK.sub(" ", _WIKILINK.sub(" ", line)))
        sentences += [s for s in _SENTENCE.split(text) if len(_WORD.findall(s)) >= 5]
    if not sentences:
        return None
    thinned = _thin(_WORD.findall(rng.choice(sentences))[:40], rng, rarity, ANCHOR_DROP_BY_RARITY)
    return " ".join(thinned[0]).strip(" ,;:()[]\"'") if thinned else None


def _span(
    note: NoteSample, rng: random.Random, rarity: Mapping[str, float]
) -> tuple[str, int | None] | None:
    usable = [s for s in note.sections if s.content_type not in _SKIP_TYPES and len(s.text) >= 60]
    if not usable:
        return None
    section = rng.choice(usable)
    sentences = [s for s in _SENTENCE.split(plain_text(section.text)) if len(s.split()) >= 6]
    if not sentences:
        return None
    thinned = _thin(_WORD.findall(rng.choice(sentences))[:40], rng, rarity, DROP_BY_RARITY)
    if thinned is None:
        return None
    text = " ".join(thinned[0]).strip(" ,;:()[]\"'")
    # A note of one passage cannot be found without it: its span stays visible.
    hide = section.chunk if len(note.sections) > 1 else None
    return (text, hide) if text else None
