"""Fixtures of the fault-injection suite: embedded servers of a test's own (seeded from one
data directory made per session) and the clean reference index every fault is held to."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.dump import dump_index
from tests.faults.harness import env_for, make_pgdata_template, run_json, seed_pgdata, stop_server


@pytest.fixture(scope="session")
def pgdata_template() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="retriever-faults-pg-"))
    try:
        yield make_pgdata_template(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def own_home(tmp_path: Path, pgdata_template: Path) -> Iterator[Path]:
    """A RETRIEVER_HOME with a data directory of its own (no server running yet); the
    server the test's processes start there is stopped at the end."""
    home = tmp_path / "own-home"
    seed_pgdata(pgdata_template, home)
    yield home
    stop_server(home / "pgdata")


@pytest.fixture
def clean_index(new_db_url: Callable[[], str], tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """The dump of a clean full index of ``vault`` in a fresh database and home."""

    def make(vault: Path, model: str | Path = "none", **extra: str) -> dict[str, Any]:
        url = new_db_url()
        home = tmp_path / f"clean-home-{uuid.uuid4().hex[:6]}"
        code, data, stderr = run_json(
            ["index", str(vault), "--full"], env_for(home, url, model, **extra)
        )
        assert code in (0, 1) and not data.get("interrupted"), stderr[-2000:]
        return dump_index(url)

    return make
