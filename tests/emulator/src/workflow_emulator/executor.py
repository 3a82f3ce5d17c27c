"""The executor GET /api/deployments/executor serves: a stand-in for the "Linux/AMD64 Pulumi
Deployments executor binary" [SPEC], shipped as data/pulumi-deploy-executor. It lives in memory
(POST /admin/executor replaces it until a reset or restart) with its ETag and fetch counts."""

import collections
import hashlib
from importlib import resources


def default_content() -> bytes:
    return resources.files("workflow_emulator").joinpath("data/pulumi-deploy-executor").read_bytes()


class Executor:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.replace(None)
        self.fetches: collections.Counter = collections.Counter({"200": 0, "304": 0})

    def replace(self, content: bytes | None) -> None:
        """New content (None: the shipped stand-in); its ETag is the quoted SHA-256 [ASSUMED]."""
        self.content = default_content() if content is None else content
        self.etag = '"' + hashlib.sha256(self.content).hexdigest() + '"'

    def not_modified(self, if_none_match: str | None) -> bool:
        """Whether If-None-Match names the current copy (RFC 9110: a list, `*`, weak tags)."""
        if not if_none_match:
            return False
        tags = [t.strip() for t in if_none_match.split(",")]
        return any(t == "*" or t.removeprefix("W/") == self.etag for t in tags)

    def view(self) -> dict:
        return {"etag": self.etag, "size": len(self.content), "fetches": dict(self.fetches)}
