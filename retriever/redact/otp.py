"""Two-factor setup keys: the base32 secret an authenticator app is given, after a label
that names one.

    Secret key: ev5z lytw nhpu eshx lxkm ezgv lalt zbcm     (Google's groups of four)
    MFA seed = JBSWY3DPEHPK3PXPJBSWY3DP                       (one run, upper case)

Whoever holds it makes the codes. Base32 is letters and the digits 2-7, and English has
enough four-letter words to fill the groups: a key must hold a digit (a random key of 16
characters or more lacks one about once in thirty).
"""

from __future__ import annotations

import re
from collections import Counter

from retriever.redact.core import Edit, Note, keep_first, marker

_LABEL = re.compile(
    r"(?<![\w-])(?:(?:2fa|mfa|totp|otp|authenticator|two[- ]factor|2-step|2fa[ \t]+setup)"
    r"(?:[ \t]+(?:app|auth|authentication|setup))?[ \t]+(?:key|secret|seed|code)"
    r"|(?:setup|secret)[ \t]+key|(?:totp|otp|mfa|2fa)[ \t]+seed)s?"
    # One run of blanks between two tokens (two in a row made a long blank run quadratic).
    r"(?:[ \t]*\([^()\n]{1,40}\))?[ \t]*(?:\*\*[ \t]*)?[:=][ \t]*(?:\*\*[ \t]*)?[`\"']?",
    re.IGNORECASE,
)
# Every group there is (possessive: never a shorter key that leaves groups behind), and a
# last group of one to three characters (a 26-character key in fours).
_KEY = re.compile(
    r"(?P<v>(?:[a-z2-7]{4}(?: [a-z2-7]{4}){3,63}+|[A-Z2-7]{4}(?: [A-Z2-7]{4}){3,63}+)"
    r"(?: [a-zA-Z2-7]{1,3}(?![\w-]))?|[A-Z2-7]{16,256}+|[a-z2-7]{16,256}+)(?![\w-])"
)
_DIGIT = re.compile(r"[2-7]")
_HINTS = ("2fa", "mfa", "totp", "otp", "authenticator", "factor", "2-step", "setup", "secret")


def redact_otp(note: Note, counts: Counter[str]) -> str:
    text = note.text
    edits: list[Edit] = []
    for start, end in note.lines(_HINTS):
        for label in _LABEL.finditer(text, start, end):
            m = _KEY.match(text, label.end(), end)
            if m is not None and _DIGIT.search(m.group("v")):
                edits.append((m.start("v"), m.end("v"), marker("secret")))
    return keep_first(text, edits, counts)
