"""Tests for retriever.chunk: chunk boundaries, exact line numbers, metadata and links."""

from __future__ import annotations

import json
import pickle
import random
import re
from pathlib import Path
from typing import Any

import pytest

from retriever.chunk import CHUNKER_VERSION, Chunk, Link, ParsedNote, parse_note

FIXTURES = Path(__file__).parent / "fixtures" / "chunk"
ALL_FIXTURES = sorted(FIXTURES.glob("*.md"))
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def read(name: str) -> str:
    # Bytes then decode: keeps CRLF exactly as stored (open() would translate it).
    return (FIXTURES / name).read_bytes().decode("utf-8")


def parse(name: str, **kwargs: int) -> ParsedNote:
    return parse_note(read(name), f"notes/{name}", **kwargs)


def spans(note: ParsedNote) -> list[tuple[int, int]]:
    return [(c.start_line, c.end_line) for c in note.chunks]


def assert_exact_lines(text: str, note: ParsedNote) -> None:
    """Every chunk is exactly the original lines start_line..end_line (1-based)."""
    lines = LINE_BREAK.split(text.removeprefix("\ufeff"))
    for chunk in note.chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])


def links_of(note: ParsedNote) -> list[tuple[str, str, int, str | None, str | None]]:
    return [(k.target, k.kind, k.line, k.anchor, k.alias) for k in note.links]


# --- invariants over every fixture ----------------------------------------------------------


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("max_chars", [120, 400, 2000])
def test_fixture_invariants(path: Path, max_chars: int) -> None:
    text = path.read_bytes().decode("utf-8")
    note = parse_note(text, path.name, max_chars=max_chars)
    assert_exact_lines(text, note)
    n_lines = len(LINE_BREAK.split(text))
    previous_end = 0
    for i, chunk in enumerate(note.chunks):
        assert chunk.ordinal == i
        assert previous_end < chunk.start_line <= chunk.end_line <= n_lines
        assert chunk.text.strip()
        assert chunk.text == chunk.text.strip("\n")  # no leading/trailing blank lines
        assert chunk.heading_trail[0] == note.title
        assert chunk.content_type in {"narrative", "code", "table", "list"}
        previous_end = chunk.end_line
    lines = LINE_BREAK.split(text)
    if lines[0] == "---" and "---" in lines[1:]:
        # Frontmatter is never chunked: chunks start after the closing fence.
        closing = lines.index("---", 1) + 1
        assert all(c.start_line > closing for c in note.chunks)
    for link in note.links:
        assert 1 <= link.line <= n_lines
        assert link.target
        assert link.kind in {"wiki", "embed", "markdown", "frontmatter"}
    json.dumps(note.frontmatter)  # always JSON-serialisable


def test_line_ending_variants_give_identical_results() -> None:
    text = read("code_fences.md")
    expected = parse_note(text, "code_fences.md")
    for variant in (text.replace("\n", "\r\n"), text.replace("\n", "\r"), "\ufeff" + text):
        note = parse_note(variant, "code_fences.md")
        assert note.chunks == expected.chunks
        assert note.links == expected.links
        assert note.tags == expected.tags
        assert_exact_lines(variant, note)


def test_dataclasses_are_picklable_for_worker_processes() -> None:
    note = parse("links.md")
    assert pickle.loads(pickle.dumps(note)) == note
    assert isinstance(CHUNKER_VERSION, str) and CHUNKER_VERSION


# --- code fences ----------------------------------------------------------------------------


def test_code_fences_headings_inside_are_not_headings() -> None:
    note = parse("code_fences.md")
    assert note.title == "Code Fences"
    assert spans(note) == [(1, 3), (5, 19), (21, 26)]
    assert [c.heading_trail for c in note.chunks] == [
        ("Code Fences",),
        ("Code Fences", "Shell"),
        ("Code Fences", "Indented"),
    ]
    shell = note.chunks[1]
    assert "# this is a comment, not a heading" in shell.text
    assert shell.text.startswith("## Shell\n")
    assert shell.text.endswith("    return None\n~~~")
    assert shell.content_type == "code"


def test_links_and_tags_inside_code_are_ignored() -> None:
    note = parse("code_fences.md")
    assert links_of(note) == [("Linked Note", "wiki", 26, None, None)]
    assert note.tags == ["real-tag"]


# --- tables, lists, content types -----------------------------------------------------------


def test_tables_and_lists() -> None:
    note = parse("tables.md")
    assert note.title == "Table Note"
    assert spans(note) == [(5, 5), (7, 14), (16, 20)]
    assert [c.content_type for c in note.chunks] == ["narrative", "table", "list"]
    assert note.chunks[0].heading_trail == ("Table Note",)
    assert links_of(note) == [("Table Link", "wiki", 14, None, None)]


