"""Credentials in markdown tables: the cells of a column headed "Password", "Mot de passe",
"API key", "Token"...

    | Service | User  | Password               |
    | ------- | ----- | ---------------------- |
    | NAS     | admin | violet-rocket-maple-42 |

Each cell of such a column is judged as a value written after its label would be (a
passphrase, a human password, random characters, key material); other columns are left
alone. A column of login pairs ("Credentials", "User / Password": ``admin / secret``,
``bob:secret``) has the part after the user judged the same way. Every row is read, to the
table's end, once: a row that looks like a header again is not read twice. A row that
pairs a label with its value (``| Password | … |``) is prose's job.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

from retriever.redact.core import MARK, Edit, Note, keep_first, marker
from retriever.redact.prose import CHECKS, LABEL_RE, VALUE_TRIM, label_lines

_PIPE = re.compile(r"(?<!\\)\|")
# GFM: a delimiter cell is one hyphen or more (`|--|`, `| - |`, `|:-|` are tables too).
_DELIMITER = re.compile(r"[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?[ \t]*")
# Header cells that name a password column only in a table's header ("pass" in prose is
# a verb or a ticket), and only beside a column of whom or what it opens: "| Test | Pass |"
# counts results.
_PASSWORD_HEADERS = frozenset({"pass", "pw", "pwd", "passwd", "mdp", "pass word"})
_ACCOUNT_HEADERS = frozenset(
    """user username login account email e-mail site service host server name compte
    utilisateur identifiant identifiants site web""".split()
)
# Header cells of a column of login pairs ("admin / secret", "bob:secret"): the part after
# the user is judged as "login: admin / …" in prose is. A cell without a pair (a user name
# alone, "see the vault") is left alone.
# Not "Login" or "Access": there they hold ARNs, roles and branches (arn:aws:…, group:x2).
_PAIR_HEADER = re.compile(
    r"(?:credentials?|creds|identifiants?"
    r"|(?:user(?:name)?|login|account|compte|identifiants?|utilisateur)[ \t]*/[ \t]*"
    r"(?:pass(?:word)?|pwd|pw|mdp|mot de passe))"
)
_PAIR_HINTS = ("cred", "identifiant")
# A column of PINs or card security codes: only digits of a PIN's or a code's length, and
# a PIN only beside a column of what it opens ("| Pin | Function |" numbers GPIO pins).
_CODE_HEADERS = {
    **dict.fromkeys(("pin", "pin code", "code pin", "passcode", "door code", "digicode"), "pin"),
    **dict.fromkeys(("cvc", "cvv", "cvc2", "cvv2", "cryptogramme", "security code"), "cvc"),
}
_PIN_OWNERS = _ACCOUNT_HEADERS | frozenset(
    "card carte bank banque phone sim door porte lock device account what".split()
)
_CODE_CHECKS = {
    "pin": ("pin", lambda v, _: bool(re.fullmatch(r"\d{4,8}", v))),
    "cvc": ("payment_card", lambda v, _: bool(re.fullmatch(r"\d{3,4}", v))),
}
_CODE_HINTS = (
    "pin",
    "passcode",
    "door code",
    "digicode",
    "cvc",
    "cvv",
    "cryptogramme",
    "security code",
)
_CELL_PAIR = re.compile(
    r"[\w@.+\\-]{1,64}(?P<gap>[ \t]*)(?:/|:)[ \t]*[`\"'*]*(?P<v>[^\s`\"'*<>|/]{1,200})"
)
_CELL_TRIM = " \t*_`\"'"


def _cells(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each cell's content, trimmed; outer pipes do not make empty cells."""
    bounds = [start - 1, *(m.start() for m in _PIPE.finditer(text, start, end)), end]
    cells = []
    for a, b in itertools.pairwise(bounds):
        a += 1
        while a < b and text[a] in _CELL_TRIM:
            a += 1
        while b > a and text[b - 1] in _CELL_TRIM:
            b -= 1
        cells.append((a, b))
    if cells and text[start:end].lstrip().startswith("|"):
        cells = cells[1:]
    if cells and text[start:end].rstrip().endswith("|"):
        cells = cells[:-1]
    return cells


