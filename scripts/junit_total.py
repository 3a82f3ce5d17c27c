"""Sum JUnit XML reports into one closing line: `tests: N passed, N failed, N skipped`.

    junit_total.py [--summary FILE] [--exit-code N] DIR...

With --summary ($STATE/summary, the stages' verdict lines), a stage that failed is named after
the counts: `tests: 2260 passed, 1 failed, 9 skipped; 1 stage failed (k8s: the cluster build
failed)`. A failed stage whose summary names no failed case (a build that failed, lint, a suite
that collected nothing) counts as one failed case, as verdict.py's `record` counts a runner
without reports: CI reads `N passed, N failed`, and a failed run must not read `0 failed`.
With --exit-code (make test's), a non-zero code that no stage explains counts the same way.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import re
import sys
from dataclasses import dataclass

from verdict import read_cases

# A stage's verdict line, as scripts/stage.sh writes it: `NAME  PASS in 12s  ...`,
# `NAME  FAIL in 12s  ...`, or `NAME  FAIL: why (details)` for a stage that did not run.
STAGE = re.compile(r"^(?P<name>\S+)\s+(?P<verdict>PASS|FAIL)(?::\s*(?P<why>.*))?")


@dataclass
class Stage:
    name: str
    failed: bool
    why: str = ""  # a stage that failed before it ran: the reason, without its details
    failed_cases: bool = False  # its summary lines name a failed case (counted in the reports)


def read_stages(summary: pathlib.Path) -> list[Stage]:
    """The stages of a summary file, each with whether its indented lines name a failed case."""
    stages: list[Stage] = []
    for line in summary.read_text().splitlines():
        if line.startswith("  "):
            if stages and line.startswith("  failed"):
                stages[-1].failed_cases = True
            continue
        m = STAGE.match(line)
        if m:
            why = (m["why"] or "").split(" (")[0].strip()
            stages.append(Stage(m["name"], m["verdict"] == "FAIL", why))
    return stages


def closing_line(dirs: list[str], summary: pathlib.Path | None, exit_code: int) -> str:
    count: collections.Counter[str] = collections.Counter()
    for d in dirs:
        for f in sorted(pathlib.Path(d).glob("**/*.xml")):
            count.update(c.outcome for c in read_cases(f))
    stages = read_stages(summary) if summary and summary.exists() else []
    failed_stages = [s for s in stages if s.failed]
    failed = count["failed"] + sum(1 for s in failed_stages if not s.failed_cases)
    notes = []
    if failed_stages:
        names = ", ".join(f"{s.name}: {s.why}" if s.why else s.name for s in failed_stages)
        plural = "s" if len(failed_stages) > 1 else ""
        notes.append(f"{len(failed_stages)} stage{plural} failed ({names})")
    if exit_code and not failed:
        failed = 1
        notes.append(f"make test exited {exit_code}")
    line = f"tests: {count['passed']} passed, {failed} failed, {count['skipped']} skipped"
    return "; ".join([line, *notes])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary", type=pathlib.Path, help="the stages' verdict lines")
    parser.add_argument("--exit-code", type=int, default=0, help="make test's exit code")
    parser.add_argument("dirs", nargs="*", help="directories of JUnit reports")
    args = parser.parse_args(argv)
    print(closing_line(args.dirs, args.summary, args.exit_code))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
