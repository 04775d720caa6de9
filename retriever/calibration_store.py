"""Stored calibrations: one row per embedding model in ``calibrations`` (see migration 0002).

Kept apart from the calibration run itself so that the search path imports only this.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from retriever.absence import AbsenceModel
from retriever.ranking import Ranking

LEXICAL_KEY = ""  # the row for searches without a semantic arm
CALIBRATION_VERSION = 11  # bump when the procedure changes: stored results are redone
# (9: the vault's languages stored for query feedback; 10: the query words chosen per model)


@dataclass(frozen=True, slots=True)
class Calibration:
    ranking: Ranking
    absence_hybrid: AbsenceModel | None
    absence_lexical: AbsenceModel | None
    created_at: str
    ranking_chosen: bool = True  # False: the default ranking, with calibrated absence
    languages: tuple[str, ...] = ()  # the vault's, as calibration found them


def save(
    conn: psycopg.Connection,
    key: str,
    n_docs: int,
    pseudo_queries: list[dict[str, Any]],
    result: dict[str, Any],
) -> None:
    conn.execute(
        """
        INSERT INTO calibrations (model, version, n_docs, pseudo_queries, result)
        VALUES (%s, %s, %s, %s, %s)
        ON CONFLICT (model) DO UPDATE SET version = EXCLUDED.version, created_at = now(),
            n_docs = EXCLUDED.n_docs, changed_docs = 0,
            pseudo_queries = EXCLUDED.pseudo_queries, result = EXCLUDED.result
        """,
        (key, CALIBRATION_VERSION, n_docs, Jsonb(pseudo_queries), Jsonb(result)),
    )


def load_result(conn: psycopg.Connection, key: str) -> dict[str, Any] | None:
    """The stored report for ``key`` with its bookkeeping, or None."""
    row = conn.execute(
        "SELECT result, version, created_at, n_docs, changed_docs FROM calibrations"
        " WHERE model = %s",
        (key,),
    ).fetchone()
    if row is None:
        return None
    return {
        **row[0],
        "version": int(row[1]),
        "created_at": row[2].isoformat(),
        "n_docs": int(row[3]),
        "changed_docs": int(row[4]),
    }


def note_vault_change(conn: psycopg.Connection, notes: int) -> None:
    """An index run wrote or removed ``notes`` notes: calibrations drift by that much."""
    if notes > 0:
        conn.execute("UPDATE calibrations SET changed_docs = changed_docs + %s", (notes,))


def gc(conn: psycopg.Connection) -> int:
    """Drop the calibrations of models whose vectors are gone (lexical-only stays)."""
    cur = conn.execute(
        "DELETE FROM calibrations WHERE model <> %s"
        " AND model NOT IN (SELECT fingerprint FROM models)",
        (LEXICAL_KEY,),
    )
    return cur.rowcount


def needs_calibration(conn: psycopg.Connection, key: str, n_docs: int, *, drift: float) -> bool:
    """True when ``key`` has no current calibration, or the vault changed materially
    (more than ``drift`` of its notes written or removed since) or the procedure did."""
    row = conn.execute(
        "SELECT version, n_docs, changed_docs FROM calibrations WHERE model = %s", (key,)
    ).fetchone()
    if row is None or int(row[0]) != CALIBRATION_VERSION:
        return True
    return int(row[2]) > drift * max(int(row[1]), n_docs, 1)


def _parse(result: dict[str, Any], created_at: str) -> Calibration:
    absence = result.get("absence") or {}
    hybrid, lexical = absence.get("hybrid"), absence.get("lexical")
    return Calibration(
        ranking=Ranking.from_dict(result["ranking"]),
        absence_hybrid=AbsenceModel.from_dict(hybrid["model"]) if hybrid else None,
        absence_lexical=AbsenceModel.from_dict(lexical["model"]) if lexical else None,
        created_at=created_at,
        ranking_chosen=not str(result.get("ranking_source", "")).startswith("default"),
        languages=tuple(result.get("vault_languages") or ()),
    )


class CalibrationCache:
    """Calibrations by model key; a search re-reads only the row's timestamp."""

    def __init__(self) -> None:
        self._items: dict[str, Calibration | None] = {}
        self._stamps: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def get(
        self, conn: psycopg.Connection, key: str, stamps: Mapping[str, str] | None = None
    ) -> Calibration | None:
        """``stamps``: every calibration's timestamp, if the caller has read them
        (store.read_generation), else read here."""
        if stamps is None:
            row = conn.execute(
                "SELECT created_at::text FROM calibrations WHERE model = %s AND version = %s",
                (key, CALIBRATION_VERSION),
            ).fetchone()
            stamp = row[0] if row else None
        else:
            stamp = stamps.get(key)
        with self._lock:
            if key in self._items and self._stamps.get(key) == stamp:
                return self._items[key]
        found = None
        if stamp is not None:
            data = conn.execute("SELECT result FROM calibrations WHERE model = %s", (key,))
            result = data.fetchone()
            row = result[0] if result is not None else None
            found = _parse(row, stamp) if row and row.get("status") == "calibrated" else None
        with self._lock:
            self._items[key], self._stamps[key] = found, stamp
        return found


def summary(result: dict[str, Any] | None) -> dict[str, Any]:
    """A compact view of a stored calibration for status, health and MCP."""
    if not result or result.get("status") != "calibrated":
        return {
            "state": "default",
            "ranking": None,
            "reason": "not calibrated yet (run `retriever calibrate`)"
            if not result
            else result.get("message", "not calibrated"),
        }
    absence = result.get("absence") or {}
    arm = absence.get("hybrid") or absence.get("lexical") or {}
    return {
        "state": "calibrated",
        "ranking": result.get("label"),
        "ranking_source": result.get("ranking_source"),
        "model": result.get("model"),
        "ndcg_report": result.get("ndcg_report"),
        "queries": result.get("queries"),
        "absence_report": arm.get("report"),
        "created_at": result.get("created_at"),
        "changed_docs": result.get("changed_docs"),
    }
