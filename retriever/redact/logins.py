"""Login pairs written in notes: "login: admin / secret", "user admin pass secret",
"identifiants : bob / secret", "creds admin:secret", "Wi-Fi: HomeNet / secret"; a pair after
a device's or an account's label, "Router: admin / secret" (blanks around the slash); an
e-mail address and a strong password joined by a colon or a slash; and PostgreSQL
password-file lines, "db.example.com:5432:orders:alice:secret".

The value after the user name is a password when it looks like one
(:func:`prose_values.password_ok`): "login: admin / admin" and "user: alice / bob" are kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from retriever.redact.assign import PAIR_PASSWORD, PAIR_USER
from retriever.redact.core import MARK, Edit, Note, keep_first, marker
from retriever.redact.prose import SPACES, VALUE_TRIM, value_end
from retriever.redact.prose_values import PW_SYMBOL, password_ok
from retriever.redact.values import alnum_classes, is_placeholder, looks_random

# "login: admin / secret", "user admin pass secret", "identifiants : bob / secret",
# "creds admin:secret".
# Matched in the lowercase twin too: the value is then read from the text.
_LOGIN_LABEL = (
    r"login|logins|user(?:name)?|identifiants?|utilisateur|creds|credentials|account|compte"
    r"|ssid|wi-?fi"
    r"|u(?=[ \t]*:)"  # "u: bob p: …"
)
# "p" alone only with its colon ("p: 3 pages" has no user before it).
_PAIR_PW = r"pass(?:word)?|pwd|pw|p(?=[ \t]*:)|mdp|mots?" + SPACES + r"de" + SPACES + "passe"
_LOGIN_PAIR = re.compile(
    rf"(?<![\w-])(?:{_LOGIN_LABEL})(?![\w-])[*_]*[ \t]*(?:[:=]|(?:is|est)(?=[ \t]))?[ \t]*"
    r"[`\"'*]*(?P<user>[\w@.+-]{0,63}\w)[`\"'*]*"
    r"(?::(?=[^\s/])"  # admin:secret
    rf"|[ \t]*/(?!/)[ \t]*[`\"'*]*(?:(?:{_PAIR_PW})[ \t]*[:=]?[ \t]*)?"
    rf"|[ \t]*[,;]?[ \t]+(?:{_PAIR_PW})(?:[ \t]*[:=][ \t]*|[ \t]+))"
    r"[`\"'*]*(?P<v>[^\s`\"'*<>|]{1,200})"
)
# A login pair's label with a slash, "u/p: admin/…", "user/pass: admin / …", "login/mdp :
# admin/…", "**user/pass:** admin X", and what follows it: a pair, or the password alone
# ("Login/Password: …"; the assignment and prose stages leave these labels to this one).
_SLASH_LABEL = re.compile(
    rf"(?<![\w-])(?:{PAIR_USER})/(?:{PAIR_PASSWORD})(?![\w-])"
    r"[*_]*[ \t\xa0]*(?:[:=][*_]*[ \t\xa0]*)?[`\"'*]*"
)
_SLASH_PAIR = re.compile(
    r"(?P<user>[\w@.+-]{0,63}\w)[`\"'*]*(?::(?=[^\s/])|[ \t]*/(?!/)[ \t]*|[ \t]+)[`\"'*]*"
    r"(?P<v>[^\s`\"'*<>|]{1,200})"
)
_SLASH_ONE = re.compile(r"(?P<v>[^\s`\"'*<>|]{1,200})")
# The rest of a value cut at 200 characters (see prose.value_end): this rule's alphabet.
_VALUE_REST = re.compile(r"[^\s`\"'*<>|]*")
_LOGIN_HINTS = (
    "u:",
    "u/p",
    "id/",
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


def _value_edit(
    text: str,
    m: re.Match[str],
    end: int,
    ok: Callable[[str], bool] = lambda v: password_ok(v, False),
) -> Edit | None:
    """The password in ``m``'s group ``v``, when ``ok`` says it is one (a labelled pair's
    value by default), redacted to the end of its run."""
    vs, read = m.start("v"), m.end("v")
    v = text[vs:read].rstrip(VALUE_TRIM)
    if text.startswith(MARK, vs) or not v or not ok(v):
        return None
    return vs, value_end(text, vs, read, end, _VALUE_REST), marker("password")


# A pair after a device's or an account's label, "Router: admin / secret", "NAS (garage):
# root / secret", "creds -> postgres / secret": blanks around the slash (a path has none), a
# label word from this list (not "Route:", "Image:", "Shortcut:"), and a strong value.
_BARE_PAIR = re.compile(
    r"(?<![\w-])(?:router|modem|box|nas|server|db|database|camera|printer|switch|firewall"
    r"|vpn|ssh|sftp|ftp|admin|console|panel|portal|dashboard|creds?|account|bank|mail|email"
    r"|e-mail|wifi|wi-fi|gmail|outlook|icloud|google|apple|microsoft|amazon|netflix|paypal"
    r"|github|gitlab|jira|grafana|synology|proxmox|unifi|idrac|ilo|mysql|postgres|dropbox)"
    r"(?![\w-])[^:\n→>]{0,30}(?::|->|→)[ \t]*[`\"'*]*"
    r"(?P<user>[\w@.+-]{0,63}\w)[`\"'*]*[ \t]+/[ \t]+[`\"'*]*(?P<v>[^\s`\"'*<>|]{1,200})"
)
# An e-mail address and its password, joined by a colon as credential dumps write them
# ("me@example.org:secret") or by a slash with blanks ("Gmail: me@example.org / secret").
_EMAIL_PAIR = re.compile(
    r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}(?::|[ \t]+/[ \t]+)"
    r"[`\"'*]*(?P<v>[^\s`\"'*<>|]{1,200})"
)


# An e-mail address alone on its line, and a strong password alone on the next: a login
# copied into a note as two lines.
_EMAIL_LINE = re.compile(
    r"[ \t]*(?:[-*+>][ \t]+)?[`\"'*]*[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}[`\"'*]*[ \t]*\r?"
)
_LONE_TOKEN = re.compile(
    r"[ \t]*(?:[-*+>][ \t]+)?[`\"'*]*(?P<v>[^\s`\"'*<>|][^\s`\"'<>|]{6,198}[^\s`\"'*<>|])"
    r"[`\"'*]*[ \t]*\r?"
)


# What a signature or a message puts under an address: "Ref:INV-42", "Order#12345",
# "Tel:06…", "@handle", "PGP:0x…", "Fwd:…".
_REFERENCE = re.compile(r"@|[A-Za-z]{2,12}[#:°]")


def _below_email(text: str, start: int, end: int) -> Edit | None:
    """The password alone on the line under an e-mail address alone on its line."""
    if _EMAIL_LINE.fullmatch(text, start, end) is None or end >= len(text):
        return None  # ``end`` is the line's "\n", or the text's end
    below = end + 1
    stop = text.find("\n", below)
    m = _LONE_TOKEN.fullmatch(text, below, len(text) if stop < 0 else stop)
    if m is None:
        return None
    value = m.group("v")
    if value.startswith(MARK) or _REFERENCE.match(value) or not _strong(value):
        return None
    return m.start("v"), m.end("v"), marker("password")


def _strong(v: str) -> bool:
    """A password with no login label to vouch for it: a symbol, or noise of capitals,
    small letters and digits ("DB: postgres / postgres-14-data" is no login)."""
    return password_ok(v, True) and (
        bool(PW_SYMBOL.search(v)) or (len(v) >= 12 and alnum_classes(v) == 3 and looks_random(v))
    )


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
            edit = _value_edit(text, m, end)
            if edit is not None:
                edits.append(edit)
                last = (edit[0], edit[1])
        for label in _SLASH_LABEL.finditer(low, start, end):
            for pattern in (_SLASH_PAIR, _SLASH_ONE):  # the pair first, then one value
                found = pattern.match(low, label.end(), end)
                if found is None or last[0] <= found.start("v") < last[1]:
                    continue
                edit = _value_edit(text, found, end)
                if edit is not None:
                    edits.append(edit)
                    last = (edit[0], edit[1])
                    break
    for hint, pattern in ((" / ", _BARE_PAIR), ("@", _EMAIL_PAIR)):
        for start, end in note.lines((hint,)):
            for m in pattern.finditer(low, start, end):
                edit = _value_edit(text, m, end, _strong)
                if edit is not None:
                    edits.append(edit)
    for start, end in note.lines(("@",)):
        if (edit := _below_email(text, start, end)) is not None:
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
