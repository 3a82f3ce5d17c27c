"""The store's jobs: creation, the claim, the agent's and the job's calls, the sweep, views."""

import collections
import hashlib
import hmac
import re
import secrets

from workflow_emulator import deployments, durations, jobspec, oidc
from workflow_emulator.errors import ApiError
from workflow_emulator.records import (
    DEFAULT_JOB_TIMEOUT,
    JOB_TYPES,
    MAX_LOG_BATCH,
    STEP_REPORTS,
    TERMINAL,
    new_id,
    same,
    token_hash,
    wire_status,
)


def same_stack(a: dict | None, b: dict) -> bool:
    return a is not None and all(a[k] == b[k] for k in ("org", "project", "stack"))


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


class JobStore:
    """Jobs and their protocol (a part of Store: see store.py)."""

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
            "os": jobspec.str_field(spec, "os", "linux"),
            "architecture": jobspec.str_field(spec, "architecture", "amd64"),
            "image": jobspec.image(spec.get("image", self.default_image)),
            "timeout": durations.to_go(
                jobspec.duration(spec.get("timeout", DEFAULT_JOB_TIMEOUT), "timeout")
            ),
            "env": jobspec.env(spec.get("env", {})),
            "steps": [{"name": "checkout", "run": ""}, *jobspec.steps(spec.get("steps"))],
        }
        if "shell" in spec:
            definition["shell"] = jobspec.str_field(spec, "shell", "")
        return self._queue(kind, pool, definition, count=count, service_env=service_env)

    def create_deployment(self, spec: dict) -> dict:
        """A deployment job shaped like the service's (deployments.py), for one stack."""
        if not isinstance(spec, dict):
            raise ApiError(400, "deployment must be a JSON object")
        pool = self._job_pool(spec.get("pool"))
        where = deployments.target(spec, pool["org"])
        deployment_id = new_id("dep")
        number = 1 + sum(1 for j in self.jobs.values() if same_stack(j.get("deployment"), where))
        definition = deployments.definition(
            spec, where, deployment_id=deployment_id, build_number=number
        )
        where["operation"] = definition["env"]["PULUMI_CI_OPERATION"]
        [job] = self._queue(
            "deployment", pool, definition, deployment=where, deployment_id=deployment_id
        )
        return job

    def _queue(
        self,
        kind: str,
        pool: dict,
        definition: dict,
        *,
        count: int = 1,
        service_env: bool = False,
        deployment: dict | None = None,
        deployment_id: str | None = None,
    ) -> list[dict]:
        now = self.clock.now()
        jobs = []
        with self.db.tx():
            for _ in range(count):
                self.seq += 1
                job = {
                    "id": new_id("job"),
                    "seq": self.seq,
                    "type": kind,
                    "pool_id": pool["id"],
                    "status": "not-started",
                    "deployment_id": deployment_id or new_id("dep"),
                    "run_id": new_id("run"),
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
                    "deployment": deployment,
                }
                self.jobs[job["id"]] = job
                self.by_deployment[job["deployment_id"]] = job["id"]
                self.queues[(pool["id"], kind)].append(job["id"])
                if deployment:
                    self.stack_tokens[token_hash(self.stack_token(job))] = job["id"]
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
                expires_in=jobspec.duration(job["definition"]["timeout"], "timeout"),
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
        if job["token_hash"] is None or not same(job["token_hash"], token_hash(token)):
            raise ApiError(401, f"the job token is not valid for job {job_id}")
        return job

    def stack_token(self, job: dict) -> str:
        """A deployment's PULUMI_ACCESS_TOKEN, "temporary, scoped to the stack" [DOC]: derived
        from the job id with the issuer key, so that no token is stored, only its hash."""
        mac = hmac.new(self.issuer_key, b"stack-token:" + job["id"].encode(), hashlib.sha256)
        return "pul-" + mac.hexdigest()[:40]

    def definition(self, job: dict, token: str, service_url: str) -> dict:
        """The JobDefinition as served. A deployment gets its scoped PULUMI_ACCESS_TOKEN, its
        build URL and the stand-in backend's URL, all at the URL the caller used (the job
        reaches the service as the agent does [RE]). With `service_env`, a generic job gets a
        Pulumi deployment's way back to the service [DOC: PULUMI_ACCESS_TOKEN; RE: the backend
        URL], with its job token as the token (as HappyPumi does)."""
        d = job["definition"]
        where = job.get("deployment")
        if where:
            env = {
                "PULUMI_ACCESS_TOKEN": {"secret": self.stack_token(job)},
                "PULUMI_CI_BUILD_URL": f"{service_url}/admin/jobs/{job['id']}",
                # [ASSUMED] the stand-in's state store: api_backend.py
                "PULUMI_DEPLOY_BACKEND_URL": f"{service_url}/api/stand-in/backend/{where['org']}",
            }
            return {**d, "env": {**d["env"], **env}}
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
            "deployment": job.get("deployment"),
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
