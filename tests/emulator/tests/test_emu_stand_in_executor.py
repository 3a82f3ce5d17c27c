"""The stand-in executor (data/pulumi-deploy-executor) end to end, without an agent: the test
claims a deployment job as an agent would, fetches the executor with the pool token, and runs
the job's steps 1..N as host processes (`sh -c`, the job's env, $PULUMI_DEPLOY_EXECUTOR), with
the real Pulumi CLI on PATH, against the emulator's state store and a real git server."""

import errno
import io
import os
import signal
import subprocess
import tarfile
import threading
import time

import pytest
from emu_helpers import Agent
from workflow_emulator.executor import default_content
from workflow_emulator.testing import (
    PROGRAMS,
    GitServer,
    PulumiMissing,
    pulumi_bin_dirs,
    stack_outputs,
)

PASSPHRASE = "correct horse battery staple"


@pytest.fixture(scope="module")
def bin_dirs():
    try:
        return pulumi_bin_dirs()
    except PulumiMissing as err:
        pytest.skip(f"the Pulumi CLI is not built: {err}")


@pytest.fixture(scope="module")
def git():
    with GitServer() as server:
        server.add("programs", PROGRAMS)
        yield server


class Job:
    """A claimed deployment job, its steps run the way an agent's process target runs them."""

    def __init__(self, emu, git, tmp_path, bin_dirs, project, stack="dev", **kw):
        self.emu = emu
        self.dir = tmp_path / f"job-{project}-{kw.get('operation', 'update')}-{time.time_ns()}"
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        source = {"url": git.url("programs"), "branch": "main", "repoDir": project}
        self.id = emu.create_deployment(f"{emu.org}/{project}/{stack}", source, **kw)
        agent = Agent(emu)
        claim = agent.claim()
        assert claim["jobID"] == self.id
        definition = agent.job(claim).definition().json()
        executor = agent.http.get("/api/deployments/executor")
        assert executor.status_code == 200
        agent.close()
        self.executor = self.dir / "bin" / "pulumi-deploy-executor"
        self.executor.parent.mkdir(parents=True)
        self.executor.write_bytes(executor.content)
        self.executor.chmod(0o755)
        self.steps = definition["steps"]
        self.env = {
            k: v["secret"] if isinstance(v, dict) else v for k, v in definition["env"].items()
        }
        self.env.update(
            PATH=os.pathsep.join([*bin_dirs, "/usr/local/bin", "/usr/bin", "/bin"]),
            HOME=str(self.home),
            PULUMI_DEPLOY_EXECUTOR=str(self.executor),
            PULUMI_CONFIG_PASSPHRASE=PASSPHRASE,  # what a pre-run step or a job secret gives
        )
        self.output: list[str] = []

    def start(self, index: int) -> subprocess.Popen:
        return subprocess.Popen(
            ["/bin/sh", "-c", self.steps[index]["run"]],
            cwd=self.dir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # a group of its own, which a cancel signals
        )

    def run(self, index: int) -> int:
        proc = self.start(index)
        out, _ = proc.communicate(timeout=300)
        self.output.append(out)
        return proc.returncode

    def run_all(self) -> list[int]:
        """Steps 1..N (step 0 is reserved), stopping at the first failure, as the runner does."""
        codes = []
        for index in range(1, len(self.steps)):
            codes.append(self.run(index))
            if codes[-1] != 0:
                break
        return codes

    @property
    def log(self) -> str:
        return "".join(self.output)


@pytest.fixture
def deploy(emu, git, tmp_path, bin_dirs):
    def make(project, **kw) -> Job:
        return Job(emu, git, tmp_path, bin_dirs, project, **kw)

    return make


def outputs(emu, project, bin_dirs, stack="dev"):
    return stack_outputs(emu, project, stack, passphrase=PASSPHRASE, bin_dirs=bin_dirs)


def state_files(emu) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(emu.backend_tar())) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


BASE_CONFIG = {"greeting": "hi", "secretWord": {"value": "s3cr3t-w0rd", "secret": True}}


def test_an_update_and_a_stack_reference_read_from_outside(emu, deploy, bin_dirs):
    base = deploy("base", config=BASE_CONFIG)
    assert [s["name"] for s in base.steps] == ["Get source", "Clone", "Pulumi update"]
    assert base.run_all() == [0, 0], base.log
    assert "pulumi-deploy-executor: cloning git://" in base.log
    assert "Updating (organization/base/dev)" in base.log or "Updating (dev)" in base.log
    assert outputs(emu, "base", bin_dirs) == {
        "greeting": "hi",
        "message": "hi, world",
        "secretWord": "s3cr3t-w0rd",
    }
    # The secret is encrypted in the state, and nothing wrote to $HOME.
    assert not any(b"s3cr3t-w0rd" in data for data in state_files(emu).values())
    assert list(base.home.iterdir()) == []

    app = deploy("app")
    assert app.run_all() == [0, 0], app.log
    assert outputs(emu, "app", bin_dirs) == {"fromBase": "hi, world"}


