"""Login pairs written in notes: "login: admin / secret", "user admin pass secret",
"identifiants : bob / secret", "creds admin:secret", "Wi-Fi: HomeNet / secret"; a pair after
any label, "Router: admin / secret" (blanks around the slash); a strong password after an
e-mail address, "me@example.org | secret"; and PostgreSQL password-file lines,
"db.example.com:5432:orders:alice:secret".

The value after the user name is a password when it looks like one
(:func:`prose_values.password_ok`): "login: admin / admin" and "user: alice / bob" are kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from retriever.redact.core import MARK, Edit, Note, keep_first, marker
from retriever.redact.prose import SPACES, VALUE_TRIM, value_end
from retriever.redact.prose_values import EMAIL, PW_SYMBOL, is_passphrase, password_ok
from retriever.redact.values import is_placeholder, looks_random

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
# The rest of a value cut at 200 characters (see prose.value_end): this rule's alphabet.
_VALUE_REST = re.compile(r"[^\s`\"'*<>|]*")
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


def _pair_edit(text: str, m: re.Match[str], end: int) -> Edit | None:
    vs, read = m.start("v"), m.end("v")
    v = text[vs:read].rstrip(VALUE_TRIM)
    if text.startswith(MARK, vs) or not v or not password_ok(v, False):
        return None
    return vs, value_end(text, vs, read, end, _VALUE_REST), marker("password")


# A pair after any label, "Router: admin / secret", "NAS (garage): root / secret": blanks
# around the slash (a path has none). With no login label the value must be strict, unless
# the user is a name devices ship with or an e-mail address.
_BARE_PAIR = re.compile(
    r"(?::|->|→|[ \t][–—])[ \t]*[`\"'*]*(?P<user>[\w@.+-]{0,63}\w)[`\"'*]*[ \t]+/[ \t]+[`\"'*]*"
    r"(?P<v>[^\s`\"'*<>|]{1,200})"
)
_DEVICE_USERS = frozenset(
    "admin administrator root user pi ubnt guest sa postgres operator support".split()
)


# An e-mail address, then a strong password: "Netflix: me@x.com Summer2024!", "me@x.com |
# …", "me@x.com:…" (a leaked-credentials line).
_EMAIL_PAIR = re.compile(
    r"[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}"
    r"(?:[ \t]*(?::|[|/,;–—-])[ \t]*|[ \t]+)[`\"'*]*(?P<v>[^\s`\"'*<>|]{1,200})"
)


def _strong(v: str) -> bool:
    """A password with no login label to vouch for it: a symbol, a passphrase or noise
    ("Build: Debug / Release-x64" is no login)."""
    return password_ok(v, True) and (
        bool(PW_SYMBOL.search(v)) or is_passphrase(v, 3) or (len(v) >= 12 and looks_random(v))
    )


def _value_edit(text: str, m: re.Match[str], end: int, ok: Callable[[str], bool]) -> Edit | None:
    vs, read = m.start("v"), m.end("v")
    v = text[vs:read].rstrip(VALUE_TRIM)
    if text.startswith(MARK, vs) or not v or not ok(v):
        return None
    return vs, value_end(text, vs, read, end, _VALUE_REST), marker("password")


def _bare_pair_edit(text: str, m: re.Match[str], end: int) -> Edit | None:
    user = m.group("user")
    if user.lower() in _DEVICE_USERS or EMAIL.fullmatch(user):
        return _value_edit(text, m, end, lambda v: password_ok(v, False))
    return _value_edit(text, m, end, _strong)


def redact_logins(note: Note, counts: Counter[str]) -> str:
    text, low = note.text, note.low
    edits: list[Edit] = []
    last = (0, 0)  # the last value redacted: a value starting inside it is part of it
    for start, end in note.lines(_LOGIN_HINTS):
        if not any(low.find(h, start, end) >= 0 for h in _PAIR_HINTS):
            continue
        for m in _LOGIN_PAIR.finditer(low, start, end):
            if last[0] <= m.start("v") < last[1]:
                continue
            edit = _pair_edit(text, m, end)
            if edit is not None:
                edits.append(edit)
                last = (edit[0], edit[1])
    for start, end in note.lines((" / ",)):
        for m in _BARE_PAIR.finditer(text, start, end):
            edit = _bare_pair_edit(text, m, end)
            if edit is not None:
                edits.append(edit)
    for start, end in note.lines(("@",)):
        for m in _EMAIL_PAIR.finditer(text, start, end):
            edit = _value_edit(text, m, end, _strong)
            if edit is not None:
                edits.append(edit)
    return keep_first(text, edits, counts)


# A .pgpass line, host:port:database:user:password (a field may escape ":" as "\\:"). Found
# from its port field (a literal ":" to scan for), then read as its whole line. A port is
# 1024 or above (or "*"). The host is "*", an IPv4 address or a domain name (its last
# label letters, not a file extension); localhost or a bare name only with a PostgreSQL
# port. Not logins: "user:1000:profile:email:cache" (a cache key), "notes.md:12:tags:x:y"
# (grep output), "k8s.io:1:pod:nginx:running", "2024-05-01T10:30:00:123:INFO".
_PGPASS_PORT = re.compile(r":(?:\d{1,5}|\*):")
_FIELD = r"(?:[^\s:\\]|\\.){1,100}"
_PORT = r"(?:[1-9]\d{3,4}|\*)"
_PG_PORT = r"(?:5432|5433|6432|\*)"
_NOT_A_FILE = r"(?!(?:md|markdown|txt|py|js|ts|go|rs|rb|java|json|ya?ml|toml|log|sh|c|h|cpp|html?|css|csv|xml|sql|ini|cfg|conf|lock)\b)"
_DOMAIN = rf"[\w-]{{1,63}}(?:\.[\w-]{{1,63}}){{0,8}}\.{_NOT_A_FILE}[A-Za-z]{{2,24}}"
_HOST_ANY_PORT = rf"(?:\*|\d{{1,3}}(?:\.\d{{1,3}}){{3}}|{_DOMAIN}):{_PORT}"
_HOST_PG_PORT = rf"(?=[\w.-]{{0,252}}[A-Za-z])[\w.-]{{1,253}}:{_PG_PORT}"
_PGPASS_LINE = re.compile(  # in a list, a quote or an HTML comment too
    rf"[ \t]*(?:(?:[-*+>]|<!--)[ \t]*)*(?:{_HOST_ANY_PORT}|{_HOST_PG_PORT}):{_FIELD}:{_FIELD}"
    r":(?P<v>(?:[^\s:\\]|\\.){4,200})(?:[ \t]*-->)?[ \t]*\r?"
)


def redact_pgpass(note: Note, counts: Counter[str]) -> str:
    text = note.text
    edits: list[Edit] = []
    port = _PGPASS_PORT.search(text)
    while port is not None:
        start = text.rfind("\n", 0, port.start()) + 1
        end = text.find("\n", port.end())
        end = len(text) if end < 0 else end
        m = _PGPASS_LINE.fullmatch(text, start, end)
        if m is not None and not _kept(text, m):
            edits.append((m.start("v"), m.end("v"), marker("password")))
        port = _PGPASS_PORT.search(text, end)  # the next line: each is read once
    return keep_first(text, edits, counts)


def _kept(text: str, line: re.Match[str]) -> bool:
    """Already redacted, or a placeholder (``<password>``, ``xxxx``)."""
    return text.startswith(MARK, line.start("v")) or is_placeholder(line.group("v"))
