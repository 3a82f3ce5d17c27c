"""The stand-in for the Pulumi Cloud backend (GET/PUT /api/stand-in/backend/{org}): an
organization's `.pulumi/` tree as a tar, read with a deployment's scoped access token, of which
the token changes only its own stack's files."""

import io
import tarfile

import httpx
import pytest

ORG_PATH = "/api/stand-in/backend/{org}"
DEV = {
    ".pulumi/meta.yaml": b"version: 1\n",
    ".pulumi/stacks/base/dev.json": b'{"version": 3}',
    ".pulumi/stacks/base/dev.json.bak": b"{}",
    ".pulumi/history/base/dev/dev-1.history.json": b"{}",
    ".pulumi/locks/organization/base/dev/lock-1.json": b"{}",
}


def tar_of(files: dict[str, bytes], *, extra=()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return buf.getvalue()


def files_of(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


class Deployment:
    """A claimed deployment job's view of the backend, with its PULUMI_ACCESS_TOKEN."""

    def __init__(self, emu, agent, stack: str) -> None:
        self.job = emu.create_deployment(f"{emu.org}/{stack}", {"url": "git://x/r"})
        claim = agent.claim()
        env = agent.job(claim).definition().json()["env"]
        self.token = env["PULUMI_ACCESS_TOKEN"]["secret"]
        self.url = env["PULUMI_DEPLOY_BACKEND_URL"]
        self.http = httpx.Client(headers={"Authorization": f"token {self.token}"}, timeout=30)

    def get(self) -> httpx.Response:
        return self.http.get(self.url)

    def put(self, body: bytes) -> httpx.Response:
        return self.http.put(self.url, content=body)


@pytest.fixture
def base(emu, agent):
    d = Deployment(emu, agent, "base/dev")
    yield d
    d.http.close()


def test_a_stack_s_tree_goes_up_and_comes_back(emu, base):
    assert base.url == emu.url + ORG_PATH.format(org=emu.org)
    assert files_of(base.get().content) == {}  # a valid, empty tar for a new organization
    put = base.put(tar_of(DEV))
    assert put.status_code == 200 and put.json() == {"files": 5, "removed": 0}
    assert files_of(base.get().content) == DEV
    assert files_of(emu.backend_tar()) == DEV
    # The upload replaces the stack's files: a lock the job no longer has goes.
    unlocked = {k: v for k, v in DEV.items() if "/locks/" not in k}
    assert base.put(tar_of(unlocked)).json() == {"files": 4, "removed": 1}
    assert files_of(emu.backend_tar()) == unlocked


def test_another_stack_may_read_but_not_change_it(emu, agent, base):
    base.put(tar_of(DEV))
    app = Deployment(emu, agent, "app/dev")
    tree = files_of(app.get().content)
    assert tree == DEV  # a StackReference reads other stacks
    mine = {**tree, ".pulumi/stacks/app/dev.json": b"{}"}
    assert app.put(tar_of(mine)).status_code == 200  # others' files unchanged: fine
    changed = {**mine, ".pulumi/stacks/base/dev.json": b"{}"}
    refused = app.put(tar_of(changed))
    assert refused.status_code == 403
    assert refused.json()["error"] == (
        f"the access token of {emu.org}/app/dev may not change .pulumi/stacks/base/dev.json"
    )
    assert (
        files_of(emu.backend_tar())[".pulumi/stacks/base/dev.json"]
        == DEV[".pulumi/stacks/base/dev.json"]
    )
    # A stack that only starts with "dev" is not dev's.
    assert app.put(tar_of({".pulumi/stacks/app/dev2.json": b"{}"})).status_code == 403


def _link(name: str, kind: bytes, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"not a tar", "the body is not a tar archive"),
        (tar_of({".pulumi/../../etc/x": b""}), "tar member '.pulumi/../../etc/x' is not a path"),
        (tar_of({"/etc/passwd": b""}), "tar member '/etc/passwd' is not a path inside .pulumi/"),
        (tar_of({"elsewhere/x": b""}), "tar member 'elsewhere/x' is not a path inside .pulumi/"),
        (
            tar_of({}, extra=[_link(".pulumi/stacks/base/dev.json", tarfile.SYMTYPE, "/etc")]),
            "tar member '.pulumi/stacks/base/dev.json' is not a regular file or directory",
        ),
        (
            tar_of({}, extra=[_link(".pulumi/x", tarfile.LNKTYPE, ".pulumi/meta.yaml")]),
            "tar member '.pulumi/x' is not a regular file or directory",
        ),
    ],
)
def test_a_bad_tar_is_refused_naming_the_member(emu, base, body, error):
    refused = base.put(body)
    assert refused.status_code == 400 and refused.json()["error"].startswith(error)
    assert files_of(emu.backend_tar()) == {}


def test_only_a_deployment_s_token_for_its_own_organization(emu, base):
    other = emu.create_pool("p", org="other-org")
    assert other
    url = emu.url + ORG_PATH.format(org="other-org")
    refused = base.http.get(url)
    assert refused.status_code == 403
    assert refused.json()["error"] == (
        f"the access token of {emu.org}/base/dev is not valid for organization other-org"
    )
    for token in (emu.pool_token, emu.admin_token, "pul-0000"):
        resp = httpx.get(base.url, headers={"Authorization": f"token {token}"}, timeout=30)
        assert resp.status_code == 401
        assert resp.json()["error"] == "the token is not a deployment's access token"


def test_the_token_expires_some_minutes_after_its_job_ends(emu, base):
    emu.cancel(base.job)
    assert base.put(tar_of(DEV)).status_code == 200  # the executor's upload after a cancel
    emu.advance_clock(601)
    expired = base.get()
    assert expired.status_code == 401 and "has expired" in expired.json()["error"]


def test_the_state_survives_a_restart_and_goes_with_a_reset(emu, base):
    base.put(tar_of(DEV))
    emu.restart()
    assert files_of(emu.backend_tar()) == DEV
    assert base.get().status_code == 200  # the token too
    emu.reset()
    assert files_of(emu.backend_tar()) == {}


def test_extract_backend_unpacks_the_tree(emu, base, tmp_path):
    base.put(tar_of(DEV))
    out = emu.extract_backend(tmp_path / "state")
    assert (out / ".pulumi/stacks/base/dev.json").read_bytes() == DEV[
        ".pulumi/stacks/base/dev.json"
    ]
