"""Credentials named by markup rather than written ``key = value``: XML elements and
attribute pairs, the rows of a two-column key/value table, and values written under their
key (a YAML block scalar or list, a Terraform variable's default).

    <password>…</password>                       Maven settings.xml, Spring, Tomcat
    <add key="SmtpPassword" value="…" />         .NET appSettings, NuGet
    <property name="db.password" value="…"/>     Ant, Hibernate, Java properties as XML
    | DB_PASSWORD | … |                          a note's table of environment variables

The name decides, as a ``KEY=value`` key does (``assign.classify_key``): a password is
any value, a secret a random one, a weak name (``GPG_KEY``) only a long mixed one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from retriever.redact.assign import classify_key
from retriever.redact.core import MARK, Edit, Note, keep_first, marker
from retriever.redact.prose_values import password_ok
from retriever.redact.values import alnum_classes, high_entropy, is_placeholder, looks_random

# <ns:name attrs>value</ns:name> on one line; the value has no markup of its own.
_ELEMENT = re.compile(
    r"<(?:[A-Za-z_][\w.-]{0,40}:)?(?P<key>[A-Za-z_][\w.-]{0,79})(?:[ \t][^<>\n]{0,200})?>"
    r"[ \t]*(?P<v>[^<>\s][^<>\n]{0,500}?)[ \t]*</(?:[A-Za-z_][\w.-]{0,40}:)?(?P=key)>"
)
# <entry key="NAME">VALUE</entry>: the name in an attribute (Java properties as XML).
_KEYED = re.compile(
    r"<(?P<tag>[A-Za-z_][\w.:-]{0,40})[ \t][^<>\n]{0,200}?(?<![\w-])(?:key|name)[ \t]*=[ \t]*"
    r"(?P<q>[\"'])(?P<key>[A-Za-z_][\w.:-]{0,79})(?P=q)[^<>\n]{0,200}?>"
    r"[ \t]*(?P<v>[^<>\s][^<>\n]{0,500}?)[ \t]*</(?P=tag)>"
)
# key="NAME" value="VALUE" (either quote; value= may come first).
_PAIR = re.compile(
    r"(?<![\w-])(?:key|name)[ \t]*=[ \t]*(?P<q1>[\"'])(?P<key>[A-Za-z_][\w.:-]{0,79})(?P=q1)"
    r"[ \t]+value[ \t]*=[ \t]*(?P<q2>[\"'])(?P<v>[^\"'\n]{1,500})(?P=q2)"
    r"|(?<![\w-])value[ \t]*=[ \t]*(?P<q3>[\"'])(?P<v2>[^\"'\n]{1,500})(?P=q3)"
    r"[ \t]+(?:key|name)[ \t]*=[ \t]*(?P<q4>[\"'])(?P<key2>[A-Za-z_][\w.:-]{0,79})(?P=q4)",
    re.IGNORECASE,
)
# | NAME | VALUE | …: a table row whose first cell is a name (in backticks or not), in a
# blockquote, a list item or a comment too.
_ROW = re.compile(
    r"^(?:[ \t]*(?:>|[-*+]|<!--))*[ \t]*\|[ \t]*`?(?P<key>[A-Za-z_][\w.-]{0,79})`?[ \t]*\|[ \t]*`?(?P<v>[^|`\s][^|`\n]{0,500}?)`?"
    r"[ \t]*(?:\||\r?$)",
    re.MULTILINE,
)
_HINTS = ("pass", "pwd", "secret", "token", "key", "auth", "cred")


def _mixed(v: str) -> bool:
    """Ten characters or more mixing letters and digits (``ofmYuz9OXZC1_R6I``), which
    ``password_ok`` reads as a name when its only symbols are ``_`` and ``-``."""
    return len(v) >= 10 and alnum_classes(v) >= 2 and any(c.isdigit() for c in v)


def _judged(key: str, value: str, *, cell: bool = False) -> str:
    """The kind to redact ``value`` as under the name ``key``, or ''. In XML a password
    is any value, as in ``KEY=value``; in a table ``cell`` it must look like one (a
    column of a table is as often a type or a description: "| password | hashed |")."""
    found = classify_key(key)
    if found is None or value.startswith(MARK) or " " in value.strip():
        return ""
    tier, kind = found
    v = value.strip()
    if len(v) < 3 or is_placeholder(v) or v.startswith(("${", "$", "%", "{{", "#{")):
        return ""
    if tier == "password":
        return kind if not cell or password_ok(v, False) or _mixed(v) else ""
    return kind if (looks_random if tier == "secret" else high_entropy)(v) else ""


def _edits(text: str, start: int, end: int) -> list[Edit]:
    edits: list[Edit] = []
    for m in _ELEMENT.finditer(text, start, end):
        kind = _judged(m.group("key"), m.group("v"))
        if kind:
            edits.append((m.start("v"), m.end("v"), marker(kind)))
    for m in _KEYED.finditer(text, start, end):
        kind = _judged(m.group("key"), m.group("v"))
        if kind:
            edits.append((m.start("v"), m.end("v"), marker(kind)))
    for m in _PAIR.finditer(text, start, end):
        group = "v" if m.group("v") is not None else "v2"
        kind = _judged(m.group("key") or m.group("key2"), m.group(group))
        if kind:
            edits.append((m.start(group), m.end(group), marker(kind)))
    for m in _ROW.finditer(text, start, end):
        value = m.group("v").rstrip()
        kind = _judged(m.group("key"), value, cell=True)
        if kind:
            edits.append((m.start("v"), m.start("v") + len(value), marker(kind)))
    return edits


# A key whose value is below it: a YAML block scalar (``password: >``) or list
# (``tokens:`` then ``  - …``), or a Terraform variable (``variable "db_password" {`` then
# ``default = "…"``).
_KEY_ABOVE = re.compile(
    r"(?P<indent>[ \t]*)(?:-[ \t]+)?(?P<key>[A-Za-z_][\w.-]{0,79})[ \t]*:[ \t]*"
    r"(?P<block>[>|][+-]?)?[ \t]*\r?"
)
_VARIABLE = re.compile(r"[ \t]*variable[ \t]+\"(?P<key>[A-Za-z_][\w.-]{0,79})\"[ \t]*\{[ \t]*\r?")
_ITEM = re.compile(r"(?P<indent>[ \t]*)-[ \t]+[\"']?(?P<v>[^\s\"'#][^\s\"']{0,500})[\"']?[ \t]*\r?")
_SCALAR = re.compile(r"(?P<indent>[ \t]+)(?P<v>[^\s#][^\s]{0,500})[ \t]*\r?")
_DEFAULT = re.compile(r"[ \t]*default[ \t]*=[ \t]*\"(?P<v>[^\"\n]{1,500})\"[ \t]*\r?")
# A Kubernetes, compose or CI environment entry: ``- name: DB_PASSWORD`` and, on a line
# below, ``value: …``.
_NAME_ENTRY = re.compile(
    r"[ \t]*(?:-[ \t]+)?name[ \t]*:[ \t]*[\"']?(?P<key>[A-Za-z_][\w.-]{0,79})[\"']?[ \t]*\r?"
)
_ENTRY_VALUE = re.compile(
    r"[ \t]*value[ \t]*:[ \t]*(?P<q>[\"']?)(?P<v>[^\s\"'#][^\s\"']{0,500})(?P=q)[ \t]*\r?"
)
_ENTRY_LINES = 2  # its value: on the next line, or after one other field
_BELOW_LINES = 8  # a variable block's lines read for its default; a list's items


def _lines_after(text: str, end: int) -> Iterator[tuple[int, int]]:
    """The lines after the one ending at ``end``, at most ``_BELOW_LINES`` (lazily: most
    keys are read no further than their next line)."""
    pos = end + 1
    for _ in range(_BELOW_LINES):
        if pos > len(text):
            return
        stop = text.find("\n", pos)
        stop = len(text) if stop < 0 else stop
        yield pos, stop
        pos = stop + 1


def _below_edits(text: str, start: int, end: int) -> list[Edit]:
    """The values written under a key that names a credential (see ``_KEY_ABOVE``)."""
    edits: list[Edit] = []
    if (var := _VARIABLE.fullmatch(text, start, end)) is not None:
        for a, b in _lines_after(text, end):
            if text.startswith("}", a) or text[a:b].strip() == "}":
                break
            if (m := _DEFAULT.fullmatch(text, a, b)) and (kind := _judged(var["key"], m["v"])):
                edits.append((m.start("v"), m.end("v"), marker(kind)))
        return edits
    if (entry := _NAME_ENTRY.fullmatch(text, start, end)) is not None:
        for (a, b), _ in zip(_lines_after(text, end), range(_ENTRY_LINES), strict=False):
            m = _ENTRY_VALUE.fullmatch(text, a, b)
            if m is not None and (kind := _judged(entry["key"], m["v"])):
                edits.append((m.start("v"), m.end("v"), marker(kind)))
                break
        return edits
    head = _KEY_ABOVE.fullmatch(text, start, end)
    if head is None or classify_key(head["key"]) is None:
        return edits
    depth = len(head["indent"].expandtabs())
    for a, b in _lines_after(text, end):
        m = (_SCALAR if head["block"] else _ITEM).fullmatch(text, a, b)
        if m is None or (head["block"] and len(m["indent"].expandtabs()) <= depth):
            break
        kind = _judged(head["key"], m["v"])
        if not kind:
            break
        edits.append((m.start("v"), m.end("v"), marker(kind)))
        if head["block"]:
            break  # one scalar: the value (a key's PEM block is the PEM stage's)
    return edits


def redact_markup(note: Note, counts: Counter[str]) -> str:
    text = note.text
    edits: list[Edit] = []
    for start, end in note.lines(_HINTS):
        if text.find("<", start, end) >= 0 or text.find("|", start, end) >= 0:
            edits += _edits(text, start, end)
        if text.find(":", start, end) >= 0 or text.find("variable", start, end) >= 0:
            edits += _below_edits(text, start, end)
    return keep_first(text, sorted(set(edits)), counts)
