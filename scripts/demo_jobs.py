"""Enqueue demo jobs on the emulator, wait for them with progress, print who ran what."""

import argparse
import collections
import json
import pathlib
import sys
import time
import urllib.parse
import urllib.request


def call(url: str, token: str, method: str = "GET", body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)  # noqa: S310 (the local emulator)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 (the local emulator)
        return json.loads(resp.read() or b"{}")


def prom(url: str, path: str, **params) -> list:
    """One Prometheus HTTP API query's result list."""
    q = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}{path}?{q}", timeout=10) as resp:  # noqa: S310 (loopback)
        return json.loads(resp.read())["data"]["result"]


def prometheus_summary(url: str, planned: int, start: float) -> bool:
    """Planned slots next to what Prometheus scraped, and the busy slots while the jobs ran.
    True when Prometheus reports the planned slots."""
    # One more scrape (every 2s) so the last moments of the jobs are in.
    time.sleep(3)
    end = time.time()
    total = prom(url, "/api/v1/query", query='sum(workflow_agent_slots{job="workflow_agent"})')
    seen = int(float(total[0]["value"][1])) if total else 0
    busy = prom(
        url,
        "/api/v1/query_range",
        query='sum(workflow_agent_busy_slots{job="workflow_agent"})',
        start=f"{start:.3f}",
        end=f"{end:.3f}",
        step="2",
    )
    samples = [int(float(v)) for _, v in busy[0]["values"]] if busy else []
    print(f"\nPrometheus ({url}):")
    print(f"  planned slots {planned}, sum(workflow_agent_slots) = {seen}")
    if samples:
        print(f"  busy slots during the jobs (every 2s): {' '.join(map(str, samples))}")
        print(f"  most busy at once: {max(samples)} of {seen}")
    else:
        print("  busy slots during the jobs: no samples (were the agents scraped?)")
    dashboard = pathlib.Path(__file__).resolve().parents[1] / "extensions/prometheus/dashboard.json"
    panels = json.loads(dashboard.read_text())["panels"]
    empty = [
        p["title"]
        for p in panels
        for t in p["targets"]
        if not prom(url, "/api/v1/query", query=t["expr"])
    ]
    print(
        f"  dashboard ({dashboard.name}): {len(panels) - len(set(empty))} of {len(panels)} panels"
        f" have data{'; none yet: ' + ', '.join(sorted(set(empty))) if empty else ''}"
    )
    return seen == planned


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--admin-token-file", required=True)
    p.add_argument("--jobs", type=int, default=12)
    p.add_argument("--agents", type=int, default=0, help="how many agents should share the jobs")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--prometheus", help="a Prometheus scraping the agents: print what it saw")
    p.add_argument("--planned-slots", type=int, default=0, help="the pool's planned slots")
    a = p.parse_args()
    start = time.time()
    token = pathlib.Path(a.admin_token_file).read_text().strip()
    ids = []
    for i in range(1, a.jobs + 1):
        job = {
            "steps": [
                {"name": "build", "run": f'echo "job {i} building on $(hostname)"; sleep 4'},
                {"name": "deploy", "run": f'echo "job {i} deployed"'},
            ]
        }
        ids.append(call(f"{a.url}/admin/jobs", token, "POST", job)["id"])
    print(f"enqueued {len(ids)} jobs")
    deadline = time.monotonic() + a.timeout
    terminal = {"succeeded", "failed", "canceled", "skipped"}
    last = None
    while True:
        jobs = [call(f"{a.url}/admin/jobs/{j}", token) for j in ids]
        counts = collections.Counter(j["status"] for j in jobs)
        line = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        if line != last:
            print(f"  {time.strftime('%H:%M:%S')}  {line}", flush=True)
            last = line
        if all(j["status"] in terminal for j in jobs):
            break
        if time.monotonic() > deadline:
            print(f"timed out after {a.timeout:.0f}s", file=sys.stderr)
            return 1
        time.sleep(1)
    table = collections.defaultdict(collections.Counter)
    for j in jobs:
        table[j.get("agent") or "-"][j["status"]] += 1
    print()
    rows = []
    for agent in sorted(table):
        host, _, inst = agent.partition("/")
        res = ", ".join(f"{n} {s}" for s, n in sorted(table[agent].items()))
        rows.append((host, inst, str(sum(table[agent].values())), res))
    hw = max([len("host")] + [len(r[0]) for r in rows])
    iw = max([len("instance")] + [len(r[1]) for r in rows])
    print(f"{'host':<{hw}}  {'instance':<{iw}}  {'jobs run':>8}  result")
    for host, inst, n, res in rows:
        print(f"{host:<{hw}}  {inst:<{iw}}  {n:>8}  {res}")
    ok = counts.get("succeeded", 0)
    print(f"\n{ok}/{len(jobs)} jobs succeeded on {len(table)} agents")
    if a.agents and len(table) < a.agents:
        print(f"(fewer than {a.agents} agents took a job this time: the pollers decide who claims)")
    seen_ok = prometheus_summary(a.prometheus, a.planned_slots, start) if a.prometheus else True
    return 0 if ok == len(jobs) and seen_ok else 1


if __name__ == "__main__":
    sys.exit(main())
