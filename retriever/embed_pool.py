"""Big index runs encode with Model2Vec in worker processes.

Encoding is the embedding phase's CPU, and it runs in one process while the parent's
database work (reading passages, copying vectors in) is light: on two cores the second one
sat idle. The indexer encodes every other batch (on two cores) and a worker process,
which loads the model once, the rest: whole batches (passages and their windows), exactly
as the indexer would: a passage's vectors do not depend on its batch, so
the stored vectors are the same either way. Results come back in batch order. A worker
that cannot load the same model, or a pool that breaks, leaves the rest of the run to the
parent. Ollama models are not encoded here: their server does the work.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import numpy as np

from retriever.embed import Embedder
from retriever.encode import Encoded, Rows
from retriever.lifeline import bind_to_owner, start_fork_server

log = logging.getLogger(__name__)

# Pending passages from which a run starts a worker: below it, its start (a process, its
# imports and a model load: about a second) costs more than the second core gives back
# (Dendron, 4,736 passages: embedding 1.2 s alone, 1.6 s with a worker; a 4,000-note win32
# sample, 22,042 passages: 12.3 s alone, 9.0 s with one).
PARALLEL_MIN = 16_000
TASKS_IN_FLIGHT = 2  # per worker: the next batch is ready while one is stored

Encode = Callable[[Embedder, Rows], Encoded]


def workers_for(embedder: Embedder, pending: int) -> int:
    """How many worker processes a run with ``pending`` passages encodes in besides the
    indexer itself (0: none)."""
    cores = os.cpu_count() or 1
    if getattr(embedder, "kind", "") != "model2vec" or cores < 2 or pending < PARALLEL_MIN:
        return 0
    return min(cores, 4) - 1


class EncoderPool:
    """Worker processes that each hold the model and encode batches with ``encode``."""

    def __init__(self, embedder: Embedder, workers: int, encode: Encode) -> None:
        self._embedder, self._encode = embedder, encode
        start_fork_server(["retriever.prepare", "retriever.lifeline"])
        self._pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("forkserver"),
            initializer=_start_worker,
            initargs=(os.getpid(), embedder.model_id, embedder.fingerprint),
        )
        self._workers = workers
        self._broken = False

    def __enter__(self) -> EncoderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def encoded(self, batches: Iterable[Rows]) -> Iterator[tuple[Rows, Encoded]]:
        """Each batch with its encoding, in order. The indexer encodes one batch in every
        ``workers + 1`` itself, when its turn comes (its database work is light), while the
        workers encode theirs, ``TASKS_IN_FLIGHT`` each ahead: as fast as one more worker,
        without another copy of the model and its caches. Stops asking for batches when
        the caller stops."""
        window: deque[tuple[Rows, Future[Encoded] | None]] = deque()
        source = enumerate(batches)
        for n, rows in source:
            window.append((rows, self._submit(n, rows)))
            if len(window) >= (self._workers + 1) * TASKS_IN_FLIGHT:
                break
        while window:
            rows, future = window.popleft()
            yield rows, self._result(rows, future)
            for n, more in source:  # one batch in for each one out
                window.append((more, self._submit(n, more)))
                break

    def _submit(self, n: int, rows: Rows) -> Future[Encoded] | None:
        """The batch's future in a worker; None: the indexer encodes it itself."""
        if self._broken or n % (self._workers + 1) == self._workers:
            return None
        try:
            return self._pool.submit(encode_in_worker, rows)
        except Exception as exc:  # a broken pool, or a worker that could not start
            self._give_up(exc)
            return None

    def _result(self, rows: Rows, future: Future[Encoded] | None) -> Encoded:
        if future is not None:
            try:
                found = future.result()
                if found.error != WORKER_WITHOUT_MODEL:
                    return found
                self._give_up(RuntimeError("a worker could not load the same model"))
            except Exception as exc:  # a worker died: the parent carries on alone
                self._give_up(exc)
        return self._encode(self._embedder, rows)

    def _give_up(self, exc: BaseException) -> None:
        if not self._broken:
            log.warning("encoding in this process from now on: %s", exc)
        self._broken = True


WORKER_WITHOUT_MODEL = "the worker has no model"
_worker: dict[str, Any] = {}


def _start_worker(owner: int, model_id: str, fingerprint: str) -> None:
    """Pool initializer: bound to the owner, with the owner's model (same fingerprint)."""
    bind_to_owner(owner)
    try:
        from retriever.embed.model2vec import Model2VecEmbedder

        embedder = Model2VecEmbedder(model_id)
    except Exception as exc:  # the batch goes back to the owner
        log.debug("worker could not load %s: %s", model_id, exc)
        return
    if embedder.fingerprint == fingerprint:
        _worker["embedder"] = embedder


def encode_in_worker(rows: Rows) -> Encoded:
    from retriever.encode import encode_batch

    embedder = _worker.get("embedder")
    if embedder is None:
        return Encoded([], np.zeros((0, 0), dtype=np.float32), error=WORKER_WITHOUT_MODEL)
    return encode_batch(embedder, rows)
