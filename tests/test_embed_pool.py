"""Encoding in worker processes (retriever.embed_pool): the same vectors as encoding in
the indexing process, in every batch layout, and the parent carrying on alone when its
workers cannot."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from retriever import embed_pool

VECTORS = (
    "SELECT md5(string_agg(encode(hash, 'hex') || part || vec::text, ',' ORDER BY hash, part))"
    ", count(*) FROM embeddings"
)
WINDOWS = "SELECT md5(string_agg(encode(hash, 'hex') || encode(vecs, 'hex'), ',' ORDER BY hash)) FROM windows"


def _stored(url: str) -> tuple[object, ...]:
    with psycopg.connect(url) as conn:
        return (*conn.execute(VECTORS).fetchone(), *conn.execute(WINDOWS).fetchone())  # type: ignore[misc]


def test_workers_store_the_vectors_the_indexer_stores(
    vault_copy: Path,
    model_dir: Path,
    new_db_url: Callable[[], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from retriever.app import Retriever
    from retriever.config import Settings
    from retriever.db import Database

    def index(url: str, *, workers: bool) -> int:
        monkeypatch.setattr(embed_pool, "PARALLEL_MIN", 0 if workers else 10**9)
        settings = Settings(
            vault=vault_copy,
            home=tmp_path / url[-8:],
            database_url=url,
            embed_model=str(model_dir),
            embed_batch=16,
            calibrate=False,
        )
        app = Retriever(settings, db=Database(url))
        try:
            report = app.index()
        finally:
            app.close()
        assert report.errors == [] and report.passages_pending == 0
        return report.passages_embedded

    monkeypatch.setattr(embed_pool.os, "cpu_count", lambda: 2)  # one worker, on any runner
    here, there = new_db_url(), new_db_url()
    with caplog.at_level(logging.WARNING, logger="retriever"):
        assert index(here, workers=False) == index(there, workers=True) > 16 * 4  # batches
    assert "encoding in this process" not in caplog.text  # the worker did its share
    assert _stored(here) == _stored(there)  # bit for bit, windows included


def test_without_a_model_in_the_workers_the_indexer_encodes_alone(
    make_app,
    vault_copy: Path,
    model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    moved = tmp_path / "model"
    shutil.copytree(model_dir, moved)
    app = make_app(vault_copy, model=moved, embed_batch=16)
    assert app.embedder()[0] is not None  # loaded here; then gone from disk
    shutil.rmtree(moved)
    monkeypatch.setattr(embed_pool, "PARALLEL_MIN", 0)
    monkeypatch.setattr(embed_pool.os, "cpu_count", lambda: 2)
    with caplog.at_level(logging.WARNING, logger="retriever.embed_pool"):
        report = app.index()
    assert report.passages_embedded > 0 and report.passages_pending == 0
    assert "encoding in this process from now on" in caplog.text
