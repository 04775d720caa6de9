"""Credentials written as sentences, English and French."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from retriever.redact.assign import VETO_LAST
from retriever.redact.core import MARK, Edit, hint_lines, marker, splice
from retriever.redact.values import (
    B64,
    DIGIT,
    DIGITS,
    HEXLIKE,
    UUID,
    alnum_classes,
    entropy,
    high_entropy,
    is_code_ref,
    is_path,
    is_placeholder,
    is_wordy,
    looks_random,
)

# "password" and its French and qualified forms; "wifi password" is the same word.
_PW_PHRASE = r"(?:pass(?:word|phrase|code)s?|mots?[ \t]+de[ \t]+passe|mdp)"

# Material named by what it encrypts, English and French (accents optional).
_KEY_PHRASE = (
    r"(?:(?:encryption|decryption|master|backup|(?:restic[ \t]+)?repo(?:sitory)?|restic)"
    r"[ \t]+key|cl[eé][ \t]+(?:de[ \t]+)?(?:chiffrement|d[eé]chiffrement))"
)

# Up to five qualifying words ("for the guest network", "du wifi") before the separator.
_QUALIFIER = r"(?P<qual>(?:[ \t]+[^\s:=.;!?,()`\"'*]{1,24}){0,5}?)"

# Every qualifier length is tried with a separator before settling for none.
_PROSE_SEP = (
    r"(?:" + _QUALIFIER + r"[ \t]*(?P<sep>:|=|->|→|\b(?:is|was|est|était|sera)\b)|(?P<none>))"
)

_PROSE_VALUE = r"[ \t]*[`\"'*“«(]*[ \t]*(?P<v>[^\s`\"'*”»<>]{1,200})"

_PROSE_PW = re.compile(
    r"(?<![\w-])" + _PW_PHRASE + r"(?![\w-])" + _PROSE_SEP + _PROSE_VALUE,
    re.IGNORECASE,
)

_PROSE_KEY = re.compile(
    r"(?<![\w-])" + _KEY_PHRASE + r"(?![\w-])" + _PROSE_SEP + _PROSE_VALUE,
    re.IGNORECASE,
)

# "login: admin / secret", "user = root / secret", "identifiant : bob / secret".
_LOGIN_PAIR = re.compile(
    r"(?<![\w-])(?:login|user(?:name)?|identifiant|utilisateur)[ \t]*[:=][ \t]*[`\"'*]*"
    r"[^\s/`\"'*]{1,64}[`\"'*]*[ \t]*/[ \t]*[`\"'*]*(?P<v>[^\s`\"'*<>]{1,200})",
    re.IGNORECASE,
)

# Lowercase prefilters: a rule's regex only runs on the lines holding one of these. They
# assume single spaces ("encryption key"), as people write; the regexes allow more.
_PW_HINTS = ("password", "passphrase", "passcode", "passe", "mdp")

# Every English phrase ends in " key": one scan for it spares the others in most notes.
_KEY_HINTS_EN = (
    "encryption key",
    "decryption key",
    "master key",
    "backup key",
    "repo key",
    "repository key",
    "restic key",
)

_KEY_HINTS_FR = ("chiffrement",)

_LOGIN_HINTS = ("login", "user", "identifiant", "utilisateur")

_VALUE_TRIM = ".,;:!?)]}\"'`*”»"

EMAIL = re.compile(r"[\w.+\-]+@[\w\-]+\.[\w.\-]+")

_PHRASE_PARTS = re.compile(r"[-_.+]")

# A word, one number, maybe more words: Win32_UserAccount, SHA256, x509Certificate.
NAME_WITH_NUMBER = re.compile(r"[A-Za-z]*[A-Za-z]\d+(?:[_-]?[A-Za-z]+)*")


def is_passphrase(v: str, min_parts: int = 2) -> bool:
    """Words joined by dashes (or dots, underscores) with a number: correct-horse-battery-42."""
    parts = _PHRASE_PARTS.split(v)
    if len(parts) < min_parts or not all(p.isascii() and p.isalnum() for p in parts):
        return False
    wordy = sum(len(p) >= 2 and any(c.isalpha() for c in p) for p in parts)
    return wordy >= 2 and any(c.isdigit() for c in v)


def prose_secret_ok(v: str, strict: bool) -> bool:
    """A value written in a sentence: a passphrase or random characters, not a word."""
    if len(v) < 6 or is_placeholder(v) or "://" in v or EMAIL.fullmatch(v):
        return False
    if is_path(v) or is_code_ref(v) or UUID.fullmatch(v):
        return False
    if is_passphrase(v, 3 if strict else 2):
        return True
    if not DIGIT.search(v) or (NAME_WITH_NUMBER.fullmatch(v) and is_wordy(DIGITS.sub("", v))):
        return False  # Win32_UserAccount, SHA256, plain words: names, not secrets
    if strict:
        return len(v) >= 10 and alnum_classes(v) == 3 and entropy(v) >= 3.0
    return looks_random(v) or (len(v) >= 6 and not v.isalnum() and alnum_classes(v) >= 2)


def key_material_ok(v: str, strict: bool) -> bool:
    """Base64 (or hex, when a separator says "this is it") key material."""
    if len(v) < 16 or is_placeholder(v) or not B64.fullmatch(v) or UUID.fullmatch(v):
        return False
    if HEXLIKE.fullmatch(v):
        return not strict and len(v) >= 32
    # Base64 of 32 random bytes lacks a digit about once in a thousand: do not insist on one.
    return high_entropy(v) or (alnum_classes(v) >= 2 and entropy(v) >= 3.5 and not is_wordy(v))


def _qualifier_vetoed(m: re.Match[str]) -> bool:
    """ "password hash is …", "key fingerprint: …": the value describes, it is not secret."""
    return any(w.lower() in VETO_LAST for w in (m.group("qual") or "").split())


def _prose_edits(
    text: str,
    spans: list[tuple[int, int]],
    regex: re.Pattern[str],
    ok: Callable[[str, bool], bool],
    kind: str,
) -> list[Edit]:
    edits: list[Edit] = []
    for start, end in spans:
        for m in regex.finditer(text, start, end):
            if "qual" in m.re.groupindex and _qualifier_vetoed(m):
                continue
            strict = "none" in m.re.groupindex and m.group("none") is not None
            vs = m.start("v")
            v = m.group("v").rstrip(_VALUE_TRIM)
            if text.startswith(MARK, vs) or not v or not ok(v, strict):
                continue
            edits.append((vs, vs + len(v), marker(kind)))
    return edits


def redact_prose(text: str, counts: Counter[str], low: str) -> str:
    """Credentials written as sentences: "the wifi password is …", "login: admin / …"."""
    edits: list[Edit] = []
    if any(h in low for h in _PW_HINTS):
        spans = hint_lines(text, _PW_HINTS, low)
        edits += _prose_edits(text, spans, _PROSE_PW, prose_secret_ok, "password")
    if "/" in text and any(h in low for h in _LOGIN_HINTS):  # the pair's "/" first: cheap
        spans = [
            (a, b) for a, b in hint_lines(text, _LOGIN_HINTS, low) if text.find("/", a, b) >= 0
        ]
        edits += _prose_edits(text, spans, _LOGIN_PAIR, prose_secret_ok, "password")
    hints = _KEY_HINTS_FR if " key" not in low else _KEY_HINTS_EN + _KEY_HINTS_FR
    if any(h in low for h in hints):
        spans = hint_lines(text, hints, low)
        edits += _prose_edits(text, spans, _PROSE_KEY, key_material_ok, "secret")
    if not edits:
        return text
    kept: list[Edit] = []
    for edit in sorted(edits):  # two rules can name the same value
        if not kept or edit[0] >= kept[-1][1]:
            kept.append(edit)
            counts[edit[2][len(MARK) : -1]] += 1
    return splice(text, kept)
