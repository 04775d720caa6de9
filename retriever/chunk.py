"""Parse one markdown note: frontmatter, title, tags, links and heading-aware chunks (pure).

Design notes (the choices a caller may care about):

* Line numbers are 1-based and always refer to the original file: frontmatter lines count,
  and ``\\r\\n``, lone ``\\r`` and ``\\n`` each end a line. A chunk's ``text`` is exactly the
  source lines ``start_line..end_line`` joined with ``"\\n"`` (a leading BOM is dropped).
* Block structure comes from one block-level markdown-it parse per note (inline parsing is
  disabled: it is the expensive part and chunking only needs block line ranges). Links and
  inline tags are found with precompiled regexes on the body with code blocks and inline
  code spans blanked out.
* Title: frontmatter ``title``, else the first top-level H1, else the file name stem.
* ``heading_trail`` is ``(title, H1?, H2?, H3?)`` where the H1 is included only when it is not
  just the title again (casefold comparison). So the usual ``# Title`` + ``## Section`` note
  gives ``(title, H2, H3)``; a note with a frontmatter title and a different H1, or with several
  H1 sections, keeps that H1 as context.
* Sections start at top-level H1-H3 headings. A section larger than ``max_chars`` is split at
  block boundaries; oversized lists split between top-level items, oversized paragraphs and
  blockquotes (without code or tables inside) between lines; code, tables and HTML are never
  cut. Pieces under ``min_chars`` merge into the previous piece of the same section (the first
  piece into the next). A section that is only a heading line is merged into the next
  section's first chunk (or, with nothing adjacent after it, into the previous chunk; alone as
  a last resort so no text is lost).
* Sections named Related / See also / Links / References / Backlinks / Further reading /
  Voir aussi / Liens / Références (H2 or H3, any case, optional colon; H3s under such an H2
  too) give no chunks; chunks never span across them. Their links are still extracted.
* Same-note links (``[[#heading]]``, ``[[#^block]]``) are skipped: they add no edge.
  Markdown images ``![alt](path)`` are kind ``"markdown"`` (they resolve relative to the
  note like any markdown link); only ``![[...]]`` is ``"embed"``. Reference-style markdown
  links (``[text][ref]``) are not extracted.
* Tags are deduplicated case-insensitively (Obsidian treats tags that way), first spelling
  kept. Frontmatter ``aliases`` as a string is one alias (not comma-split).
* ``created``/``updated``: ISO strings for YAML dates; integer epoch values (Dendron writes
  epoch milliseconds) become ISO-8601 UTC; other scalars are returned as given (``str``).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any
from urllib.parse import unquote

import yaml
from markdown_it import MarkdownIt

from retriever import md_dispatch, md_rules

CHUNKER_VERSION = "1"


@dataclass(frozen=True, slots=True)
class Chunk:
    ordinal: int
    text: str
    heading_trail: tuple[str, ...]
    start_line: int
    end_line: int
    content_type: str


@dataclass(frozen=True, slots=True)
class Link:
    target: str
    kind: str
    line: int
    anchor: str | None
    alias: str | None


@dataclass(slots=True)
class ParsedNote:
    title: str
    frontmatter: dict[str, Any]
    tags: list[str]
    aliases: list[str]
    note_type: str | None
    created: str | None
    updated: str | None
    chunks: list[Chunk]
    links: list[Link]
    frontmatter_error: str | None
    title_source: str = "filename"  # "frontmatter" | "h1" | "filename"


# One shared block-level parser: the inline core rule is off (we never use inline tokens, and
# inline parsing is most of markdown-it's cost); GFM tables on; raw HTML blocks recognised.
_MD = MarkdownIt("commonmark", {"html": True}).enable("table").disable("inline")
# Tables: the same decisions without a token per row and cell (see md_rules).
_MD.block.ruler.at("table", md_rules.table, {"alt": ["paragraph", "reference"]})
# Each line tries only the block rules that can match it (see md_dispatch).
md_dispatch.dispatch_by_first_char(_MD)
# markdown-it compiles a ruler's chains at their first use, and not atomically: two threads
# parsing at once for the first time (the MCP server, the service) could get no tokens.
_MD.core.ruler.getRules("")
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_FRONTMATTER_NODES = 100_000  # far beyond any real frontmatter, far below a YAML bomb

# Block kinds; the numeric value doubles as the per-line content-type code.
_NONE, _CODE, _TABLE, _LIST, _NARR, _HEADING, _QUOTE, _HTML = range(8)
_KIND_BY_TYPE = {
    "paragraph_open": _NARR,
    "heading_open": _HEADING,
    "bullet_list_open": _LIST,
    "ordered_list_open": _LIST,
    "blockquote_open": _QUOTE,
    "table_open": _TABLE,
    "fence": _CODE,
    "code_block": _CODE,
    "hr": _NARR,
    "html_block": _HTML,
}
# What each block kind counts as when deciding a chunk's content_type.
_LINE_TYPE = {
    _CODE: _CODE,
    _TABLE: _TABLE,
    _LIST: _LIST,
    _NARR: _NARR,
    _HEADING: _NARR,
    _QUOTE: _NARR,
    _HTML: _NARR,
}

_SKIP_TITLES = frozenset(
    {
        "related",
        "see also",
        "links",
        "references",
        "backlinks",
        "further reading",
        "voir aussi",
        "liens",
        "références",
    }
)
_FRONTMATTER_LINK_KEYS = ("references", "related", "links")

# Inline code spans (CommonMark: a run of n backticks closed by exactly n), never across a
# blank line because a blank line ends the paragraph.
# Every pattern starts with a literal so re can scan for it quickly (lookbehinds come after).
_CODE_SPAN_RE = re.compile(r"(`(?<!``)`*)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)
_NOT_NEWLINE_RE = re.compile(r"[^\n]")
_WIKI_RE = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
# Wiki link | markdown link. One alternation so matches never overlap and come in order; a
# preceding '!' (embed/image) is checked by hand to keep the literal '[' first.
_LINK_RE = re.compile(
    r"\[\[(?P<winner>[^\[\]\n]+?)\]\]"
    r"|\[(?P<mtext>(?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]"
    r"\([ \t]*(?:<(?P<mangle>[^<>\n]*)>|(?P<mbare>[^\s()<>]*(?:\([^\s()]*\)[^\s()]*)*))"
    r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*\)"
)
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_DENDRON_PREFIX_RE = re.compile(r"^dendron://[^/|#]*/")
# Obsidian-style inline tag: '#' at line start or after whitespace.
_TAG_RE = re.compile(r"#(?<!\S#)([\w/\-]+)")
_TAG_SPLIT_RE = re.compile(r"[,\s]+")
_FM_KEY_RE = re.compile(r"^([^\s#:\-][^:]*?)\s*:(?:\s|$)")


@dataclass(slots=True)
class _Block:
    kind: int
    start: int  # 0-based line in the file
    end: int  # exclusive, trailing blank lines trimmed
    level: int = 0  # heading level
    heading: str = ""
    items: list[tuple[int, int]] | None = None  # top-level list items
    rigid: bool = False  # contains code or a table: never split by lines


@dataclass(slots=True)
class _Section:
    heading: _Block | None
    trail: tuple[str, ...]
    skip: bool
    blocks: list[_Block]


def parse_note(text: str, path: str, *, min_chars: int = 30, max_chars: int = 2000) -> ParsedNote:
    """Parse a note's text (any line endings) into metadata, chunks and links."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")

    body_start, fm_lines = _split_frontmatter(lines)
    fm_error: str | None = None
    raw_fm: dict[str, Any] = {}
    if fm_lines is not None:
        raw_fm, fm_error = _load_yaml(fm_lines)
    fm: dict[str, Any] = _json_safe(raw_fm)
    lower_fm = {k.lower(): v for k, v in fm.items()}

    tokens = _MD.parse("\n".join(lines[body_start:])) if body_start < len(lines) else []
    blocks, code_ranges = _collect_blocks(tokens, lines, body_start)

    title = _scalar_str(lower_fm.get("title"))
    title_source = "frontmatter"
    if not title:
        first_h1 = next((b.heading for b in blocks if b.kind == _HEADING and b.level == 1), "")
        title = first_h1 or _stem(path)
        title_source = "h1" if first_h1 else "filename"

    chunks = _build_chunks(lines, blocks, title, min_chars, max_chars)

    scan = _scan_text(lines, body_start, code_ranges)
    links = _frontmatter_links(lower_fm, fm_lines) if fm_lines else []
    links.extend(_body_links(scan))

    tags = _frontmatter_tags(lower_fm)
    if "#" in scan.text:
        tags.extend(m.group(1) for m in _TAG_RE.finditer(scan.text) if not m.group(1).isdigit())
    aliases = _dedupe(
        [*_strings(lower_fm.get("aliases")), *_strings(lower_fm.get("alias"))], fold=False
    )

    return ParsedNote(
        title=title,
        frontmatter=fm,
        tags=_dedupe(tags, fold=True),
        aliases=aliases,
        note_type=_scalar_str(lower_fm.get("type")),
        created=_date_str(_first_present(lower_fm, "created", "date")),
        updated=_date_str(_first_present(lower_fm, "updated", "modified")),
        chunks=chunks,
        title_source=title_source,
        links=links,
        frontmatter_error=fm_error,
    )


