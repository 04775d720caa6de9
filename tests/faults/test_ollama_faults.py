"""Fault 4: Ollama down, slow, failing with HTTP 500, answering NaN or vectors of the wrong
size, mid-index and mid-search. The real `ollama` client talks to the loopback protocol
fake of tests/test_embed_ollama.py; the indexer runs as the CLI.

Mid-index: the passages the fault touches stay pending (or refused), every stored vector
is exactly the model's vector for its text, and once the server heals one more run gives
a clean index. Mid-search: the answer says it is lexical and why."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retriever.app import Retriever
from retriever.config import Settings
from retriever.passage_text import unpack
from retriever.prepare import embedding_input
from retriever.windows import embedding_windows
from tests.conftest import TEST_VAULT
from tests.faults.dump import dump_index, rows
from tests.faults.harness import (
    amcheck,
    copy_vault,
    env_for,
    free_port,
    record_convergence,
    run_json,
)
from tests.faults.table import record
from tests.test_embed_ollama import MODEL, FakeOllama, _handler, _model_entry, fake_vector

pytestmark = pytest.mark.faults

HEALTHY_CALLS = 5  # the start-up probe and two batches of 8 passages (whole, then windows)
MARKER = "kombu"  # NaN for any text that mentions it (cooking/Dashi.md does)
FAULTS = ["down", "slow", "http 500", "NaN", "wrong dimension"]


class Ollama:
    """The protocol fake on a fixed port, with a fault switched on after some calls; it can
    go down and come back on the same port."""

    def __init__(self) -> None:
        self.state = FakeOllama(url="", models=[_model_entry(f"{MODEL}:latest")])
        self.state.embed_hook = self._hook
        self.port = free_port()
        self.state.url = f"http://127.0.0.1:{self.port}"
        self.fault: str | None = None
        self.after = 0
        self._server: ThreadingHTTPServer | None = None
        self._stopping: threading.Thread | None = None
        self.start()

    def start(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self.state))
        server.daemon_threads = True
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        self._server = server

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            for conn in list(self.state.connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)

    def heal(self) -> None:
        self.fault = None
        if self._stopping is not None:  # the old server must let go of the port first
            self._stopping.join(timeout=10)
            self._stopping = None
        if self._server is None:
            self.start()

    def _hook(self, texts: list[str], n: int) -> tuple[int, Any]:
        ok = {"model": MODEL, "embeddings": [fake_vector(t) for t in texts]}
        if self.fault is None or n <= self.after:
            return 200, ok
        if self.fault == "down":
            if self._stopping is None:
                self._stopping = threading.Thread(target=self.stop, daemon=True)
                self._stopping.start()
            return 503, {"error": "shutting down"}
        if self.fault == "slow":
            time.sleep(2.5)  # over RETRIEVER_OLLAMA_TIMEOUT
            return 200, ok
        if self.fault == "http 500":
            return 500, {"error": "llama runner process has terminated"}
        if self.fault == "NaN":
            if any(MARKER in t.lower() for t in texts):  # what Ollama's Go server answers
                return 500, {"error": "failed to encode response: json: unsupported value: NaN"}
            return 200, ok
        assert self.fault == "wrong dimension"
        return 200, {"model": MODEL, "embeddings": [[*fake_vector(t), 0.5] for t in texts]}


@pytest.fixture
def ollama() -> Iterator[Ollama]:
    fake = Ollama()
    try:
        yield fake
    finally:
        fake.stop()


def ollama_env(home: Path, url: str, fake: Ollama) -> dict[str, str]:
    return env_for(
        home,
        url,
        f"ollama:{MODEL}",
        RETRIEVER_OLLAMA_URL=fake.state.url,
        RETRIEVER_OLLAMA_TIMEOUT="1",
        RETRIEVER_EMBED_BATCH="8",
    )


def wrong_vectors(url: str) -> int:
    """Stored vectors that are not exactly the model's vector for their passage's text (part
    0) or for that window of it (parts 1..)."""
    bad = 0
    for packed, context, part, vec in rows(
        url,
        "SELECT p.ztext, p.context, e.part, e.vec::text FROM embeddings e"
        " JOIN passages p ON p.hash = e.hash",
    ):
        got = np.array([float(x) for x in vec.strip("[]").split(",")])
        text = unpack(packed)
        windows = embedding_windows(context, text)
        source = embedding_input(context, text) if part == 0 else windows[part - 1]
        want = np.array(fake_vector(source))
        bad += int(got.shape != want.shape or not np.allclose(got, want, atol=1e-6))
    return bad


def _in_ci(fault: str, *quick: str) -> Any:
    """`make test` runs the ``quick`` faults; `make faults` all of them."""
    return fault if fault in quick else pytest.param(fault, marks=pytest.mark.faults_full)


@pytest.mark.parametrize("fault", [_in_ci(f, "NaN") for f in FAULTS])
def test_ollama_fault_mid_index(
    fault: str,
    ollama: Ollama,
    db_url: str,
    tmp_path: Path,
    clean_index: Callable[..., dict[str, Any]],
) -> None:
    vault = copy_vault(TEST_VAULT, tmp_path / "vault")
    env = ollama_env(tmp_path / "home", db_url, ollama)
    ollama.fault, ollama.after = fault, HEALTHY_CALLS
    code, data, stderr = run_json(["index", str(vault)], env)
    print(
        f"{fault}: exit {code}, embedded {data.get('passages_embedded')}, pending "
        f"{data.get('passages_pending')}, refused {data.get('vectors_refused')}, "
        f"error {data.get('embed_error')}"
    )
    assert code == 1, stderr[-2000:]  # degraded: the notes are indexed, vectors pending
    assert "Traceback" not in stderr
    assert data["passages_embedded"] >= 16 and data["passages_pending"] > 0
    stored_wrong = wrong_vectors(db_url)
    if fault in ("NaN", "wrong dimension"):
        # Refused, never stored; a model that keeps failing is given up on for this run
        # (the tiers stop after a run of invalid vectors) and the rest stay pending.
        error = data["embed_error"]
        assert data["vectors_refused"] > 0 and (error is None or "invalid vectors" in error)
    else:
        assert data["embed_error"] and "Ollama" in data["embed_error"]

    ollama.heal()
    started = time.monotonic()
    code, data, stderr = run_json(["index", str(vault)], env)
    took = time.monotonic() - started
    assert code == 0 and data["passages_pending"] == 0, stderr[-2000:]
    got, want = (
        dump_index(db_url),
        clean_index(vault, f"ollama:{MODEL}", RETRIEVER_OLLAMA_URL=ollama.state.url),
    )
    amcheck(db_url)
    record_convergence(
        f"ollama {fault} mid-index",
        got,
        want,
        wrong=stored_wrong,
        recovery_s=took,
        note="wrong = vectors stored wrong",
    )
    assert stored_wrong == 0


# Mid-search: an app that searched hybrid a moment ago, then the fault.
SEARCH_EXPECT = {
    "down": "Ollama",
    "slow": "did not answer",
    "http 500": "HTTP 500",
    "NaN": "NaN",
    "wrong dimension": "vector",
}


@pytest.mark.parametrize(
    "fault",
    [
        *(_in_ci(f) for f in FAULTS[:3]),
        *(pytest.param(f, marks=pytest.mark.faults_full) for f in FAULTS[3:]),
    ],
)
def test_ollama_fault_mid_search(fault: str, ollama: Ollama, db_url: str, tmp_path: Path) -> None:
    vault = copy_vault(TEST_VAULT, tmp_path / "vault")
    env = ollama_env(tmp_path / "home", db_url, ollama)
    code, _, stderr = run_json(["index", str(vault)], env)
    assert code == 0, stderr[-2000:]
    settings = Settings(
        vault=vault,
        home=tmp_path / "home",
        database_url=db_url,
        embed_model=f"ollama:{MODEL}",
        ollama_url=ollama.state.url,
        ollama_timeout=1.0,
        calibrate=False,
        fresh_search=False,
    )
    app = Retriever(settings)
    # Query vectors are cached per text: each question is new, so each needs the model.
    queries = ["kombu dashi stock", "dashi from kombu", "kombu broth for miso", "what is in dashi"]
    wrong = 0
    try:
        before = app.search(queries[0])
        assert before.mode == "hybrid" and before.degraded_reason is None
        ollama.fault, ollama.after = fault, 0
        answers = [app.search(q) for q in queries[1:]]  # the failing call, then the next ones
        for a in answers:
            print(f"{fault}: {a.mode} / {a.degraded_reason}")
            healthy_claim = a.mode == "hybrid" and not a.degraded_reason
            explained = (
                a.degraded_reason and SEARCH_EXPECT[fault].lower() in a.degraded_reason.lower()
            )
            wrong += int(healthy_claim or not explained or not a.hits)
            if a.hits:
                assert a.hits[0].path == before.hits[0].path  # keywords still find the note
        ollama.heal()
        app.embedder(retry=True)
        started = time.monotonic()
        after = app.search("kombu and bonito dashi")
        took = time.monotonic() - started
    finally:
        app.close()
    record(
        f"ollama {fault} mid-search",
        converged=after.mode == "hybrid",
        wrong=wrong,
        recovery_s=took,
        note=f"{len(answers)} answers during the fault",
    )
    assert wrong == 0
    assert after.mode == "hybrid" and after.degraded_reason is None
