"""Where the test suite's time goes: the slowest test files of a pytest `--junitxml` report.

    python -m pytest -q tests --junitxml=/tmp/junit.xml
    python benchmarks/suite_times.py /tmp/junit.xml [--top 20] [--tests 30] [--before OLD.xml]

Seconds are summed per file over its tests (worker-seconds: with `-n 2` the wall time is about half
the total), so a before/after pair of tables shows which files a change made cheaper. Module
fixtures are charged to the test that first used them, as pytest reports them. `--tests N` also
lists the N slowest tests (the candidates for a `slow` mark when the fast lane grows); `--before`
adds each file's seconds in an earlier report and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def file_of(case: ET.Element) -> str:
    """The test file of a junit <testcase>: its classname is the dotted module path (plus a class)."""
    parts = case.get("classname", "").split(".")
    while parts and not parts[-1].startswith("test_"):
        parts.pop()  # a test class (or a module not named test_*): keep the module's path
    return "/".join(parts) + ".py" if parts else case.get("classname", "?")


def seconds_per_test(report: Path) -> Counter:
    """Seconds per test, keyed `file::name`, over every <testcase> of the report."""
    seconds = Counter()
    for case in ET.parse(report).getroot().iter("testcase"):
        seconds[f"{file_of(case)}::{case.get('name')}"] += float(case.get("time", 0.0))
    return seconds


def file_seconds(tests: Counter) -> tuple[Counter, Counter]:
    """(seconds per file, tests per file) from the seconds per test."""
    seconds, counts = Counter(), Counter()
    for test, s in tests.items():
        name = test.split("::")[0]
        seconds[name] += s
        counts[name] += 1
    return seconds, counts


def table(seconds: Counter, counts: Counter, top: int, before: Counter | None = None) -> str:
    """A markdown table of the `top` slowest files, then the total over all files; with `before`
    (seconds per file of an earlier report), its column and the ratio now / before."""
    head, rule = "| file | tests | seconds | share |", "|---|---:|---:|---:|"
    if before is not None:
        head, rule = head + " before | now / before |", rule + "---:|---:|"
    lines = [head, rule]
    total = sum(seconds.values())

    def row(name: str, n: int, s: float, share: str, old: float | None) -> str:
        line = f"| {name} | {n} | {s:.0f} | {share} |"
        if before is not None:
            line += f" {old:.0f} | {s / old:.2f} |" if old else " - | - |"
        return line

    for name, s in seconds.most_common(top):
        lines.append(row(name, counts[name], s, f"{s / total:.1%}", before and before.get(name)))
    old_total = sum(before.values()) if before is not None else None
    lines.append(row(f"total ({len(seconds)} files)", sum(counts.values()), total, "100%", old_total))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, help="a pytest --junitxml file")
    parser.add_argument("--top", type=int, default=20, help="how many files to list")
    parser.add_argument("--tests", type=int, default=0, help="also list this many slowest tests")
    parser.add_argument("--before", type=Path, help="an earlier junit report to compare each file with")
    args = parser.parse_args(argv)
    for report in (args.junit, args.before):
        if report is not None and not report.is_file():
            print(f"no junit report at {report}", file=sys.stderr)
            return 2
    tests = seconds_per_test(args.junit)
    before = file_seconds(seconds_per_test(args.before))[0] if args.before else None
    print(table(*file_seconds(tests), args.top, before))
    if args.tests:
        print("\n| test | seconds |\n|---|---:|")
        print("\n".join(f"| {test} | {s:.1f} |" for test, s in tests.most_common(args.tests)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