# --- frontmatter ------------------------------------------------------------------------


def _split_frontmatter(lines: list[str]) -> tuple[int, list[str] | None]:
    """(index of the first body line, frontmatter lines or None). Needs a closing fence."""
    if not lines or lines[0].rstrip() != "---":
        return 0, None
    for i in range(1, len(lines)):
        fence = lines[i].rstrip()
        if fence == "---" or fence == "...":
            return i + 1, lines[1:i]
    return 0, None


def _load_yaml(fm_lines: list[str]) -> tuple[dict[str, Any], str | None]:
    source = "\n".join(fm_lines)
    if not source.strip():
        return {}, None
    try:
        size = _expanded_size(yaml.compose(source, Loader=_YAML_LOADER), {})
        if size > MAX_FRONTMATTER_NODES:  # anchors and aliases can nest a "billion laughs"
            return {}, f"frontmatter expands to {size} values (more than {MAX_FRONTMATTER_NODES})"
        data = yaml.load(source, Loader=_YAML_LOADER)
    except Exception as exc:  # YAML errors, bad timestamps, deep recursion: never fatal
        message = " ".join(str(exc).split()) or type(exc).__name__
        return {}, f"{type(exc).__name__}: {message}"[:500]
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, f"frontmatter is not a mapping (got {type(data).__name__})"
    return data, None


