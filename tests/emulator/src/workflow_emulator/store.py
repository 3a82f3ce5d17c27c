"""The emulator's state and its rules: pools, tokens, jobs, logs, agents.

Everything runs on the server's single event-loop thread and no method awaits, so each method
is atomic: that is what makes a claim exclusive across any number of concurrent pollers.
Every change is written through to `Db` in one transaction.
"""

import collections
import hashlib
import hmac
import re
import secrets
import time
import uuid

from workflow_emulator import durations, oidc
from workflow_emulator.db import Db
from workflow_emulator.errors import ApiError

JOB_TYPES = ("deployment", "insights_scan", "policy_evaluation")
LEASE_TYPES = ("insights_scan", "policy_evaluation")
# Job statuses: the upstream enum plus "canceled" (admin view only; the wire says "failed").
JOB_STATUSES = ("not-started", "accepted", "running", "failed", "succeeded", "skipped", "canceled")
TERMINAL = frozenset({"failed", "succeeded", "skipped", "canceled"})
STEP_REPORTS = ("running", "succeeded", "failed", "skipped")
DEFAULT_JOB_TIMEOUT = 3600.0
MAX_LOG_BATCH = 10_000
_ORG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_USER_AGENT = re.compile(r"^[^/\s]+/(?P<version>\S+)(?:\s+\((?P<os>[^;)]+);\s*(?P<arch>[^)]+)\))?")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def new_token() -> str:
    return "pul-" + secrets.token_hex(20)


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def unix(ts: float | None) -> int:
    """Unix epoch seconds, the pool REST API's time format [SPEC: int64]; 0 for never."""
    return 0 if ts is None else int(ts)


