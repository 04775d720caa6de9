"""Passage text as stored (pure): packing gives every text back and shrinks prose."""

from __future__ import annotations

import zlib

import pytest

from retriever.passage_text import pack, unpack


@pytest.mark.parametrize(
    "text",
    ["", "a", "Café « crème », naïve ☕ 𝔘 \u200b", "line\n\n\tcode\r\n| a | b |\n" * 40],
)
def test_packed_text_comes_back_exactly(text: str) -> None:
    assert unpack(pack(text)) == text
    assert unpack(memoryview(pack(text))) == text  # what a binary column may arrive as


def test_packing_shrinks_ordinary_prose() -> None:
    prose = "The quick brown fox jumps over the lazy dog near the river bank. " * 10
    assert len(pack(prose)) < len(prose.encode()) / 4


def test_unpacking_a_damaged_value_fails_loudly() -> None:
    with pytest.raises(zlib.error):
        unpack(b"\xff\xfe not deflate")
