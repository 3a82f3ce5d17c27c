"""Shared test helpers.

`Script` is an httpx.MockTransport: the transport is the unit boundary of the protocol client,
so retry, backoff and breaker schedules can be checked exactly, with an injected clock and no
sleeping. Everything end to end runs against the real emulator (tests/system).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
from workflow_agent.client import Client
from workflow_agent.clock import FakeClock
from workflow_agent.config import validate_mapping

TOKEN = "pul-0123456789abcdefSECRETTOKEN"
URL = "http://service.test"


def config(**overrides):
    return validate_mapping({"token": TOKEN, "service_url": URL, **overrides})


Answer = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class Script:
    """Answers requests from a queue (the last answer repeats) and records every request."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer) and not isinstance(answer, httpx.Response):
            return answer(request)
        return answer

    def push(self, *answers: Answer) -> None:
        self.answers.extend(answers)

    @property
    def paths(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]

    def bodies(self) -> list:
        return [json.loads(r.content) if r.content else None for r in self.requests]


def make_client(script: Script, clock: FakeClock | None = None, metrics=None, env=None, **cfg):
    return Client(
        config(**cfg),
        transport=httpx.MockTransport(script),
        clock=clock or FakeClock(),
        metrics=metrics,
        env=env or {},
    )


def ok(data=None, status: int = 200, **headers) -> httpx.Response:
    if data is None:
        return httpx.Response(status, headers=headers)
    return httpx.Response(status, content=json.dumps(data).encode(), headers=headers)