class Clock:
    """Wall time plus an offset the admin API can advance: how tests move time without sleeping."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() + self.offset


def check_org(org: object) -> str:
    if not isinstance(org, str) or not _ORG.match(org):
        raise ApiError(400, f"organization name {org!r} is not valid (letters, digits, . _ -)")
    return org


class Store:
    def __init__(
        self,
        db: Db,
        clock: Clock,
        *,
        heartbeat_timeout: float,
        online_window: float,
        org: str,
        default_image: str,
    ) -> None:
        self.db = db
        self.clock = clock
        self.heartbeat_timeout = heartbeat_timeout
        self.online_window = online_window
        self.org = org
        self.default_image = default_image
        self.on_claim = lambda job, wait: None  # metrics hook
        self._load()

    # ---------------------------------------------------------------- loading and reset
    def _load(self) -> None:
        self.pools: dict[str, dict] = {d["id"]: d for d in self.db.docs("pool")}
        self.tokens: dict[str, dict] = {d["hash"]: d for d in self.db.docs("token")}
        self.jobs: dict[str, dict] = {d["id"]: d for d in self.db.docs("job")}
        self.agents: dict[str, dict] = {d["key"]: d for d in self.db.docs("agent")}
        self.logs: dict[tuple[str, int], list[list[str]]] = collections.defaultdict(list)
        for job_id, step, t, text in self.db.all_logs():
            self.logs[(job_id, step)].append([t, text])
        meta = self.db.get("meta", "meta") or {}
        self.clock.offset = meta.get("clock_offset", self.clock.offset)
        self.issuer_key = bytes.fromhex(meta.get("issuer_key") or secrets.token_hex(32))
        self.seq = max((j["seq"] for j in self.jobs.values()), default=0)
        self.by_deployment = {j["deployment_id"]: j["id"] for j in self.jobs.values()}
        self.queues: dict[tuple[str, str], collections.deque] = collections.defaultdict(
            collections.deque
        )
        self.active: set[str] = set()
        for job in sorted(self.jobs.values(), key=lambda j: j["seq"]):
            if job["status"] in TERMINAL:
                continue
            if job["agent"] is None:
                self.queues[(job["pool_id"], job["type"])].append(job["id"])
            else:
                self.active.add(job["id"])
        self._save_meta()

    def _save_meta(self) -> None:
        with self.db.tx():
            self.db.put(
                "meta",
                "meta",
                {"clock_offset": self.clock.offset, "issuer_key": self.issuer_key.hex()},
            )

    def reset(self, *, pools: bool, keep_pool: str | None) -> None:
        """Forget jobs, logs, agents and the clock offset; with `pools`, every pool but the seed."""
        with self.db.tx():
            self.db.delete("job")
            self.db.delete("agent")
            self.db.drop_logs()
            if pools:
                for pool in list(self.pools.values()):
                    if pool["id"] != keep_pool:
                        self.db.delete("pool", pool["id"])
                self.db.delete("token")
        self.clock.offset = 0.0
        self._save_meta()
        self._load()

    def advance(self, seconds: float) -> None:
        self.clock.offset += seconds
        self._save_meta()
        self.sweep()

    # ---------------------------------------------------------------- pools and tokens
    def create_pool(
        self,
        org: str,
        name: object,
        description: object = "",
        token: str | None = None,
        *,
        is_default: bool = False,
    ) -> tuple[dict, str]:
        check_org(org)
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            raise ApiError(400, "pool name must be a non-empty string of at most 100 characters")
        if not isinstance(description, str):
            raise ApiError(400, "pool description must be a string")
        if any(p["org"] == org and p["name"] == name for p in self.pools.values()):
            raise ApiError(409, f"organization {org} already has a pool named {name!r}")
        token = token or new_token()
        pool = {
            "id": str(uuid.uuid4()),
            "org": org,
            "name": name,
            "description": description,
            "created": self.clock.now(),
            "token_hash": token_hash(token),
            "stacks": [],
            "is_default": is_default,
            "last_claim": None,
        }
        self.pools[pool["id"]] = pool
        self._put_pool(pool)
        return pool, token

    def seed(self, token: str) -> dict:
        """The pool `default` of the default org, with this token (a restart may change it)."""
        for pool in self.pools.values():
            if pool["org"] == self.org and pool["name"] == "default":
                pool["token_hash"] = token_hash(token)
                self._put_pool(pool)
                return pool
        return self.create_pool(self.org, "default", "seeded by serve", token, is_default=True)[0]

    def _put_pool(self, pool: dict) -> None:
        with self.db.tx():
            self.db.put("pool", pool["id"], pool)

    def find_pool(self, ref: object, org: str | None = None) -> dict:
        if not isinstance(ref, str) or not ref:
            raise ApiError(400, "pool must be a pool id or name")
        pools = [p for p in self.pools.values() if org is None or p["org"] == org]
        for pool in pools:
            if pool["id"] == ref:
                return pool
        named = [p for p in pools if p["name"] == ref]
        if len(named) > 1:
            named = [p for p in named if p["org"] == self.org] or named
        if len(named) == 1:
            return named[0]
        if named:
            raise ApiError(400, f"pool name {ref!r} is ambiguous: give its id")
        raise ApiError(404, f"no pool {ref!r}" + (f" in organization {org}" if org else ""))

    def update_pool(self, pool: dict, changes: dict) -> dict:
        if "name" in changes:
            name = changes["name"]
            if not isinstance(name, str) or not name.strip() or len(name) > 100:
                raise ApiError(
                    400, "pool name must be a non-empty string of at most 100 characters"
                )
            if any(
                p["org"] == pool["org"] and p["name"] == name and p["id"] != pool["id"]
                for p in self.pools.values()
            ):
                raise ApiError(409, f"organization {pool['org']} already has a pool named {name!r}")
        if "description" in changes and not isinstance(changes["description"], str):
            raise ApiError(400, "pool description must be a string")
        if "stacks" in changes:
            stacks = changes["stacks"]
            if not isinstance(stacks, list) or not all(isinstance(s, str) for s in stacks):
                raise ApiError(400, "stacks must be a list of strings")
        for key in ("name", "description", "stacks"):
            if key in changes:
                pool[key] = changes[key]
        self._put_pool(pool)
        return pool

    def delete_pool(self, pool: dict, *, force: bool) -> None:
        unfinished = [
            j
            for j in self.jobs.values()
            if j["pool_id"] == pool["id"] and j["status"] not in TERMINAL
        ]
        if not force and (pool["stacks"] or unfinished):
            what = []
            if pool["stacks"]:
                what.append(f"stacks {', '.join(pool['stacks'])}")
            if unfinished:
                what.append(f"{len(unfinished)} unfinished jobs")
            raise ApiError(
                400,
                f"pool {pool['name']!r} is still referenced by {' and '.join(what)};"
                " delete with ?force=true",
            )
        for job in unfinished:
            self.cancel(job, "pool deleted")
        del self.pools[pool["id"]]
        with self.db.tx():
            self.db.delete("pool", pool["id"])
            for h, tok in list(self.tokens.items()):
                if tok.get("pool_id") == pool["id"]:
                    del self.tokens[h]
                    self.db.delete("token", h)

    def pool_for_token(self, token: str) -> dict | None:
        """The pool a pool token or runner access token belongs to; compared in constant time."""
        h = token_hash(token)
        found = None
        for pool in self.pools.values():
            if _same(pool["token_hash"], h):
                found = pool
        if found:
            return found
        tok = self._access_token(h, "runner")
        return self.pools.get(tok["pool_id"]) if tok else None

    def _access_token(self, h: str, kind: str) -> dict | None:
        found = None
        for key, tok in self.tokens.items():
            if _same(key, h) and tok["kind"] == kind:
                found = tok
        if found and found.get("expires") is not None and found["expires"] <= self.clock.now():
            return None
        return found

    def add_access_token(self, kind: str, **doc: object) -> str:
        token = new_token()
        rec = {"hash": token_hash(token), "kind": kind, **doc}
        self.tokens[rec["hash"]] = rec
        with self.db.tx():
            self.db.put("token", rec["hash"], rec)
        return token

    def org_token(self, token: str) -> dict | None:
        """An access token minted for the pool REST API (`org` is "*" for every org)."""
        return self._access_token(token_hash(token), "org")

    # ---------------------------------------------------------------- agents
    def see_agent(self, pool: dict, ident: dict) -> dict:
        hostname = ident.get("hostname") or ident["ip"] or "unknown"
        name = ident.get("instance") or ident.get("pid") or "-"
        agent_id = f"{hostname}/{name}"
        key = f"{pool['id']}|{agent_id}"
        now = self.clock.now()
        agent = self.agents.get(key)
        if agent is None:
            agent = {
                "key": key,
                "id": agent_id,
                "pool_id": pool["id"],
                "first_seen": now,
                "claims": 0,
            }
            self.agents[key] = agent
        m = _USER_AGENT.match(ident.get("user_agent") or "")
        agent.update(
            hostname=ident.get("hostname") or None,
            instance=ident.get("instance") or None,
            pid=ident.get("pid") or None,
            ip=ident["ip"],
            user_agent=ident.get("user_agent") or "",
            version=m.group("version") if m else "",
            platform=f"{m.group('os')}/{m.group('arch')}".lower() if m and m.group("os") else "",
            last_seen=now,
        )
        with self.db.tx():
            self.db.put("agent", key, agent)
        return agent

    def list_agents(self, *, pool: dict | None, online_within: float | None) -> list[dict]:
        now = self.clock.now()
        out = []
        for agent in sorted(self.agents.values(), key=lambda a: (a["pool_id"], a["id"])):
            if pool is not None and agent["pool_id"] != pool["id"]:
                continue
            if online_within is not None and now - agent["last_seen"] > online_within:
                continue
            out.append(agent)
        return out

    def agent_online(self, agent: dict) -> bool:
        return self.clock.now() - agent["last_seen"] <= self.online_window

    # ---------------------------------------------------------------- jobs: creation
    def create_jobs(self, spec: dict) -> list[dict]:
        """Validate an admin job request and queue `count` copies of it."""
        if not isinstance(spec, dict):
            raise ApiError(400, "job must be a JSON object")
        known = {
            "steps",
            "image",
            "env",
            "timeout",
            "type",
            "pool",
            "count",
            "os",
            "architecture",
            "shell",
            "service_env",
        }
        unknown = sorted(set(spec) - known)
        if unknown:
            raise ApiError(400, f"unknown job field(s): {', '.join(unknown)}")
        kind = spec.get("type", "deployment")
        if kind not in JOB_TYPES:
            raise ApiError(400, f"type must be one of {', '.join(JOB_TYPES)}, not {kind!r}")
        count = spec.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 10_000:
            raise ApiError(400, "count must be an integer from 1 to 10000")
        pool = self._job_pool(spec.get("pool"))
        service_env = spec.get("service_env", False)
        if not isinstance(service_env, bool):
            raise ApiError(400, "service_env must be true or false")
        definition = {
            "os": _str_field(spec, "os", "linux"),
            "architecture": _str_field(spec, "architecture", "amd64"),
            "image": _image(spec.get("image", self.default_image)),
            "timeout": durations.to_go(
                _duration(spec.get("timeout", DEFAULT_JOB_TIMEOUT), "timeout")
            ),
            "env": _env(spec.get("env", {})),
            "steps": [{"name": "checkout", "run": ""}, *_steps(spec.get("steps"))],
        }
        if "shell" in spec:
            definition["shell"] = _str_field(spec, "shell", "")
        now = self.clock.now()
        jobs = []
        with self.db.tx():
            for _ in range(count):
                self.seq += 1
                job = {
                    "id": _id("job"),
                    "seq": self.seq,
                    "type": kind,
                    "pool_id": pool["id"],
                    "status": "not-started",
                    "deployment_id": _id("dep"),
                    "run_id": _id("run"),
                    "definition": definition,
                    "created": now,
                    "claimed_at": None,
                    "accepted_at": None,
                    "started_at": None,
                    "finished_at": None,
                    "agent": None,
                    "token_hash": None,
                    "last_beat": None,
                    "heartbeats": 0,
                    "reason": "",
                    "result": None,
                    "claims": [],
                    "events": [[now, "created", ""]],
                    "steps": ["not-started"] * len(definition["steps"]),
                    "service_env": service_env,
                }
                self.jobs[job["id"]] = job
                self.by_deployment[job["deployment_id"]] = job["id"]
                self.queues[(pool["id"], kind)].append(job["id"])
                self.db.put("job", job["id"], job)
                jobs.append(job)
        return jobs

    def _job_pool(self, ref: object) -> dict:
        if ref is not None:
            return self.find_pool(ref)
        defaults = [
            p for p in self.pools.values() if p["org"] == self.org and p["name"] == "default"
        ]
        if defaults:
            return defaults[0]
        if len(self.pools) == 1:
            return next(iter(self.pools.values()))
        raise ApiError(400, "no pool given and there is no pool named 'default'")

    def _put_job(self, job: dict, event: str | None = None, detail: str = "") -> None:
        if event:
            job["events"].append([self.clock.now(), event, detail])
        with self.db.tx():
            self.db.put("job", job["id"], job)

    # ---------------------------------------------------------------- jobs: the agent's side
    def claim(self, pool: dict, kinds: tuple[str, ...], agent: dict) -> tuple[dict, str] | None:
        """Hand the oldest queued job of these kinds to this agent, exactly once."""
        best = None
        for kind in kinds:
            queue = self.queues.get((pool["id"], kind))
            while queue and self.jobs.get(queue[0], {}).get("status") != "not-started":
                queue.popleft()  # canceled or deleted while queued
            if queue and (best is None or self.jobs[queue[0]]["seq"] < self.jobs[best[0]]["seq"]):
                best = queue
        if best is None:
            return None
        job = self.jobs[best.popleft()]
        now = self.clock.now()
        token = secrets.token_urlsafe(32)
        job.update(agent=agent["id"], claimed_at=now, last_beat=now, token_hash=token_hash(token))
        if job["type"] != "deployment":
            job.update(status="accepted", accepted_at=now)  # a lease has no separate ack
        job["claims"].append({"agent": agent["id"], "at": now, "user_agent": agent["user_agent"]})
        agent["claims"] += 1
        pool["last_claim"] = now
        self.active.add(job["id"])
        job["events"].append([now, "claimed", agent["id"]])
        with self.db.tx():
            self.db.put("job", job["id"], job)
            self.db.put("agent", agent["key"], agent)
            self.db.put("pool", pool["id"], pool)
        self.on_claim(job, now - job["created"])
        return job, token

    def claim_body(self, job: dict, token: str) -> dict:
        pool = self.pools[job["pool_id"]]
        body = {
            "jobID": job["id"],
            "jobToken": token,
            "oidcToken": oidc.mint(
                self.issuer_key,
                audience=oidc.ORG_AUDIENCE_PREFIX + pool["org"],
                subject=f"job:{job['id']}",
                now=self.clock.now(),
                expires_in=_duration(job["definition"]["timeout"], "timeout"),
                extra={},
            ),
            "runID": job["run_id"],
            "typeSpecificID": job["deployment_id"],
            "deploymentID": job["deployment_id"],
        }
        if job["type"] != "deployment":
            body["type"] = job["type"]
        return body

    def job_in_pool(self, pool: dict, job_id: object) -> dict:
        job = self.jobs.get(job_id) if isinstance(job_id, str) else None
        if job is None or job["pool_id"] != pool["id"]:
            raise ApiError(404, f"no job {job_id!r} in this pool")
        return job

    def ack(self, pool: dict, body: dict) -> None:
        job = self.job_in_pool(pool, body.get("jobID"))
        if body.get("deploymentID") not in (None, job["deployment_id"]):
            raise ApiError(400, f"deploymentID does not belong to job {job['id']}")
        if job["agent"] is None:
            raise ApiError(409, f"job {job['id']} has not been claimed")
        if job["status"] == "not-started":  # repeats (a retried ack) change nothing
            job.update(status="accepted", accepted_at=self.clock.now(), last_beat=self.clock.now())
            self._put_job(job, "accepted")

    def deployment_status(self, pool: dict, deployment_id: str) -> str:
        job_id = self.by_deployment.get(deployment_id)
        job = self.jobs.get(job_id) if job_id else None
        if job is None or job["pool_id"] != pool["id"]:
            raise ApiError(404, f"no deployment {deployment_id!r} in this pool")
        return wire_status(job)

    def job_for_token(self, job_id: str, token: str) -> dict:
        job = self.jobs.get(job_id)
        if job is None:
            raise ApiError(404, f"no job {job_id!r}")
        if job["token_hash"] is None or not _same(job["token_hash"], token_hash(token)):
            raise ApiError(401, f"the job token is not valid for job {job_id}")
        return job

    def job_holding(self, token: str) -> dict:
        """The job whose current job token this is (GET /api/deployments/executor has no job id
        in its path); compared in constant time."""
        h = token_hash(token)
        found = None
        for job in self.jobs.values():
            if job["token_hash"] is not None and _same(job["token_hash"], h):
                found = job
        if found is None:
            raise ApiError(401, "the token is not a job token")
        return found

    def definition(self, job: dict, token: str, service_url: str) -> dict:
        """The JobDefinition as served: with `service_env`, the job also gets what a Pulumi
        deployment has in its environment to call the service back [DOC: PULUMI_ACCESS_TOKEN;
        RE: the backend URL]. The token is the job token, the one credential the emulator
        accepts from a job (as HappyPumi does)."""
        d = job["definition"]
        if not job.get("service_env"):
            return d
        env = {"PULUMI_BACKEND_URL": service_url, "PULUMI_ACCESS_TOKEN": {"secret": token}}
        return {**d, "env": {**env, **d["env"]}}

    def _step(self, job: dict, index: str) -> int:
        if not re.fullmatch(r"\d{1,6}", index) or int(index) >= len(job["steps"]):
            raise ApiError(
                404, f"job {job['id']} has no step {index!r} (steps 0..{len(job['steps']) - 1})"
            )
        return int(index)

    def step_status(self, job: dict, index: str, body: dict) -> None:
        i = self._step(job, index)
        status = body.get("status")
        if status not in STEP_REPORTS:
            raise ApiError(
                400, f"step status must be one of {', '.join(STEP_REPORTS)}, not {status!r}"
            )
        current = job["steps"][i]
        if current == status:
            return  # a retried report
        if current in ("succeeded", "failed", "skipped"):
            raise ApiError(409, f"step {i} of job {job['id']} is already {current}")
        job["steps"][i] = status
        if status == "running" and job["status"] in ("not-started", "accepted"):
            job.update(status="running", started_at=self.clock.now())
        self._put_job(job, f"step {i} {status}")
        self._settle(job, i)

    def _settle(self, job: dict, index: int) -> None:
        """The job's outcome, from its step reports: there is no job-level status call on the
        wire [RE]. A failed step fails the job; steps 1..N all succeeded (or skipped) succeed it.
        Step 0 (reserved for the source checkout) is never run, so it does not count."""
        reported = job["steps"][1:]
        if job["steps"][index] == "failed":
            outcome = "failed"
            name = job["definition"]["steps"][index]["name"]
            lines = self.logs.get((job["id"], index)) or [["", ""]]
            last = " ".join(lines[-1][1].split())[:300]
            reason = f"step {index} ({name}) failed" + (f": {last}" if last else "")
        elif reported and all(s in ("succeeded", "skipped") for s in reported):
            outcome, reason = "succeeded", ""
        else:
            return
        if job["result"] is not None:
            return
        job["result"] = outcome
        if job["status"] in TERMINAL:  # canceled or timed out first: the service's word stands
            self._put_job(job, f"steps say {outcome}", reason)
            return
        job.update(status=outcome, finished_at=self.clock.now(), reason=reason)
        self.active.discard(job["id"])
        self._put_job(job, outcome, reason)

    def append_logs(self, job: dict, index: str, body: dict) -> int:
        i = self._step(job, index)
        offset, lines = body.get("offset"), body.get("lines")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ApiError(400, "offset must be a non-negative integer")
        if not isinstance(lines, list) or len(lines) > MAX_LOG_BATCH:
            raise ApiError(400, f"lines must be a list of at most {MAX_LOG_BATCH} entries")
        rows = []
        for n, line in enumerate(lines):
            if not isinstance(line, dict) or not isinstance(line.get("l"), str):
                raise ApiError(400, f"lines[{n}] must be an object with a string 'l'")
            t = line.get("t")
            if not isinstance(t, str) or not _RFC3339.match(t):
                raise ApiError(400, f"lines[{n}].t must be an RFC 3339 timestamp")
            rows.append([t, line["l"]])
        stored = self.logs[(job["id"], i)]
        if offset != len(stored):
            raise ApiError(
                409,
                f"log offset {offset} does not match the {len(stored)} lines stored for step {i}",
                expectedOffset=len(stored),
            )
        with self.db.tx():
            self.db.add_logs(job["id"], i, offset, rows)
        stored.extend(rows)
        return len(stored)

    def heartbeat(self, job: dict) -> None:
        job["heartbeats"] += 1
        if job["status"] not in TERMINAL:
            job["last_beat"] = self.clock.now()
        self._put_job(job)

    # ---------------------------------------------------------------- jobs: the service's side
    def cancel(self, job: dict, reason: str, status: str = "canceled") -> None:
        """End a job from the service side: canceled, or skipped (a fresher one superseded it)."""
        if status not in ("canceled", "skipped"):
            raise ApiError(400, f"status must be canceled or skipped, not {status!r}")
        if job["status"] in TERMINAL:
            raise ApiError(409, f"job {job['id']} is already {job['status']}")
        job.update(status=status, finished_at=self.clock.now(), reason=reason)
        self.active.discard(job["id"])
        self._put_job(job, status, reason)

    def sweep(self) -> None:
        """Fail deployments (requeue leases) whose heartbeats stopped for heartbeat_timeout."""
        now = self.clock.now()
        for job_id in list(self.active):
            job = self.jobs[job_id]
            if job["status"] in TERMINAL:
                self.active.discard(job_id)
                continue
            if now - job["last_beat"] <= self.heartbeat_timeout:
                continue
            self.active.discard(job_id)
            silent = durations.to_go(now - job["last_beat"])
            if job["type"] == "deployment":  # never redelivered
                job.update(status="failed", finished_at=now, reason=f"no heartbeat for {silent}")
                self._put_job(job, "heartbeat timeout", job["agent"])
                continue
            # A lease expired: the work goes back to the front of its queue for another runner.
            job.update(
                status="not-started",
                agent=None,
                token_hash=None,
                claimed_at=None,
                accepted_at=None,
                started_at=None,
                last_beat=None,
            )
            job["steps"] = ["not-started"] * len(job["steps"])
            for i in range(len(job["steps"])):
                self.logs.pop((job_id, i), None)
            with self.db.tx():
                self.db.drop_logs(job_id)
                self._put_job(job, "lease expired", f"no heartbeat for {silent}")
            self.queues[(job["pool_id"], job["type"])].appendleft(job_id)

    # ---------------------------------------------------------------- views
    def job_view(self, job: dict) -> dict:
        d = job["definition"]
        pool = self.pools.get(job["pool_id"])
        steps = [
            {
                "index": i,
                "name": step["name"],
                "status": job["steps"][i],
                "logs": [text for _, text in self.logs.get((job["id"], i), ())],
            }
            for i, step in enumerate(d["steps"])
            if i > 0
        ]
        image = dict(d["image"])
        if "credentials" in image:
            image["credentials"] = {
                "username": image["credentials"]["username"],
                "password": "[secret]",
            }
        return {
            "id": job["id"],
            "status": job["status"],
            "type": job["type"],
            "pool": pool["name"] if pool else None,
            "pool_id": job["pool_id"],
            "deploymentID": job["deployment_id"],
            "runID": job["run_id"],
            "agent": job["agent"],
            "claims": job["claims"],
            "result": job["result"],
            "reason": job["reason"],
            "created": job["created"],
            "claimed_at": job["claimed_at"],
            "accepted_at": job["accepted_at"],
            "started_at": job["started_at"],
            "finished_at": job["finished_at"],
            "last_heartbeat": job["last_beat"],
            "heartbeats": job["heartbeats"],
            "image": image,
            "timeout": d["timeout"],
            "env": {k: "[secret]" if isinstance(v, dict) else v for k, v in d["env"].items()},
            "steps": steps,
            "events": [{"at": at, "event": ev, "detail": det} for at, ev, det in job["events"]],
        }

    def list_jobs(self, *, statuses: set[str] | None, pool: dict | None, kind: str | None) -> list:
        out = []
        for job in sorted(self.jobs.values(), key=lambda j: j["seq"]):
            if statuses is not None and job["status"] not in statuses:
                continue
            if pool is not None and job["pool_id"] != pool["id"]:
                continue
            if kind is not None and job["type"] != kind:
                continue
            out.append(job)
        return out

    def queue_depth(self) -> dict[tuple[str, str], int]:
        depth: dict[tuple[str, str], int] = collections.Counter()
        for job in self.jobs.values():
            if job["status"] == "not-started" and job["agent"] is None:
                depth[(job["pool_id"], job["type"])] += 1
        return depth

    def stats(self) -> dict:
        by_status = collections.Counter(j["status"] for j in self.jobs.values())
        claims = collections.Counter(c["agent"] for j in self.jobs.values() for c in j["claims"])
        duplicates = [
            j["id"]
            for j in self.jobs.values()
            if j["type"] == "deployment" and len(j["claims"]) > 1
        ]
        return {
            "jobs": dict(by_status),
            "queued": sum(self.queue_depth().values()),
            "claims": sum(claims.values()),
            "claims_by_agent": dict(claims),
            "duplicate_claims": duplicates,
            "agents": len(self.agents),
            "agents_online": sum(1 for a in self.agents.values() if self.agent_online(a)),
            "now": self.clock.now(),
            "clock_offset": self.clock.offset,
            "heartbeat_timeout": self.heartbeat_timeout,
            "online_window": self.online_window,
        }


def wire_status(job: dict) -> str:
    """The upstream enum has no "canceled": a canceled job reads as failed on the wire."""
    return "failed" if job["status"] == "canceled" else job["status"]


# -------------------------------------------------------------------- admin job validation
def _str_field(spec: dict, key: str, default: str) -> str:
    value = spec.get(key, default)
    if not isinstance(value, str) or not value:
        raise ApiError(400, f"{key} must be a non-empty string")
    return value


def _duration(value: object, what: str) -> float:
    if isinstance(value, bool):
        raise ApiError(400, f"{what} must be a Go duration string or a number of seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = durations.parse(value)
        except ValueError as err:
            raise ApiError(400, f"{what}: {err}") from None
    else:
        raise ApiError(400, f"{what} must be a Go duration string or a number of seconds")
    if not 0 < seconds <= 7 * 86400:
        raise ApiError(400, f"{what} must be more than 0 and at most 7 days")
    return seconds


def _secret(value: object, what: str) -> dict | str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"secret"} and isinstance(value["secret"], str):
        return {"secret": value["secret"]}
    raise ApiError(400, f'{what} must be a string or {{"secret": "..."}}')


def _image(value: object) -> dict:
    if isinstance(value, str) and value:
        return {"reference": value}
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("reference"), str)
        or not value["reference"]
    ):
        raise ApiError(400, 'image must be a reference string or {"reference", "credentials"?}')
    if set(value) - {"reference", "credentials"}:
        raise ApiError(400, "image allows only reference and credentials")
    image = {"reference": value["reference"]}
    creds = value.get("credentials")
    if creds is not None:
        if not isinstance(creds, dict) or not isinstance(creds.get("username"), str):
            raise ApiError(400, 'image.credentials must be {"username", "password"}')
        password = _secret(creds.get("password"), "image.credentials.password")
        if isinstance(password, str):
            password = {"secret": password}
        image["credentials"] = {"username": creds["username"], "password": password}
    return image


def _env(value: object) -> dict:
    if not isinstance(value, dict):
        raise ApiError(400, "env must be an object of NAME: value")
    env = {}
    for name, v in value.items():
        if not _ENV_NAME.match(name):
            raise ApiError(400, f"env name {name!r} is not a valid variable name")
        env[name] = _secret(v, f"env.{name}")
    return env


def _steps(value: object) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise ApiError(400, 'steps must be a non-empty list of {"name", "run"}')
    steps = []
    for n, step in enumerate(value):
        if not isinstance(step, dict) or set(step) - {"name", "run", "timeout", "workingDir"}:
            raise ApiError(
                400, f"steps[{n}] must be an object with name, run, optional timeout, workingDir"
            )
        if not isinstance(step.get("name"), str) or not step["name"]:
            raise ApiError(400, f"steps[{n}].name must be a non-empty string")
        if not isinstance(step.get("run"), str):
            raise ApiError(400, f"steps[{n}].run must be a string (a /bin/sh script)")
        out = {"name": step["name"], "run": step["run"]}
        if "workingDir" in step:
            if not isinstance(step["workingDir"], str) or not step["workingDir"]:
                raise ApiError(400, f"steps[{n}].workingDir must be a non-empty string")
            out["workingDir"] = step["workingDir"]
        if "timeout" in step:
            out["timeout"] = durations.to_go(_duration(step["timeout"], f"steps[{n}].timeout"))
        steps.append(out)
    return steps
