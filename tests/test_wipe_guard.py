"""An index is never replaced silently: not by another vault, not by a vault that looks
empty or lost most of its notes at once (unmounted, moved); `--force` does it. And a
malformed DATABASE_URL is one clear line, never a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from retriever.errors import VaultError
from tests.conftest import cli_env, retriever_exe


def _vault(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        name = f"{root.name} note {i}.md"
        (root / name).write_text(f"# Note {i}\n\nabout topic {i} and more\n", "utf-8")
    return root


def _count(app) -> int:
    with app.db.connection() as conn:
        n = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        conn.commit()
    return int(n)


def test_another_vault_does_not_replace_the_index(make_app, tmp_path: Path) -> None:
    first = make_app(_vault(tmp_path / "a", 12))
    assert first.index().files_changed == 12
    other = make_app(_vault(tmp_path / "b", 3))
    report = other.index()
    assert (
        report.refused
        and "this index holds" in report.refused
        and str(tmp_path / "a") in report.refused
    )
    assert report.files_deleted == 0 and _count(other) == 12
    # Nor does it answer for the other vault: its hits would cite notes b does not have.
    with pytest.raises(VaultError, match=r"this index holds .*a, not .*b"):
        other.search("topic", mode="lexical")
    assert first.search("topic 3", mode="lexical").hits[0].path == "a note 3.md"
    forced = other.index(force=True)
    assert forced.refused is None and forced.files_deleted == 12 and _count(other) == 3
    assert other.search("topic 1", mode="lexical").hits[0].path == "b note 1.md"
    with pytest.raises(VaultError):  # and the first app no longer answers from it
        first.search("topic 3", mode="lexical")


def test_a_moved_vault_is_still_answered_for(make_app, tmp_path: Path) -> None:
    app = make_app(_vault(tmp_path / "a", 12))
    app.index()
    moved = (tmp_path / "a").rename(tmp_path / "renamed")
    assert make_app(moved).search("topic 3", mode="lexical").hits[0].path == "a note 3.md"


def test_most_notes_gone_at_once_needs_force(make_app, tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v", 30)
    app = make_app(vault)
    app.index()
    for i in range(5):  # a few deletions: ordinary
        (vault / f"v note {i}.md").unlink()
    assert app.index().files_deleted == 5
    for i in range(5, 25):  # 20 of the 25 left: looks like a lost vault
        (vault / f"v note {i}.md").unlink()
    report = app.index()
    assert report.refused and "20 of 25 indexed notes are gone" in report.refused
    assert _count(app) == 25
    assert app.index(force=True).files_deleted == 20 and _count(app) == 5


def test_cli_refuses_with_one_line_and_exit_2(tmp_path: Path, db_url: str) -> None:
    env = cli_env(db_url, tmp_path / "home")
    a, b = _vault(tmp_path / "a", 12), _vault(tmp_path / "b", 2)
    first = subprocess.run([retriever_exe(), "index", str(a)], env=env, capture_output=True)
    assert first.returncode in (0, 1)  # 1: no model, vectors pending (degraded, not failed)
    done = subprocess.run(
        [retriever_exe(), "index", str(b), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    data = json.loads(done.stdout)
    assert data["ok"] is False and "--force" in data["error"]
    plain = subprocess.run(
        [retriever_exe(), "index", str(b)], env=env, capture_output=True, text=True, check=False
    )
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    forced = subprocess.run(
        [retriever_exe(), "index", str(b), "--force", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert forced.returncode in (0, 1) and json.loads(forced.stdout)["files_deleted"] == 12


def test_a_malformed_database_url_is_one_line_and_exit_2(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v", 2)
    env = {
        "DATABASE_URL": "not a url at all",
        "RETRIEVER_HOME": str(tmp_path / "home"),
        "RETRIEVER_EMBED_MODEL": "none",
        "PATH": "/usr/bin:/bin",
        "RETRIEVER_SERVICE": "off",
    }
    for args in (
        ["index", str(vault)],
        ["status", str(vault)],
        ["search", "--vault", str(vault), "topic"],
    ):
        done = subprocess.run(
            [retriever_exe(), *args, "--json"], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 2, args
        assert "DATABASE_URL is not a libpq URL" in json.loads(done.stdout)["error"]
        assert "Traceback" not in done.stderr