def test_table_is_never_cut() -> None:
    rows = "\n".join(f"| row {i} | {'x' * 40} |" for i in range(30))
    intro = "An intro paragraph that is long enough to stand alone."
    after = "A closing paragraph, also long enough to stand alone."
    text = f"# T\n\n{intro}\n\n| a | b |\n|---|---|\n{rows}\n\n{after}\n"
    note = parse_note(text, "t.md", max_chars=200)
    assert_exact_lines(text, note)
    assert spans(note) == [(1, 3), (5, 36), (38, 38)]
    assert [c.content_type for c in note.chunks] == ["narrative", "table", "narrative"]


# --- CRLF -----------------------------------------------------------------------------------


def test_crlf_fixture() -> None:
    text = read("crlf.md")
    assert "\r\n" in text
    note = parse_note(text, "crlf.md")
    assert spans(note) == [(1, 4), (6, 8)]
    assert "\r" not in note.chunks[0].text
    assert note.chunks[0].text == (
        "# CRLF Note\n\nFirst paragraph line one\nline two of the first paragraph."
    )
    assert links_of(note) == [("Crlf Link", "wiki", 8, None, None)]
    assert_exact_lines(text, note)


def test_lone_cr_and_bom() -> None:
    text = "\ufeff# T\r\rBody line one\rBody line two [[X]]\r"
    note = parse_note(text, "t.md")
    assert note.title == "T"
    assert spans(note) == [(1, 4)]
    assert note.chunks[0].text == "# T\n\nBody line one\nBody line two [[X]]"
    assert links_of(note) == [("X", "wiki", 4, None, None)]


# --- frontmatter ----------------------------------------------------------------------------


def test_frontmatter_lists_dates_and_links() -> None:
    note = parse("frontmatter_list.md")
    assert note.frontmatter_error is None
    assert note.title == "List Frontmatter"
    assert note.tags == ["project", "status/active", "new-tag"]
    assert note.aliases == ["LF", "List FM"]
    assert note.note_type == "project"
    assert note.created == "2024-01-05"
    assert note.updated == "2024-02-10T08:30:00"
    assert note.frontmatter["created"] == "2024-01-05"
    assert links_of(note) == [
        ("Ref One", "frontmatter", 11, None, None),
        ("Ref Two", "frontmatter", 12, "Section", "Shown"),
        ("sub/plain path.md", "frontmatter", 13, None, None),
        ("Rel Note", "frontmatter", 14, None, None),
    ]
    # Frontmatter is not body: the only chunk starts after the closing fence (line 16).
    assert spans(note) == [(17, 19)]
    assert note.chunks[0].heading_trail == ("List Frontmatter", "Body Heading")


def test_frontmatter_strings_and_epoch() -> None:
    note = parse("frontmatter_string.md")
    assert note.title == "frontmatter_string"  # no title, no H1: file stem
    assert note.tags == ["alpha", "beta", "gamma", "delta"]
    assert note.aliases == ["Single Alias"]
    assert note.created == "2023-03-04T10:00:00"  # from `date`
    assert note.updated == "2021-11-09T23:20:00+00:00"  # `modified` epoch ms
    # Unquoted `[[x]]` is a nested YAML list; it still yields the link.
    assert links_of(note) == [("Nested Wiki", "frontmatter", 6, None, None)]
    assert spans(note) == [(9, 9)]


def test_malformed_frontmatter_is_not_fatal() -> None:
    note = parse("frontmatter_malformed.md")
    assert note.frontmatter_error
    assert note.frontmatter == {}
    assert note.title == "Malformed"
    assert spans(note) == [(5, 7)]


def test_only_frontmatter_and_empty_files() -> None:
    note = parse("only_frontmatter.md")
    assert note.title == "Nothing Else"
    assert note.tags == ["lonely"]
    assert note.chunks == []
    empty = parse("empty.md")
    assert (empty.title, empty.chunks, empty.links, empty.tags) == ("empty", [], [], [])
    blank = parse_note("  \n\n\t\n", "dir/Blank.md")
    assert blank.title == "Blank" and blank.chunks == []