def _expanded_size(node: Any, memo: dict[int, int]) -> int:
    """How many values the YAML node stands for once aliases are expanded (a node reached
    twice counts twice), computed once per node: linear in the text, whatever it expands to."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a node inside itself counts once
    if isinstance(node, yaml.SequenceNode):
        total = 1 + sum(_expanded_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        total = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    else:
        total = 1
    memo[key] = total
    return total


def _json_safe(value: Any, depth: int = 0) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, _dt.date | _dt.time):  # datetime is a date subclass
        return value.isoformat()
    if depth > 32:  # YAML anchors can build self-referencing structures
        return str(value)
    if isinstance(value, dict):
        return {_json_key(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, set | frozenset):  # YAML's !!set: in an order no hash seed moves
        return sorted((_json_safe(v, depth + 1) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [_json_safe(v, depth + 1) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, _dt.date | _dt.time):
        return key.isoformat()
    return str(key)


def _strings(value: Any) -> list[str]:
    """Flatten a frontmatter value (scalar or nested lists) to non-empty stripped strings."""
    if value is None or isinstance(value, dict):
        return []
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    text = str(value).strip()
    return [text] if text else []


def _scalar_str(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text or None


def _first_present(fm: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        value = fm.get(key)
        if value is not None and value != "":
            return value
    return None


def _date_str(value: Any) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        # Epoch seconds (>= 2001-09) or milliseconds (Dendron); small numbers are years etc.
        seconds = value / 1000 if value >= 1e11 else value
        if 1e9 <= seconds < 1e11:
            try:
                return _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC).isoformat()
            except (OverflowError, OSError, ValueError):
                pass
    return _scalar_str(value)


def _frontmatter_tags(fm: dict[str, Any]) -> list[str]:
    tags: list[str] = []
    for raw in (*_strings(fm.get("tags")), *_strings(fm.get("tag"))):
        for part in _TAG_SPLIT_RE.split(raw):
            tag = part.lstrip("#")
            if tag:
                tags.append(tag)
    return tags


def _dedupe(items: list[str], *, fold: bool) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.casefold() if fold else item
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _stem(path: str) -> str:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name[:-3] if name.lower().endswith(".md") and len(name) > 3 else name


# --- blocks and chunks -------------------------------------------------------------------


def _collect_blocks(
    tokens: list[Any], lines: list[str], offset: int
) -> tuple[list[_Block], list[tuple[int, int]]]:
    """Top-level blocks (absolute line ranges) plus the ranges of every code block."""
    blocks: list[_Block] = []
    code_ranges: list[tuple[int, int]] = []
    for i, tok in enumerate(tokens):
        tmap = tok.map
        if tmap is None:
            continue
        ttype = tok.type
        if tok.level == 0:
            kind = _KIND_BY_TYPE.get(ttype)
            if kind is None:
                continue
            start, end = tmap[0] + offset, tmap[1] + offset
            while end > start + 1 and not lines[end - 1].strip():
                end -= 1
            block = _Block(kind, start, end)
            if kind == _HEADING:
                block.level = int(tok.tag[1])
                block.heading = " ".join(tokens[i + 1].content.split())
            elif kind == _CODE:
                code_ranges.append((start, end))
            blocks.append(block)
        elif ttype == "list_item_open" and tok.level == 1:
            # Item of the current top-level list: the split points for an oversized list.
            start, end = tmap[0] + offset, tmap[1] + offset
            while end > start + 1 and not lines[end - 1].strip():
                end -= 1
            last = blocks[-1]
            if last.items is None:
                last.items = []
            last.items.append((start, end))
        elif ttype in ("fence", "code_block"):
            code_ranges.append((tmap[0] + offset, tmap[1] + offset))
            if blocks:
                blocks[-1].rigid = True
        elif ttype == "table_open" and blocks:
            blocks[-1].rigid = True
    return blocks, code_ranges


def _sections(blocks: list[_Block], title: str) -> list[_Section]:
    folded_title = title.casefold()
    sections = [_Section(None, (title,), False, [])]
    h1 = h2 = h3 = ""
    skip2 = skip3 = False
    for block in blocks:
        if block.kind != _HEADING or block.level > 3:
            sections[-1].blocks.append(block)
            continue
        if block.level == 1:
            h1 = "" if block.heading.casefold() == folded_title else block.heading
            h2 = h3 = ""
            skip2 = skip3 = False
        elif block.level == 2:
            h2, h3 = block.heading, ""
            skip2, skip3 = _is_skip_title(h2), False
        else:
            h3 = block.heading
            skip3 = _is_skip_title(h3)
        trail = (title, *(h for h in (h1, h2, h3) if h))
        sections.append(_Section(block, trail, skip2 or skip3, []))
    return sections


def _is_skip_title(heading: str) -> bool:
    name = heading.strip().strip("*_").strip().rstrip(":").strip().casefold()
    return unicodedata.normalize("NFC", name) in _SKIP_TITLES


Piece = tuple[int, int, tuple[str, ...]]  # (first line, end line, heading trail)


def _build_chunks(
    lines: list[str], blocks: list[_Block], title: str, min_chars: int, max_chars: int
) -> list[Chunk]:
    if not blocks:
        return []
    # prefix[i] = characters before line i (newlines included): O(1) span sizes.
    prefix = [0, *accumulate(len(line) + 1 for line in lines)]

    def size(start: int, end: int) -> int:
        return prefix[end] - prefix[start] - 1

    pieces = _pieces(lines, blocks, title, size, min_chars, max_chars)
    line_type = _line_types(len(lines), blocks)
    chunks: list[Chunk] = []
    for start, end, trail in pieces:
        text = "\n".join(lines[start:end])
        if not text.strip():
            continue
        chunks.append(
            Chunk(
                ordinal=len(chunks),
                text=text,
                heading_trail=trail,
                start_line=start + 1,
                end_line=end,
                content_type=_content_type(line_type, start, end),
            )
        )
    return chunks


def _line_types(n_lines: int, blocks: list[_Block]) -> bytearray:
    """Per-line content type for content_type; blank lines between blocks stay _NONE."""
    line_type = bytearray(n_lines)
    for block in blocks:
        line_type[block.start : block.end] = bytes([_LINE_TYPE[block.kind]]) * (
            block.end - block.start
        )
    return line_type


def _pieces(
    lines: list[str],
    blocks: list[_Block],
    title: str,
    size: Callable[[int, int], int],
    min_chars: int,
    max_chars: int,
) -> list[Piece]:
    """Line ranges of the chunks, section by section; a heading with no body of its own
    joins the next piece (or the previous one, when nothing was skipped in between)."""
    pieces: list[Piece] = []
    pending: Piece | None = None  # heading-only section(s)
    pending_adjacent = False  # pending directly follows pieces[-1] (no skipped section between)
    adjacent = False  # the next section directly follows pieces[-1]

    def flush_pending() -> None:
        nonlocal pending
        if pending is None:
            return
        if pieces and pending_adjacent:
            start, _, trail = pieces[-1]
            pieces[-1] = (start, pending[1], trail)
        else:
            pieces.append(pending)
        pending = None

    for section in _sections(blocks, title):
        if section.skip:
            flush_pending()
            adjacent = False
            continue
        if not section.blocks:
            if section.heading is None:
                continue
            head = section.heading
            if pending is None:
                pending = (head.start, head.end, section.trail)
                pending_adjacent = adjacent
            else:
                pending = (pending[0], head.end, pending[2])
            continue
        ranges = _split_section(section, lines, size, min_chars, max_chars)
        if pending is not None:
            ranges[0] = (pending[0], ranges[0][1])
            pending = None
        pieces.extend((start, end, section.trail) for start, end in ranges)
        adjacent = True
    flush_pending()
    return pieces


def _split_section(
    section: _Section,
    lines: list[str],
    size: Callable[[int, int], int],
    min_chars: int,
    max_chars: int,
) -> list[tuple[int, int]]:
    """Line ranges [start, end) of one section's pieces (the section has body blocks)."""
    units: list[tuple[int, int]] = []
    for block in section.blocks:
        if size(block.start, block.end) <= max_chars:
            units.append((block.start, block.end))
        elif block.kind == _LIST and block.items and len(block.items) > 1:
            units.extend(block.items)
        elif block.kind in (_NARR, _QUOTE) and not block.rigid:
            units.extend((i, i + 1) for i in range(block.start, block.end) if lines[i].strip())
        else:
            units.append((block.start, block.end))  # code, table, HTML: never cut

    ranges: list[tuple[int, int]] = []
    if section.heading is not None:
        cur_start, cur_end = section.heading.start, section.heading.end
        heading_only = True  # a heading always takes the following content with it
    else:
        cur_start, cur_end = units[0]
        units = units[1:]
        heading_only = False
    for start, end in units:
        if heading_only or size(cur_start, end) <= max_chars:
            cur_end = end
        else:
            ranges.append((cur_start, cur_end))
            cur_start, cur_end = start, end
        heading_only = False
    ranges.append((cur_start, cur_end))

    # Small pieces join the previous piece of the section (the first one joins the next).
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if merged and size(start, end) < min_chars:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    if len(merged) > 1 and size(*merged[0]) < min_chars:
        merged[0:2] = [(merged[0][0], merged[1][1])]
    return merged


