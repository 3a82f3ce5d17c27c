"""What every part of the store shares: job types and statuses, tokens, the clock, org names."""

import hashlib
import hmac
import re
import secrets
import time
import uuid

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


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def new_token() -> str:
    return "pul-" + secrets.token_hex(20)


def new_id(prefix: str) -> str:
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


def wire_status(job: dict) -> str:
    """The upstream enum has no "canceled": a canceled job reads as failed on the wire."""
    return "failed" if job["status"] == "canceled" else job["status"]
