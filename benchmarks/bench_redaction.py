"""Redaction on real corpora: what fires, how often, how fast, and before/after a change.

    python -m benchmarks.bench_redaction CORPUS [CORPUS ...] [--baseline REF]
        [--samples 8] [--context 1] [--seed 0] [--json]

Runs :func:`retriever.redact.redact` over every ``.md`` file of each corpus, decoded as the
indexer decodes it, and reports files scanned, files with a redaction, redactions per kind,
and the redactor's CPU time and throughput. On a corpus of public documentation every hit is
a false-positive candidate: the samples print each redacted line before and after, with its
neighbours, so a reviewer can judge it. Only run it on corpora whose text may be shown.

``--baseline REF`` runs the same scan with the redactor of a git revision (``main``), in a
subprocess importing that revision's ``retriever`` package, and prints both side by side.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_MARKER = re.compile(r"\[REDACTED:(\w+)\]")
_ROOT = Path(__file__).resolve().parent.parent


@dataclass(slots=True)
class Sample:
    path: str
    line: int  # 1-based
    before: list[str]  # context lines, the redacted one in the middle
    after: str


@dataclass(slots=True)
class ScanResult:
    corpus: str
    version: str = ""
    files: int = 0
    files_hit: int = 0
    chars: int = 0
    cpu_seconds: float = 0.0
    counts: Counter[str] = field(default_factory=Counter)
    # Reservoir per kind: a fair sample without holding every hit.
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    seen: Counter[str] = field(default_factory=Counter)

    @property
    def mb_per_s(self) -> float:
        return self.chars / 1e6 / self.cpu_seconds if self.cpu_seconds else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "corpus": self.corpus,
            "redactor_version": self.version,
            "files": self.files,
            "files_hit": self.files_hit,
            "chars": self.chars,
            "redactions": sum(self.counts.values()),
            "counts": dict(self.counts.most_common()),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "mb_per_s": round(self.mb_per_s, 2),
        }


def _changed_lines(before: str, after: str) -> list[tuple[int, str]]:
    """(index, redacted line) of every line the redactor changed; lines stay aligned."""
    old, new = before.splitlines(), after.splitlines()
    if len(old) != len(new):  # never expected: the redactor keeps line structure
        raise AssertionError("line count changed")
    return [(i, b) for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]


def _keep_sample(res: ScanResult, kind: str, sample: Sample, k: int, rng: random.Random) -> None:
    res.seen[kind] += 1
    bucket = res.samples.setdefault(kind, [])
    if len(bucket) < k:
        bucket.append(sample)
        return
    j = rng.randrange(res.seen[kind])
    if j < k:
        bucket[j] = sample


def scan(corpus: Path, *, samples: int, context: int, seed: int) -> ScanResult:
    from retriever.prepare import decode_note
    from retriever.redact import REDACTOR_VERSION, redact

    res = ScanResult(str(corpus), REDACTOR_VERSION)
    rng = random.Random(seed)
    for path in sorted(corpus.rglob("*.md")):
        if not path.is_file():
            continue
        text, _ = decode_note(path.read_bytes())
        res.files += 1
        res.chars += len(text)
        start = time.process_time()
        out, counts = redact(text)
        res.cpu_seconds += time.process_time() - start
        if not counts:
            continue
        res.files_hit += 1
        res.counts.update(counts)
        lines = text.splitlines()
        rel = path.relative_to(corpus).as_posix()
        for i, after in _changed_lines(text, out):
            window = lines[max(0, i - context) : i + context + 1]
            sample = Sample(rel, i + 1, window, after)
            for kind in set(_MARKER.findall(after)):
                _keep_sample(res, kind, sample, samples, rng)
    return res


def baseline(ref: str, corpora: list[Path]) -> list[dict[str, Any]]:
    """Summaries of the same scan with the redactor at git revision ``ref``."""
    archive = subprocess.run(
        ["git", "-C", str(_ROOT), "archive", ref, "retriever"],
        check=True,
        capture_output=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="bench-redaction-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        env = {**os.environ, "PYTHONPATH": tmp}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", *map(str, corpora)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    data: list[dict[str, Any]] = json.loads(out)
    if not all(d["module"].startswith(tmp) for d in data):
        raise RuntimeError(f"the baseline imported the working tree's redactor, not {ref}'s")
    return data


def _clip(line: str, width: int = 160) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def _row(label: str, s: dict[str, Any]) -> str:
    return (
        f"  {label:<10} v{s['redactor_version']:<4} {s['files']:>6} files "
        f"{s['chars'] / 1e6:7.1f} M chars  {s['files_hit']:>4} files hit "
        f"{s['redactions']:>4} redactions  {s['cpu_seconds']:7.2f} CPU s "
        f"{s['mb_per_s']:6.2f} MB/s"
    )


def report(res: ScanResult, base: dict[str, Any] | None) -> None:
    now = res.summary()
    print(f"== {res.corpus}")
    if base is not None:
        print(_row("baseline", base))
    print(_row("this tree", now))
    kinds = sorted(set(now["counts"]) | set(base["counts"] if base else {}))
    for kind in kinds:
        was = f"{base['counts'].get(kind, 0):>5} -> " if base else ""
        print(f"    {kind:<24} {was}{now['counts'].get(kind, 0):>5}")
    for kind, bucket in sorted(res.samples.items()):
        print(f"\n-- {kind}: {len(bucket)} of {res.seen[kind]} redacted lines")
        for s in sorted(bucket, key=lambda s: (s.path, s.line)):
            print(f"   {s.path}:{s.line}")
            for line in s.before:
                print(f"     | {_clip(line)}")
            print(f"     > {_clip(s.after)}")
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("corpora", type=Path, nargs="+", help="folders of markdown files")
    ap.add_argument("--baseline", metavar="REF", help="also scan with the redactor at this git ref")
    ap.add_argument("--samples", type=int, default=8, help="redacted lines shown per kind")
    ap.add_argument("--context", type=int, default=1, help="lines shown around each one")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="summaries only, as JSON")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    missing = [str(c) for c in args.corpora if not c.is_dir()]
    if missing:
        print(f"not a folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.worker:  # the baseline's subprocess: summaries and where the redactor came from
        import retriever.redact

        module = str(Path(retriever.redact.__file__).resolve())
        found = [scan(c, samples=0, context=0, seed=0).summary() for c in args.corpora]
        print(json.dumps([{**row, "module": module} for row in found]))
        return 0
    try:
        bases = baseline(args.baseline, args.corpora) if args.baseline else None
    except (subprocess.CalledProcessError, RuntimeError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        detail = err.decode(errors="replace").strip().splitlines()[-1:] if err else [str(exc)]
        print(f"baseline {args.baseline!r} failed: {' '.join(detail)}", file=sys.stderr)
        return 2
    results = [
        scan(c, samples=args.samples, context=args.context, seed=args.seed) for c in args.corpora
    ]
    if args.json:
        pairs = zip(results, bases or [None] * len(results), strict=True)
        print(json.dumps([{"this_tree": r.summary(), "baseline": b} for r, b in pairs], indent=2))
        return 0
    for i, res in enumerate(results):
        report(res, bases[i] if bases else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
