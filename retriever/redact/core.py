"""Shared plumbing: the marker, edits spliced into the text, and line lookups."""

from __future__ import annotations

import re
from collections import Counter

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


class Note:
    """A version of the text being redacted, its lowercase twin (same offsets, so a match in
    one is a span of the other) and which lines hold which trigger word.

    Every stage asks for the lines holding its words; each word is searched once per version
    of the text (str.find on the lowercase text: C speed, where a case-insensitive regex is
    not), and stages that share a word share the search.
    """

    __slots__ = ("_starts", "low", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        low = text.lower()
        if len(low) != len(text):  # "İ" lowercases to two characters: keep offsets aligned
            low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
        self.low = low
        self._starts: dict[str, list[int]] = {}

    def _line_starts(self, word: str) -> list[int]:
        starts = self._starts.get(word)
        if starts is None:
            starts = []
            low = self.low
            i = low.find(word)
            while i >= 0:
                starts.append(low.rfind("\n", 0, i) + 1)
                end = low.find("\n", i)
                if end < 0:
                    break
                i = low.find(word, end)  # the rest of this line is covered already
            self._starts[word] = starts
        return starts

    def has(self, word: str) -> bool:
        """``word`` (lowercase) occurs in the text."""
        return bool(self._line_starts(word))

    def lines(self, words: tuple[str, ...]) -> list[tuple[int, int]]:
        """(start, end) of each line holding one of ``words`` (lowercase), in order: only
        there can a rule match."""
        starts: set[int] = set()
        for word in words:
            starts.update(self._line_starts(word))
        spans = []
        for start in sorted(starts):
            end = self.text.find("\n", start)
            spans.append((start, len(self.text) if end < 0 else end))
        return spans


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
