"""Embedding tiers: the primary model and a second one that answers while it is away.

``RETRIEVER_EMBED_MODEL`` is the primary tier (often Ollama: the component most often
missing, still pulling its model, or restarting); ``RETRIEVER_FALLBACK_MODEL`` the second
(Model2Vec, in-process, always there). Indexing fills every tier that is up; a search uses
the best tier that is up *and* has a vector for every passage, and says which one answered
and why when it is not the primary.

A tier that is down is probed again with a short timeout and a growing pause (1 s, 2 s,
4 s ... up to ``probe_interval_max``); searches never wait for those probes: they run on a
background thread and the next search after a successful one uses the tier again. Only a
tier's first load (a new process) and index runs probe in the caller's thread.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from retriever import store
from retriever.config import DEFAULT_MODEL, Settings
from retriever.embed import Embedder, EmbedderError, load_embedder

log = logging.getLogger(__name__)

PRIMARY, FALLBACK = "primary", "fallback"
OFF = {"none", "off", "lexical"}
PROBE_BASE = 1.0  # seconds before the first re-probe; doubled after each failed probe

Loader = Callable[[str], Embedder]


def configured(settings: Settings) -> list[tuple[str, str]]:
    """(tier name, model setting) for every configured tier, best first."""
    primary = settings.embed_model.strip()
    fallback = settings.fallback_model.strip()
    if fallback.lower() == "auto":
        # The built-in static model backs an Ollama primary; a Model2Vec primary is already
        # in-process, so a second static model would add cost and nothing else.
        fallback = DEFAULT_MODEL if primary.startswith("ollama:") else "none"
    tiers = [(PRIMARY, primary)]
    if fallback.lower() not in OFF and fallback != primary:
        tiers.append((FALLBACK, fallback))
    return tiers


def unchanged_model(
    conn: psycopg.Connection, setting: str, expected_dim: int | None = None
) -> tuple[int, str, int] | None:
    """(model row, fingerprint, dimension) stored for a Model2Vec setting whose model is
    as it was when stored: its folder (or, for a hub id, its snapshot in the local hub
    cache) is there in Model2Vec's own layout and gives the stored fingerprint, known
    without loading the model (a quarter of a second and its imports). None, so the
    caller loads it and hears why not, for Ollama (only the server knows its model's
    digest), a setting never stored, a changed or missing model, or a dimension other than
    ``expected_dim`` (RETRIEVER_EMBED_DIM). Corrupt files are found only by loading."""
    from retriever.embed.model2vec import model2vec_fingerprint, own_layout_folder

    setting = setting.strip()
    if setting.startswith("ollama:") or setting.lower() in OFF:
        return None
    stored = store.stored_model(conn, setting)
    if stored is None or (expected_dim is not None and stored[2] != expected_dim):
        return None
    try:
        if own_layout_folder(setting) is None:
            return None
        if model2vec_fingerprint(setting, stored[2]) != stored[1]:
            return None
    except OSError:  # unreadable: loading it says what is wrong
        return None
    return stored


def display_name(model: str) -> str:
    """A model as answers name it: a local folder by its name, anything else as set."""
    if model.startswith(("/", ".", "~")) or (os.sep in model and os.path.exists(model)):
        return os.path.basename(model.rstrip("/")) or model
    return model


def loader_for(settings: Settings, tier: str) -> Loader:
    """How a tier loads its model (the expected dimension is the primary model's)."""

    def load(model: str) -> Embedder:
        return load_embedder(
            model,
            ollama_url=settings.ollama_url,
            timeout=settings.ollama_timeout,
            probe_timeout=settings.probe_timeout,
            expected_dim=settings.embed_dim if tier == PRIMARY else None,
            setting="RETRIEVER_EMBED_MODEL" if tier == PRIMARY else "RETRIEVER_FALLBACK_MODEL",
        )

    return load


def short_reason(model: str, error: str | None) -> str:
    """A few words on why a tier is down, for answers (the full reason is in health)."""
    text = (error or "").lower()
    backend = "ollama" if model.startswith("ollama:") else display_name(model)
    if "down or unreachable" in text or "unreachable" in text:
        return f"{backend} unreachable"
    if "did not answer within" in text:
        return f"{backend} did not answer (timeout)"
    if "not pulled" in text or "not available" in text:
        return f"{display_name(model)} not pulled yet"
    if re.search(r"\bnan\b|infinity", text):
        return f"{display_name(model)} returns invalid vectors (NaN)"
    if "invalid vectors" in text:
        return f"{display_name(model)} returns invalid vectors"
    if "dimension" in text:
        return f"{display_name(model)} answers with vectors of the wrong dimension"
    if status := re.search(r"http (5\d\d)", text):
        return f"{backend} failing (server error, HTTP {status.group(1)})"
    return f"{display_name(model)} unavailable"


class Tier:
    """One configured model: loaded or down since when, and when to probe it again."""

    def __init__(self, name: str, model: str, load: Loader, interval_max: float) -> None:
        self.name, self.model = name, model
        self._load = load
        self._interval_max = max(0.0, interval_max)
        self._lock = threading.Lock()  # guards the state below
        self._probe_lock = threading.Lock()  # one probe at a time
        self._embedder: Embedder | None = None
        self._query: Embedder | None = None
        self.error: str | None = None
        self.down_since: float | None = None  # wall clock
        self.last_probe: float | None = None  # wall clock
        self.last_probe_ok: bool | None = None
        self._next_probe = 0.0  # monotonic
        self._failures = 0

    @property
    def off(self) -> bool:
        return self.model.strip().lower() in OFF

    @property
    def label(self) -> str:
        return display_name(self.model)

    def get(self, *, block: bool = False) -> Embedder | None:
        """The loaded embedder, or None while the tier is down. A first load, or a due
        probe when ``block``, runs here; a due probe otherwise starts in the background."""
        if self.off:
            self._note_off()
            return None
        with self._lock:
            if self._embedder is not None:
                return self._embedder
            first = self.last_probe is None
            due = time.monotonic() >= self._next_probe
        if first or (block and due):
            self.probe()
            with self._lock:
                return self._embedder
        if due and not self._probe_lock.locked():
            threading.Thread(target=self.probe, name=f"probe-{self.name}", daemon=True).start()
        return None

    def _note_off(self) -> None:
        with self._lock:
            if self.error is not None:
                return
            setting = (
                "RETRIEVER_EMBED_MODEL" if self.name == PRIMARY else "RETRIEVER_FALLBACK_MODEL"
            )
            self.error = f"embeddings are turned off ({setting}=none)"
        log.warning("embedder unavailable: %s", self.error)

    def query_embedder(self, embedder: Embedder) -> Embedder:
        """The view searches embed queries with (Ollama: one attempt, the probe timeout)."""
        with self._lock:
            if embedder is self._embedder and self._query is not None:
                return self._query
        return embedder

    def probe(self, *, force: bool = False) -> bool:
        """Try to load the model now (unless another probe did meanwhile); True when up."""
        if self.off:
            return False
        with self._probe_lock:
            with self._lock:
                if self._embedder is not None:
                    return True
                waited = not force and self.last_probe is not None
                if waited and time.monotonic() < self._next_probe:
                    return False  # probed by another thread while we waited
            try:
                embedder: Embedder | None = self._load(self.model)
                error = None
            except EmbedderError as exc:
                embedder, error = None, str(exc)
            except Exception as exc:  # a loader bug must not take search down
                embedder, error = None, f"{type(exc).__name__}: {exc}"
            self._settle(embedder, error)
            return embedder is not None

    def _settle(self, embedder: Embedder | None, error: str | None) -> None:
        now = time.time()
        with self._lock:
            self.last_probe, self.last_probe_ok = now, embedder is not None
            if embedder is not None:
                was_down = self.down_since is not None
                self._embedder, self.error, self.down_since, self._failures = (
                    embedder,
                    None,
                    None,
                    0,
                )
                view = getattr(embedder, "for_queries", None)
                self._query = view() if callable(view) else embedder
                if was_down:
                    log.warning("%s tier is back: %s", self.name, embedder.model_id)
                return
            self.error = error
            self.down_since = self.down_since or now
            self._failures += 1
            self._next_probe = time.monotonic() + self._pause()
        # The primary's line reads as it always did (the CLI then need not repeat it).
        who = "embedder" if self.name == PRIMARY else f"{self.name} embedder"
        log.warning("%s unavailable: %s", who, error)

    def _pause(self) -> float:
        return float(min(self._interval_max, PROBE_BASE * 2 ** max(0, self._failures - 1)))

    def failed(self, reason: str, embedder: Embedder | None = None) -> None:
        """A loaded model stopped answering: down from now, probed again shortly.

        The old embedder is dropped, not closed: another thread may be mid-request on it."""
        with self._lock:
            current = self._embedder
            if current is None or (
                embedder is not None and embedder is not current and embedder is not self._query
            ):
                return  # already handled (or a newer load replaced it)
            self._embedder = self._query = None
            self.error = reason
            self.down_since = time.time()
            self._failures = 1
            self._next_probe = time.monotonic() + self._pause()
        log.warning("%s tier failed: %s", self.name, reason)

    def loaded(self) -> Embedder | None:
        """The embedder if the model is loaded already (never loads or probes)."""
        with self._lock:
            return self._embedder

    def down_phrase(self) -> str:
        """'ollama unreachable since 12:03'."""
        with self._lock:
            error, since = self.error, self.down_since
        phrase = short_reason(self.model, error)
        if since is not None:
            phrase += f" since {time.strftime('%H:%M', time.localtime(since))}"
        return phrase

    def state(self) -> dict[str, Any]:
        with self._lock:
            embedder = self._embedder
            return {
                "tier": self.name,
                "model": self.model,
                "state": "off" if self.off else ("up" if embedder is not None else "down"),
                "model_id": embedder.model_id if embedder else None,
                "fingerprint": embedder.fingerprint if embedder else None,
                "dimension": embedder.dimension if embedder else None,
                "error": self.error,
                "down_since": self.down_since,
                "last_probe": self.last_probe,
                "last_probe_ok": self.last_probe_ok,
            }

    def close(self) -> None:
        with self._lock:
            embedder, self._embedder, self._query = self._embedder, None, None
        if embedder is not None:
            embedder.close()


@dataclass(slots=True)
class Choice:
    """The tier a search uses: its embedder (None: lexical) and what to tell the reader."""

    tier: Tier | None
    embedder: Embedder | None
    note: str | None = None  # why a better tier was passed over
    error: str | None = None  # why there is no embedder at all


Coverage = Callable[[Embedder], int | None]  # passages without a vector (None: no vector)


class Tiers:
    """Every configured tier, best first."""

    def __init__(self, settings: Settings, loaders: dict[str, Loader] | None = None) -> None:
        loaders = loaders or {}
        interval = settings.probe_interval_max
        self.tiers = [
            Tier(name, model, loaders.get(name) or loader_for(settings, name), interval)
            for name, model in configured(settings)
        ]

    @property
    def primary(self) -> Tier:
        return self.tiers[0]

    def get(self, name: str) -> Tier | None:
        return next((t for t in self.tiers if t.name == name), None)

    def for_index(self, *, block: bool) -> list[tuple[Tier, Embedder | None]]:
        """Every tier with its embedder (None while down); ``block``: probe due tiers now."""
        return [(t, t.get(block=block)) for t in self.tiers]

    def choose(self, coverage: Coverage, *, skip: dict[str, str] | None = None) -> Choice:
        """The best tier that is up and has every passage's vector; else the first one up
        with some vectors (the answer says they are partial); else none (lexical).
        ``skip``: tiers this search already found unusable, with why."""
        passed: list[str] = []  # why each better tier was passed over, in order
        partial: tuple[Choice, int] | None = None
        unembedded: Choice | None = None
        for tier in self.tiers:
            if tier.off:
                continue
            if skip and tier.name in skip:
                passed.append(skip[tier.name])
                continue
            embedder = tier.get()
            if embedder is None:
                passed.append(tier.down_phrase())
                continue
            pending = coverage(embedder)
            if pending == 0:
                return Choice(tier, self._for_queries(tier, embedder), self._note(passed, tier))
            if pending is None:
                unembedded = unembedded or Choice(tier, embedder)
                passed.append(f"{tier.label} has no vectors yet")
            else:
                if partial is None:
                    choice = Choice(tier, self._for_queries(tier, embedder))
                    partial = (choice, len(passed))
                passed.append(f"{tier.label} lacks vectors for {pending} passages")
        if partial is not None:
            choice, before = partial
            assert choice.tier is not None
            choice.note = self._note(passed[:before], choice.tier)
            return choice
        if unembedded is not None:  # the search itself says no passage has a vector yet
            return unembedded
        if len(self.tiers) == 1:
            return Choice(None, None, error=self.primary.error or _off_reason(self.primary))
        return Choice(None, None, error="; ".join(passed) or None)

    def _for_queries(self, tier: Tier, embedder: Embedder) -> Embedder:
        """With another tier to turn to, a query gets one short attempt (a slow or dead
        server must not hold the search); alone, a tier keeps its full timeout and retries
        (a busy server still answers, which beats keyword-only)."""
        if sum(not t.off for t in self.tiers) > 1:
            return tier.query_embedder(embedder)
        return embedder

    def _note(self, passed: list[str], tier: Tier) -> str | None:
        if tier is self.primary or not passed:
            return None
        return f"{'; '.join(passed)}; using the {tier.name} model {tier.label}"

    def failed(self, tier: Tier, reason: str, embedder: Embedder | None = None) -> None:
        tier.failed(reason, embedder)

    def states(self) -> list[dict[str, Any]]:
        return [t.state() for t in self.tiers]

    def close(self) -> None:
        for tier in self.tiers:
            tier.close()


def _off_reason(tier: Tier) -> str | None:
    if tier.off:
        tier.get()
    return tier.error