def test_a_preview_changes_nothing_and_a_destroy_leaves_an_empty_stack(emu, deploy, bin_dirs):
    assert deploy("base", config=BASE_CONFIG).run_all() == [0, 0]
    preview = deploy("base", operation="preview", config={**BASE_CONFIG, "greeting": "yo"})
    assert preview.run_all() == [0, 0], preview.log
    assert "Previewing update" in preview.log
    assert outputs(emu, "base", bin_dirs)["greeting"] == "hi"
    destroy = deploy("base", operation="destroy", config=BASE_CONFIG)
    assert destroy.steps[-1]["run"] == '"$PULUMI_DEPLOY_EXECUTOR" destroy'
    assert destroy.run_all() == [0, 0], destroy.log
    assert outputs(emu, "base", bin_dirs) == {}
    assert ".pulumi/stacks/base/dev.json" in state_files(emu)  # the stack is still there


def test_a_refresh_runs(emu, deploy):
    assert deploy("base", config=BASE_CONFIG).run_all() == [0, 0]
    refresh = deploy("base", operation="refresh", config=BASE_CONFIG)
    assert refresh.run_all() == [0, 0], refresh.log
    assert "Refreshing (" in refresh.log


def test_a_program_error_fails_the_step_with_pulumi_s_own_error(emu, deploy):
    broken = deploy("broken")
    codes = broken.run_all()
    assert codes[0] == 0 and codes[1] != 0
    assert 'resource or variable named "doesNotExist" could not be found' in broken.log
    assert "pulumi-deploy-executor: uploaded the state" in broken.log  # after a failure too
    assert ".pulumi/stacks/broken/dev.json" in state_files(emu)


def test_pre_run_commands_run_each_in_its_own_shell(emu, deploy):
    job = deploy("base", config=BASE_CONFIG, pre_run_commands=["X=1; echo x=$X", "echo x=$X"])
    assert job.run_all() == [0, 0, 0, 0]
    assert job.output[1:3] == ["x=1\n", "x=\n"]


def test_without_a_passphrase_pulumi_says_so(emu, deploy):
    job = deploy("base", config=BASE_CONFIG)
    del job.env["PULUMI_CONFIG_PASSPHRASE"]
    codes = job.run_all()
    assert codes[0] == 0 and codes[1] != 0
    assert "PULUMI_CONFIG_PASSPHRASE" in job.log and "Traceback" not in job.log


def executor_pid(shell: int) -> int:
    """The executor's process: the step's shell itself (if it exec'd) or its child."""
    children = subprocess.run(["pgrep", "-P", str(shell)], capture_output=True, text=True)
    for pid in [shell, *map(int, children.stdout.split())]:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            if b"pulumi-deploy-executor" in fh.read():
                return pid
    raise AssertionError(f"no executor under the step's shell {shell}")


def _open_writer(path, until: float) -> int:
    """A write end of the FIFO, once the program (pulumi's language host) has it open."""
    while True:
        try:
            return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as err:
            if err.errno != errno.ENXIO or time.monotonic() > until:
                raise
        time.sleep(0.05)


def test_a_cancel_mid_update_leaves_no_lock_and_the_next_update_succeeds(
    emu, deploy, bin_dirs, tmp_path
):
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    first = deploy("gate", config={"gate": str(fifo)})
    assert first.run(1) == 0, first.log
    proc = first.start(2)
    try:
        held = _open_writer(fifo, until=time.monotonic() + 120)  # `up` now waits on it
    except OSError:
        proc.kill()
        raise AssertionError("pulumi never opened the FIFO:\n" + proc.communicate()[0]) from None
    try:
        os.kill(executor_pid(proc.pid), signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)  # its output ends when the executor's does
    finally:
        os.close(held)
    assert proc.returncode == 143, out
    assert "pulumi-deploy-executor: canceled (SIGTERM)" in out
    assert "update canceled" in out  # pulumi's own cancel, from its SIGINT
    assert "pulumi-deploy-executor: uploaded the state" in out
    assert not [p for p in state_files(emu) if p.startswith(".pulumi/locks/")]

    second = deploy("gate", config={"gate": str(fifo)})
    assert second.run(1) == 0

    def open_gate():
        with open(fifo, "w") as fh:  # blocks until the program opens it to read
            fh.write("open sesame")

    writer = threading.Thread(target=open_gate, daemon=True)
    writer.start()
    assert second.run(2) == 0, second.log
    writer.join(timeout=60)
    assert outputs(emu, "gate", bin_dirs) == {"opened": "open sesame"}


# ---------------------------------------------------------------- without the real CLI

FAKE_PULUMI = r"""#!/bin/sh
# A pulumi that ignores SIGINT during `up` (the real one always stopped in time here), to prove
# the executor's fallback: kill it, remove the stack's lock, upload.
if [ "$1" = up ]; then
  trap '' INT
  lock="${PULUMI_BACKEND_URL#file://}/.pulumi/locks/organization/$PULUMI_CI_PROJECT/$PULUMI_CI_STACK"
  mkdir -p "$lock" && echo '{}' > "$lock/fake.json"
  echo "fake pulumi: up holds the lock in process group $$"
  sleep 600
fi
exit 0
"""


