"""Redaction scan: how often each rule fires on a corpus, how long it takes, and samples.

    python -m benchmarks.redaction_scan CORPUS [--samples 8] [--context 1] [--seed 0] [--json]

Runs :func:`retriever.redact.redact` over every ``.md`` file under CORPUS, decoded as the
indexer decodes it, and reports the redactions per kind and the redaction time. On a corpus
of public documentation every hit is a false positive candidate: the samples print each
redacted line before and after, with its neighbours, so a reviewer can judge it. Only run
it on corpora whose text may be shown (it prints what was redacted).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from retriever.prepare import decode_note
from retriever.redact import REDACTOR_VERSION, redact

_MARKER = re.compile(r"\[REDACTED:(\w+)\]")


@dataclass(slots=True)
class Sample:
    path: str
    line: int  # 1-based
    before: list[str]  # context lines, the redacted one in the middle
    after: str


@dataclass(slots=True)
class ScanResult:
    files: int = 0
    files_hit: int = 0
    chars: int = 0
    seconds: float = 0.0
    counts: Counter[str] = field(default_factory=Counter)
    # Reservoir per kind: a fair sample without holding every hit.
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    seen: Counter[str] = field(default_factory=Counter)


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
    res = ScanResult()
    rng = random.Random(seed)
    for path in sorted(corpus.rglob("*.md")):
        if not path.is_file():
            continue
        text, _ = decode_note(path.read_bytes())
        res.files += 1
        res.chars += len(text)
        start = time.perf_counter()
        out, counts = redact(text)
        res.seconds += time.perf_counter() - start
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


def _clip(line: str, width: int = 160) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def report(res: ScanResult, corpus: Path) -> None:
    total = sum(res.counts.values())
    print(f"redactor v{REDACTOR_VERSION} on {corpus}")
    print(
        f"{res.files} files, {res.chars / 1e6:.1f} M chars, {res.files_hit} files with a "
        f"redaction, {total} redactions; redaction time {res.seconds:.2f} s "
        f"({res.seconds / max(res.files, 1) * 1e3:.2f} ms/file)"
    )
    for kind, n in res.counts.most_common():
        print(f"  {kind:<24} {n}")
    for kind, bucket in sorted(res.samples.items()):
        print(f"\n== {kind}: {len(bucket)} of {res.seen[kind]} redacted lines")
        for s in sorted(bucket, key=lambda s: (s.path, s.line)):
            print(f"-- {s.path}:{s.line}")
            for line in s.before:
                print(f"   | {_clip(line)}")
            print(f"   > {_clip(s.after)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", type=Path, help="folder of markdown files")
    ap.add_argument("--samples", type=int, default=8, help="redacted lines shown per kind")
    ap.add_argument("--context", type=int, default=1, help="lines shown around each one")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="counts and timing only, as JSON")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"not a folder: {args.corpus}", file=sys.stderr)
        return 2
    res = scan(args.corpus, samples=args.samples, context=args.context, seed=args.seed)
    if args.json:
        summary = {
            "redactor_version": REDACTOR_VERSION,
            "files": res.files,
            "files_hit": res.files_hit,
            "seconds": round(res.seconds, 3),
            "counts": dict(res.counts.most_common()),
        }
        print(json.dumps(summary, indent=2))
    else:
        report(res, args.corpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
