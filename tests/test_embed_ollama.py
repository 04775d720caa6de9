"""OllamaEmbedder against a real HTTP server that speaks the Ollama protocol.

The server runs in a thread on 127.0.0.1 and is scripted per test (down, slow, 5xx,
NaN, wrong shapes, model missing); the real ``ollama`` client library does the talking.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from retriever.embed import (
    Embedder,
    EmbedderUnavailable,
    InvalidVectorError,
    load_embedder,
)
from retriever.embed.ollama import OllamaEmbedder

DIM = 8
MODEL = "test-embed"
DIGEST = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"


def fake_vector(text: str, dim: int = DIM) -> list[float]:
    """Deterministic, non-zero vector per text, so tests can check order and batching."""
    h = hashlib.sha256(text.encode()).digest()
    return [(b + 1) / 256 for b in h[:dim]]


def _latest(name: str) -> str:
    return name if ":" in name else f"{name}:latest"


# An embed hook gets (inputs, call number) and returns (status, JSON-able body or raw bytes).
EmbedHook = Callable[[list[str], int], tuple[int, Any]]


@dataclass
class FakeOllama:
    url: str
    models: list[dict[str, Any]] = field(default_factory=list)
    embed_hook: EmbedHook | None = None
    delay: float = 0.0  # seconds to stall /api/embed (for timeouts)
    embed_calls: list[dict[str, Any]] = field(default_factory=list)
    tags_calls: int = 0
    release: threading.Event = field(default_factory=threading.Event)
    stop: Callable[[], None] = lambda: None
    connections: set[socket.socket] = field(default_factory=set)

    def answer_embed(self, body: dict[str, Any]) -> tuple[int, Any]:
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        self.embed_calls.append(body)
        # Like Ollama, treat "name" and "name:latest" as the same model.
        known = {_latest(m["model"]) for m in self.models}
        if _latest(str(body.get("model"))) not in known:
            return 404, {"error": f'model "{body.get("model")}" not found, try pulling it first'}
        if self.embed_hook is not None:
            return self.embed_hook(texts, len(self.embed_calls))
        return 200, {"model": body["model"], "embeddings": [fake_vector(t) for t in texts]}


def _handler(fake: FakeOllama) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out separately: avoid 40 ms stalls

        def setup(self) -> None:
            super().setup()
            fake.connections.add(self.connection)

        def finish(self) -> None:
            fake.connections.discard(self.connection)
            super().finish()

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, payload: Any) -> None:
            # Python's json emits NaN/Infinity literals, as a lenient server would.
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def do_GET(self) -> None:
            if self.path == "/api/tags":
                fake.tags_calls += 1
                self._send(200, {"models": fake.models})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/api/embed":
                self._send(404, {"error": "not found"})
                return
            if fake.delay:
                fake.release.wait(fake.delay)
            status, payload = fake.answer_embed(body)
            self._send(status, payload)

    return Handler


def _model_entry(name: str, digest: str = DIGEST) -> dict[str, Any]:
    # Shape of a real /api/tags entry (name and model carry the same value).
    return {
        "name": name,
        "model": name,
        "modified_at": "2025-05-01T10:00:00.000000000Z",
        "size": 1234,
        "digest": digest,
        "details": {"format": "gguf", "family": "bert", "parameter_size": "1M"},
    }


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    state = FakeOllama(url="", models=[_model_entry(f"{MODEL}:latest")])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True

    def stop() -> None:
        state.release.set()  # wake any stalled handler so shutdown is quick
        server.shutdown()  # returns at once when already stopped
        server.server_close()
        for conn in list(state.connections):  # a dead server drops keep-alive connections too
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        thread.join(timeout=2)

    state.stop = stop
    thread.start()
    try:
        yield state
    finally:
        stop()


def make(fake: FakeOllama, **kw: Any) -> OllamaEmbedder:
    opts: dict[str, Any] = {"host": fake.url, "timeout": 2.0, "retries": 2, "backoff": 0.01}
    opts.update(kw)
    return OllamaEmbedder(MODEL, **opts)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- happy path ---------------------------------------------------------------------------


def test_success_dimension_fingerprint_and_batching(fake: FakeOllama) -> None:
    emb = make(fake, batch_size=2, keep_alive="3m")
    assert isinstance(emb, Embedder)
    assert emb.model_id == f"ollama:{MODEL}"
    assert emb.dimension == DIM
    assert emb.fingerprint == f"ollama:{MODEL}:{DIM}:{DIGEST[:12]}"

    texts = [f"note {i}" for i in range(5)]
    fake.embed_calls.clear()
    vecs = emb.embed(texts)
    assert vecs.dtype == np.float32
    assert vecs.shape == (5, DIM)
    expected = np.asarray([fake_vector(t) for t in texts], dtype=np.float32)
    np.testing.assert_allclose(vecs, expected)  # order preserved across batches
    assert [len(c["input"]) for c in fake.embed_calls] == [2, 2, 1]
    assert all(c["keep_alive"] == "3m" and c["model"] == MODEL for c in fake.embed_calls)
    assert emb.embed([]).shape == (0, DIM)


def test_model_name_matches_with_or_without_latest(fake: FakeOllama) -> None:
    fake.models = [_model_entry(MODEL, digest="sha256:" + DIGEST)]
    emb = OllamaEmbedder(f"{MODEL}:latest", host=fake.url, timeout=2.0)
    assert emb.fingerprint == f"ollama:{MODEL}:latest:{DIM}:{DIGEST[:12]}"
    assert emb.embed(["x"]).shape == (1, DIM)


def test_load_embedder_returns_working_ollama_embedder(fake: FakeOllama) -> None:
    emb = load_embedder(f"ollama:{MODEL}", ollama_url=fake.url, timeout=2.0)
    assert isinstance(emb, OllamaEmbedder)
    assert emb.model_id == f"ollama:{MODEL}"
    np.testing.assert_allclose(emb.embed(["hello"])[0], np.float32(fake_vector("hello")))


# -- server unavailable ---------------------------------------------------------------------


def test_server_down_is_unavailable_with_host_in_reason() -> None:
    port = closed_port()
    started = time.monotonic()
    with pytest.raises(
        EmbedderUnavailable, match=rf"down or unreachable at http://127\.0\.0\.1:{port}"
    ):
        OllamaEmbedder(MODEL, host=f"http://127.0.0.1:{port}", timeout=1.0, backoff=0.01)
    assert time.monotonic() - started < 2.0  # no retry schedule at start-up


def test_error_messages_never_carry_credentials() -> None:
    port = closed_port()
    with pytest.raises(EmbedderUnavailable) as info:
        OllamaEmbedder(MODEL, host=f"http://user:s3cret@127.0.0.1:{port}", timeout=1.0)
    assert "s3cret" not in str(info.value)
    assert "user" not in str(info.value)


def test_invalid_url_is_unavailable() -> None:
    with pytest.raises(EmbedderUnavailable, match="invalid Ollama URL") as info:
        OllamaEmbedder(MODEL, host="http://user:s3cret@127.0.0.1:notaport", timeout=1.0)
    assert "s3cret" not in str(info.value)


def test_server_goes_down_after_start(fake: FakeOllama) -> None:
    emb = make(fake)
    fake.stop()
    with pytest.raises(EmbedderUnavailable, match=r"down or unreachable.*after 3 attempts"):
        emb.embed(["a"])


def test_slow_server_times_out(fake: FakeOllama) -> None:
    emb = make(fake, timeout=0.5, retries=1)
    fake.delay = 5.0
    fake.embed_calls.clear()
    started = time.monotonic()
    with pytest.raises(EmbedderUnavailable, match=r"did not answer within 0\.5s \(timeout\)"):
        emb.embed(["slow"])
    assert time.monotonic() - started < 3.0
    assert len(fake.embed_calls) <= 2  # first attempt + one retry (the last may not arrive)


def test_slow_server_at_start_up(fake: FakeOllama) -> None:
    fake.delay = 5.0
    with pytest.raises(EmbedderUnavailable, match="timeout"):
        make(fake, timeout=0.3, retries=0)


# -- retries --------------------------------------------------------------------------------


def test_http_500_is_retried_then_succeeds(fake: FakeOllama) -> None:
    emb = make(fake, retries=3)
    failures = {"left": 2}

    def flaky(texts: list[str], _n: int) -> tuple[int, Any]:
        if failures["left"]:
            failures["left"] -= 1
            return 500, {"error": "llama runner process has terminated"}
        return 200, {"model": MODEL, "embeddings": [fake_vector(t) for t in texts]}

    fake.embed_hook = flaky
    fake.embed_calls.clear()
    vecs = emb.embed(["a", "b"])
    assert vecs.shape == (2, DIM)
    assert len(fake.embed_calls) == 3


def test_persistent_http_500_is_unavailable(fake: FakeOllama) -> None:
    emb = make(fake, retries=2)
    fake.embed_hook = lambda _t, _n: (500, {"error": "runner crashed"})
    fake.embed_calls.clear()
    with pytest.raises(EmbedderUnavailable, match=r"HTTP 500: runner crashed \(after 3 attempts\)"):
        emb.embed(["a"])
    assert len(fake.embed_calls) == 3


def test_http_4xx_is_not_retried(fake: FakeOllama) -> None:
    emb = make(fake, retries=3)
    fake.embed_hook = lambda _t, _n: (400, {"error": "input length exceeds context length"})
    fake.embed_calls.clear()
    with pytest.raises(EmbedderUnavailable, match="HTTP 400: input length exceeds"):
        emb.embed(["a"])
    assert len(fake.embed_calls) == 1


# -- invalid vectors ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_refused(fake: FakeOllama, bad: float) -> None:
    emb = make(fake)
    # json.dumps writes NaN / Infinity; the client's parser (json.loads) accepts them and
    # pydantic lets them through, so it is validate_vectors that must refuse the batch.
    fake.embed_hook = lambda texts, _n: (
        200,
        {"model": MODEL, "embeddings": [[bad, *fake_vector(t)[1:]] for t in texts]},
    )
    with pytest.raises(InvalidVectorError, match="NaN or infinity"):
        emb.embed(["a", "b"])


def test_nan_as_ollama_reports_it_is_invalid_not_retried(fake: FakeOllama) -> None:
    # Real Ollama cannot encode NaN and answers 500 with this text: deterministic per input.
    emb = make(fake, retries=3)
    fake.embed_hook = lambda _t, _n: (
        500,
        {"error": "failed to encode response: json: unsupported value: NaN"},
    )
    fake.embed_calls.clear()
    with pytest.raises(InvalidVectorError, match="NaN"):
        emb.embed(["long text"])
    assert len(fake.embed_calls) == 1


def test_wrong_dimension_is_refused(fake: FakeOllama) -> None:
    emb = make(fake)
    fake.embed_hook = lambda texts, _n: (
        200,
        {"model": MODEL, "embeddings": [fake_vector(t, DIM + 1) for t in texts]},
    )
    with pytest.raises(InvalidVectorError, match=f"expected dimension {DIM}, got {DIM + 1}"):
        emb.embed(["a"])


def test_fewer_vectors_than_inputs_is_refused(fake: FakeOllama) -> None:
    emb = make(fake)
    fake.embed_hook = lambda texts, _n: (
        200,
        {"model": MODEL, "embeddings": [fake_vector(t) for t in texts[:-1]]},
    )
    with pytest.raises(InvalidVectorError, match="expected 3 vectors, got 2"):
        emb.embed(["a", "b", "c"])


def test_all_zero_vector_is_refused(fake: FakeOllama) -> None:
    emb = make(fake)
    fake.embed_hook = lambda texts, _n: (
        200,
        {"model": MODEL, "embeddings": [[0.0] * DIM, *(fake_vector(t) for t in texts[1:])]},
    )
    with pytest.raises(InvalidVectorError, match="all zeros"):
        emb.embed(["a", "b"])


def test_bad_later_batch_returns_nothing(fake: FakeOllama) -> None:
    emb = make(fake, batch_size=2)

    def second_batch_bad(texts: list[str], n: int) -> tuple[int, Any]:
        vecs = [fake_vector(t) for t in texts]
        if n == 2:  # counted after clear(): batch 1 is fine, batch 2 carries a NaN
            vecs[0] = [math.nan] * DIM
        return 200, {"model": MODEL, "embeddings": vecs}

    fake.embed_calls.clear()
    fake.embed_hook = second_batch_bad
    with pytest.raises(InvalidVectorError, match="NaN"):
        emb.embed(["a", "b", "c", "d"])
    assert len(fake.embed_calls) == 2  # first batch was fine; the whole call still failed


def test_malformed_response_is_refused(fake: FakeOllama) -> None:
    emb = make(fake)
    fake.embed_hook = lambda _t, _n: (200, {"model": MODEL, "embeddings": [["x", None]]})
    with pytest.raises(InvalidVectorError, match="malformed"):
        emb.embed(["a"])
    fake.embed_hook = lambda _t, _n: (200, b"{not json")
    with pytest.raises(InvalidVectorError, match="malformed"):
        emb.embed(["a"])


def test_invalid_probe_at_start_up_is_unavailable(fake: FakeOllama) -> None:
    fake.embed_hook = lambda texts, _n: (200, {"model": MODEL, "embeddings": [[0.0] * DIM]})
    with pytest.raises(EmbedderUnavailable, match="invalid vectors for a probe"):
        make(fake)


# -- model not pulled -----------------------------------------------------------------------


def test_model_absent_from_tags(fake: FakeOllama) -> None:
    fake.models = [_model_entry("nomic-embed-text:latest")]
    with pytest.raises(EmbedderUnavailable, match=rf"not pulled.*run `ollama pull {MODEL}`"):
        make(fake)
    assert fake.embed_calls == []  # no probe when the model is known to be missing


def test_model_404_from_embed(fake: FakeOllama) -> None:
    # Listed at start-up, then deleted (or tags and embed disagree): 404 "model not found".
    emb = make(fake, retries=3)
    fake.models = [_model_entry("other:latest")]
    fake.embed_calls.clear()
    with pytest.raises(EmbedderUnavailable, match=rf"run `ollama pull {MODEL}`.*not found"):
        emb.embed(["a"])
    assert len(fake.embed_calls) == 1  # 4xx: no retry


def test_model_404_at_start_up(fake: FakeOllama) -> None:
    fake.embed_hook = lambda _t, _n: (404, {"error": f'model "{MODEL}" not found'})
    with pytest.raises(EmbedderUnavailable, match=f"ollama pull {MODEL}"):
        make(fake)