def test_frontmatter_odd_shapes() -> None:
    text = "---\n- just\n- a list\n---\nBody text that is long enough to be kept.\n"
    note = parse_note(text, "x.md")
    assert note.frontmatter == {}
    assert note.frontmatter_error and "mapping" in note.frontmatter_error
    assert spans(note) == [(5, 5)]

    text = "---\ntitle: 42\nwhen: 12:30:00\nnested: {d: 2024-01-02, n: .nan}\n---\n"
    note = parse_note(text, "x.md")
    assert note.title == "42"
    assert note.frontmatter["nested"] == {"d": "2024-01-02", "n": "nan"}
    json.dumps(note.frontmatter, allow_nan=False)

    # No closing fence: not frontmatter, the whole file is body.
    note = parse_note("---\ntitle: nope\n\nText\n", "x.md")
    assert note.frontmatter == {} and note.frontmatter_error is None
    assert note.title == "x"


# --- headings -------------------------------------------------------------------------------


def test_heading_levels_and_trails() -> None:
    note = parse("headings.md")
    assert spans(note) == [(1, 3), (5, 7), (9, 15), (17, 20), (22, 24)]
    assert [c.heading_trail for c in note.chunks] == [
        ("Headings Demo",),
        ("Headings Demo", "Part One"),
        ("Headings Demo", "Part One", "Detail A"),  # H4 stays inside Detail A
        ("Headings Demo", "Part Two", "Detail B"),  # heading-only Part Two merged forward
        ("Headings Demo", "Second Top"),  # an H1 other than the title stays in the trail
    ]
    assert "#### Deep Note" in note.chunks[2].text
    assert note.chunks[3].text.startswith("## Part Two\n### Detail B\n")


def test_frontmatter_title_with_different_h1() -> None:
    text = "---\ntitle: Real Title\n---\n# Shown Heading\n\nBody text long enough to keep.\n"
    note = parse_note(text, "x.md")
    assert note.title == "Real Title"
    assert note.chunks[0].heading_trail == ("Real Title", "Shown Heading")


def test_trailing_heading_only_section_joins_previous_chunk() -> None:
    text = "# T\n\nBody text that is long enough to keep.\n\n## Empty\n"
    note = parse_note(text, "x.md")
    assert spans(note) == [(1, 5)]
    title_only = parse_note("# Only A Title\n", "x.md")
    assert spans(title_only) == [(1, 1)]


def test_headings_in_lists_and_quotes_do_not_split() -> None:
    text = "# T\n\n> ## quoted heading\n> quoted text\n\n- ## list heading\n- item\n"
    note = parse_note(text, "x.md")
    assert spans(note) == [(1, 7)]


# --- splitting and merging ------------------------------------------------------------------


def test_long_section_splits_at_paragraph_breaks() -> None:
    note = parse("long_section.md", max_chars=400)
    # The lone H1 joins the Essay's first chunk; every later cut is at a blank line.
    assert spans(note) == [(1, 9), (11, 15), (17, 21), (23, 27), (29, 31)]
    assert all(c.heading_trail == ("Long Section", "Essay") for c in note.chunks[:4])
    assert note.chunks[1].text.startswith("Paragraph 3 begins")
    assert note.chunks[4].heading_trail == ("Long Section", "Tail")
    whole = parse("long_section.md")  # default max_chars: one chunk per section
    assert spans(whole) == [(1, 27), (29, 31)]


def test_giant_code_block_is_kept_whole() -> None:
    note = parse("giant_code.md")
    assert spans(note) == [(1, 3), (5, 88), (90, 90)]
    code = note.chunks[1]
    assert len(code.text) > 2000
    assert code.content_type == "code"
    assert code.text.startswith("## Listing\n\n```python\n")
    assert code.text.endswith("# line 79\n```")
    assert note.chunks[2].heading_trail == ("Giant Code", "Listing")


def test_giant_paragraph_splits_at_line_boundaries() -> None:
    body = "\n".join(
        f"line {i:02d} of one very long paragraph without blank lines" for i in range(40)
    )
    text = f"# P\n\n{body}\n"
    note = parse_note(text, "p.md", max_chars=300)
    assert len(note.chunks) > 5
    assert_exact_lines(text, note)
    assert all(len(c.text) <= 300 for c in note.chunks)
    assert note.chunks[-1].end_line == 42


def test_giant_list_splits_between_items() -> None:
    items = "\n".join(f"- item {i:02d} with some words to fill the line" for i in range(30))
    text = f"## L\n\n{items}\n"
    note = parse_note(text, "l.md", max_chars=250)
    assert len(note.chunks) > 3
    assert all(c.content_type == "list" for c in note.chunks)
    assert all(len(c.text) <= 250 for c in note.chunks)
    assert_exact_lines(text, note)