def _next_line(text: str, end: int) -> tuple[int, int] | None:
    """The line after the one ending at ``end`` (its "\\r" left out, as callers give it)."""
    newline = text.find("\n", end)
    if newline < 0:
        return None
    start = newline + 1
    stop = text.find("\n", start)
    stop = len(text) if stop < 0 else stop
    return start, stop - (text[stop - 1 : stop] == "\r")


def _credential_columns(note: Note, start: int, end: int) -> dict[int, str]:
    """Column index -> label tier, for the header cells that name a credential."""
    out = {}
    cells = _cells(note.text, start, end)
    headers = {note.low[a:b] for a, b in cells}
    accounts = bool(headers & _ACCOUNT_HEADERS)
    for i, (a, b) in enumerate(cells):
        m = LABEL_RE.fullmatch(note.low, a, b)
        if m is not None and m.lastgroup:
            # "| Account | Secret |": beside whom it opens, a bare secret is its password.
            weak = m.lastgroup == "weak_token" and note.low[a:b] == "secret"
            out[i] = "password" if weak and accounts else m.lastgroup
        elif note.low[a:b] in _PASSWORD_HEADERS and accounts:
            out[i] = "password"
        elif _PAIR_HEADER.fullmatch(note.low, a, b):
            out[i] = "pair"
        elif (code := _CODE_HEADERS.get(note.low[a:b])) and (
            code == "cvc" or headers & _PIN_OWNERS
        ):
            out[i] = code
    return out


def _column_edits(note: Note, header: tuple[int, int]) -> tuple[list[Edit], int]:
    """The edits of the table under ``header``, and where the rows read end (the header's
    end when it heads no table with a credential column)."""
    text = note.text
    columns = _credential_columns(note, *header)
    delim = _next_line(text, header[1])
    if not columns or delim is None or not _DELIMITER.fullmatch(text, *delim):
        return [], header[1]
    edits: list[Edit] = []
    row = _next_line(text, delim[1])
    read = delim[1]
    # Every row to the table's end, however many: the caller never reads them again. A row
    # over a delimiter line heads the next table (two tables with no blank line between).
    while row is not None and "|" in text[row[0] : row[1]]:
        below = _next_line(text, row[1])
        if below is not None and _DELIMITER.fullmatch(text, *below):
            break
        read = row[1]
        cells = _cells(text, *row)
        for i, tier in columns.items():
            if i >= len(cells):
                continue
            a, b = cells[i]
            strict = False
            if tier == "pair":  # "admin / secret": the secret
                pair = _CELL_PAIR.fullmatch(text, a, b)
                if pair is None:
                    continue
                a = pair.start("v")
                b = a + len(pair.group("v").rstrip(VALUE_TRIM))
                # "bob:secret" with no blank reads like a namespace (group:wheel42): strict.
                tier, strict = "password", not pair["gap"]
            value = text[a:b]
            kind, ok = _CODE_CHECKS[tier] if tier in _CODE_CHECKS else CHECKS[tier]
            if value and " " not in value and not value.startswith(MARK) and ok(value, strict):
                edits.append((a, b, marker(kind)))
        row = _next_line(text, row[1])
    return edits, read


def redact_tables(note: Note, counts: Counter[str]) -> str:
    text = note.text
    if "|" not in text or "-" not in text:
        return text
    edits: list[Edit] = []
    headers = sorted(
        set(label_lines(note)) | set(note.lines(_PAIR_HINTS)) | set(note.lines(_CODE_HINTS))
    )
    read = -1  # where the rows of the last table read end: no header or row in there again
    for start, end in headers:
        if start > read and text.find("|", start, end) >= 0:
            found, read = _column_edits(note, (start, end))
            edits += found
    return keep_first(text, edits, counts)
