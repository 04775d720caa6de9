"""Embedding tiers: an Ollama primary and an in-process Model2Vec fallback.

The primary is the protocol-level fake Ollama of test_embed_ollama (a real HTTP server on
loopback, spoken to by the real ``ollama`` client), here on a fixed port so it can be
stopped and started again mid-session; the fallback is the test-made Model2Vec model.
No torch, no model download.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from retriever import languages
from retriever.app import Retriever
from retriever.config import DEFAULT_MODEL, Settings
from retriever.embed import EmbedderUnavailable
from retriever.health import run_health
from retriever.tiers import FALLBACK, PRIMARY, Tier, configured, short_reason
from tests.test_embed_ollama import MODEL, FakeOllama, _handler, _model_entry, closed_port

OLLAMA = f"ollama:{MODEL}"


class Server:
    """The fake Ollama on a fixed port, stopped and started like the real service."""

    def __init__(self) -> None:
        self.port = closed_port()
        self.state = FakeOllama(
            url=f"http://127.0.0.1:{self.port}", models=[_model_entry(f"{MODEL}:latest")]
        )
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.state.release.clear()
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self.state))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self.state.release.set()  # wake a stalled handler
        server.shutdown()
        server.server_close()
        for conn in list(self.state.connections):  # keep-alive connections die too
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=2)


@pytest.fixture
def ollama() -> Iterator[Server]:
    server = Server()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def tiered(make_app, vault_copy: Path, model_dir: Path, ollama: Server) -> Callable[..., Retriever]:
    """An app with the fake Ollama as its primary and the test model as its fallback."""

    def make(**overrides: Any) -> Retriever:
        opts: dict[str, Any] = {
            "fallback_model": str(model_dir),
            "ollama_url": ollama.state.url,
            "ollama_timeout": 2.0,
            "probe_timeout": 0.5,
            "probe_interval_max": 0.2,
            "fresh_search": False,
            **overrides,
        }
        return make_app(vault_copy, model=OLLAMA, **opts)  # type: ignore[no-any-return]

    return make


def vector_counts(app: Retriever) -> dict[str, int]:
    with app.db.connection() as conn:
        rows = conn.execute(
            "SELECT m.model_id, count(e.hash) FROM models m"
            " LEFT JOIN embeddings e ON e.model = m.id AND e.part = 0 GROUP BY m.model_id"
        ).fetchall()
        conn.commit()
    return {r[0]: int(r[1]) for r in rows}


def passages(app: Retriever) -> int:
    with app.db.connection() as conn:
        row = conn.execute("SELECT count(*) FROM passages").fetchone()
        conn.commit()
    assert row is not None
    return int(row[0])


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


_queries = (f"restic backup retention {i}" for i in range(1_000_000))


def search(app: Retriever) -> Any:
    """A fresh query each time: a cached query vector would not touch the model server."""
    return app.search(next(_queries))


# --------------------------------------------------------------------------- settings


def test_configured_tiers_follow_the_primary() -> None:
    def tiers(**kw: Any) -> list[tuple[str, str]]:
        return configured(Settings(**kw))

    assert tiers(embed_model="ollama:bge-m3:567m") == [
        (PRIMARY, "ollama:bge-m3:567m"),
        (FALLBACK, DEFAULT_MODEL),
    ]
    assert tiers(embed_model="ollama:bge-m3", fallback_model="none") == [(PRIMARY, "ollama:bge-m3")]
    assert tiers(embed_model="/models/m2v") == [(PRIMARY, "/models/m2v")]  # already in-process
    assert tiers(embed_model="/models/a", fallback_model="/models/b") == [
        (PRIMARY, "/models/a"),
        (FALLBACK, "/models/b"),
    ]
    assert tiers(embed_model="/models/a", fallback_model="/models/a") == [(PRIMARY, "/models/a")]


def test_short_reasons_name_what_is_wrong() -> None:
    down = "Ollama server is down or unreachable at http://127.0.0.1:1 (ConnectError)"
    assert short_reason(OLLAMA, down) == "ollama unreachable"
    assert "timeout" in short_reason(OLLAMA, "Ollama at x did not answer within 5s (timeout)")
    assert short_reason(OLLAMA, "Ollama model 'x' is not pulled on y") == f"{OLLAMA} not pulled yet"
    assert "server error, HTTP 500" in short_reason(
        OLLAMA, "Ollama at x failed with HTTP 500: boom"
    )


def test_a_tier_that_is_down_never_makes_the_caller_wait() -> None:
    calls: list[float] = []

    def load(model: str) -> Any:
        calls.append(time.monotonic())
        time.sleep(0.3)  # a slow, failing load (a hung server up to the probe timeout)
        raise EmbedderUnavailable("Ollama server is down or unreachable at x (ConnectError)")

    tier = Tier(PRIMARY, OLLAMA, load, interval_max=0.2)
    assert tier.get() is None  # the first load runs in the caller's thread ...
    assert len(calls) == 1 and tier.down_since is not None
    assert tier.get() is None  # ... later ones never: not due yet (a 0.2 s pause here)
    assert len(calls) == 1
    time.sleep(0.3)
    started = time.monotonic()
    assert tier.get() is None  # due: a background probe starts, the caller goes on
    assert time.monotonic() - started < 0.1
    wait_for(lambda: len(calls) == 2, timeout=3)
    assert re.fullmatch(r"ollama unreachable since \d\d:\d\d", tier.down_phrase())


# --------------------------------------------------------------------------- both tiers


def test_indexing_fills_both_tiers_and_search_uses_the_primary(tiered) -> None:
    app = tiered()
    report = app.index()
    n = passages(app)
    assert [(t.tier, t.pending, t.error) for t in report.tiers] == [
        (PRIMARY, 0, None),
        (FALLBACK, 0, None),
    ]
    assert report.model == OLLAMA and report.passages_embedded == n
    counts = vector_counts(app)
    assert counts[OLLAMA] == n and counts[str(app.settings.fallback_model)] == n
    result = search(app)
    assert (result.mode, result.tier, result.model) == ("hybrid", PRIMARY, OLLAMA)
    assert result.degraded_reason is None and result.hits
    assert result.to_dict()["tier"] == PRIMARY
    # Each tier has its own vector index and model row, and gc keeps both.
    assert app.gc()["models_removed"] == 0
    assert len(vector_counts(app)) == 2


def test_primary_stopped_mid_session_then_back(tiered, ollama: Server) -> None:
    app = tiered()
    app.index()
    assert search(app).tier == PRIMARY
    ollama.stop()
    result = search(app)  # the query embedding fails: the same search moves to the fallback
    assert (result.mode, result.tier) == ("hybrid", FALLBACK)
    assert result.model == str(app.settings.fallback_model)
    assert result.hits
    assert re.match(
        r"ollama unreachable since \d\d:\d\d; using the fallback model ", result.degraded_reason
    ), result.degraded_reason
    started = time.monotonic()
    assert search(app).tier == FALLBACK
    assert time.monotonic() - started < 0.5  # the dead server is not asked again meanwhile
    ollama.start()
    wait_for(lambda: search(app).tier == PRIMARY)  # back without a restart
    assert search(app).degraded_reason is None


def test_every_answer_says_its_mode_through_stops_and_starts(tiered, ollama: Server) -> None:
    """200 searches while the primary is stopped and started twice: 200 answers, each
    hybrid, from the fallback whenever the primary is down, and the primary again once
    it is back."""
    app = tiered()
    app.index()
    answers: list[tuple[str, Any]] = []
    phases = ["up", "down", "up", "down", "up"]
    for n, phase in enumerate(phases):
        if phase == "down":
            ollama.stop()
        elif n:
            ollama.start()
        for i in range(40):
            result = search(app)
            answers.append((phase, result))
            if phase == "up" and i >= 20 and result.tier == FALLBACK:
                time.sleep(0.05)  # give the background probe its moment
    assert len(answers) == 200
    assert all(r.mode == "hybrid" and r.hits for _, r in answers)
    for phase, r in answers:
        if phase == "down":
            assert r.tier == FALLBACK and "using the fallback model" in r.degraded_reason
        else:
            assert r.tier in (PRIMARY, FALLBACK)
            assert (r.tier == PRIMARY) == (r.degraded_reason is None)
    for n in range(len(phases)):
        assert answers[n * 40 + 39][1].tier == ("primary" if phases[n] == "up" else FALLBACK)


def test_nan_after_some_vectors(tiered, ollama: Server) -> None:
    served = [0]

    def hook(texts: list[str], call: int) -> tuple[int, Any]:
        served[0] += len(texts)
        if served[0] > 40:  # the Ollama NaN regression: HTTP 500 from its JSON encoder
            return 500, {"error": "failed to encode response: json: unsupported value: NaN"}
        return 200, {"model": MODEL, "embeddings": [[0.5] * 8 for _ in texts]}

    ollama.state.embed_hook = hook
    app = tiered(embed_batch=16)
    report = app.index()
    primary, fallback = report.tiers
    n = passages(app)
    assert fallback.pending == 0
    assert 0 < primary.pending < n and primary.error and "invalid vectors" in primary.error
    assert vector_counts(app)[OLLAMA] <= 40  # nothing invalid was stored
    calls = len(ollama.state.embed_calls)
    assert calls < 80, "a broken model is not asked passage by passage for the whole vault"
    result = search(app)
    assert (result.mode, result.tier) == ("hybrid", FALLBACK)
    assert "using the fallback model" in result.degraded_reason


def test_slow_primary_is_left_after_the_probe_timeout(tiered, ollama: Server) -> None:
    app = tiered()
    app.index()
    ollama.state.delay = 5.0
    started = time.monotonic()
    result = search(app)
    first = time.monotonic() - started
    assert result.tier == FALLBACK and "did not answer (timeout)" in result.degraded_reason
    assert first < 2.0, f"the slow primary held the search {first:.1f} s"
    started = time.monotonic()
    assert search(app).tier == FALLBACK
    assert time.monotonic() - started < 0.5  # no second wait for the slow server
    ollama.state.delay = 0.0
    ollama.state.release.set()
    wait_for(lambda: search(app).tier == PRIMARY, timeout=30)


def test_http_500_moves_to_the_fallback(tiered, ollama: Server) -> None:
    app = tiered()
    app.index()
    ollama.state.embed_hook = lambda texts, call: (500, {"error": "model runner crashed"})
    result = search(app)
    assert result.tier == FALLBACK and result.hits
    assert "ollama failing (server error, HTTP 500)" in result.degraded_reason
    ollama.state.embed_hook = None
    wait_for(lambda: search(app).tier == PRIMARY)


def test_model_still_pulling_fills_the_primary_later(tiered, ollama: Server) -> None:
    ollama.state.models = []  # Ollama is up, the model not pulled yet
    app = tiered()
    report = app.index()
    primary, fallback = report.tiers
    assert fallback.pending == 0 and primary.pending == passages(app)
    assert primary.error and "not pulled" in primary.error
    result = search(app)  # useful from the first minute: semantic, from the fallback
    assert (result.mode, result.tier) == ("hybrid", FALLBACK)
    assert f"{OLLAMA} not pulled yet since" in result.degraded_reason
    ollama.state.models = [_model_entry(f"{MODEL}:latest")]  # the pull finished
    time.sleep(0.3)  # the next probe is due
    report = app.index()
    assert report.tiers[0].pending == 0 and report.tiers[0].embedded == passages(app)
    assert search(app).tier == PRIMARY


def test_primary_still_filling_is_not_searched(tiered, ollama: Server) -> None:
    app = tiered()
    ollama.stop()
    app.index()  # the fallback is complete, the primary has nothing
    ollama.start()
    assert app.tiers.primary.probe(force=True)
    app.index(embed_limit=5)  # the primary now has a few vectors
    result = search(app)
    assert result.tier == FALLBACK
    assert re.search(
        rf"{OLLAMA} lacks vectors for \d+ passages; using the fallback model",
        result.degraded_reason,
    ), result.degraded_reason
    app.index()
    assert search(app).tier == PRIMARY


def test_wrong_dimension_is_refused_before_any_vector_is_stored(tiered) -> None:
    app = tiered(embed_dim=16)  # the fake answers with 8
    report = app.index()
    assert report.tiers[0].error and "dimension 8, expected 16" in report.tiers[0].error
    assert OLLAMA not in vector_counts(app)
    assert search(app).tier == FALLBACK


def test_watcher_fills_the_primary_once_it_answers(
    tiered, ollama: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retriever import watch

    monkeypatch.setattr(watch, "RETRY_SECONDS", 1)
    ollama.stop()
    app = tiered()
    stop = threading.Event()
    reports: list[Any] = []
    thread = threading.Thread(
        target=watch.watch_vault, args=(app,), kwargs={"stop": stop, "on_report": reports.append}
    )
    thread.start()
    try:
        wait_for(lambda: bool(reports))
        assert reports[0].tiers[1].pending == 0 and reports[0].tiers[0].pending > 0
        ollama.start()  # no note changes: the watcher's retry fills the primary
        wait_for(lambda: any(r.tiers[0].pending == 0 for r in reports), timeout=30)
    finally:
        stop.set()
        thread.join(timeout=30)


def test_each_tier_is_calibrated(tiered) -> None:
    app = tiered(calibrate=True)
    report = app.index()
    assert report.calibration is not None
    assert [t["tier"] for t in report.calibration["tiers"]] == [PRIMARY, FALLBACK]
    with app.db.connection() as conn:
        keys = {r[0] for r in conn.execute("SELECT model FROM calibrations")}
        conn.commit()
    fingerprints = {t.loaded().fingerprint for t in app.tiers.tiers}  # type: ignore[union-attr]
    assert fingerprints | {""} == keys


def test_health_lists_every_tier(tiered, ollama: Server) -> None:
    app = tiered()
    app.index()
    report = run_health(app)
    rows = {r["tier"]: r for r in report.facts["tiers"]}
    assert set(rows) == {PRIMARY, FALLBACK}
    n = passages(app)
    for row in rows.values():
        assert row["state"] == "up" and row["vectors"] == n and row["last_probe"]
    assert report.check("tiers").status == "ok"  # type: ignore[union-attr]
    ollama.stop()
    app.embedder_failed("Ollama server is down or unreachable at x (ConnectError)")
    report = run_health(app)
    rows = {r["tier"]: r for r in report.facts["tiers"]}
    assert rows[PRIMARY]["state"] == "down" and rows[FALLBACK]["state"] == "up"
    tiers = report.check("tiers")
    assert tiers is not None and tiers.status == "warn"
    assert "answers from the fallback tier" in tiers.detail
    assert report.search_mode == "hybrid" and report.verdict == "degraded"


# --------------------------------------------------------------------------- languages


def test_language_guess_and_model_table() -> None:
    assert languages.guess("Le serveur est dans la baie et les disques sont pleins.") == "fr"
    assert languages.guess("The server is in the rack and the disks are full of data.") == "en"
    assert languages.guess("restic") is None
    assert languages.model_languages("ollama:bge-m3:567m") == languages.ANY
    assert languages.model_languages("minishlab/potion-base-8M") == languages.ENGLISH
    assert languages.model_languages("/opt/models/potion-base-8M") == languages.ENGLISH
    assert languages.model_languages("ollama:all-minilm") == languages.ENGLISH
    assert languages.model_languages("/somewhere/my-own-model") is None  # unknown: no warning


def test_query_language_from_a_short_question() -> None:
    assert languages.query_language("Quel raccourci permet de supprimer la note ?") == "fr"
    assert languages.query_language("Où manger des quenelles à Lyon ?") == "fr"
    assert languages.query_language("What sights are worth seeing in Lyon?") == "en"
    assert languages.query_language("shakshuka ingredients") is None  # nothing says
    assert languages.query_language("the and de la") is None  # mixed: unsure


def test_vault_languages_are_those_of_a_real_share_of_passages() -> None:
    english = "The server is in the rack and the disks are full of data."
    french = "Le serveur est dans la baie et les disques sont pleins."
    assert languages.present([english] * 30 + [french] * 2) == ("en", "fr")
    assert languages.present([english] * 40 + [french]) == ("en",)
    assert languages.present(["restic"]) == ()


FRENCH = [
    "La sauvegarde des données est faite chaque nuit avec restic, et les instantanés sont "
    "gardés pendant trente jours sur le disque externe.",
    "Pour restaurer un fichier, il faut monter le dépôt puis copier le fichier dans le "
    "dossier voulu; cette opération peut prendre du temps.",
    "Les mots de passe sont dans le coffre et ne sont jamais écrits dans les notes; nous "
    "avons aussi une copie sur papier dans un lieu sûr.",
    "Le routeur de la maison est configuré avec un réseau pour les invités et les objets "
    "connectés, qui sont isolés du reste du réseau.",
]


def test_health_warns_when_the_model_does_not_read_the_vault(
    make_app, tmp_path: Path, model_dir: Path
) -> None:
    vault = tmp_path / "notes"
    vault.mkdir()
    for i, text in enumerate(FRENCH * 3):
        (vault / f"note {i}.md").write_text(f"# Note {i}\n\n{text}\n", "utf-8")
    english = tmp_path / "models" / "potion-base-8M"  # a known English-only model's name
    shutil.copytree(model_dir, english)
    app = make_app(vault, model=english)
    app.index()
    check = run_health(app).check("language")
    assert check is not None and check.status == "warn"
    assert "French" in check.detail and "RETRIEVER_EMBED_MODEL" in (check.hint or "")
    multilingual = tmp_path / "models" / "potion-multilingual-128M"
    shutil.copytree(model_dir, multilingual)
    other = make_app(vault, model=multilingual)
    other.index()
    check = run_health(other).check("language")
    assert check is not None and check.status == "ok" and "French" in check.detail


def test_mcp_server_switches_tiers_without_a_restart(
    tiered, ollama: Server, tmp_path: Path
) -> None:
    from retriever.mcp_server import build_server
    from tests.test_mcp import Caller

    app = tiered()
    app.index()
    mcp = Caller(build_server(app))
    data = mcp.ok("search", queries=next(_queries))
    assert (data["mode"], data["tier"], data["model"]) == ("hybrid", PRIMARY, OLLAMA)
    ollama.stop()
    data = mcp.ok("search", queries=next(_queries))
    assert (data["mode"], data["tier"]) == ("hybrid", FALLBACK) and data["hits"]
    assert "ollama unreachable since" in data["degraded_reason"]
    assert data["model"] == Path(str(app.settings.fallback_model)).name  # no local path
    text = mcp.ok("get_context", topic=next(_queries))
    assert "using the fallback model" in text
    health = mcp.ok("health")
    assert {t["tier"]: t["state"] for t in health["tiers"]} == {
        PRIMARY: "down",
        FALLBACK: "up",
    }
    ollama.start()
    wait_for(lambda: mcp.ok("search", queries=next(_queries))["tier"] == PRIMARY)
    for message in mcp.messages:
        assert str(tmp_path) not in message