def test_small_pieces_merge_with_neighbour() -> None:
    # The tiny intro before a big code block rides along with it rather than standing alone.
    code = "\n".join(f"x = {i}" for i in range(60))
    text = f"## S\n\nSee:\n\n```\n{code}\n```\n\nok\n"
    note = parse_note(text, "s.md", max_chars=200)
    assert spans(note) == [(1, 68)]  # "ok" is too small too: it joins the code chunk
    assert note.chunks[0].content_type == "code"


# --- related / see also ---------------------------------------------------------------------


def test_related_sections_yield_links_but_no_chunks() -> None:
    note = parse("related.md")
    assert spans(note) == [(1, 3), (10, 12)]
    assert [c.heading_trail for c in note.chunks] == [
        ("Related Demo",),
        ("Related Demo", "Notes"),
    ]
    assert links_of(note) == [
        ("Seen Also", "wiki", 7, None, None),
        ("other.md", "markdown", 8, None, "other"),
        ("Related One", "wiki", 16, None, None),
        ("Nested Under Related", "wiki", 20, None, None),
        ("Voir Note", "wiki", 24, None, None),
        ("Reference Note", "wiki", 28, None, None),
    ]


# --- links ----------------------------------------------------------------------------------


def test_every_link_form() -> None:
    note = parse("links.md")
    assert links_of(note) == [
        ("Target", "wiki", 3, None, None),
        ("Target", "wiki", 3, None, "Alias Text"),
        ("Target", "wiki", 3, "Heading", None),
        ("Target", "wiki", 4, "^abc123", None),
        # [[#Local Heading]] (same note) is skipped.
        ("image.png", "embed", 5, None, None),
        ("Embedded Note", "embed", 5, "Part", "shown"),
        ("folder/Other.md", "markdown", 6, None, "text"),
        ("My Note.md", "markdown", 6, None, "spaced"),
        ("My Note.md", "markdown", 6, "Sec", "enc"),
        # https:, mailto: and #anchor links are skipped.
        ("Label Text", "wiki", 8, None, "topic.sub"),  # dendron://vault/ prefix removed
        ("Label", "wiki", 8, None, "topic.other"),
        ("../up/Note.md", "markdown", 9, None, "up"),
        ("img/pic.png", "markdown", 9, None, "alt"),
        ("Table Target", "wiki", 13, None, "Table Alias"),  # escaped \| inside a table
        # inline code spans and fenced code are skipped.
    ]
    assert all(isinstance(link, Link) for link in note.links)


def test_multiline_code_span_hides_links() -> None:
    text = "Start `code [[Hidden]]\nstill code` then [[Shown]].\n\n`unclosed [[Also Shown]]\n"
    note = parse_note(text, "x.md")
    assert [(k.target, k.line) for k in note.links] == [("Shown", 2), ("Also Shown", 4)]


def test_dendron_note() -> None:
    note = parse("dendron.topic.lookup.md")
    assert note.title == "Lookup"
    assert note.created == "2021-11-08T19:33:20+00:00"
    assert links_of(note) == [
        ("the parent", "wiki", 11, None, "dendron.topic"),
        ("dendron.topic.sibling", "wiki", 11, None, None),
    ]
    assert spans(note) == [(9, 11)]


def test_inline_tags() -> None:
    text = "# T #title-tag\n\nText #one, #Two and #two, not#this, #123, [x](#anchor) #a/b.\n"
    note = parse_note(text, "x.md")
    assert note.tags == ["title-tag", "one", "Two", "a/b"]


def test_chunk_is_frozen() -> None:
    chunk = parse("crlf.md").chunks[0]
    assert isinstance(chunk, Chunk)
    with pytest.raises(AttributeError):
        chunk.text = "x"  # type: ignore[misc]


def test_wiki_edge_forms() -> None:
    text = "[[Note|]] [[ spaced | shown ]] [[#^only-block]] [[]] [[a#b#c]]\n"
    note = parse_note(text, "x.md")
    assert links_of(note) == [
        ("Note", "wiki", 1, None, None),
        ("spaced", "wiki", 1, None, "shown"),
        ("a", "wiki", 1, "b#c", None),
    ]


# --- equivalence with the stock markdown-it table rule ------------------------------------

TABLE_CASES = [
    "| a | b |\n|---|:-:|\n| 1 | 2 |\n| 3 |\n\nafter\n",
    "a | b\n--|--\n1 | 2\n> quote ends it\n",
    "| a \\| b | c |\n| --- | --- |\n| x \\| y | z |\n|\n",
    "- item\n\n  | a | b |\n  |---|---|\n  | 1 | 2 |\n\n- next\n",
    "| a |\n|---|---|\n| not a table: the counts differ |\n",
    "text\n| a | b |\n|---|---|\n| 1 | 2 |\n    code after\n",
    "|a|\n|-|\n|\\|\n|x\\\\|\n# heading ends it\n",
]


