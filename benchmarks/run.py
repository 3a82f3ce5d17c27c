"""`make bench`: measure the agent and the collection, each figure beside a baseline measured in
the same run, print one table and write benchmarks/results/latest.json (machine included).

    python benchmarks/run.py [--only overhead,footprint,slots,fleet,image,rollout,deploy]
                             [--repeats 5] [--jobs 20] [--idle 60] [--window 60]
                             [--hosts 10,25,50] [--deployments 3] [--smoke]

Every figure is measured `--repeats` times, each time right after (or beside) its baseline, so
figure and baseline interleave (B A B A ...) and drift on the machine hits both. The table shows
the median and the spread (min–max) over the runs, and a ratio's spread is that of the per-run
ratios. A goal is "met" only when it holds across the whole spread, "within noise" when the
spread straddles it. Never a pass or a fail on time: a section that cannot run says "n/a" and
why. Exit 0 unless the run itself broke.

`--smoke` (what `make test` runs): every section once, at its smallest size, with no verdicts and
no results file: it proves the benchmarks still run, and measures nothing worth keeping.
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

import benchlib
import deploy
import fleet
import footprint
import image
import overhead
import rollout
import slots
from benchlib import judge, linear_fit, spread
from readme_table import LATEST

RESULTS = LATEST.parent
SECTIONS = ("overhead", "footprint", "slots", "fleet", "image", "rollout", "deploy")


def docker_ok() -> bool:
    try:
        return (
            subprocess.run([benchlib.DOCKER, "info"], capture_output=True, timeout=60).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def fmt(figure: dict | None, unit: str = "", digits: int = 1) -> str:
    """median (min–max) of a spread() leaf; just the value when there was one run."""
    if not figure:
        return "n/a"
    med, low, high = (f"{figure[k]:.{digits}f}" for k in ("median", "min", "max"))
    if figure["n"] < 2 or low == high:
        return f"{med}{unit}"
    return f"{med}{unit} ({low}–{high})"


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

    if not na("overhead", "Overhead claim→step"):
        o = results["overhead"]["summary"]
        out.append(
            [
                "Overhead claim→step, process (median of each run)",
                fmt(o["process"]["median_ms"], " ms"),
                f"bare client {fmt(o['bare_client']['median_ms'], ' ms')}",
                fmt(o["process_ratio"], "×", 2),
                "≤ 50 ms median",
                judge(o["process"]["median_ms"], 50),
            ]
        )
        if "docker" in o:
            out.append(
                [
                    "Overhead claim→step, docker (median of each run)",
                    fmt(o["docker"]["median_ms"], " ms"),
                    f"docker run {fmt(o['bare_docker_run']['median_ms'], ' ms')}",
                    fmt(o["docker_ratio"], "×", 2),
                    "≤ 1.15× docker run",
                    judge(o["docker_ratio"], 1.15),
                ]
            )
            if "engine_exec" in o:  # results measured before there was this floor have none
                out.append(
                    [
                        "Docker floor of a step exec'd in a started container (Engine API)",
                        fmt(o["engine_exec"]["median_ms"], " ms"),
                        f"the agent {fmt(o['docker']['median_ms'], ' ms')}; "
                        f"{fmt(o['engine_exec_docker_run_ratio'], '×', 2)} docker run",
                        fmt(o["docker_engine_exec_ratio"], "×", 2),
                        "a measured floor",
                        "",
                    ]
                )
        else:
            out.append(["Overhead claim→step, docker", "n/a: no Docker engine", "", "", "", "n/a"])
    if not na("footprint", "Idle agent"):
        f = results["footprint"]["summary"]
        lib = f["baseline_python_libs"]
        out.append(
            [
                f"Idle RSS, 1 agent, {f['window_s']['median']:.0f} s",
                fmt(f["rss_mb_median"], " MB"),
                f"python+libs {fmt(lib['rss_mb'], ' MB')}",
                fmt(f["rss_ratio"], "×", 2),
                "≤ 38 MB",
                judge(f["rss_mb_median"], 38),
            ]
        )
        if "baseline_floor" in f:  # results measured before there was a floor have none
            out.append(
                [
                    "Idle RSS floor: python+libs, 1 pydantic model validated",
                    fmt(f["baseline_floor"]["rss_mb"], " MB"),
                    f"the agent {fmt(f['rss_mb_median'], ' MB')}",
                    fmt(f["rss_floor_ratio"], "×", 2),
                    "a measured floor",
                    "",
                ]
            )
        out.append(
            [
                "Idle CPU, 1 agent (same window as baseline)",
                fmt(f["cpu_percent"], "% of a core", 2),
                f"python+libs {fmt(lib['cpu_percent'], '%', 2)}",
                "",
                "",
                "",
            ]
        )
        out.append(
            [
                f"Idle HTTP requests (poll {f['polling_interval_s']['median']:g}s)",
                f"{fmt(f['polls'], '', 0)} polls + {fmt(f['other_requests'], '', 0)} other",
                "the poll schedule (every run)",
                "",
                "= poll schedule",
                "met" if f["polls_match_schedule"] and not f["other_requests"]["max"] else "missed",
            ]
        )
    if not na("slots", "Slots"):
        s = results["slots"]["summary"]
        one, many = s["one_process"], int(s["many_slots"]["median"])
        procs = int(s["processes"]["median"])
        out.append(
            [
                f"RSS of 1 / 10 / {many} slots, 1 process",
                " / ".join(fmt(one[k]["rss_mb"], "", 1) for k in ("1", "10", "many")) + " MB",
                f"{procs} processes {fmt(s['n_processes']['rss_mb'], ' MB')}",
                "",
                "",
                "",
            ]
        )
        out.append(
            [
                "Marginal MB per extra slot",
                fmt(s["marginal_mb_per_slot_rss"], " MB", 3),
                f"per extra process {fmt(s['marginal_mb_per_process_rss'], ' MB')}",
                "",
                "≤ 2 MB",
                judge(s["marginal_mb_per_slot_rss"], 2),
            ]
        )
    if not na("fleet", "Fleet"):
        f = results["fleet"]["summary"]
        fl, base = f["fleet"], f["baseline"]
        pollers = int(fl["pollers"]["median"])
        out.append(
            [
                f"Fleet {pollers} slots: probe poll p50 / p99",
                f"{fmt(fl['probe_poll_p50_ms'])} / {fmt(fl['probe_poll_p99_ms'], ' ms')}",
                f"{pollers} bare pollers {fmt(base['probe_poll_p50_ms'])} / "
                f"{fmt(base['probe_poll_p99_ms'], ' ms')}",
                "",
                "",
                "",
            ]
        )
        out.append(
            [
                "Fleet: claim latency p50 / p99",
                f"{fmt(fl['claim_latency_p50_ms'], '', 0)} / "
                f"{fmt(fl['claim_latency_p99_ms'], ' ms', 0)}",
                f"bare, no jitter {fmt(base['claim_latency_p50_ms'], '', 0)} / "
                f"{fmt(base['claim_latency_p99_ms'], ' ms', 0)}",
                fmt(f.get("claim_p50_ratio"), "×", 2),
                "",
                "",
            ]
        )
        out.append(
            [
                "Fleet: emulator CPU",
                fmt(fl["emulator_cpu_percent"], "% of a core"),
                f"bare pollers {fmt(base['emulator_cpu_percent'], '%')}",
                "",
                "",
                "",
            ]
        )
    if not na("image", "Agent image"):
        im = results["image"]["summary"]
        out.append(
            [
                "Image size",
                fmt(im["size_mb"], " MB"),
                f"base image {fmt(im['base_size_mb'], ' MB')}",
                "",
                "",
                "",
            ]
        )
        out.append(
            [
                "Image: docker run → /healthz 200",
                fmt(im["time_to_healthy_ms_median"], " ms", 0),
                f"bare http.server {fmt(im['bare_http_server_ms_median'], ' ms', 0)}",
                fmt(im["ratio"], "×", 2),
                "",
                "",
            ]
        )
    if not na("rollout", "Rollout"):
        r = results["rollout"]
        for count, sz in r["sizes"].items():
            out.append(
                [
                    f"Rollout, {count} hosts: first converge (once)",
                    f"{sz['first_converge']['seconds']} s "
                    f"({sz['first_converge_s_per_host']} s/host)",
                    f"baseline play {sz['baseline_before']['seconds']} s",
                    f"{sz['first_converge_ratio']:.2f}×",
                    "",
                    "",
                ]
            )
            n = sz["no_op"]
            out.append(
                [
                    f"Rollout, {count} hosts: no-op re-run",
                    f"{fmt(n['no_op_s'], ' s')}; {fmt(n['no_op_s_per_host'], ' s/host', 2)}",
                    f"baseline play {fmt(n['baseline_s'], ' s')}",
                    fmt(n["no_op_ratio"], "×", 2),
                    "≤ 1.5× baseline",
                    judge(n["no_op_ratio"], 1.5),
                ]
            )
        out += growth_rows(r["sizes"])
    if not na("deploy", "Deployment through the agent"):
        d = results["deploy"]["summary"]
        agent = fmt(d["agent"]["median_s"], " s", 2)
        out.append(
            [
                "Deployment claim→done, docker: `pulumi up` of `base` (median of each run)",
                agent,
                f"same executor, bare docker run {fmt(d['executor']['median_s'], ' s', 2)}",
                fmt(d["ratio"], "×", 2),
                "≤ 1.10× bare docker run",
                judge(d["ratio"], 1.10),
            ]
        )
        out.append(
            [
                "Deployment, against its pulumi commands by hand (file:// backend)",
                agent,
                f"bare docker run {fmt(d['by_hand']['median_s'], ' s', 2)}",
                fmt(d["ratio_by_hand"], "×", 2),
                "",
                "",
            ]
        )
    return out


def growth_rows(sizes: dict) -> list[list[str]]:
    """How a rollout's cost grows with the fleet: a straight line through the measured sizes
    (first converge; no-op medians), read off at 200 hosts."""
    if len(sizes) < 2:
        return []
    counts = ", ".join(str(c) for c in sizes)
    out = []
    for label, seconds in (
        ("first converge", lambda sz: sz["first_converge"]["seconds"]),
        ("no-op re-run", lambda sz: sz["no_op"]["no_op_s"]["median"]),
    ):
        fixed, per_host = linear_fit([(int(c), seconds(sz)) for c, sz in sizes.items()])
        at_200 = fixed + 200 * per_host
        out.append(
            [
                f"Rollout growth, {label}",
                f"{fixed:.1f} s + {per_host:.2f} s/host; 200 hosts ≈ {at_200:.0f} s",
                f"least squares over {counts} hosts",
                "",
                "",
                "",
            ]
        )
    return out


def _iso(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).isoformat()


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
    summary = o.get("summary", {})
    for target in ("process", "docker"):
        if target in summary:
            phases = {k: v["median"] for k, v in summary[target]["phases_median_ms"].items()}
            out.append(f"{target} overhead by phase (median ms over the runs): {phases}")
    d = results.get("deploy", {}).get("summary", {})
    for side in ("agent", "executor", "by_hand"):
        if side in d:
            phases = {k: v["median"] for k, v in d[side]["phases_median_s"].items()}
            out.append(f"deployment {side} by phase (median s over the runs): {phases}")
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
    parser.add_argument("--repeats", type=int, default=5, help="runs of each figure (>= 1)")
    parser.add_argument("--jobs", type=int, default=20, help="jobs per overhead run")
    parser.add_argument("--idle", type=float, default=60, help="seconds of idle footprint")
    parser.add_argument("--window", type=float, default=60, help="seconds of fleet load")
    parser.add_argument("--hosts", default="10,25,50", help="rollout fleet sizes")
    parser.add_argument("--deployments", type=int, default=3, help="deployment pairs per run")
    parser.add_argument("--smoke", action="store_true", help="each section once, smallest size")
    args = parser.parse_args(argv)
    chosen = [s for s in args.only.split(",") if s]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    try:
        sizes = tuple(int(h) for h in args.hosts.split(",") if h)
    except ValueError:
        parser.error(f"--hosts: comma-separated host counts, not {args.hosts!r}")
    if args.repeats < 1 or args.deployments < 1 or not sizes or min(sizes) < 1:
        parser.error("--repeats, --deployments and every --hosts size must be at least 1")
    if args.smoke:
        args.repeats, args.jobs, args.idle, args.window, sizes = 1, 3, 6, 6, (2,)
        args.deployments = 1
    benchlib.STATE.mkdir(parents=True, exist_ok=True)
    has_docker = docker_ok()
    described = benchlib.machine()  # before the run: the load average then says how busy it was
    started = time.time()
    results: dict = {}
    no_docker = {"na": "n/a: no Docker engine"}
    runners = {
        "overhead": lambda: overhead.run(args.jobs, has_docker),
        "footprint": lambda: footprint.run(args.idle),
        "slots": (lambda: slots.run(5, 2)) if args.smoke else slots.run,
        "fleet": lambda: fleet.run(args.window, *((2, 2) if args.smoke else ())),
        "image": image.run if has_docker else lambda: no_docker,
        # Smoke: one pair, no warm-up pair.
        "deploy": (
            (lambda: deploy.run(args.deployments, 0 if args.smoke else deploy.WARMUP))
            if has_docker
            else lambda: no_docker
        ),
    }
    for name in chosen:
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        try:
            if name == "rollout":  # its own repeats: one set-up per fleet size
                results[name] = rollout.run(sizes, args.repeats) if has_docker else no_docker
            else:
                runs = []
                for i in range(args.repeats):
                    runs.append(runners[name]())
                    if "na" in runs[-1]:
                        break
                    print(f"bench: {name} run {i + 1}/{args.repeats}", file=sys.stderr, flush=True)
                done = {"runs": runs, "summary": spread(runs)}
                results[name] = runs[0] if "na" in runs[0] else done
            if name == "overhead" and not args.smoke:
                results[name].update(overhead.profiles(results[name]["summary"]))
            idle = results[name].get("summary", {}).get("rss_mb_median", {}).get("median", 0)
            if name == "footprint" and not args.smoke and idle > 40:
                results[name]["import_profile_rss_mb"] = footprint.import_profile()
        except Exception as exc:  # a broken section is reported, the others still run
            traceback.print_exc()
            results[name] = {"error": f"n/a: {type(exc).__name__}: {exc}"}
        results[name]["section_seconds"] = round(time.monotonic() - t0, 1)
        print(f"bench: {name} done in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)

    for result in results.values():
        result["measured"] = {"commit": described["commit"], "started": _iso(started)}
    # A re-run of some sections (--only) keeps the others from the last full results, each with
    # the commit and date it was measured at.
    last = json.loads(LATEST.read_text()) if LATEST.exists() else {}
    if not args.smoke and set(chosen) != set(SECTIONS) and last:
        for name, result in last.get("results", {}).items():
            results.setdefault(name, result)
        results = {name: results[name] for name in SECTIONS if name in results}
        args.only = ",".join(results)
    body = rows(results)
    header = ["Figure", "Value: median (min–max)", "Baseline (same runs)", "Ratio", "Goal"]
    header.append("Verdict")
    report = {
        "machine": {**described, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
        "started": _iso(started),
        "duration_s": round(time.time() - started, 1),
        "args": {**vars(args), "hosts": list(sizes)},
        "results": results,
        "table": [dict(zip(header, r, strict=True)) for r in body],
        "notes": notes(results),
    }
    m = report["machine"]
    print(
        f"\nMachine: {m['cpu']}, {m['cores']} cores, {m['memory']}, kernel {m['kernel']}, "
        f"{m['os']}, Python {m['python']}, Docker {m['docker']}, commit {m['commit']}, "
        f"load {m['load_average_at_start']} → {m['load_average_at_end']}"
    )
    print(table(header, body))
    for note in report["notes"]:
        print(f"- {note}")
    broken = [n for n, r in results.items() if "error" in r]
    if args.smoke:
        print(f"\nbench-smoke: {len(results) - len(broken)} of {len(results)} sections ran")
        return 1 if broken else 0
    RESULTS.mkdir(exist_ok=True)
    tmp = RESULTS / "latest.json.tmp"
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, LATEST)
    print(f"\nwritten: {LATEST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
