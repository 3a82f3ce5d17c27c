"""One deadline per attempt, enforced on every socket operation under httpx.

httpx's timeouts apply to each socket operation: a server that trickles its headers a byte at a
time, each byte inside the read timeout, would hold a call for hours. `DeadlineBackend` is an
httpcore network backend whose streams cap each operation at what is left of the calling
thread's attempt (`Deadline.at`, set by the client around each attempt).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpcore


class Deadline(threading.local):
    """The monotonic time by which the calling thread's current attempt must be over."""

    at: float | None = None

    def left(self, timeout: float | None, error: type[Exception]) -> float | None:
        """`timeout` of one socket operation, capped at what is left of the attempt."""
        if self.at is None:
            return timeout
        remaining = self.at - time.monotonic()
        if remaining <= 0:
            raise error("request_timeout reached")
        return remaining if timeout is None else min(timeout, remaining)


class DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._deadline.left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._deadline.left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore.NetworkStream:
        timeout = self._deadline.left(timeout, httpcore.ConnectTimeout)
        inner = self._inner.start_tls(ssl_context, server_hostname, timeout)
        return DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sockets, each operation capped at the calling attempt's deadline."""

    def __init__(self, inner: httpcore.NetworkBackend, deadline: Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        timeout = self._deadline.left(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return DeadlineStream(stream, self._deadline)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        timeout = self._deadline.left(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_unix_socket(path, timeout, socket_options)
        return DeadlineStream(stream, self._deadline)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
