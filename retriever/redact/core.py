"""Shared plumbing: the marker, edits spliced into the text, and line lookups."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

try:
    import ahocorasick
except ImportError:  # no wheel for this platform: each word is searched on its own
    ahocorasick = None
if ahocorasick is not None and not getattr(ahocorasick, "unicode", 0):
    ahocorasick = None  # a bytes-only build cannot take str words

MARK = "[REDACTED:"

# Every character str.splitlines() treats as a line break: values must never contain one.
LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

BREAK_RE = re.compile("\r\n|[" + LINE_BREAKS + "]")

Edit = tuple[int, int, str]


def marker(kind: str) -> str:
    return f"{MARK}{kind}]"


def splice(text: str, edits: list[Edit]) -> str:
    """Apply sorted, non-overlapping (start, end, replacement) edits."""
    if not edits:
        return text
    parts: list[str] = []
    last = 0
    for start, end, rep in edits:
        parts.append(text[last:start])
        parts.append(rep)
        last = end
    parts.append(text[last:])
    return "".join(parts)


def lines_above(text: str, start: int, n: int) -> int:
    """Where the line ``n`` lines above the one starting at ``start`` starts (the text's
    start when there are fewer)."""
    for _ in range(n):
        if start <= 0:
            return 0
        start = text.rfind("\n", 0, start - 1) + 1
    return start


def line_spans(text: str, hint: re.Pattern[str]) -> list[tuple[int, int]]:
    """(start, end) of each distinct line containing a match of ``hint``.

    Each search is bounded by the nearest ``\n`` so that LF-only text never makes a scan
    for ``\r`` run to the end (or start) of the note: linear, not quadratic.
    """
    spans: list[tuple[int, int]] = []
    last_end = -1
    has_cr = "\r" in text
    for m in hint.finditer(text):
        if m.start() <= last_end:
            continue
        start = text.rfind("\n", 0, m.start()) + 1
        if has_cr:
            start = max(start, text.rfind("\r", start, m.start()) + 1)
        end = text.find("\n", m.end())
        if end == -1:
            end = len(text)
        if has_cr:
            cr = text.find("\r", m.end(), end)
            end = cr if cr != -1 else end
        spans.append((start, end))
        last_end = end
    return spans


class _Words:
    """The words the stages look for, found together in one pass over a text (Aho-Corasick)
    instead of one ``str.find`` over the whole text per word. On win32-17k the stages look
    for about 70 words in every note and 97 % of them are absent: without those scans the
    redactor takes a third less CPU (14.7 -> 10.0 s). The set is learnt from the stages' own requests (a word
    first asked for is searched on its own, then joins the next pass)."""

    __slots__ = ("_built", "_version", "words")

    def __init__(self) -> None:
        self.words: set[str] = set()
        self._version = 0  # moves with every word learnt: the automaton is built again
        self._built: tuple[int, frozenset[str], Any] | None = None

    def learn(self, word: str) -> None:
        if word and ahocorasick is not None and word not in self.words:
            self.words.add(word)
            self._version += 1

    def occurrences(self, text: str) -> tuple[frozenset[str], dict[str, list[int]]] | None:
        """(the words searched, where each starts in ``text``), or None when there is no
        pass to make (no library, no word yet) or an offset it gave does not hold its word
        (the caller then searches word by word)."""
        built = self._built
        if built is None or built[0] != self._version:
            version = self._version
            known = frozenset(self.words)  # one C-level copy: safe beside another thread
            if not known:
                return None
            automaton = ahocorasick.Automaton()
            for word in known:
                automaton.add_word(word, word)
            automaton.make_automaton()
            built = self._built = (version, known, automaton)
        _, known, automaton = built
        found: dict[str, list[int]] = {}
        for end, word in automaton.iter(text):
            start = end - len(word) + 1
            if start < 0 or not text.startswith(word, start):
                return None
            found.setdefault(word, []).append(start)
        return known, found


_NONE: list[int] = []  # a word the pass found nowhere (shared: callers only read it)
_LOWERCASE_WORDS = _Words()  # searched in the lowercase text: Note.lines, Note.has
_EXACT_WORDS = _Words()  # searched as written: Note.has_exact


class Note:
    """A version of the text being redacted, its lowercase twin (same offsets, so a match in
    one is a span of the other) and which lines hold which trigger word.

    Every stage asks for the lines holding its words; all the words known are searched in
    one pass per version of the text (``_Words``), and stages that share a word share it.
    """

    __slots__ = ("_exact", "_known", "_scanned", "_starts", "low", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        low = text.lower()
        if len(low) != len(text):  # "İ" lowercases to two characters: keep offsets aligned
            low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
        self.low = low
        self._starts: dict[str, list[int]] = {}
        self._known: frozenset[str] = frozenset()  # the words the one pass looked for
        self._scanned = False
        self._exact: tuple[frozenset[str], frozenset[str]] | None = None

    def _line_starts(self, word: str) -> list[int]:
        starts = self._starts.get(word)
        if starts is None and not self._scanned:
            self._scanned = True
            self._scan()
            starts = self._starts.get(word)
        if starts is None:
            if word in self._known:  # looked for in the pass, not found
                return _NONE
            _LOWERCASE_WORDS.learn(word)
            starts = self._starts[word] = _line_starts_of(self.low, word)
        return starts

    def _scan(self) -> None:
        """Every known word's line starts, from one pass over the lowercase text."""
        result = _LOWERCASE_WORDS.occurrences(self.low)
        if result is None:
            return
        known, found = result
        self._known = known
        low = self.low
        for word, positions in found.items():  # only the words found: most are not
            starts: list[int] = []
            line_end = -1  # occurrences before it sit on a line already counted
            for i in positions:
                if i < line_end:
                    continue  # one look back per line, not per occurrence: linear on one long line
                starts.append(low.rfind("\n", 0, i) + 1)
                line_end = low.find("\n", i)
                if line_end < 0:
                    break
            self._starts[word] = starts

    def has(self, word: str) -> bool:
        """``word`` (lowercase) occurs in the text."""
        return bool(self._line_starts(word))

    def has_exact(self, word: str) -> bool:
        """``word`` occurs in the text as written (case counts)."""
        if self._exact is None:
            result = _EXACT_WORDS.occurrences(self.text)
            self._exact = (
                (result[0], frozenset(result[1])) if result else (frozenset(), frozenset())
            )
        known, present = self._exact
        if word in known:
            return word in present
        _EXACT_WORDS.learn(word)
        return word in self.text

    def lines(self, words: tuple[str, ...]) -> list[tuple[int, int]]:
        """(start, end) of each line holding one of ``words`` (lowercase), in order: only
        there can a rule match."""
        starts: set[int] = set()
        for word in words:
            found = self._line_starts(word)
            if found:
                starts.update(found)
        if not starts:
            return []
        spans = []
        for start in sorted(starts):
            end = self.text.find("\n", start)
            spans.append((start, len(self.text) if end < 0 else end))
        return spans


def _line_starts_of(low: str, word: str) -> list[int]:
    """Where each line holding ``word`` starts, one ``str.find`` per line that holds it."""
    starts: list[int] = []
    i = low.find(word)
    while i >= 0:
        starts.append(low.rfind("\n", 0, i) + 1)
        end = low.find("\n", i)
        if end < 0:
            break
        i = low.find(word, end)  # the rest of this line is covered already
    return starts


def keep_first(text: str, edits: list[Edit], counts: Counter[str]) -> str:
    """Splice ``edits`` in, dropping any that overlaps an earlier one (two rules can name the
    same value), and count the kinds kept."""
    if not edits:
        return text
    kept: list[Edit] = []
    for edit in sorted(edits):
        if not kept or edit[0] >= kept[-1][1]:
            kept.append(edit)
            counts[edit[2][len(MARK) : -1]] += 1
    return splice(text, kept)
