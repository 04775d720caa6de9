"""Login pairs written in notes: "login: admin / secret", "user admin pass secret",
"identifiants : bob / secret", "creds admin:secret", "Wi-Fi: HomeNet / secret"; and
PostgreSQL password-file lines, "db.example.com:5432:orders:alice:secret".

The value after the user name is a password when it looks like one
(:func:`prose_values.password_ok`): "login: admin / admin" and "user: alice / bob" are kept.
"""

from __future__ import annotations

import re
from collections import Counter

from retriever.redact.core import MARK, Edit, Note, keep_first, marker
from retriever.redact.prose import SPACES, VALUE_TRIM
from retriever.redact.prose_values import password_ok
from retriever.redact.values import is_placeholder

# "login: admin / secret", "user admin pass secret", "identifiants : bob / secret",
# "creds admin:secret".
# Matched in the lowercase twin too: the value is then read from the text.
_LOGIN_LABEL = (
    r"login|logins|user(?:name)?|identifiants?|utilisateur|creds|credentials|account|compte"
    r"|ssid|wi-?fi"
)
_PAIR_PW = r"pass(?:word)?|pwd|pw|mdp|mots?" + SPACES + r"de" + SPACES + "passe"
_LOGIN_PAIR = re.compile(
    rf"(?<![\w-])(?:{_LOGIN_LABEL})(?![\w-])[*_]*[ \t]*(?:[:=]|(?:is|est)(?=[ \t]))?[ \t]*"
    r"[`\"'*]*(?P<user>[\w@.+-]{0,63}\w)[`\"'*]*"
    r"(?::(?=[^\s/])"  # admin:secret
    rf"|[ \t]*/(?!/)[ \t]*[`\"'*]*(?:(?:{_PAIR_PW})[ \t]*[:=]?[ \t]*)?"
    rf"|[ \t]*[,;]?[ \t]+(?:{_PAIR_PW})(?:[ \t]*[:=][ \t]*|[ \t]+))"
    r"[`\"'*]*(?P<v>[^\s`\"'*<>|]{1,200})"
)
_LOGIN_HINTS = (
    "login",
    "user",
    "identifiant",
    "utilisateur",
    "cred",
    "account",
    "compte",
    "ssid",
    "wifi",
    "wi-fi",
)
_PAIR_HINTS = ("/", ":", "pass", "pw", "mdp")


def _pair_edit(text: str, m: re.Match[str]) -> Edit | None:
    vs = m.start("v")
    v = text[vs : m.end("v")].rstrip(VALUE_TRIM)
    if text.startswith(MARK, vs) or not v or not password_ok(v, False):
        return None
    return vs, vs + len(v), marker("password")


def redact_logins(note: Note, counts: Counter[str]) -> str:
    text, low = note.text, note.low
    edits: list[Edit] = []
    for start, end in note.lines(_LOGIN_HINTS):
        if not any(low.find(h, start, end) >= 0 for h in _PAIR_HINTS):
            continue
        for m in _LOGIN_PAIR.finditer(low, start, end):
            edit = _pair_edit(text, m)
            if edit is not None:
                edits.append(edit)
    return keep_first(text, edits, counts)


# A .pgpass line, host:port:database:user:password (a field may escape ":" as "\\:"). Found
# from its port field (a literal ":" to scan for), then read as its whole line. The host
# holds a letter or is an IPv4 address or "*": "10:30:00:000:x" is a time, not a login.
_PGPASS_PORT = re.compile(r":(?:\d{1,5}|\*):")
_FIELD = r"(?:[^\s:\\]|\\.){1,100}"
_HOST = r"(?:\*|(?=[\w.-]{0,252}[A-Za-z])[\w.-]{1,253}|\d{1,3}(?:\.\d{1,3}){3})"
_PGPASS_LINE = re.compile(  # in a list, a quote or an HTML comment too
    rf"[ \t]*(?:(?:[-*+>]|<!--)[ \t]*)*{_HOST}:(?:\d{{1,5}}|\*):{_FIELD}:{_FIELD}"
    r":(?P<v>(?:[^\s:\\]|\\.){4,200})(?:[ \t]*-->)?[ \t]*\r?"
)


def redact_pgpass(note: Note, counts: Counter[str]) -> str:
    text = note.text
    edits: list[Edit] = []
    seen = -1
    for port in _PGPASS_PORT.finditer(text):
        start = text.rfind("\n", 0, port.start()) + 1
        if start <= seen:
            continue  # this line was read already
        seen = start
        end = text.find("\n", port.end())
        m = _PGPASS_LINE.fullmatch(text, start, len(text) if end < 0 else end)
        if m is None or text.startswith(MARK, m.start("v")) or is_placeholder(m.group("v")):
            continue
        edits.append((m.start("v"), m.end("v"), marker("password")))
    return keep_first(text, edits, counts)
