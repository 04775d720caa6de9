"""Credentials passed positionally in code: ``Client("SK…", "<secret>")``, ``login("bob", "…")``.

A call is read when one of its string arguments is a strong token (long, random) or when its
name says it takes credentials (``Client``, ``OAuthHandler``, ``login``, ``connect``,
``HTTPBasicAuth``, ``auth = (…)``). Then:

* strong tokens among its arguments are secrets when the name says so, or when there are two
  of them (a key and its secret: ``Api("…", "…")``);
* under a credential name, a literal after another literal ("user", then this) is a
  password when it looks like one (:func:`prose_values.password_ok`);
* after a Twilio account or API key SID, the next literal is its auth token or secret.

Arguments may span lines; every edit stays inside one string literal.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass

from retriever.redact.core import Edit, Note, keep_first, marker
from retriever.redact.prose_values import password_ok
from retriever.redact.values import (
    HEXLIKE,
    UUID,
    alnum_classes,
    entropy,
    high_entropy,
    is_code_ref,
    is_masked,
    is_placeholder,
    is_wordy,
    looks_random,
)

# A quoted token of 16+ characters as an argument: the candidates for a strong one.
_STRONG_LITERAL = re.compile(r"""[(,][\s>]*[LuUbrf]?(["'`])([A-Za-z0-9+/=_\-.~]{16,200})\1""")
# A string literal argument (C/C++/Python prefixes allowed before the quote).
_STRING = re.compile(r"""(?P<q>["'`])(?P<v>(?:\\.|(?!(?P=q))[^\\\r\n])*)(?P=q)""")
# Two string literals in a row: ``"user", "password"``.
_LITERAL_PAIR = re.compile(r"""["'`][ \t]*,[\s>]*[LuUbrf]?["'`]""")  # ">": code in a quote
# What an argument list's reader stops at: quotes, brackets, separators.
_ARG_SYNTAX = re.compile(r"""["'`()\[\]{},=:]""")
# The called name, right before its "(" (``name (`` is prose); ``auth = (`` names a tuple.
_CALLEE = re.compile(r"([A-Za-z_$][\w.$]*)(?:[ \t]*=[ \t]*)?\Z")
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")
_TOKEN_ALPHABET = re.compile(r"[A-Za-z0-9+/=_\-.~]+")
_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# The name's last word takes credentials (Client, HTTPBasicAuth, smtp.login, Api), or any
# of its words is unambiguous (OAuthHandler, TwilioClient).
_CRED_LAST = frozenset(
    "client auth login logon signin connect credential credentials creds api".split()
)
_PASSWORD_CALLS = ("basicauth", "signin", "connect", "auth")
_CRED_ANY = ("oauth", "twilio", "credential", "creds", "login", "logon")
_TWILIO_SID = re.compile(r"(?:AC|SK)[0-9a-fA-F]{32}|\[REDACTED:twilio\]")
_PAREN_SYNTAX = re.compile(r"[();{}]")
_BACK_LIMIT = 300  # how far back an argument looks for its call's "("
_ARGS_LIMIT = 600  # how far an argument list may run


@dataclass(frozen=True, slots=True)
class _Arg:
    start: int
    end: int
    value: str


def _strong(v: str) -> bool:
    """A token no one types by hand: long, random, not a hash, id, name or placeholder."""
    if len(v) < 16 or not _TOKEN_ALPHABET.fullmatch(v) or HEXLIKE.fullmatch(v):
        return False  # hashes and ids; Twilio's hex secrets are read after their SID
    if max(map(len, _ALNUM_RUN.findall(v)), default=0) < 12:
        return False  # words and numbers joined: ext-ms-win-l1-1-0, daily.journal.2022.01.31
    if not (high_entropy(v) or (alnum_classes(v) == 3 and entropy(v) >= 3.5)):
        return False
    return not (is_placeholder(v) or is_wordy(v) or is_code_ref(v) or UUID.fullmatch(v))


def _credential_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    words = [w.lower() for w in _NAME_WORD.findall(last.replace("_", " "))]
    joined = last.lower().replace("_", "")
    return bool(words) and (words[-1] in _CRED_LAST or any(w in joined for w in _CRED_ANY))


def _open_paren(text: str, pos: int) -> int:
    """Offset of the unclosed "(" before ``pos`` (within reach), or -1."""
    lo = max(0, pos - _BACK_LIMIT)
    if text.rfind("(", lo, pos) < 0:
        return -1
    depth = 0
    for m in reversed(list(_PAREN_SYNTAX.finditer(text, lo, pos))):
        ch = m.group()
        if ch == ")":
            depth += 1
        elif ch == "(":
            if depth == 0:
                return m.start()
            depth -= 1
        else:  # ";", "{" or "}": a statement or block boundary
            return -1
    return -1


def _args(text: str, open_pos: int) -> list[_Arg]:
    """The top-level positional string-literal arguments of the call opened at ``open_pos``.

    Keyword arguments (``password="…"``) are left to the ``key = value`` rules, which know
    their names."""
    out: list[_Arg] = []
    pos, end, depth = open_pos + 1, min(len(text), open_pos + _ARGS_LIMIT), 0
    keyword = False  # the current argument has a name
    while (m := _ARG_SYNTAX.search(text, pos, end)) is not None:
        ch = m.group()
        pos = m.end()
        if ch in "\"'`":
            lit = _STRING.match(text, m.start(), end)
            if lit is None:
                break
            if depth == 0 and not keyword:
                out.append(_Arg(lit.start("v"), lit.end("v"), lit.group("v")))
            pos = lit.end()
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0:
            keyword = ch != ","  # "=" or ":" names the argument; "," starts the next
    return out


def _call_edits(text: str, open_pos: int) -> list[Edit]:
    m = _CALLEE.search(text, max(0, open_pos - 80), open_pos)
    if m is None:
        return []  # "(" with no name right before it: prose or a tuple, not a call
    named = _credential_name(m.group(1))
    user_password = named and _takes_a_password(m.group(1), text[m.end(1) : open_pos])
    args = _args(text, open_pos)
    edits: list[Edit] = []
    twilio = [
        arg
        for prev, arg in itertools.pairwise(args)
        if _TWILIO_SID.fullmatch(prev.value) and len(arg.value) == 32 and looks_random(arg.value)
    ]
    edits += [(a.start, a.end, marker("twilio")) for a in twilio if not is_masked(a.value)]
    # A Twilio SID is an identifier (the API key SID is a vendor token, already redacted).
    rest = [a for a in args if a not in twilio and not _TWILIO_SID.fullmatch(a.value)]
    # Under a credential name, a literal after the user name that reads as a password.
    after_user = rest[1:] if named else []
    passwords = [a for a in after_user if password_ok(a.value, False)]
    strong = [a for a in rest if _strong(a.value) and not (user_password and a in passwords)]
    if named or len(strong) >= 2:
        edits += [(a.start, a.end, marker("secret")) for a in strong]
    edits += [(a.start, a.end, marker("password")) for a in passwords if a not in strong]
    return edits


def _takes_a_password(name: str, between: str) -> bool:
    """``login("bob", "…")``, ``HTTPBasicAuth``, ``connect``, ``auth = (…)``: the literal
    after the user is a password; a ``Client("key", "secret")`` holds a key and its secret."""
    low = name.rsplit(".", 1)[-1].lower().replace("_", "")
    return "=" in between or low.endswith(_PASSWORD_CALLS) or "login" in low or "logon" in low


def _call_sites(text: str) -> set[int]:
    """Offsets of the "(" of every call worth reading: one with a strong literal, or with
    two literals in a row (a user and a password, a SID and its secret)."""
    sites: set[int] = set()
    for m in _STRONG_LITERAL.finditer(text):
        if _strong(m.group(2)):
            sites.add(_open_paren(text, m.start(1)))
    for m in _LITERAL_PAIR.finditer(text):
        sites.add(_open_paren(text, m.start()))
    sites.discard(-1)
    return sites


def redact_calls(note: Note, counts: Counter[str]) -> str:
    text = note.text
    if "(" not in text:
        return text
    edits: list[Edit] = []
    for open_pos in sorted(_call_sites(text)):
        edits += _call_edits(text, open_pos)
    return keep_first(text, edits, counts)
