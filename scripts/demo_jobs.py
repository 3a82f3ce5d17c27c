"""Enqueue demo jobs on the emulator, wait for them with progress, print who ran what.

With --deploy, also one real Pulumi deployment (`pulumi up` of the emulator's `base` program,
config with a secret, the passphrase written to $PULUMI_ENV by a pre-run command), cloned from a
git server this script runs for as long as the jobs do; its stack's outputs are then read from
outside the job with the real `pulumi stack output`, on the emulator's copy of the state.
"""

import argparse
import collections
import contextlib
import io
import json
import pathlib
import secrets
import shutil
import sys
import tarfile
import time
import urllib.parse
import urllib.request

PROJECT, STACK = "base", "dev"


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
    # Until every agent was scraped once more (every 2s), so that the last moments of the jobs
    # are in: a scrape after the jobs ended, not a fixed wait.
    done = time.time()
    for _ in range(25):
        last = prom(url, "/api/v1/query", query='min(timestamp(up{job="workflow_agent"}))')
        if last and float(last[0]["value"][1]) > done:
            break
        time.sleep(0.2)
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


class EmulatorState:
    """What workflow_emulator.testing.stack_outputs needs of an emulator, for one that runs in a
    container: its copy of the organization's Pulumi state (GET /admin/backend/<org>)."""

    def __init__(self, url: str, token: str, org: str) -> None:
        self.url, self.token, self.org = url, token, org

    def extract_backend(self, dest) -> pathlib.Path:
        req = urllib.request.Request(f"{self.url}/admin/backend/{self.org}")  # noqa: S310
        req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 (the local emulator)
            data = resp.read()
        dest = pathlib.Path(dest)
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data")
        return dest


class Deployment:
    """The demo's one real deployment, from its git server to its stack's outputs."""

    def __init__(self, url: str, token: str, org: str, git_host: str, passphrase: str) -> None:
        self.url, self.token, self.org = url, token, org
        self.git_host, self.passphrase = git_host, passphrase
        self.stack = f"{org}/{PROJECT}/{STACK}"
        # This run's values: the outputs read back must be these, not an earlier demo's.
        self.greeting = f"hello from make demo at {time.strftime('%H:%M:%S')}"
        self.secret = secrets.token_hex(6)
        self.id = ""
        self.git_url = ""

    def start(self, stack: contextlib.ExitStack) -> None:
        from workflow_emulator.testing import PROGRAMS, GitServer

        git = stack.enter_context(GitServer(host=self.git_host))
        self.git_url = git.add("programs", PROGRAMS)
        body = {
            "stack": self.stack,
            "source": {"url": self.git_url, "repoDir": PROJECT},
            "operation": "update",
            "config": {
                "greeting": self.greeting,
                "secretWord": {"value": self.secret, "secret": True},
            },
            # As a deployment's pre-run command would: the secrets provider's passphrase
            # reaches `pulumi` only through $PULUMI_ENV.
            "preRunCommands": [
                f'echo "PULUMI_CONFIG_PASSPHRASE={self.passphrase}" >> "$PULUMI_ENV"'
            ],
        }
        self.id = call(f"{self.url}/admin/deployments", self.token, "POST", body)["id"]

    def report(self, job: dict) -> bool:
        """The deployment's table: who ran it and its stack's outputs. True when it succeeded
        and the outputs are this run's."""
        from workflow_emulator.testing import EmulatorError, stack_outputs

        host, _, inst = (job.get("agent") or "-").partition("/")
        took = ""
        if job.get("finished_at") and job.get("claimed_at"):
            took = f" in {job['finished_at'] - job['claimed_at']:.0f}s"
        print(
            f"\nDeployment {self.stack}: pulumi up of the '{PROJECT}' program from "
            f"{self.git_url}, {job['status']}{took}"
        )
        if job["status"] != "succeeded":
            logs = [line for step in job["steps"] for line in step["logs"]]
            print(f"  reason: {job.get('reason') or '-'}; the last lines of its log:")
            print("\n".join(f"  | {line}" for line in logs[-30:]))
            return False
        state = EmulatorState(self.url, self.token, self.org)
        try:
            outputs = stack_outputs(state, PROJECT, STACK, passphrase=self.passphrase)
        except EmulatorError as exc:
            print(f"  cannot read the stack's outputs: {exc}")
            return False
        want = {
            "greeting": self.greeting,
            "message": f"{self.greeting}, world",
            "secretWord": self.secret,
        }
        shown = dict(outputs)
        if "secretWord" in shown:  # read with the passphrase; never printed
            same = shown["secretWord"] == self.secret
            shown["secretWord"] = "[secret]: " + (
                "decrypts to the value this run set" if same else "NOT the value this run set"
            )
        rows = [(k, str(v)) for k, v in sorted(shown.items())]
        hw = max(len("host"), len(host))
        iw = max(len("instance"), len(inst))
        ow = max([len("output")] + [len(k) for k, _ in rows])
        print(
            f"{'host':<{hw}}  {'instance':<{iw}}  {'output':<{ow}}  "
            "value (pulumi stack output, read outside the job from the emulator's state)"
        )
        for n, (key, value) in enumerate(rows):
            who = f"{host:<{hw}}  {inst:<{iw}}" if n == 0 else " " * (hw + 2 + iw)
            print(f"{who}  {key:<{ow}}  {value}")
        if outputs != want:
            print(f"  the outputs are not this run's: expected {sorted(want)} with its values")
        return outputs == want


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--admin-token-file", required=True)
    p.add_argument("--jobs", type=int, default=12)
    p.add_argument("--agents", type=int, default=0, help="how many agents should share the jobs")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--prometheus", help="a Prometheus scraping the agents: print what it saw")
    p.add_argument("--planned-slots", type=int, default=0, help="the pool's planned slots")
    p.add_argument("--deploy", action="store_true", help="also run one real Pulumi deployment")
    p.add_argument(
        "--git-host", default="127.0.0.1", help="where the git server listens: the agents reach it"
    )
    p.add_argument("--passphrase-file", help="the stack's secrets passphrase (--deploy)")
    p.add_argument("--org", default="default", help="the pool's organization")
    a = p.parse_args()
    if a.deploy and not a.passphrase_file:
        p.error("--deploy needs --passphrase-file")
    start = time.time()
    token = pathlib.Path(a.admin_token_file).read_text().strip()
    with contextlib.ExitStack() as stack:  # the git server serves until the jobs are done
        deployment = None
        if a.deploy:
            passphrase = pathlib.Path(a.passphrase_file).read_text().strip()
            deployment = Deployment(a.url, token, a.org, a.git_host, passphrase)
            deployment.start(stack)  # first: it takes longest, an agent claims it at once
        return run_jobs(a, token, start, deployment)