def _content_type(line_type: bytearray, start: int, end: int) -> str:
    total = (end - start) - line_type.count(_NONE, start, end)
    if total:
        half = total / 2
        if line_type.count(_CODE, start, end) > half:
            return "code"
        if line_type.count(_TABLE, start, end) > half:
            return "table"
        if line_type.count(_LIST, start, end) > half:
            return "list"
    return "narrative"


# --- links ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Scan:
    """Body text with frontmatter, code blocks and inline code blanked (same line layout)."""

    text: str
    lines: list[str]
    _starts: list[int] | None = None

    def line_of(self, pos: int) -> int:
        if self._starts is None:
            self._starts = [0, *accumulate(len(line) + 1 for line in self.lines)]
        return bisect_right(self._starts, pos)  # 1-based line number


def _scan_text(lines: list[str], body_start: int, code_ranges: list[tuple[int, int]]) -> _Scan:
    scan_lines = [""] * body_start + lines[body_start:]
    for start, end in code_ranges:
        scan_lines[start:end] = [""] * (end - start)
    text = "\n".join(scan_lines)
    if "`" in text:
        text = _CODE_SPAN_RE.sub(lambda m: _NOT_NEWLINE_RE.sub(" ", m.group(0)), text)
    return _Scan(text, scan_lines)


