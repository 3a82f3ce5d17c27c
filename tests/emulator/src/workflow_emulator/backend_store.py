"""The stand-in for the Pulumi Cloud backend: each organization's DIY-backend state (the
`.pulumi/` tree a `pulumi login file://...` writes), kept file by file.

The real executor keeps state in Pulumi Cloud with the job's PULUMI_ACCESS_TOKEN; the stand-in
executor downloads this tree as a tar, runs the real CLI against it, and uploads it back
(api_backend.py). A deployment's token reads its organization's tree (a StackReference reads
other stacks) and changes only its own stack's files.
"""

import io
import posixpath
import tarfile

from workflow_emulator.errors import ApiError
from workflow_emulator.records import TERMINAL, token_hash

MAX_FILES = 10_000
# Files of the whole organization, not of one stack: `pulumi login` writes meta.yaml once.
SHARED = (".pulumi/meta.yaml", ".pulumi/meta.yaml.attrs")
# [ASSUMED] how long a deployment's token outlives its job (the real one is "temporary" [DOC]):
# long enough for the executor's upload after a cancel.
TOKEN_GRACE = 600.0


def stack_paths(project: str, stack: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(exact-name prefixes, directory prefixes) of one stack's files in a DIY backend, as
    pulumi v3 lays them out (project-scoped stacks; locks under organization/)."""
    return (
        (f".pulumi/stacks/{project}/{stack}.json",),  # .json, .json.bak, .json.attrs, .json.gz
        (
            f".pulumi/history/{project}/{stack}/",
            f".pulumi/backups/{project}/{stack}/",
            f".pulumi/locks/organization/{project}/{stack}/",
        ),
    )


def in_scope(path: str, where: dict) -> bool:
    names, dirs = stack_paths(where["project"], where["stack"])
    return any(path == n or path.startswith(n + ".") for n in names) or path.startswith(dirs)


def read_tar(data: bytes) -> dict[str, bytes]:
    """The regular files of an (uncompressed) tar of a `.pulumi/` tree; a member that is not
    one is a 400 naming it."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            return _files(tar)
    except (tarfile.TarError, EOFError, OSError):
        raise ApiError(400, "the body is not a tar archive, or a truncated one") from None


def _files(tar: tarfile.TarFile) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for member in tar:
        name = member.name
        norm = posixpath.normpath(name.removeprefix("./")) if name else ""
        if (
            name.startswith("/")
            or ".." in name.split("/")
            or not (norm == ".pulumi" or norm.startswith(".pulumi/"))
        ):
            raise ApiError(400, f"tar member {name!r} is not a path inside .pulumi/")
        if member.isdir():
            continue
        if not member.isfile():
            raise ApiError(400, f"tar member {name!r} is not a regular file or directory")
        if len(files) >= MAX_FILES:
            raise ApiError(400, f"the tar has more than {MAX_FILES} files")
        fh = tar.extractfile(member)
        files[norm] = fh.read() if fh else b""
    return files


def write_tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size = len(files[path])
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(files[path]))
    return buf.getvalue()


class BackendStore:
    """The organizations' state trees (a part of Store: see store.py)."""

    def _load_backends(self) -> None:
        self.backends: dict[str, dict[str, bytes]] = {}
        for org, path, data in self.db.all_files():
            self.backends.setdefault(org, {})[path] = bytes(data)

    def job_for_stack_token(self, token: str) -> dict:
        job = self.jobs.get(self.stack_tokens.get(token_hash(token), ""))
        if job is None:
            raise ApiError(401, "the token is not a deployment's access token")
        ended = job["finished_at"]
        if job["status"] in TERMINAL and ended and self.clock.now() - ended > TOKEN_GRACE:
            raise ApiError(401, f"the access token of job {job['id']} has expired")
        return job

    def backend_tar(self, org: str) -> bytes:
        return write_tar(self.backends.get(org, {}))

    def put_backend(self, where: dict, data: bytes) -> dict:
        """Replace the stack's files with the tar's; the rest of the organization's tree may
        only come back unchanged (SHARED files may also be new)."""
        files = read_tar(data)
        org = where["org"]
        stored = self.backends.get(org, {})
        name = f"{org}/{where['project']}/{where['stack']}"
        for path, content in sorted(files.items()):
            if in_scope(path, where) or stored.get(path) == content:
                continue
            if path in SHARED and path not in stored:
                continue
            raise ApiError(403, f"the access token of {name} may not change {path}")
        ours = {p: c for p, c in files.items() if in_scope(p, where) or p in SHARED}
        gone = [p for p in stored if in_scope(p, where) and p not in files]
        with self.db.tx():
            for path in gone:
                self.db.delete_file(org, path)
            for path, content in ours.items():
                self.db.put_file(org, path, content)
        tree = self.backends.setdefault(org, {})
        for path in gone:
            del tree[path]
        tree.update(ours)
        return {"files": len(ours), "removed": len(gone)}
