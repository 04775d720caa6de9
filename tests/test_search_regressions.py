"""Regressions found in review: filters, budget, bounded freshness, honest degraded modes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retriever import notes, store
from retriever.embed import EmbedderError
from retriever.index import index_vault
from retriever.search import Searcher, SearchOptions


def _write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def test_tag_filter_is_case_insensitive_and_includes_nested_tags(make_app, tmp_path: Path) -> None:
    vault = tmp_path / "v"
    body = "restic backup repository pruning schedule\n"
    _write(vault / "a.md", f"---\ntags: [HomeLab]\n---\n# Alpha\n\n{body}")
    _write(vault / "b.md", f"---\ntags: [homelab/backup]\n---\n# Beta\n\n{body}")
    _write(vault / "c.md", f"---\ntags: [homelab]\n---\n# Gamma\n\n{body}")
    _write(vault / "d.md", f"---\ntags: [homelabs]\n---\n# Delta\n\n{body}")
    app = make_app(vault)
    app.index()
    result = app.search("restic backup", mode="lexical", tags=["homelab"], graph=False)
    assert sorted(h.path for h in result.hits) == ["a.md", "b.md", "c.md"]
    listed = notes.list_notes(app, None, "homelab", None, None, 50, None)
    assert sorted(n["path"] for n in listed["notes"]) == ["a.md", "b.md", "c.md"]


def test_semantic_folder_filter_finds_passages_outside_the_global_top(
    make_app, tmp_path: Path, model_dir: Path
) -> None:
    vault = tmp_path / "v"
    for i in range(300):
        _write(
            vault / "big" / f"n{i}.md",
            f"# Bread {i}\n\nsourdough starter feeding flour water levain bread loaf {i}\n",
        )
    _write(
        vault / "small" / "only.md",
        "# Starter care\n\nfeeding the sourdough starter with flour and water every day\n",
    )
    app = make_app(vault, model=model_dir)
    assert app.index().passages_pending == 0
    result = app.search("sourdough starter feeding", mode="semantic", folder="small", graph=False)
    assert [h.path for h in result.hits] == ["small/only.md"]


def test_a_huge_best_passage_is_cut_to_the_budget(make_app, tmp_path: Path) -> None:
    vault = tmp_path / "v"
    code = "\n".join(f"frobnicate_widget(x{i}) = compute_thing({i})  # quux" for i in range(2000))
    _write(vault / "big.md", f"# Frobnicate\n\n```python\n{code}\n```\n")
    app = make_app(vault)
    app.index()
    result = app.search("frobnicate_widget", mode="lexical", budget_tokens=50)
    assert result.used_tokens <= 50
    [hit] = result.hits
    assert hit.truncated
    lines = (vault / "big.md").read_text("utf-8").splitlines()
    cited = lines[hit.start_line - 1 : hit.end_line]
    assert hit.text.splitlines() == cited  # the narrowed citation is exactly what is shown


def test_freshness_pass_is_bounded(make_app, vault_copy: Path, model_dir: Path) -> None:
    app = make_app(vault_copy, model=model_dir, fresh_interval=0.0, fresh_max_files=1)
    backlog = app.index(embed=False).passages_pending
    assert backlog > 128
    note = vault_copy / "Inbox.md"
    note.write_text(note.read_text("utf-8") + "\nnew line\n", "utf-8")
    result = app.search("backup", mode="lexical")
    assert result.refreshed_files == 1
    assert app.status().passages_pending > 0  # the backlog is `retriever index`'s job
    # A changed pipeline never turns a search into a full rebuild, but the note that
    # changed is still indexed: a search finds it, and the full re-derive stays due.
    with app.db.connection() as conn:
        store.set_meta(conn, "pipeline_version", "old-version")
        conn.commit()
    note.write_text(note.read_text("utf-8") + "\nanother line about quokkas\n", "utf-8")
    result = app.search("quokkas", mode="lexical")
    assert result.refreshed_files == 1
    assert result.hits[0].path == "Inbox.md"
    with app.db.connection() as conn:
        assert store.get_meta(conn, "pipeline_version") == "old-version"
        conn.commit()
    assert app.index().full  # `retriever index` re-derives every note
    # ... and never more notes than a bounded pass takes (fresh_max_files is 1 here)
    with app.db.connection() as conn:
        store.set_meta(conn, "pipeline_version", "old-version")
        conn.commit()
    for name in ("Inbox.md", "Home.md"):
        touched = vault_copy / name
        touched.write_text(touched.read_text("utf-8") + "\nwombats\n", "utf-8")
    assert app.search("wombats", mode="lexical").refreshed_files == 0


class _Stub:
    model_id = "stub"
    dimension = 8
    fingerprint = "stub:8"

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.fail:
            raise EmbedderError("ollama went away")
        v = np.ones((len(texts), 8), dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def close(self) -> None:
        pass


def test_no_vectors_yet_is_degraded_and_unreachable_is_not_refused(
    make_app, vault_copy: Path
) -> None:
    app = make_app(vault_copy)
    report = index_vault(app.db, app.settings, embedder=_Stub(True))  # type: ignore[arg-type]
    assert report.embed_error and report.vectors_refused == 0
    assert report.passages_pending > 0
    with app.db.connection() as conn:
        result, _ = Searcher().search(
            conn,
            ["restic backup"],
            SearchOptions(),
            vault=vault_copy,
            embedder=_Stub(False),
            embed_error=None,
        )  # type: ignore[arg-type]
        conn.commit()
    assert result.mode == "lexical"
    assert result.degraded_reason and "no passage has a vector" in result.degraded_reason
