"""Runtime fault injection (POST /admin/faults): errors, latency, drops, Retry-After on polls,
and a broken executor download."""

import collections
import email.utils
import math
import random
import time

from workflow_emulator.errors import ApiError

DEFAULTS: dict = {
    "rate_429": 0.0,  # fraction of matching requests answered 429 with Retry-After
    "rate_503": 0.0,  # fraction answered 503
    "drop_rate": 0.0,  # fraction whose connection is closed without any response
    "retry_after": 1,  # seconds in the Retry-After of injected 429s (and 503s, see below)
    "retry_after_on_503": False,
    "retry_after_format": "seconds",  # or "http-date"
    "latency": 0.0,  # seconds added before every matching request is handled
    "poll_retry_after": None,  # seconds: Retry-After on 204 answers of the two poll routes
    "paths": ["/api/"],  # path prefixes the faults apply to (the admin API is never affected)
    "budget": None,  # errors/drops to inject in all (None: no limit); latency is not counted
    "seed": None,  # seed of the random draws, for a reproducible sequence
    # GET /api/deployments/executor answers this instead of the executor (None: no fault):
    # "404" (a JSON error), "json" or "html" (a 200 whose body is no executor).
    "executor": None,
}
EXECUTOR_FAULTS = ("404", "json", "html")
POLL_PATHS = ("/api/deployments/poll", "/api/background-activities/worker/lease/acquire")


def _fraction(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ApiError(400, f"{key} must be a number from 0 to 1")
    return float(value)


def _seconds(value: object, key: str, *, allow_none: bool, limit: float) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= limit:
        raise ApiError(400, f"{key} must be a number of seconds from 0 to {limit:g}")
    return value


class Faults:
    def __init__(self) -> None:
        self.injected: collections.Counter = collections.Counter()
        self.configure({})

    def configure(self, data: dict) -> None:
        """Replace every setting: keys not given go back to their defaults."""
        unknown = sorted(set(data) - set(DEFAULTS))
        if unknown:
            raise ApiError(400, f"unknown fault setting(s): {', '.join(unknown)}")
        s = {**DEFAULTS, **data}
        for key in ("rate_429", "rate_503", "drop_rate"):
            s[key] = _fraction(s[key], key)
        if s["rate_429"] + s["rate_503"] + s["drop_rate"] > 1:
            raise ApiError(400, "rate_429 + rate_503 + drop_rate must not exceed 1")
        s["retry_after"] = _seconds(s["retry_after"], "retry_after", allow_none=False, limit=86400)
        s["latency"] = _seconds(s["latency"], "latency", allow_none=False, limit=60)
        s["poll_retry_after"] = _seconds(
            s["poll_retry_after"], "poll_retry_after", allow_none=True, limit=86400
        )
        if not isinstance(s["retry_after_on_503"], bool):
            raise ApiError(400, "retry_after_on_503 must be true or false")
        if s["retry_after_format"] not in ("seconds", "http-date"):
            raise ApiError(400, "retry_after_format must be seconds or http-date")
        paths = s["paths"]
        if (
            not isinstance(paths, list)
            or not paths
            or not all(isinstance(p, str) and p.startswith("/api/") for p in paths)
        ):
            raise ApiError(400, "paths must be a non-empty list of prefixes starting with /api/")
        budget = s["budget"]
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget < 0
        ):
            raise ApiError(400, "budget must be a non-negative integer or null")
        if s["seed"] is not None and (
            isinstance(s["seed"], bool) or not isinstance(s["seed"], int)
        ):
            raise ApiError(400, "seed must be an integer or null")
        if s["executor"] is not None and s["executor"] not in EXECUTOR_FAULTS:
            raise ApiError(400, f"executor must be null or one of {', '.join(EXECUTOR_FAULTS)}")
        self.settings = s
        self.budget = budget
        self.rng = random.Random(s["seed"])

    def view(self) -> dict:
        return {**self.settings, "budget_left": self.budget, "injected": dict(self.injected)}

    def decide(self, path: str) -> tuple[float, str | None]:
        """(latency, action) for one request; action is None, "drop", "429" or "503"."""
        s = self.settings
        if not any(path.startswith(p) for p in s["paths"]):
            return 0.0, None
        action = None
        if self.budget != 0:
            u = self.rng.random()
            if u < s["drop_rate"]:
                action = "drop"
            elif u < s["drop_rate"] + s["rate_429"]:
                action = "429"
            elif u < s["drop_rate"] + s["rate_429"] + s["rate_503"]:
                action = "503"
        if action:
            self.injected[action] += 1
            if self.budget is not None:
                self.budget -= 1
        if s["latency"]:
            self.injected["latency"] += 1
        return s["latency"], action

    def error_headers(self, action: str) -> dict[str, str]:
        headers = {"x-emulator-fault": action}
        if action == "429" or self.settings["retry_after_on_503"]:
            headers["retry-after"] = self.retry_after(self.settings["retry_after"])
        return headers

    def poll_header(self, path: str) -> str | None:
        value = self.settings["poll_retry_after"]
        if value is None or path not in POLL_PATHS:
            return None
        return self.retry_after(value)

    def retry_after(self, seconds: float) -> str:
        if self.settings["retry_after_format"] == "http-date":
            # Real time, not the emulator clock: the client compares it with its own clock.
            return email.utils.formatdate(time.time() + seconds, usegmt=True)
        return str(math.ceil(seconds))  # delay-seconds is a whole number (RFC 9110)
