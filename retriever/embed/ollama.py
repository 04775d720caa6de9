"""Embeddings from an Ollama server, through the official ``ollama`` client (``/api/embed``).

Every batch is validated like any other embedder's output (one finite, non-zero vector of
the expected dimension per input), so a misbehaving server or model can never get bad
vectors stored: a bad batch raises :class:`InvalidVectorError`, an unreachable server or
missing model raises :class:`EmbedderUnavailable` with a reason a human can act on.
"""

from __future__ import annotations

import copy
import logging
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import TypeVar

import httpx
import numpy as np
import ollama
import pydantic

from retriever.embed.base import (
    EmbedderError,
    EmbedderUnavailable,
    InvalidVectorError,
    validate_vectors,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

# Ollama's Go server cannot JSON-encode NaN, so a model that produces NaN (seen with bge-m3
# on some GPU builds) surfaces as HTTP 500 with this text. It is deterministic for the
# input, so retrying is pointless: report it as an invalid batch instead.
_NAN_MARKERS = ("unsupported value: nan", "unsupported value: +inf", "unsupported value: -inf")


def _safe_host(host: str) -> str:
    """``host`` without credentials or query, fit for error messages and logs."""
    raw = host if "://" in host else f"http://{host}"
    try:
        parts = urllib.parse.urlsplit(raw)
        netloc = parts.hostname or ""
    except ValueError:
        return "<unparseable URL>"
    if ":" in netloc:  # IPv6 literal
        netloc = f"[{netloc}]"
    try:
        port = parts.port
    except ValueError:  # keep the bad port visible: it is the likely mistake
        port_text = parts.netloc.rpartition("@")[2].rpartition(":")[2]
        netloc = f"{netloc}:{port_text}"
    else:
        if port is not None:
            netloc = f"{netloc}:{port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def _canonical(name: str) -> str:
    """Ollama treats ``bge-m3`` and ``bge-m3:latest`` as the same model."""
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


def _short(text: object, limit: int = 200) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


class _Retryable(Exception):
    """Internal: a transient failure worth another attempt (carries the human reason)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class OllamaEmbedder:
    """Embed through Ollama's ``/api/embed``. ``model`` is an Ollama name like ``bge-m3``.

    ``retries`` is the number of extra attempts after the first one; only connection
    errors, timeouts and HTTP 5xx are retried (4xx means the request itself is wrong).
    ``probe_timeout`` bounds the start-up model listing and every query embedding made
    through :meth:`for_queries` (a search must not wait out a hung server's full timeout
    when another tier can answer). ``expected_dim``: the model must answer the start-up
    probe with this dimension, or it is refused before any vector is stored.
    """

    kind = "ollama"
    contextual = True  # Ollama's embedding models are transformers: see retriever.feedback

    def __init__(
        self,
        model: str,
        *,
        host: str,
        timeout: float = 60.0,
        probe_timeout: float | None = None,
        expected_dim: int | None = None,
        batch_size: int = 32,
        retries: int = 3,
        keep_alive: str = "10m",
        backoff: float = 0.2,
    ) -> None:
        if not model.strip():
            raise EmbedderUnavailable("no Ollama model name given (expected ollama:<model>)")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.model = model
        self.model_id = f"ollama:{model}"
        self.batch_size = batch_size
        self.retries = max(0, retries)
        self.keep_alive = keep_alive
        self.timeout = timeout
        self.probe_timeout = min(timeout, probe_timeout) if probe_timeout else timeout
        self._backoff = max(0.0, backoff)
        self._host = _safe_host(host)
        self._owner = True  # False for the query view, which shares the clients
        try:
            self._client = ollama.Client(host=host, timeout=timeout)
            self._quick = ollama.Client(host=host, timeout=self.probe_timeout)
        except (ValueError, httpx.InvalidURL) as exc:
            # Say what is wrong without echoing the URL, which may carry credentials.
            raise EmbedderUnavailable(
                f"invalid Ollama URL {self._host}: {type(exc).__name__}"
            ) from None

        try:
            digest = self._check_model()
            # One probe embedding teaches us the dimension (and proves the model embeds).
            # The full timeout and retries: the server answered the listing, and loading a
            # model into memory may take a while on its first request.
            try:
                probe = self._embed_batch(["dimension probe"], expected_dim=None)
            except InvalidVectorError as exc:
                # At start-up a broken model means "no vectors at all", not one bad batch.
                raise EmbedderUnavailable(
                    f"Ollama model {model!r} returned invalid vectors for a probe: {exc}"
                ) from exc
            if expected_dim is not None and probe.shape[1] != expected_dim:
                raise EmbedderUnavailable(
                    f"Ollama model {model!r} answers with dimension {probe.shape[1]}, "
                    f"expected {expected_dim} (RETRIEVER_EMBED_DIM): is it the right model "
                    "and tag? No vector is stored from it"
                )
        except BaseException:
            self.close()
            raise
        self.dimension: int = int(probe.shape[1])
        self.fingerprint: str = (
            f"ollama:{model}:{self.dimension}:{digest[:12] if digest else 'nodigest'}"
        )
        log.info("Ollama embedder ready: %s at %s (dim %d)", model, self._host, self.dimension)

    # -- Embedder protocol -------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return float32 (len(texts), dimension); raise rather than return anything bad."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out = [
            self._embed_batch(texts[i : i + self.batch_size], expected_dim=self.dimension)
            for i in range(0, len(texts), self.batch_size)
        ]
        return out[0] if len(out) == 1 else np.concatenate(out, axis=0)

    def for_queries(self) -> OllamaEmbedder:
        """The same model for query embeddings: one attempt within ``probe_timeout``, so a
        search whose primary tier hangs moves on to the next tier quickly."""
        view = copy.copy(self)
        view._client, view.timeout, view.retries = self._quick, self.probe_timeout, 0
        view._owner = False
        return view

    def close(self) -> None:
        if self._owner:
            self._client.close()
            self._quick.close()

    def __enter__(self) -> OllamaEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------

    def _check_model(self) -> str | None:
        """Fail fast with a useful reason; return the model digest when the server gives one.

        Deliberately a single attempt: callers degrade to lexical search when Ollama is
        unavailable, and that beats stalling every caller through a retry schedule.
        """
        listing = self._call(
            self._quick.list, what="list models", attempts=1, limit=self.probe_timeout
        )
        wanted = _canonical(self.model)
        for entry in listing.models:
            name = entry.model or ""
            if name and _canonical(name) == wanted:
                digest = (entry.digest or "").removeprefix("sha256:")
                return digest or None
        raise EmbedderUnavailable(
            f"Ollama model {self.model!r} is not pulled on {self._host}: "
            f"run `ollama pull {self.model}`"
        )

    def _embed_batch(
        self, batch: list[str], *, expected_dim: int | None, attempts: int | None = None
    ) -> np.ndarray:
        def request() -> ollama.EmbedResponse:
            return self._client.embed(model=self.model, input=batch, keep_alive=self.keep_alive)

        response = self._call(request, what=f"embed {len(batch)} text(s)", attempts=attempts)
        return validate_vectors(response.embeddings, len(batch), expected_dim)

    def _call(
        self,
        fn: Callable[[], T],
        *,
        what: str,
        attempts: int | None = None,
        limit: float | None = None,
    ) -> T:
        """Run ``fn`` with bounded retries; translate every failure into our error types."""
        total = self.retries + 1 if attempts is None else attempts
        for attempt in range(total):
            try:
                return self._once(fn, self.timeout if limit is None else limit)
            except _Retryable as exc:
                if attempt + 1 >= total:
                    suffix = f" (after {total} attempts)" if total > 1 else ""
                    raise EmbedderUnavailable(f"{exc.reason}{suffix}") from None
                delay = self._backoff * (2**attempt)
                log.warning(
                    "Ollama %s failed (%s); retry %d/%d in %.1fs",
                    what,
                    exc.reason,
                    attempt + 1,
                    total - 1,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, fn: Callable[[], T], limit: float) -> T:
        try:
            return fn()
        except ollama.ResponseError as exc:
            raise self._from_response_error(exc) from None
        except httpx.TimeoutException:
            raise _Retryable(
                f"Ollama at {self._host} did not answer within {limit:g}s (timeout)"
            ) from None
        except (ConnectionError, httpx.TransportError) as exc:
            # The client turns httpx.ConnectError into the builtin ConnectionError.
            raise _Retryable(
                f"Ollama server is down or unreachable at {self._host} ({type(exc).__name__})"
            ) from None
        except (pydantic.ValidationError, ValueError) as exc:
            # Malformed JSON or a response of the wrong shape: nothing usable in this batch.
            raise InvalidVectorError(
                f"Ollama at {self._host} returned a malformed response: {_short(exc)}"
            ) from None

    def _from_response_error(self, exc: ollama.ResponseError) -> EmbedderError | _Retryable:
        code = exc.status_code
        message = _short(exc.error)
        if any(marker in message.lower() for marker in _NAN_MARKERS):
            return InvalidVectorError(
                f"Ollama model {self.model!r} produced NaN/infinite values for this batch "
                f"(HTTP {code}: {message})"
            )
        if code == 404:
            return EmbedderUnavailable(
                f"Ollama model {self.model!r} is not available on {self._host}: "
                f"run `ollama pull {self.model}` ({message})"
            )
        if code >= 500:
            return _Retryable(f"Ollama at {self._host} failed with HTTP {code}: {message}")
        return EmbedderUnavailable(
            f"Ollama at {self._host} refused the request: HTTP {code}: {message}"
        )
