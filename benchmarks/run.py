"""`make bench`: measure the agent and the collection, each figure beside a baseline measured in
the same run, print one table and write benchmarks/results/latest.json (machine included).

    python benchmarks/run.py [--only overhead,footprint,slots,fleet,image,rollout]
                             [--jobs 50] [--idle 60] [--window 60]

Never a pass or a fail on time: the "goal" column is the compass the figures are judged
against, and a section that cannot run says "n/a" and why. Exit 0 unless the run itself broke.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import benchlib
import fleet
import footprint
import image
import overhead
import rollout
import slots

RESULTS = Path(__file__).resolve().parent / "results"
SECTIONS = ("overhead", "footprint", "slots", "fleet", "image", "rollout")


def docker_ok() -> bool:
    try:
        return (
            subprocess.run([benchlib.DOCKER, "info"], capture_output=True, timeout=60).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def verdict(value: float | None, goal: float) -> str:
    if value is None:
        return "n/a"
    if value <= goal:
        return "met"
    return f"missed by {(value / goal - 1) * 100:.0f}%"


def rows(results: dict) -> list[list[str]]:
    out: list[list[str]] = []

    def na(section: str, figure: str) -> bool:
        data = results.get(section)
        if data is None:
            return True
        reason = data.get("na") or data.get("error")
        if reason:
            out.append([figure, str(reason)[:70], "", "", "", "n/a"])
            return True
        return False

    if not na("overhead", "Overhead claim→step (process)"):
        o = results["overhead"]
        p, b = o["process"], o["bare_client"]
        out.append(
            [
                "Overhead claim→step, process",
                f"{p['median_ms']} ms (p95 {p['p95_ms']})",
                f"bare client {b['median_ms']} ms (p95 {b['p95_ms']})",
                f"{p['median_ms'] / b['median_ms']:.2f}×",
                "≤ 50 ms median",
                verdict(p["median_ms"], 50),
            ]
        )
        if "docker" in o:
            d, bd = o["docker"], o["bare_docker_run"]
            out.append(
                [
                    "Overhead claim→step, docker",
                    f"{d['median_ms']} ms (p95 {d['p95_ms']})",
                    f"docker run {bd['median_ms']} ms (p95 {bd['p95_ms']})",
                    f"{o['docker_ratio']:.2f}×",
                    "≤ 1.15× docker run",
                    verdict(o["docker_ratio"], 1.15),
                ]
            )
        else:
            out.append(["Overhead claim→step, docker", "n/a: no Docker engine", "", "", "", "n/a"])
    if not na("footprint", "Idle agent"):
        f = results["footprint"]
        lib = f["baseline_python_libs"]
        out.append(
            [
                f"Idle RSS, 1 agent, {f['window_s']:.0f} s",
                f"{f['rss_mb_median']} MB (PSS {f['pss_mb']})",
                f"python+libs {lib['rss_mb']} MB",
                f"{f['rss_mb_median'] / lib['rss_mb']:.2f}×",
                "≤ 40 MB",
                verdict(f["rss_mb_median"], 40),
            ]
        )
        out.append(
            [
                "Idle CPU, 1 agent",
                f"{f['cpu_percent']}% of a core",
                f"python+libs {lib['cpu_percent']}%",
                "",
                "",
                "",
            ]
        )
        low, high = f["expected_polls"]
        out.append(
            [
                f"Idle HTTP requests (poll {f['polling_interval_s']:g}s)",
                f"{f['polls']} polls + {f['other_requests']} other",
                f"schedule {low}..{high}",
                "",
                "= poll schedule",
                "met" if f["polls_match_schedule"] and not f["other_requests"] else "missed",
            ]
        )
    if not na("slots", "Slots"):
        s = results["slots"]
        one = s["one_process"]
        out.append(
            [
                "RSS of 1 / 10 / 150 slots, 1 process",
                f"{one['1']['rss_mb']} / {one['10']['rss_mb']} / {one['150']['rss_mb']} MB",
                f"1 / 10 processes {one['1']['rss_mb']} / {s['ten_processes']['rss_mb']} MB",
                "",
                "",
                "",
            ]
        )
        out.append(
            [
                "Marginal MB per extra slot",
                f"{s['marginal_mb_per_slot_rss']} MB",
                f"per extra process {s['marginal_mb_per_process_rss']} MB",
                f"{s['marginal_mb_per_slot_rss'] / s['marginal_mb_per_process_rss']:.3f}×",
                "≤ 2 MB",
                verdict(s["marginal_mb_per_slot_rss"], 2),
            ]
        )
    if not na("fleet", "Fleet"):
        fl, base = results["fleet"]["fleet"], results["fleet"]["baseline"]
        out.append(
            [
                f"Fleet {fl['slots']} slots: poll p50/p99",
                f"{fl['poll_p50_ms']} / {fl['poll_p99_ms']} ms",
                f"1 slot {base['poll_p50_ms']} / {base['poll_p99_ms']} ms",
                _ratio(fl["poll_p99_ms"], base["poll_p99_ms"]),
                "",
                "",
            ]
        )
        out.append(
            [
                "Fleet: probe poll p50/p99",
                f"{fl['probe_poll_p50_ms']} / {fl['probe_poll_p99_ms']} ms",
                f"1 slot {base['probe_poll_p50_ms']} / {base['probe_poll_p99_ms']} ms",
                _ratio(fl["probe_poll_p99_ms"], base["probe_poll_p99_ms"]),
                "",
                "",
            ]
        )
        out.append(
            [
                "Fleet: claim latency p50/p99",
                f"{fl['claim_latency_p50_ms']} / {fl['claim_latency_p99_ms']} ms",
                f"1 slot {base['claim_latency_p50_ms']} / {base['claim_latency_p99_ms']} ms",
                _ratio(fl["claim_latency_p50_ms"], base["claim_latency_p50_ms"]),
                "",
                "",
            ]
        )
        out.append(
            [
                "Fleet: emulator CPU",
                f"{fl['emulator_cpu_percent']}% of a core",
                f"1 slot {base['emulator_cpu_percent']}%",
                _ratio(fl["emulator_cpu_percent"], base["emulator_cpu_percent"]),
                "",
                "",
            ]
        )
    if not na("image", "Agent image"):
        im = results["image"]
        out.append(
            [
                "Image size",
                f"{im['size_mb']} MB",
                f"base image {im['base_size_mb']} MB",
                f"+{im['size_mb'] - im['base_size_mb']:.0f} MB",
                "",
                "",
            ]
        )
        out.append(
            [
                "Image: docker run → /healthz 200",
                f"{im['time_to_healthy_ms_median']} ms",
                f"bare http.server {im['bare_http_server_ms_median']} ms",
                f"{im['ratio']:.2f}×",
                "",
                "",
            ]
        )
    if not na("rollout", "Rollout"):
        r = results["rollout"]
        out.append(
            [
                f"Rollout, {r['hosts']} hosts: first converge",
                f"{r['first_converge']['seconds']} s",
                f"baseline play {r['baseline_before']['seconds']} s",
                f"{r['first_converge_ratio']:.2f}×",
                "",
                "",
            ]
        )
        out.append(
            [
                "Rollout: no-op re-run",
                f"{r['no_op']['seconds']} s (changed={r['no_op']['changed']})",
                f"baseline play {r['baseline']['seconds']} s",
                f"{r['no_op_ratio']:.2f}×",
                "≤ 1.5× baseline",
                verdict(r["no_op_ratio"], 1.5),
            ]
        )
    return out


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a is not None and b else ""


def table(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    fmt = [("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))).rstrip() for r in body]
    head = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()
    return "\n".join([head, line, *fmt])


def notes(results: dict) -> list[str]:
    """What dominates, where a figure missed its goal (from the profiles the sections took)."""
    out = []
    o = results.get("overhead", {})
    for key in ("process_profile", "docker_profile"):
        if key in o:
            top = list(o[key]["cumulative_ms_per_job"].items())[:10]
            out.append(
                f"{key.replace('_', ' ')} (cProfile, ms per job): "
                + ", ".join(f"{k} {v}" for k, v in top)
            )
    for target in ("process", "docker"):
        if target in o:
            out.append(f"{target} overhead by phase (median ms): {o[target]['phases_median_ms']}")
    f = results.get("footprint", {})
    if "import_profile_rss_mb" in f:
        out.append(
            "idle RSS by import (MB added): "
            + ", ".join(f"{k} {v}" for k, v in f["import_profile_rss_mb"].items())
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS))
    parser.add_argument("--jobs", type=int, default=50, help="jobs per overhead figure")
    parser.add_argument("--idle", type=float, default=60, help="seconds of idle footprint")
    parser.add_argument("--window", type=float, default=60, help="seconds of fleet load")
    args = parser.parse_args(argv)
    chosen = [s for s in args.only.split(",") if s]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    benchlib.STATE.mkdir(parents=True, exist_ok=True)
    has_docker = docker_ok()
    described = benchlib.machine()  # before the run: the load average then says how busy it was
    started = time.time()
    results: dict = {}
    runners = {
        "overhead": lambda: overhead.run(args.jobs, has_docker),
        "footprint": lambda: footprint.run(args.idle),
        "slots": slots.run,
        "fleet": lambda: fleet.run(args.window),
        "image": image.run if has_docker else lambda: {"na": "n/a: no Docker engine"},
        "rollout": rollout.run if has_docker else lambda: {"na": "n/a: no Docker engine"},
    }
    for name in chosen:
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        try:
            results[name] = runners[name]()
        except Exception as exc:  # a broken section is reported, the others still run
            traceback.print_exc()
            results[name] = {"error": f"n/a: {type(exc).__name__}: {exc}"}
        results[name]["section_seconds"] = round(time.monotonic() - t0, 1)
        print(f"bench: {name} done in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)

    body = rows(results)
    header = ["Figure", "Value", "Baseline (same run)", "Ratio", "Goal", "Verdict"]
    report = {
        "machine": {**described, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
        "started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(),
        "duration_s": round(time.time() - started, 1),
        "args": vars(args),
        "results": results,
        "table": [dict(zip(header, r, strict=True)) for r in body],
        "notes": notes(results),
    }
    m = report["machine"]
    print(
        f"\nMachine: {m['cpu']}, {m['cores']} cores, {m['memory']}, kernel {m['kernel']}, "
        f"{m['os']}, Python {m['python']}, Docker {m['docker']}, "
        f"load {m['load_average_at_start']} → {m['load_average_at_end']}"
    )
    print(table(header, body))
    for note in report["notes"]:
        print(f"- {note}")
    RESULTS.mkdir(exist_ok=True)
    tmp = RESULTS / "latest.json.tmp"
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, RESULTS / "latest.json")
    print(f"\nwritten: {RESULTS / 'latest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
