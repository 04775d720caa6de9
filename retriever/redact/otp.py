"""Two-factor setup keys: the base32 secret an authenticator app is given, after a label
that names one.

    Secret key: ev5z lytw nhpu eshx lxkm ezgv lalt zbcm     (Google's groups of four)
    MFA seed = JBSWY3DPEHPK3PXPJBSWY3DP                       (one run, upper case)

    TOTP seed for the AWS root account: BYYWAZ6Z…             (words before the colon)

Whoever holds it makes the codes. Base32 is letters and the digits 2-7, and English has
enough four-letter words to fill the groups: a key must hold a digit (a random key of 16
characters or more lacks one about once in thirty), but for eight groups of four letters
or more, few of them words, after a label naming a two-factor key ("Clé 2FA : nijz sxbr
…").
"""

from __future__ import annotations

import re
from collections import Counter

from retriever.redact.core import Edit, Note, keep_first, marker
from retriever.redact.values import is_common_word, made_up_groups

# A label naming a two-factor key may have words before its separator: "TOTP seed for the
# AWS root account:", "Clé 2FA (TOTP) Binance à saisir manuellement :". A bare "setup key"
# or "secret key" may not (it names too much else).
_NAMED = (
    r"(?:(?:2fa|mfa|totp|otp|authenticator|two[- ]factor|2-step|2fa[ \t]+setup)"
    r"(?:[ \t]+(?:app|auth|authentication|setup))?[ \t]+(?:key|secret|seed|code)"
    r"|(?:totp|otp|mfa|2fa)[ \t]+seed|cl[eé]f?[ \t]+(?:2fa|totp|otp|mfa))s?"
)
_LABEL = re.compile(
    rf"(?<![\w-])(?:(?P<named>{_NAMED})|(?:setup|secret)[ \t]+keys?)"
    # One run of blanks between two tokens (two in a row made a long blank run quadratic).
    # Words and asides after a named label (each word after its own blanks: linear), an
    # aside at most after another.
    r"(?(named)(?:[ \t]+[^\s:=()*]{1,30}|[ \t]*\([^()\n]{1,40}\)){0,6}"
    r"|(?:[ \t]*\([^()\n]{1,40}\))?)"
    r"[ \t]*(?:\*\*[ \t]*)?[:=][ \t]*(?:\*\*[ \t]*)?[`\"']?",
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
# A key of letters only: eight groups of four or more, as Google and Binance show one.
_LETTER_GROUPS = re.compile(r"[a-z]{4}(?: [a-z]{4}){7,63}")


def _letters_only_key(v: str) -> bool:
    """A 32-character key or longer with no digit 2-7 (one in thirty random keys lacks one),
    after a label naming a two-factor key: its groups not words ("this that what when"),
    not made up (``made_up_groups``)."""
    if _LETTER_GROUPS.fullmatch(v) is None:
        return False
    groups = v.split()
    return not made_up_groups(groups) and sum(map(is_common_word, groups)) * 4 <= len(groups)


def redact_otp(note: Note, counts: Counter[str]) -> str:
    text = note.text
    edits: list[Edit] = []
    for start, end in note.lines(_HINTS):
        for label in _LABEL.finditer(text, start, end):
            m = _KEY.match(text, label.end(), end)
            if m is None:
                continue
            key = m.group("v")
            if _DIGIT.search(key) or (label["named"] and _letters_only_key(key)):
                edits.append((m.start("v"), m.end("v"), marker("secret")))
    return keep_first(text, edits, counts)
