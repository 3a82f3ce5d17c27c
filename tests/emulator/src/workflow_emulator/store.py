"""The emulator's state and its rules: pools, tokens, jobs, logs, agents, and the stand-in
backend's state trees.

Everything runs on the server's single event-loop thread and no method awaits, so each method
is atomic: that is what makes a claim exclusive across any number of concurrent pollers.
Every change is written through to `Db` in one transaction.
"""

import collections
import secrets

from workflow_emulator.backend_store import BackendStore
from workflow_emulator.db import Db
from workflow_emulator.job_store import JobStore
from workflow_emulator.pool_store import PoolStore
from workflow_emulator.records import (  # noqa: F401 - the store's vocabulary, imported from here
    JOB_STATUSES,
    JOB_TYPES,
    LEASE_TYPES,
    TERMINAL,
    Clock,
    check_org,
    token_hash,
    unix,
    wire_status,
)


class Store(PoolStore, JobStore, BackendStore):
    """The whole state, one object: PoolStore (pools, tokens, agents), JobStore (jobs) and
    BackendStore (the organizations' Pulumi state, for the stand-in executor)."""

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
        self._load_backends()
        self.logs: dict[tuple[str, int], list[list[str]]] = collections.defaultdict(list)
        for job_id, step, t, text in self.db.all_logs():
            self.logs[(job_id, step)].append([t, text])
        meta = self.db.get("meta", "meta") or {}
        self.clock.offset = meta.get("clock_offset", self.clock.offset)
        self.issuer_key = bytes.fromhex(meta.get("issuer_key") or secrets.token_hex(32))
        self.seq = max((j["seq"] for j in self.jobs.values()), default=0)
        self.by_deployment = {j["deployment_id"]: j["id"] for j in self.jobs.values()}
        # The hashes of deployments' scoped access tokens (JobStore.stack_token).
        self.stack_tokens = {
            token_hash(self.stack_token(j)): j["id"]
            for j in self.jobs.values()
            if j.get("deployment")
        }
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
        """Forget jobs, logs, agents, Pulumi state and the clock offset; with `pools`, every
        pool but the seed."""
        with self.db.tx():
            self.db.delete("job")
            self.db.delete("agent")
            self.db.drop_logs()
            self.db.drop_files()
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

    # ---------------------------------------------------------------- views
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
