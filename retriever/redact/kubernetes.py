"""Kubernetes ``kind: Secret`` manifests: the values under ``data:`` and ``stringData:``."""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter

from retriever.redact.core import MARK, Edit, Note, marker, splice
from retriever.redact.values import B64, MASK_CHARS, is_masked, is_placeholder

# A `kind: Secret` line; its document's top-level `data:` / `stringData:` holds the values.
# A `kind: Secret` line, maybe the first key of a list item (`- kind: Secret`).
_K8S_KIND = re.compile(
    r"""^([ \t]*(?P<item>-[ \t]+)?)["']?kind["']?[ \t]*:[ \t]*["']?Secret["']?[ \t]*(?:#.*)?$"""
)

_K8S_ANY = re.compile(
    r"""^[ \t]*(?:-[ \t]+)?["']?kind["']?[ \t]*:[ \t]*["']?Secret""", re.MULTILINE
)

_K8S_DATA = re.compile(r"""["']?(data|stringData)["']?[ \t]*:[ \t]*(?:#.*)?""")

# `key: value`, and a trailing `# comment` that is not part of the value.
_K8S_ENTRY = re.compile(r"""["']?[\w.\-]+["']?[ \t]*:(?:[ \t]+(?P<v>\S.*?))?(?:[ \t]+#.*)?[ \t]*""")

_YAML_KEY = re.compile(r"""["']?[\w.\-]+["']?[ \t]*:(?:[ \t]|$)|#|- """)

_BLOCK_SCALAR = re.compile(r"[|>][+-]?\d?")


def _yaml_lines(text: str) -> list[tuple[int, int, int]]:
    """(start, end, indent) of every line; ``end`` excludes the break (and a CR)."""
    out = []
    pos = 0
    for line in text.split("\n"):
        body = line[:-1] if line.endswith("\r") else line
        out.append((pos, pos + len(body), len(body) - len(body.lstrip(" \t"))))
        pos += len(line) + 1
    return out


def _doc_bounds(
    text: str, lines: list[tuple[int, int, int]], at: int, base: int, item: bool
) -> tuple[int, int]:
    """Line range [lo, hi) of the YAML document around line ``at``, whose keys sit at
    column ``base``: up to a `---`/`...` separator, a code fence, a line indented less, or
    a top-level non-key line (prose around a bare manifest). A list item (``item``) starts
    at its own line."""

    def inside(i: int) -> bool:
        start, end, ind = lines[i]
        body = text[start + ind : end]
        if not body.strip():
            return True
        if body.rstrip() in ("---", "...") or body.startswith(("```", "~~~")) or ind < base:
            return False
        return ind > base or bool(_YAML_KEY.match(body))

    lo = at
    while not item and lo > 0 and inside(lo - 1):
        lo -= 1
    hi = at + 1
    while hi < len(lines) and inside(hi):
        hi += 1
    return lo, hi


def _k8s_value_ok(v: str, plain: bool) -> bool:
    v = v.strip("\"'")
    if not v or is_placeholder(v):
        return False
    if plain:
        return True
    if not B64.fullmatch(v):
        return False  # a template or a flow value, not base64
    try:
        raw = base64.b64decode(v + "=" * (-len(v) % 4), altchars=b"-_" if "-" in v else None)
        decoded = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return True  # binary key material
    if decoded.startswith(("{", "[")) and len(decoded) > 8:
        return True  # a config file (.dockerconfigjson), not a template placeholder
    # A mask test on short real values ("app" has two letters) would keep too much.
    masked_only = is_masked(decoded) and not set(decoded) <= MASK_CHARS
    return not (decoded.isprintable() and is_placeholder(decoded) and not masked_only)


def _k8s_block_edits(
    text: str, lines: list[tuple[int, int, int]], i: int, hi: int, plain: bool
) -> list[Edit]:
    """Edits for the entries under the `data:`/`stringData:` key on line ``i``."""
    edits: list[Edit] = []
    parent = lines[i][2]
    in_block = -1  # indent of the entry whose block scalar (`key: |`) we are inside
    for j in range(i + 1, hi):
        start, end, ind = lines[j]
        if start + ind == end:
            continue  # blank
        if ind <= parent:
            break
        if in_block >= 0 and ind > in_block:
            if not text.startswith(MARK, start + ind):  # idempotent
                edits.append((start + ind, end, marker("kubernetes_secret")))
            continue
        m = _K8S_ENTRY.fullmatch(text, start + ind, end)
        if m is None or m.group("v") is None:
            in_block = -1
            continue
        v = m.group("v")
        if _BLOCK_SCALAR.fullmatch(v):
            in_block = ind
            continue
        in_block = -1
        vs, ve = m.span("v")
        if v[0] in "\"'" and len(v) >= 2 and v[-1] == v[0]:
            vs, ve = vs + 1, ve - 1
        if _k8s_value_ok(text[vs:ve], plain):
            edits.append((vs, ve, marker("kubernetes_secret")))
    return edits


def redact_k8s_secrets(note: Note, counts: Counter[str]) -> str:
    """Values under `data:` (base64) and `stringData:` (plain) of a `kind: Secret` document."""
    text = note.text
    if "Secret" not in text or "ata" not in text or not _K8S_ANY.search(text):
        return text
    lines = _yaml_lines(text)
    edits: list[Edit] = []
    done_until = -1
    for at, (start, end, _) in enumerate(lines):
        if at < done_until or "Secret" not in text[start:end]:
            continue
        km = _K8S_KIND.match(text[start:end])
        if km is None:
            continue
        base = len(km.group(1))
        lo, hi = _doc_bounds(text, lines, at, base, km.group("item") is not None)
        done_until = hi
        for i in range(lo, hi):
            s, e, ind = lines[i]
            dm = _K8S_DATA.fullmatch(text, s + ind, e)
            if ind == base and dm is not None:
                edits += _k8s_block_edits(text, lines, i, hi, dm.group(1) == "stringData")
    counts["kubernetes_secret"] += len(edits)
    if not counts["kubernetes_secret"]:
        del counts["kubernetes_secret"]
    return splice(text, sorted(edits))
