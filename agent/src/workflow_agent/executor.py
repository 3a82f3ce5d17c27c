"""The deployment executor: fetched from the service with the pool's credentials, kept on disk
once per version (docs/protocol.md, "Job runtime").

`GET /api/deployments/executor` streams "the Linux/AMD64 Pulumi Deployments executor binary …
for internal use by workflow runners" [SPEC GetPulumiDeployExecutor]; only a pool token may call
it [RE]. Each deployment asks again with `If-None-Match` (the last answer's ETag): a 304 keeps
the copy on disk, a 200 replaces it, so a new version of the service's executor reaches the next
job and an unchanged one is downloaded once. That the route honours ETags is [ASSUMED]; without
them every job downloads it, and the copy on disk is still named by its content's digest.

A copy is `pulumi-deploy-executor-<sha256[:16]>` (0755) in the cache directory, written under a
temporary name and renamed, so agents sharing the directory never see half a file;
`executor.json` remembers the ETag across restarts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path

from workflow_agent.client import Client
from workflow_agent.errors import ServiceError

log = logging.getLogger(__name__)

ROUTE = "/api/deployments/executor"
PREFIX = "pulumi-deploy-executor-"
META = "executor.json"
# A Linux executable: an ELF binary, or a script with an interpreter line.
MAGIC = (b"\x7fELF", b"#!")
DOWNLOAD_TIMEOUT = 600.0  # seconds per attempt: the real executor is a ~100 MB binary


class ExecutorError(Exception):
    """The executor cannot be had; the message says why, in one line."""


class ExecutorCache:
    def __init__(self, client: Client, directory: Path) -> None:
        self._client = client
        self._dir = directory
        self._lock = threading.Lock()
        self._etag = ""
        self._file: Path | None = None
        self._load()

    def _load(self) -> None:
        try:
            meta = json.loads((self._dir / META).read_text(encoding="utf-8"))
            file = self._dir / str(meta["file"])
            etag = str(meta.get("etag", ""))
        except (OSError, ValueError, KeyError, TypeError):
            return
        if file.name.startswith(PREFIX) and file.is_file():
            self._etag, self._file = etag, file

    def path(self) -> str:
        """The current executor's path on this host; ExecutorError when it cannot be had."""
        with self._lock:
            headers = {}
            if self._etag and self._file is not None and self._file.is_file():
                headers["If-None-Match"] = self._etag
            try:
                reply = self._client.call(
                    "GET",
                    ROUTE,
                    route="executor",
                    headers=headers,
                    raw=True,
                    bypass_breaker=True,
                    timeout=max(DOWNLOAD_TIMEOUT, self._client.timeout),
                )
            except ServiceError as exc:
                raise ExecutorError(f"cannot fetch the deployment executor: {exc}") from None
            if reply.status == 304 and self._file is not None:
                return str(self._file)
            body = reply.data if isinstance(reply.data, bytes) else b""
            if reply.status != 200 or not body.startswith(MAGIC):
                what = f"HTTP {reply.status}, {len(body)} bytes"
                if body:
                    what += f" starting {body[:16]!r}"
                raise ExecutorError(
                    f"the service's deployment executor ({ROUTE}) is not a Linux executable "
                    f"({what})"
                )
            self._store(body, reply.headers.get("ETag", ""))
            return str(self._file)

    def _store(self, body: bytes, etag: str) -> None:
        name = PREFIX + hashlib.sha256(body).hexdigest()[:16]
        file = self._dir / name
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            if not file.is_file():
                _write_atomic(file, body, 0o755)
            meta = json.dumps({"file": name, "etag": etag}).encode()
            _write_atomic(self._dir / META, meta, 0o644)
        except OSError as exc:
            raise ExecutorError(
                f"cannot keep the deployment executor in {self._dir}: {exc}"
            ) from None
        old, self._file, self._etag = self._file, file, etag
        log.info("deployment executor %s (%d bytes) fetched", name, len(body))
        if old is not None and old != file:
            # A job that still runs the old copy has its own (the targets copy it in).
            old.unlink(missing_ok=True)


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
