"""The agent's trust store, as one PEM bundle: what it verifies the service with (client.py),
and, with `job_ca_bundle`, what jobs are given, so that behind a TLS-inspecting proxy a job
trusts what the agent trusts (upstream 2.2.0 mounts one bundle into both its agent and its worker
pods). The bundle replaces an image's own store, so it holds the system's CAs too."""

from __future__ import annotations

import ssl
from collections.abc import Mapping

# Where tools look for a CA bundle: OpenSSL and Go (SSL_CERT_FILE), curl, git built with GnuTLS
# (Debian's), Python's requests, Node.js (on top of its own).
JOB_CA_VARS = (
    "SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)


def sources(ca_bundle: str, env: Mapping[str, str]) -> list[str]:
    """The CA files the agent trusts, in order: certifi's, the system's, SSL_CERT_FILE,
    `ca_bundle`."""
    import certifi  # an httpx dependency

    found = [certifi.where()]
    system = ssl.get_default_verify_paths().cafile
    for path in (system, env.get("SSL_CERT_FILE", ""), ca_bundle):
        if path and path not in found:
            found.append(path)
    return found


def bundle(ca_bundle: str, env: Mapping[str, str]) -> bytes:
    """Every CA the agent trusts, as one PEM file. OSError when one of the files cannot be read."""
    parts = []
    for path in sources(ca_bundle, env):
        with open(path, "rb") as fh:
            parts.append(fh.read().strip() + b"\n")
    return b"".join(parts)
