"""The outermost ASGI layer: fault injection, the JSON access log and request metrics."""

import asyncio
import json
import logging
import time

from starlette.routing import Match

log = logging.getLogger("workflow_emulator")


class Edge:
    def __init__(self, app, *, store, faults, metrics, routes, access_log) -> None:
        self.app = app
        self.routes = routes
        self.store = store
        self.faults = faults
        self.metrics = metrics
        self.access_log = access_log

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        scope["emulator"] = {}
        info = {"status": None}
        latency, action = self.faults.decide(scope["path"])
        if action:
            self.metrics.faults.labels(action).inc()
        if latency:
            await asyncio.sleep(latency)
        if action == "drop" and self._drop(send):
            self._record(scope, "dropped", start, fault="drop")
            return
        if action:  # "429", "503", or a drop uvicorn gave us no way to perform
            status = 503 if action == "drop" else int(action)
            headers = self.faults.error_headers(str(status))
            await _send_json(send, status, {"error": f"injected fault: HTTP {status}"}, headers)
            self._record(scope, str(status), start, fault=action)
            return

        self.store.sweep()
        poll_retry_after = self.faults.poll_header(scope["path"])

        async def send_wrapper(message) -> None:
            if message["type"] == "http.response.start":
                info["status"] = message["status"]
                if message["status"] == 204 and poll_retry_after is not None:
                    message = {
                        **message,
                        "headers": [
                            *message.get("headers", []),
                            (b"retry-after", poll_retry_after.encode()),
                        ],
                    }
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception:
            # Starlette has already answered 500 (JSON) and re-raises for the server to log.
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if info["status"] is None:
                info["status"] = 500
                await _send_json(send, 500, {"error": "internal error (a bug in the emulator)"}, {})
        self._record(scope, str(info["status"]), start)

    def _drop(self, send) -> bool:
        """Close the connection without a byte of response (uvicorn's h11 cycle holds it)."""
        cycle = getattr(send, "__self__", None)
        transport = getattr(cycle, "transport", None)
        if transport is None or not hasattr(cycle, "disconnected"):
            return False
        cycle.disconnected = True  # so that uvicorn does not answer 500 for us
        transport.close()
        return True

    def _template(self, scope) -> str:
        """The route's path template: a bounded metrics label, even for faulted requests."""
        probe = {
            "type": "http",
            "path": scope["path"],
            "method": scope["method"],
            "root_path": scope.get("root_path", ""),
        }
        for route in self.routes:
            if route.matches(probe)[0] != Match.NONE:
                return route.path
        return "unmatched"

    def _record(self, scope, code: str, start: float, fault: str | None = None) -> None:
        seconds = time.perf_counter() - start
        route = self._template(scope)
        self.metrics.request(route, scope["method"], code, seconds)
        if self.access_log is None:
            return
        line = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "method": scope["method"],
            "path": scope["path"],  # never the query string or headers: no token reaches the log
            "route": route,
            "status": code,
            "ms": round(seconds * 1000, 2),
            "client": (scope.get("client") or ("", 0))[0],
        }
        extra = scope.get("emulator", {})
        if extra.get("agent"):
            line["agent"] = extra["agent"]
        if fault:
            line["fault"] = fault
        try:
            self.access_log.write(json.dumps(line) + "\n")
            self.access_log.flush()
        except (OSError, ValueError):
            pass  # a closed log must not take the server down


async def _send_json(send, status: int, body: dict, headers: dict[str, str]) -> None:
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})