def _body_links(scan: _Scan) -> list[Link]:
    text = scan.text
    if "[" not in text:
        return []
    links: list[Link] = []
    for m in _LINK_RE.finditer(text):
        inner = m.group("winner")
        if inner is not None:
            parsed = _parse_wiki(inner)
            if parsed is not None:
                start = m.start()
                kind = "embed" if start and text[start - 1] == "!" else "wiki"
                links.append(Link(parsed[0], kind, scan.line_of(m.start()), parsed[1], parsed[2]))
            continue
        url = m.group("mangle")
        if url is None:
            url = m.group("mbare")
        target = _parse_url(url)
        if target is not None:
            alias = " ".join(m.group("mtext").split()) or None
            links.append(Link(target[0], "markdown", scan.line_of(m.start()), target[1], alias))
    return links


def _parse_wiki(inner: str) -> tuple[str, str | None, str | None] | None:
    """(target, anchor, alias) of a ``[[...]]`` body, or None for same-note/empty links."""
    left, bar, right = inner.replace("\\|", "|").partition("|")
    target, hash_, anchor = left.partition("#")
    target = _DENDRON_PREFIX_RE.sub("", target.strip())
    if not target:
        return None
    alias = _DENDRON_PREFIX_RE.sub("", right.strip()) if bar else ""
    return target, (anchor.strip() or None) if hash_ else None, alias or None


