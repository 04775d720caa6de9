"""Alembic glue: migrations live in the top-level ``migrations`` package.

Alembic (and SQLAlchemy under it) are imported only when migrations actually run: every
process checks the schema head at start-up, and that check only reads the revision files.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import migrations

if TYPE_CHECKING:
    from alembic.config import Config

_REVISION = re.compile(r"^revision\s*=\s*['\"]([^'\"]+)['\"]", re.M)
_DOWN = re.compile(r"^down_revision\s*=\s*(None|['\"]([^'\"]+)['\"])", re.M)


def _script_location() -> str:
    return str(Path(migrations.__file__).resolve().parent)


def alembic_config(url: str | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", _script_location())
    if url:
        cfg.attributes["libpq_url"] = url
    return cfg


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The single head of the linear revision chain, read from the revision files."""
    revisions: dict[str, str | None] = {}
    for path in (Path(_script_location()) / "versions").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        rev, down = _REVISION.search(text), _DOWN.search(text)
        if rev and down:
            revisions[rev.group(1)] = down.group(2)
    parents = {d for d in revisions.values() if d}
    heads = [r for r in revisions if r not in parents]
    if len(heads) == 1:
        return heads[0]
    # Branches or unusual files: let Alembic decide (and complain if it must).
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migration found"
    return head
