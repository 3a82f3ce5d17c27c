"""A stage's verdict on the suites it names, from the JUnit reports its runners write.

An exit code of 0 is not enough: pytest exits 0 when every case skips, and a cluster that does
not answer skips every cluster case. So each stage names its required suites, and a suite that
collected nothing or whose every case skipped fails the stage. Skips that remain are listed
with their reasons.

A suite is `REPORT[::PATH]`: REPORT a JUnit file (glob) under the stage's JUnit directory, PATH
a test file or directory (as pytest names it) whose cases in that report make the suite.

    verdict.py clear JUNIT_DIR SUITE...   remove the suites' reports (before the stage runs)
    verdict.py check JUNIT_DIR SUITE...   one line per suite and per skip reason; exit 1 if a
                                          suite ran nothing
    verdict.py record REPORT NAME -- COMMAND...
                                          run COMMAND; record its outcome as one case NAME
                                          (for a runner that writes no report of its own)
"""

from __future__ import annotations

import collections
import pathlib
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

MAX_FAILED = 10  # failed cases named per suite
USAGE = "usage: verdict.py clear|check JUNIT_DIR SUITE... | record REPORT NAME -- COMMAND..."


@dataclass(frozen=True)
class Case:
    test_id: str  # dotted, as JUnit's classname: agent.tests.test_cli.TestX
    name: str
    outcome: str  # passed | failed | skipped
    reason: str = ""  # a skip's reason, a failure's message


def outcome(case: ET.Element) -> tuple[str, str]:
    """A <testcase>'s outcome, and a skip's reason or a failure's message (the one
    classification of junit_total.py)."""
    for tag in ("failure", "error"):
        failed = case.find(tag)
        if failed is not None:
            message = " ".join((failed.get("message") or "").split())
            body = " ".join((failed.text or "").split())
            # A message that announces the details ("... failed with the error:") gets them.
            if not message or message.endswith(":"):
                message = f"{message} {body}".strip()
            return "failed", message or f"{tag}, no message"
    skipped = case.find("skipped")
    if skipped is not None:
        reason = skipped.get("message") or (skipped.text or "").strip() or "no reason given"
        if reason == "collection skipped":  # a module-level skip: its text holds the reason
            reason = (skipped.text or reason).strip()
        return "skipped", reason
    return "passed", ""


def read_cases(report: pathlib.Path) -> list[Case]:
    """The cases of one report. An unreadable report is one failed case (it names the file)."""
    try:
        root = ET.parse(report).getroot()  # noqa: S314 - our own test runners' reports
    except ET.ParseError as exc:
        return [Case(str(report), report.name, "failed", f"unreadable JUnit report: {exc}")]
    cases = []
    for case in root.iter("testcase"):
        # A module skipped at collection has no classname; its name is the module.
        name = case.get("name") or ""
        cases.append(Case(case.get("classname") or name, name, *outcome(case)))
    return cases


def parse_suite(spec: str) -> tuple[str, str]:
    """`REPORT[::PATH]` -> (REPORT, dotted PATH or "")."""
    report, _, path = spec.partition("::")
    if not report or report.startswith("/") or ".." in pathlib.PurePath(report).parts:
        raise ValueError(f"bad suite {spec!r}: REPORT must be a file under the JUnit directory")
    dotted = path.strip("/").removesuffix(".py").replace("/", ".")
    return report, dotted


def in_suite(case: Case, dotted: str) -> bool:
    return not dotted or case.test_id == dotted or case.test_id.startswith(dotted + ".")


def check(junit_dir: pathlib.Path, specs: list[str]) -> int:
    rc = 0
    skips: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    seen: set[pathlib.Path] = set()
    for spec in specs:
        report, dotted = parse_suite(spec)
        files = sorted(junit_dir.glob(report))
        cases = [c for f in files for c in read_cases(f) if in_suite(c, dotted)]
        count = collections.Counter(c.outcome for c in cases)
        ran = count["passed"] + count["failed"]
        if not files:
            verdict, why = "FAIL", f"no report {report}"
        elif not cases:
            verdict, why = "FAIL", "collected nothing"
        elif not ran:
            verdict, why = "FAIL", f"all {len(cases)} cases skipped"
        else:
            verdict = "ok" if not count["failed"] else "FAIL"
            why = ", ".join(f"{count[o]} {o}" for o in ("passed", "failed", "skipped") if count[o])
        if verdict == "FAIL":
            rc = 1
        print(f"  suite {spec}: {verdict}: {why}")
        # Which cases failed, and why: CI shows the summary, not always the log.
        failed = [c for c in cases if c.outcome == "failed"]
        for c in failed[:MAX_FAILED]:
            print(f"  failed {c.test_id}::{c.name}: {c.reason[:600]}")
        if len(failed) > MAX_FAILED:
            print(f"  failed: {len(failed) - MAX_FAILED} more, in the stage's log")
        for f in files:
            if f not in seen:
                seen.add(f)
                for c in read_cases(f):
                    if c.outcome == "skipped":
                        skips[(c.test_id, c.reason)].append(c.name)
    for (where, reason), names in sorted(skips.items()):
        distinct = sorted(set(names))
        which = f" ({', '.join(distinct)})" if len(distinct) <= 3 else ""
        print(f"  skipped {len(names)} in {where}{which}: {reason[:160]}")
    return rc


def clear(junit_dir: pathlib.Path, specs: list[str]) -> int:
    for spec in specs:
        for f in junit_dir.glob(parse_suite(spec)[0]):
            f.unlink()
    return 0


def record(report: pathlib.Path, name: str, command: list[str]) -> int:
    start = time.monotonic()
    rc = subprocess.call(command)  # noqa: S603 - the stage's own command line
    secs = time.monotonic() - start
    body = "" if rc == 0 else f'<failure message="exit code {rc}" />'
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n'
        f'<testsuites><testsuite name={quoteattr(name)} tests="1" failures="{int(rc != 0)}">'
        f'<testcase classname={quoteattr(name)} name={quoteattr(name)} time="{secs:.1f}">'
        f"{body}</testcase></testsuite></testsuites>\n"
    )
    return rc


def main(argv: list[str]) -> int:
    try:
        if len(argv) >= 2 and argv[0] in ("clear", "check"):
            junit_dir = pathlib.Path(argv[1])
            return (check if argv[0] == "check" else clear)(junit_dir, argv[2:])
        if len(argv) >= 5 and argv[0] == "record" and argv[3] == "--":
            return record(pathlib.Path(argv[1]), argv[2], argv[4:])
    except ValueError as exc:
        print(f"verdict.py: {exc}", file=sys.stderr)
        return 2
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
