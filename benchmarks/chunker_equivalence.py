"""Chunker equivalence: parse every note of a vault with our markdown-it set-up and with the
stock one, and report the notes whose parse (chunks, links, tags, title) differs.

    python -m benchmarks.chunker_equivalence VAULT [VAULT ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from markdown_it import MarkdownIt

from retriever import chunk
from retriever.prepare import decode_note

STOCK = MarkdownIt("commonmark", {"html": True}).enable("table").disable("inline")


def differences(vault: Path) -> tuple[int, list[str], float, float]:
    """(notes, paths that differ, seconds ours, seconds stock)."""
    ours_md, differ, t_ours, t_stock, n = chunk._MD, [], 0.0, 0.0, 0
    for path in sorted(vault.rglob("*.md")):
        text = decode_note(path.read_bytes())[0]
        rel = path.relative_to(vault).as_posix()
        t = time.perf_counter()
        ours = chunk.parse_note(text, rel)
        t_ours += time.perf_counter() - t
        chunk._MD = STOCK
        try:
            t = time.perf_counter()
            stock = chunk.parse_note(text, rel)
            t_stock += time.perf_counter() - t
        finally:
            chunk._MD = ours_md
        n += 1
        if ours != stock:
            differ.append(rel)
    return n, differ, t_ours, t_stock


def main() -> None:
    failed = False
    for arg in sys.argv[1:]:
        n, differ, t_ours, t_stock = differences(Path(arg))
        print(
            f"{arg}: {n} notes, {len(differ)} differ; parse {t_ours:.1f} s vs stock {t_stock:.1f} s"
        )
        for rel in differ[:20]:
            print("  differs:", rel)
        failed |= bool(differ)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