def run_jobs(a: argparse.Namespace, token: str, start: float, deployment) -> int:
    ids = []
    for i in range(1, a.jobs + 1):
        job = {
            "steps": [
                {"name": "build", "run": f'echo "job {i} building on $(hostname)"; sleep 4'},
                {"name": "deploy", "run": f'echo "job {i} deployed"'},
            ]
        }
        ids.append(call(f"{a.url}/admin/jobs", token, "POST", job)["id"])
    print(f"enqueued {len(ids)} jobs" + (" and the deployment" if deployment else ""))
    deadline = time.monotonic() + a.timeout
    terminal = {"succeeded", "failed", "canceled", "skipped"}
    last = None
    while True:
        jobs = [call(f"{a.url}/admin/jobs/{j}", token) for j in ids]
        counts = collections.Counter(j["status"] for j in jobs)
        line = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        deployed = call(f"{a.url}/admin/jobs/{deployment.id}", token) if deployment else None
        if deployed:
            line += f"; deployment {deployed['status']}"
        if line != last:
            print(f"  {time.strftime('%H:%M:%S')}  {line}", flush=True)
            last = line
        if all(j["status"] in terminal for j in jobs + ([deployed] if deployed else [])):
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
    ran_deployment = (deployed or {}).get("agent")
    for agent in sorted(table | ({ran_deployment: {}} if ran_deployment else {})):
        host, _, inst = agent.partition("/")
        res = ", ".join(f"{n} {s}" for s, n in sorted(table[agent].items()))
        if agent == ran_deployment:  # the deployment's own table follows
            res = ", ".join(filter(None, [res, "and the deployment"]))
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
    deployed_ok = deployment.report(deployed) if deployment else True
    seen_ok = prometheus_summary(a.prometheus, a.planned_slots, start) if a.prometheus else True
    return 0 if ok == len(jobs) and seen_ok and deployed_ok else 1


if __name__ == "__main__":
    sys.exit(main())
