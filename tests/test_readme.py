"""The README's configuration table states the defaults the code has."""

from __future__ import annotations

import re
from pathlib import Path

from retriever.config import Settings

README = Path(__file__).resolve().parent.parent / "README.md"


def _documented() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        names = re.findall(r"`RETRIEVER_([A-Z0-9_]+)`", line.split("|")[1] if "|" in line else "")
        if not line.startswith("| `RETRIEVER_") or not names:
            continue
        defaults = re.findall(r"`([^`]*)`", line.split("|")[2])
        if len(defaults) == len(names):
            out.update(zip((n.lower() for n in names), defaults, strict=True))
        elif "unset" in line.split("|")[2]:
            out.update((n.lower(), "unset") for n in names)
    return out


def test_documented_defaults_match_settings() -> None:
    fields = Settings.model_fields
    documented = _documented()
    checked = 0
    for name, text in documented.items():
        if name not in fields or name in {"home", "vault"}:
            continue
        default = fields[name].default
        if text == "unset":
            assert default is None, f"RETRIEVER_{name.upper()} is documented unset, is {default!r}"
        elif isinstance(default, bool):
            assert text == str(default).lower(), f"RETRIEVER_{name.upper()}: {text} vs {default}"
        elif isinstance(default, int | float):
            assert float(text) == float(default), f"RETRIEVER_{name.upper()}: {text} vs {default}"
        else:
            assert text == str(default), f"RETRIEVER_{name.upper()}: {text} vs {default}"
        checked += 1
    assert checked >= 12  # the table is really read
    assert {"fusion", "semantic_weight", "absent_quantile", "calibrate"} <= set(documented)
