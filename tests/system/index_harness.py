"""A package index on 127.0.0.1 (PEP 503, served from a directory) that records what pip asks
it for, and wheels that impersonate the agent: the tests of the install routes offer them to pip
and assert that pip never looks at the index for the agent, or never installs them."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import http.server
import re
import shutil
import threading
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

# What an impostor's package carries, so that a test can tell it from the real agent.
POISON = "IMPOSTOR-WHEEL"


def project(wheel: Path) -> str:
    """The PEP 503 normalized project name of a wheel file."""
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def impostor_wheel(dest: Path, name: str, version: str) -> Path:
    """A wheel named `name` that installs a `workflow_agent` package and a `workflow-agent`
    command, as a squatter on a public index would."""
    dist = re.sub(r"[-_.]+", "_", name)
    files = {
        "workflow_agent/__init__.py": f'__version__ = "{version}"\nMARK = "{POISON}"\n',
        f"{dist}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        ),
        f"{dist}-{version}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{dist}-{version}.dist-info/entry_points.txt": (
            "[console_scripts]\nworkflow-agent = workflow_agent:MARK\n"
        ),
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record_path = f"{dist}-{version}.dist-info/RECORD"
    record.append(f"{record_path},,")
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(record_path, "\n".join(record) + "\n")
    return wheel


@contextlib.contextmanager
def serve_index(root: Path, wheels: Iterable[Path]) -> Iterator[tuple[str, list[str]]]:
    """Serve `wheels` as a simple index; yield its URL and the list of paths pip requested."""
    simple = root / "simple"
    for wheel in wheels:
        (simple / project(wheel)).mkdir(parents=True, exist_ok=True)
        shutil.copy(wheel, simple / project(wheel) / wheel.name)
    simple.mkdir(parents=True, exist_ok=True)
    served: list[str] = []

    class Index(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:  # record, do not print
            served.append(self.path)

    handler = functools.partial(Index, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/simple/", served
    finally:
        server.shutdown()
        server.server_close()