@pytest.fixture
def bare(emu, git, tmp_path):
    """A deployment job of the base program with a fake pulumi first on PATH."""
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "pulumi").write_text(FAKE_PULUMI)
    (fake / "pulumi").chmod(0o755)
    return Job(emu, git, tmp_path, [str(fake)], "base")


def test_a_pulumi_deaf_to_sigint_is_killed_and_its_lock_removed(emu, bare):
    assert bare.run(1) == 0, bare.log
    proc = bare.start(2)
    first = proc.stdout.readline()
    while first.startswith("pulumi-deploy-executor:"):
        first = proc.stdout.readline()
    assert first.startswith("fake pulumi: up holds the lock in process group ")
    group = int(first.split()[-1])
    os.kill(executor_pid(proc.pid), signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "pulumi did not stop within 8s of its SIGINT: killing it" in out
    assert "removed 1 lock(s) of the stack" in out
    assert not [p for p in state_files(emu) if p.startswith(".pulumi/locks/")]
    assert living(group) == []  # the killed pulumi's children (its `sleep`) went with it


def living(group: int) -> list[int]:
    """The processes of a process group that are not dead (zombies are)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if fields[0] != "Z" and int(fields[2]) == group:
            pids.append(int(entry))
    return pids


@pytest.fixture
def executor(tmp_path):
    """The shipped executor, run with `env` only; `pulumi` on PATH is a no-op."""
    path = tmp_path / "bin" / "pulumi-deploy-executor"
    path.parent.mkdir()
    path.write_bytes(default_content())
    path.chmod(0o755)
    (tmp_path / "bin" / "pulumi").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "bin" / "pulumi").chmod(0o755)

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        base = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
        return subprocess.run(
            [str(path), *args],
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run


def _one_line(res: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("pulumi-deploy-executor:")]
    return lines[-1].removeprefix("pulumi-deploy-executor: ")


def test_bad_usage_and_settings_get_one_line(emu, git, executor):
    stack = {"PULUMI_CI_PROJECT": "base", "PULUMI_CI_STACK": "dev"}
    cases = [
        ((), {}, 2, "usage: pulumi-deploy-executor clone|update|preview|destroy|refresh"),
        (("clone", "x"), {}, 2, "clone takes no arguments"),
        (("clone",), {}, 2, "PULUMI_DEPLOY_SOURCE_URL is not set (the deployment job sets it)"),
        (("update",), {}, 2, "PULUMI_CI_PROJECT is not set (the deployment job sets it)"),
        (("update",), stack, 2, "no clone in "),
        (("update",), {**stack, "PULUMI_DEPLOY_CONFIG": "{"}, 2, "PULUMI_DEPLOY_CONFIG is not"),
        (
            ("update",),
            {**stack, "PULUMI_DEPLOY_CONFIG": '{"k": "v"}'},
            2,
            'PULUMI_DEPLOY_CONFIG must be {"key": {"value": "...", "secret": bool}}',
        ),
        (
            ("clone",),
            {"PULUMI_DEPLOY_SOURCE_URL": git.url("nope")},
            1,
            f"git clone of {git.url('nope')} failed",
        ),
    ]
    for args, env, code, message in cases:
        res = executor(*args, **env)
        assert (res.returncode, _one_line(res)[: len(message)]) == (code, message), res.stderr


def test_a_wrong_token_or_a_dead_backend_is_one_line(emu, git, executor):
    clone = {
        "PULUMI_DEPLOY_SOURCE_URL": "https://user:hunter2@127.0.0.1:9/x",
    }
    res = executor("clone", **clone)
    assert res.returncode == 1 and "hunter2" not in res.stderr
    assert _one_line(res).startswith("git clone of https://***@127.0.0.1:9/x failed")
    assert executor("clone", PULUMI_DEPLOY_SOURCE_URL=git.url("programs")).returncode == 0
    op = {
        "PULUMI_CI_PROJECT": "base",
        "PULUMI_CI_STACK": "dev",
        "PULUMI_DEPLOY_BACKEND_URL": f"{emu.url}/api/stand-in/backend/{emu.org}",
        "PULUMI_ACCESS_TOKEN": "pul-not-a-deployment-token",
    }
    res = executor("update", **op)
    assert res.returncode == 1
    assert _one_line(res) == (
        f"GET {op['PULUMI_DEPLOY_BACKEND_URL']}: HTTP 401: "
        "the token is not a deployment's access token"
    )
    res = executor("update", **{**op, "PULUMI_DEPLOY_BACKEND_URL": "http://127.0.0.1:9/x"})
    assert res.returncode == 1
    assert _one_line(res).startswith("cannot reach the backend at http://127.0.0.1:9/x: ")
    res = executor("update", **{**op, "PULUMI_DEPLOY_BACKEND_URL": "file:///etc/passwd"})
    assert (res.returncode, _one_line(res)) == (
        2,
        "PULUMI_DEPLOY_BACKEND_URL 'file:///etc/passwd' is not an http(s) URL",
    )