def _stock_parse(text: str, path: str, max_chars: int = 60) -> ParsedNote:
    """parse_note with markdown-it's own table rule (what ours must agree with)."""
    from markdown_it import MarkdownIt

    from retriever import chunk

    ours = chunk._MD
    chunk._MD = MarkdownIt("commonmark", {"html": True}).enable("table").disable("inline")
    try:
        return parse_note(text, path, min_chars=1, max_chars=max_chars)
    finally:
        chunk._MD = ours


@pytest.mark.parametrize("text", TABLE_CASES)
def test_lean_table_rule_chunks_like_the_stock_parser(text: str) -> None:
    assert parse_note(text, "t.md", min_chars=1, max_chars=60) == _stock_parse(text, "t.md")


def test_every_test_note_parses_as_with_the_stock_parser() -> None:
    """The chunker equivalence check on the test vault and fixtures (benchmarks/
    chunker_equivalence.py runs it on the shared corpora)."""
    vault = Path(__file__).parent / "vault"
    notes = [*sorted(vault.rglob("*.md")), *ALL_FIXTURES]
    assert len(notes) > 30
    for path in notes:
        text = path.read_bytes().decode("utf-8", "replace")
        for max_chars in (60, 2000):
            ours = parse_note(text, path.name, min_chars=1, max_chars=max_chars)
            assert ours == _stock_parse(text, path.name, max_chars), path


# --- the dispatched block rules (md_dispatch) give the plain parser's tokens ---------------

LINE_SHAPES = [
    "plain words here",
    "text with | a pipe",
    "",
    "   ",
    "# Heading",
    "###### h6",
    "#not a heading",
    "Setext title",
    "===",
    "---",
    "***",
    "_ _ _",
    "- item",
    "* item",
    "+ item",
    "-not an item",
    "1. one",
    "2) two",
    "10. ten",
    "1.no space",
    "0. zero",
    "3) three",
    "4. four",
    "5) five",
    "6. six",
    "7) seven",
    "8. eight",
    "9) nine",
    "> quote",
    ">> nested quote",
    "> - item in a quote",
    "```",
    "```py",
    "~~~",
    "| a | b |",
    "|---|---|",
    "a | b",
    "--|--",
    "| x |",
    "[ref]: /url",
    "[ref]: /url 'title'",
    "[not a ref",
    "<div>",
    "</div>",
    "<!-- comment -->",
    "<pre>",
    "</pre>",
    "<span>inline</span>",
    "<?php echo 1; ?>",
    "*emphasis* first",
    "__strong__ first",
    "\\# escaped",
    "`code` span first",
    "é accented",
    "12345",
]
INDENTS = ["", "", "", " ", "  ", "   ", "    ", "     ", "\t", "  - ", "> ", "1. "]


def _random_note(rng: random.Random) -> str:
    lines = [rng.choice(INDENTS) + rng.choice(LINE_SHAPES) for _ in range(rng.randint(1, 30))]
    return "\n".join(lines) + rng.choice(["", "\n"])


def _tokens(md: Any, text: str) -> list[tuple[Any, ...]]:
    return [
        (t.type, t.map, t.level, t.nesting, t.markup, t.info, t.content, t.hidden)
        for t in md.parse(text)
    ]


def test_dispatched_block_rules_give_the_plain_parsers_tokens() -> None:
    """md_dispatch only skips rules that would have returned False: on generated notes
    mixing every block shape, each line under one of several indents or container
    prefixes, the tokens are the plain parser's (same rules, tried in full on every
    line)."""
    from markdown_it import MarkdownIt

    from retriever import chunk, md_rules

    plain = MarkdownIt("commonmark", {"html": True}).enable("table").disable("inline")
    plain.block.ruler.at("table", md_rules.table, {"alt": ["paragraph", "reference"]})
    rng = random.Random(8)
    notes = [_random_note(rng) for _ in range(1500)]
    vault = Path(__file__).parent / "vault"
    notes += [
        p.read_text("utf-8", "replace") for p in [*sorted(vault.rglob("*.md")), *ALL_FIXTURES]
    ]
    differ = [n for n in notes if _tokens(chunk._MD, n) != _tokens(plain, n)]
    assert differ == []


def test_the_parsers_rulers_are_compiled_before_any_parse() -> None:
    """markdown-it compiles a ruler's chains at their first use, not atomically: threads
    parsing for the first time at once could get no tokens. chunk compiles them at import."""
    from retriever import chunk

    assert chunk._MD.core.ruler.__cache__ is not None
    assert chunk._MD.block.ruler.__cache__ is not None
