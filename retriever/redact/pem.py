"""Private-key blocks: replaced whole, keeping the line breaks they spanned."""

from __future__ import annotations

import re
from collections import Counter

from retriever.redact.core import BREAK_RE, Edit, marker, splice

# Five dashes, or what a word processor made of them (en and em dashes, minus signs).
_D5 = "[-\u2010-\u2015\u2212]{1,6}"  # not a literal key header in this file

_PEM_LABEL = r" [A-Z0-9 ]{0,40}?PRIV" + r"ATE KEY(?: BLOCK)?"

_PEM_BEGIN = re.compile(_D5 + "BEGIN" + _PEM_LABEL + _D5)

_PEM_END = re.compile(_D5 + "END" + _PEM_LABEL + _D5)

_PEM_HINT = "PRIV" + "ATE KEY"

_PEM_MAX_BODY = 200_000

# Tail of a block whose END line is missing: base64 and header lines that follow, through
# real newlines or the literal "\n" escapes of a JSON string.
_NL = r"(?:\r\n|[\r\n]|\\n)"

_PEM_TAIL = re.compile(
    r"(?:" + _NL + r"[ \t]*(?:[A-Za-z0-9+/=]{16,}|=[A-Za-z0-9+/]{4}|"
    r"(?:Proc-Type|DEK-Info|Comment|Version|Hash):[^\r\n\\\"]*)[ \t]*(?="
    + _NL
    + r"|[\"']|$)|"
    + _NL
    + r"(?="
    + _NL
    + r"))*"
)

_TRAILING_NL = re.compile(_NL + r"\Z")

_PEM_BODY = re.compile(r"[A-Za-z0-9+/]{16}")


def redact_pem(text: str, counts: Counter[str]) -> str:
    if _PEM_HINT not in text:
        return text
    edits: list[Edit] = []
    pos = 0
    end_m: re.Match[str] | None = None
    no_end_after = len(text) + 1  # memo: no END marker at or after this offset
    begin = _PEM_BEGIN.search(text)
    while begin is not None:
        if begin.start() < pos:  # inside a block already replaced
            begin = _PEM_BEGIN.search(text, pos)
            continue
        nxt = _PEM_BEGIN.search(text, begin.end())
        if (end_m is None or end_m.start() < begin.end()) and begin.end() < no_end_after:
            end_m = _PEM_END.search(text, begin.end())
            if end_m is None:
                no_end_after = begin.end()
        terminated = (
            end_m is not None
            and end_m.start() >= begin.end()
            and end_m.start() - begin.end() <= _PEM_MAX_BODY
            and (nxt is None or nxt.start() > end_m.start())
        )
        if terminated and end_m is not None:
            stop = end_m.end()
        else:
            tail = _PEM_TAIL.match(text, begin.end())
            stop = tail.end() if tail else begin.end()
            # Leave the final line break in place when the tail ended on one.
            stop = begin.end() + len(_TRAILING_NL.sub("", text[begin.end() : stop]))
        # A header with no key material (a constant in code, a how-to) is not a secret.
        if not _PEM_BODY.search(text, begin.end(), stop):
            begin = nxt
            continue
        breaks = "".join(BREAK_RE.findall(text, begin.start(), stop))
        edits.append((begin.start(), stop, marker("private_key") + breaks))
        counts["private_key"] += 1
        pos = stop
        begin = nxt
    return splice(text, edits)


# PuTTY's .ppk: "Private-Lines: N" and then N lines of base64, the private key (encrypted
# or not). The public lines and the MAC are not secret.
_PPK_HINT = "PuTTY-User-Key-File-"
_PPK_PRIVATE = re.compile(r"^[ \t>]*Private-Lines:[ \t]*(\d{1,3})[ \t]*\r?$", re.MULTILINE)
_PPK_LINE = re.compile(r"[ \t>]*([A-Za-z0-9+/]{4,}={0,2})[ \t]*\r?")


def redact_ppk(text: str, counts: Counter[str]) -> str:
    if _PPK_HINT not in text:
        return text
    edits: list[Edit] = []
    for block in _PPK_PRIVATE.finditer(text):
        before = len(edits)
        pos = block.end() + 1
        for _ in range(int(block.group(1))):
            stop = text.find("\n", pos)
            stop = len(text) if stop < 0 else stop
            line = _PPK_LINE.fullmatch(text, pos, stop)
            if line is None:
                break
            edits.append((line.start(1), line.end(1), marker("private_key")))
            pos = stop + 1
        counts["private_key"] += len(edits) > before
    return splice(text, edits)
