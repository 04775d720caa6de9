"""Credentials in comma-, semicolon- or tab-separated text: a password manager's or a
browser's export pasted into a note, under a header that names the column.

    name,url,username,password
    GitHub,https://github.com,alice,Tr0ub4dor&3xq

Every row under such a header (to the first blank line, fence or line without the
separator) has its credential cells redacted, and only those. Beside a column of whom or
what it opens (username, login, url, title...) a password cell is redacted whatever it
looks like: the header says what it is, and exported passwords are often plain words.
Without one ("field,type,description" documentation) it is judged as a value written after
its label would be.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from retriever.redact.core import MARK, Edit, Note, keep_first, marker
from retriever.redact.prose import CHECKS, LABEL_RE, label_lines
from retriever.redact.values import is_placeholder

_SEPARATORS = ",;\t"
_MAX_CELLS = 40  # a header row, not a line of prose with commas
_MAX_HEADER_CELL = 40
# Header words of the column a password belongs to (a site, a user).
_ACCOUNT_WORDS = frozenset(
    """user username login account email e-mail site service host server name title url
    uri website compte utilisateur identifiant nom""".split()
)
# Exports name the column after its record: "login_password" (Bitwarden), "Password".
_EXPORT_PASSWORD = re.compile(r"(?:login |account |user )?(?:password|passwd|pwd|mot de passe)")
_EXPORT_OTP = re.compile(r"(?:login )?(?:totp|otp|otpauth|2fa)(?: secret| seed| key)?")
_OTP_VALUE = re.compile(r"otpauth://\S+|[A-Z2-7 ]{16,}=*", re.IGNORECASE)
_CLAUSE = re.compile(r"[.!?:]\s|[.!?:]$|[()]")
_FENCE = re.compile(r"[ \t]*(?:```|~~~)")


def _closing_quote(text: str, pos: int, end: int) -> int:
    """Where the quoted cell opened at ``pos`` closes ("" inside is a quote), or -1."""
    close = text.find('"', pos + 1, end)
    while close >= 0 and close + 1 < end and text[close + 1] == '"':
        close = text.find('"', close + 2, end)
    return close


def _split(text: str, start: int, end: int, sep: str) -> list[tuple[int, int]]:
    """(start, end) of each cell's content, quotes left out ("a, b" is one cell)."""
    blanks = " \t".replace(sep, "")
    cells: list[tuple[int, int]] = []
    pos = start
    while pos <= end:
        while pos < end and text[pos] in blanks:
            pos += 1
        if pos < end and text[pos] == '"':
            close = _closing_quote(text, pos, end)
            if close < 0:
                return cells  # the quoted cell goes on to the next line
            cells.append((pos + 1, close))
            nxt = text.find(sep, close, end)
        else:
            nxt = text.find(sep, pos, end)
            b = end if nxt < 0 else nxt
            while b > pos and text[b - 1] in blanks:
                b -= 1
            cells.append((pos, b))
        pos = end + 1 if nxt < 0 else nxt + 1
    return cells


def _normal(cell: str) -> str:
    return re.sub(r"[_\-.]+", " ", cell.strip().strip("\"'`*")).strip()


def _header_like(cell: str) -> bool:
    """A column's name: a few words, not a clause of a sentence with commas."""
    return len(cell) <= _MAX_HEADER_CELL and len(cell.split()) <= 3 and not _CLAUSE.search(cell)


def _column_tier(name: str) -> str | None:
    if _EXPORT_PASSWORD.fullmatch(name):
        return "password"
    if _EXPORT_OTP.fullmatch(name):
        return "otp"
    m = LABEL_RE.fullmatch(name)
    return m.lastgroup if m is not None and m.lastgroup else None


def _header(note: Note, start: int, end: int) -> tuple[str, dict[int, str], int] | None:
    """(separator, column -> tier, its number of cells when a column names an account,
    else 0) of a header row."""
    line = note.low[start:end]
    if "|" in line:
        return None  # a markdown table: the tables stage reads it
    counts = {s: line.count(s) for s in _SEPARATORS}
    sep = max(counts, key=lambda s: counts[s])
    if not counts[sep]:
        return None
    cells = [_normal(note.low[a:b]) for a, b in _split(note.low, start, end, sep)]
    if not 2 <= len(cells) <= _MAX_CELLS or not all(map(_header_like, cells)):
        return None
    columns = {i: tier for i, c in enumerate(cells) if (tier := _column_tier(c))}
    accounts = any(set(c.split()) & _ACCOUNT_WORDS for c in cells)
    return (sep, columns, len(cells) if accounts else 0) if columns else None


def _cell_edit(value: str, tier: str, lenient: bool) -> str | None:
    """The marker kind for a credential cell's value, or None to leave it."""
    if not value or value.startswith(MARK) or is_placeholder(value):
        return None
    if tier == "otp":
        return "secret" if _OTP_VALUE.fullmatch(value) else None
    if lenient and tier == "password":
        return "password" if len(value) >= 4 else None
    kind, ok = CHECKS[tier]
    return kind if " " not in value and ok(value, False) else None


def _rows(text: str, end: int) -> Iterator[tuple[int, int]]:
    """The lines after the header that ends at ``end``, to a blank line or a fence (read
    lazily: the caller stops at the first line without the separator)."""
    pos = end
    while (newline := text.find("\n", pos)) >= 0:
        start = newline + 1
        stop = text.find("\n", start)
        stop = len(text) if stop < 0 else stop
        line_end = stop - (text[stop - 1 : stop] == "\r")
        if not text[start:line_end].strip() or _FENCE.match(text, start, line_end):
            return
        yield start, line_end
        pos = stop


def redact_delimited(note: Note, counts: Counter[str]) -> str:
    text = note.text
    if "," not in text and ";" not in text and "\t" not in text:
        return text
    edits: list[Edit] = []
    read = -1
    for start, end in label_lines(note):
        if start <= read or (head := _header(note, start, end)) is None:
            continue
        sep, columns, width = head
        for row_start, row_end in _rows(text, end):
            if sep not in text[row_start:row_end]:
                break
            read = row_end
            cells = _split(text, row_start, row_end, sep)
            # Lenient only in a row of the header's shape: an export's record.
            lenient = width == len(cells)
            for i, tier in columns.items():
                if i < len(cells) and (kind := _cell_edit(text[slice(*cells[i])], tier, lenient)):
                    edits.append((*cells[i], marker(kind)))
    return keep_first(text, edits, counts)
