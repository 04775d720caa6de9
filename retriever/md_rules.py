"""A lean GFM table rule for markdown-it's block parser (what chunking needs, nothing more).

markdown-it's own table rule builds a token per row and per cell, splitting every row into
cell strings; on table-heavy vaults that was a fifth of all indexing CPU. Chunking only
needs where a table starts and ends. This rule decides both exactly as markdown-it-py's
``rules_block/table.py`` (4.x) does (same header/delimiter checks, same terminators, same
cap on auto-completed cells) and emits only ``table_open``/``table_close`` with the map.
tests/test_chunk.py checks the chunks it gives against the stock parser's.
"""

from __future__ import annotations

import re

from markdown_it.common.utils import isStrSpace, mdTrim
from markdown_it.rules_block.state_block import StateBlock
from markdown_it.rules_block.table import MAX_AUTOCOMPLETED_CELLS, escapedSplit

_HEADER_CELL = re.compile(r"^:?-+:?$")
_DELIMITER_CHARS = frozenset("|-:")


def _cells(line: str) -> int:
    """len() of markdown-it's cell list for a trimmed, non-empty row: pipes not preceded by
    a backslash split cells; an empty first and last cell (outer pipes) are dropped."""
    n = line.count("|") - line.count("\\|") + 1
    if line[0] == "|":
        n -= 1
    if n and line[-1] == "|" and (len(line) == 1 or line[-2] != "\\"):
        n -= 1
    return n


def _delimiter_columns(state: StateBlock, line: int) -> int | None:
    """Number of columns of a valid delimiter row (``|---|:-:|``) at ``line``, else None."""
    pos = state.bMarks[line] + state.tShift[line]
    end = state.eMarks[line]
    src = state.src
    if pos + 1 >= end:
        return None
    first, second = src[pos], src[pos + 1]
    if first not in _DELIMITER_CHARS:
        return None
    if second not in _DELIMITER_CHARS and not isStrSpace(second):
        return None
    if first == "-" and isStrSpace(second):  # a list item, not a table
        return None
    for ch in src[pos + 2 : end]:
        if ch not in _DELIMITER_CHARS and not isStrSpace(ch):
            return None
    columns = src[pos:end].split("|")
    count = 0
    for i, column in enumerate(columns):
        cell = mdTrim(column)
        if not cell:
            if i == 0 or i == len(columns) - 1:
                continue  # outer pipes
            return None
        if not _HEADER_CELL.search(cell):
            return None
        count += 1
    return count


def table(state: StateBlock, startLine: int, endLine: int, silent: bool) -> bool:
    """markdown-it's table rule, emitting only the table's open/close tokens."""
    if startLine + 2 > endLine:
        return False
    nextLine = startLine + 1
    if state.sCount[nextLine] < state.blkIndent or state.is_code_block(nextLine):
        return False
    aligns = _delimiter_columns(state, nextLine)
    if aligns is None:
        return False
    pos = state.bMarks[startLine] + state.tShift[startLine]
    header = mdTrim(state.src[pos : state.eMarks[startLine]])
    if "|" not in header or state.is_code_block(startLine):
        return False
    columns = escapedSplit(header)
    if columns and columns[0] == "":
        columns.pop(0)
    if columns and columns[-1] == "":
        columns.pop()
    column_count = len(columns)
    if column_count == 0 or column_count != aligns:
        return False
    if silent:
        return True

    old_parent = state.parentType
    state.parentType = "table"
    terminators = state.md.block.ruler.getRules("blockquote")
    token = state.push("table_open", "table", 1)
    token.map = lines = [startLine, 0]
    autocompleted = 0
    nextLine = startLine + 2
    while nextLine < endLine:
        if state.sCount[nextLine] < state.blkIndent:
            break
        if any(rule(state, nextLine, endLine, True) for rule in terminators):
            break
        pos = state.bMarks[nextLine] + state.tShift[nextLine]
        row = mdTrim(state.src[pos : state.eMarks[nextLine]])
        if not row or state.is_code_block(nextLine):
            break
        autocompleted += column_count - _cells(row)
        if autocompleted > MAX_AUTOCOMPLETED_CELLS:
            break
        nextLine += 1
    state.push("table_close", "table", -1)
    lines[1] = nextLine
    state.parentType = old_parent
    state.line = nextLine
    return True
