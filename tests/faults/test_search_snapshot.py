"""Found by the MCP load fault (tests/faults/test_mcp_load.py): a search issues several
statements, and under READ COMMITTED each saw the index as of its own start, so a re-index
committing in between made the search drop or misrank the very chunks it had found. A
search now reads one snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from retriever import store

pytestmark = pytest.mark.faults


def test_a_reindex_committing_mid_search_does_not_change_the_answer(
    make_app, vault_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(vault_copy)
    app.index()
    other = make_app(vault_copy)  # another process's indexer, on its own connections
    before = app.search("shakshuka eggs tomato", fresh=False)
    assert before.hits and before.hits[0].path == "cooking/Shakshuka.md"
    fetch = store.fetch_chunks
    raced: list[int] = []

    def racing(conn, ids, **kw):  # type: ignore[no-untyped-def]
        if not raced:  # a full re-index commits between the ranking and the fetch
            raced.append(other.index(full=True).files_changed)
        return fetch(conn, ids, **kw)

    monkeypatch.setattr(store, "fetch_chunks", racing)
    during = app.search("shakshuka eggs tomato", fresh=False)
    assert raced and raced[0] > 0
    assert [h.path for h in during.hits] == [h.path for h in before.hits]