def _parse_url(url: str) -> tuple[str, str | None] | None:
    """(decoded path, anchor) of a relative markdown link target, None for URLs/anchors."""
    url = url.strip()
    if not url or url.startswith(("#", "//")) or _SCHEME_RE.match(url):
        return None
    path, hash_, fragment = url.partition("#")
    path = unquote(path.partition("?")[0]).strip()
    if not path:
        return None
    return path, (unquote(fragment).strip() or None) if hash_ else None


def _frontmatter_links(fm: dict[str, Any], fm_lines: list[str]) -> list[Link]:
    links: list[Link] = []
    key_ranges: dict[str, tuple[int, int]] | None = None
    for key in _FRONTMATTER_LINK_KEYS:
        values = _strings(fm.get(key))
        if not values:
            continue
        if key_ranges is None:
            key_ranges = _frontmatter_key_ranges(fm_lines)
        first, last = key_ranges.get(key, (0, 0))
        cursor = first
        for value in values:
            # Best-effort line: the first line of this key's block (from the previous value
            # on) that contains the value; the key's own line otherwise. File line = index + 2.
            for i in range(cursor, last):
                if value in fm_lines[i]:
                    cursor = i
                    break
            line = cursor + 2
            for target, anchor, alias in _frontmatter_targets(value):
                links.append(Link(target, "frontmatter", line, anchor, alias))
    return links


def _frontmatter_key_ranges(fm_lines: list[str]) -> dict[str, tuple[int, int]]:
    """Lower-cased top-level key -> [first, last) line indexes of its block."""
    starts: list[tuple[int, str]] = []
    for i, line in enumerate(fm_lines):
        m = _FM_KEY_RE.match(line)
        if m is not None:
            starts.append((i, m.group(1).strip("'\"").lower()))
    ranges: dict[str, tuple[int, int]] = {}
    for n, (i, key) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(fm_lines)
        ranges.setdefault(key, (i, end))
    return ranges


def _frontmatter_targets(value: str) -> list[tuple[str, str | None, str | None]]:
    wiki = [p for m in _WIKI_RE.finditer(value) if (p := _parse_wiki(m.group(1)))]
    if wiki or "[[" in value:
        return wiki
    m = _LINK_RE.search(value)
    if m is not None and m.group("mtext") is not None:
        url = m.group("mangle") if m.group("mangle") is not None else m.group("mbare")
        parsed = _parse_url(url)
        alias = m.group("mtext").strip() or None
        return [(parsed[0], parsed[1], alias)] if parsed else []
    if _SCHEME_RE.match(value) and not value.startswith("dendron://"):
        return []
    parsed_plain = _parse_wiki(value)  # plain "Note", "folder/Note.md", "Note#Heading"
    return [parsed_plain] if parsed_plain else []
