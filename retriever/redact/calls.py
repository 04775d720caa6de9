"""Credentials passed positionally in code: ``Client(\"SK…\", \"<secret>\")``."""

from __future__ import annotations

import re
from collections import Counter

from retriever.redact.core import Edit, marker, splice
from retriever.redact.values import is_masked, looks_random

# Client("SK…" or "AC…", "<secret>"): the second literal is the key's secret or auth token.
_TWILIO_PAIR = re.compile(
    r"""(?P<q>["'])(?:(?:AC|SK)[0-9a-fA-F]{32}|\[REDACTED:twilio\])(?P=q)[ \t]*,[ \t]*"""
    r"""(?P<q2>["'])(?P<v>[A-Za-z0-9]{32})(?P=q2)"""
)


def redact_twilio_pairs(text: str, counts: Counter[str], low: str) -> str:
    if "AC" not in text and "[REDACTED:twilio]" not in text:
        return text
    edits: list[Edit] = []
    for m in _TWILIO_PAIR.finditer(text):
        if looks_random(m.group("v")) and not is_masked(m.group("v")):
            edits.append((*m.span("v"), marker("twilio")))
            counts["twilio"] += 1
    return splice(text, edits)
