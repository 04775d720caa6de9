"""Alembic glue: migrations live in the top-level ``migrations`` package."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory

import migrations


def _script_location() -> str:
    return str(Path(migrations.__file__).resolve().parent)


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", _script_location())
    if url:
        cfg.attributes["libpq_url"] = url
    return cfg


@lru_cache(maxsize=1)
def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migration found"
    return head
