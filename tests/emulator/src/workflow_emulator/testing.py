"""A pytest-friendly handle on a real emulator process.

    with Emulator(heartbeat_timeout="5s") as emu:
        job = emu.create_job(steps=[{"name": "build", "run": "echo hi"}])
        ...  # start an agent with service_url=emu.url and token=emu.pool_token
        [done] = emu.wait_jobs([job], timeout=120)

The server runs as a subprocess (`python -m workflow_emulator serve`) on a free loopback port
(or on `host`, e.g. a bridge address that job containers and pods reach) with a temporary state
file; tokens reach it through the environment, never argv.

For real Pulumi deployments (the stand-in executor, data/pulumi-deploy-executor): `GitServer`
serves the programs (`PROGRAMS`: base, app, broken, gate) to jobs, `pulumi_bin_dirs()` finds
the Pulumi CLI built here, and `stack_outputs()` reads a stack's outputs from outside any job.
"""

import glob
import io
import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib import resources

import httpx

TERMINAL = frozenset({"succeeded", "failed", "canceled", "skipped"})
# YAML Pulumi programs for tests, one directory each (see their Pulumi.yaml):
#   base    config `greeting` and secret `secretWord`; outputs greeting, message, secretWord
#   app     a pulumi:pulumi:StackReference to organization/base/<same stack>; output fromBase
#   broken  a program error (an undefined reference)
#   gate    reads the file named by config `gate` (a FIFO makes `up` wait for a test)
PROGRAMS = pathlib.Path(str(resources.files("workflow_emulator").joinpath("data/programs")))
# Where scripts/build-go-tool.sh caches its builds (tests/gotools pins them).
GO_CACHE = os.environ.get("WFA_GO_CACHE", "/var/cache/workflow-agent-go")


class EmulatorError(RuntimeError):
    pass


class Emulator:
    def __init__(
        self,
        *,
        heartbeat_timeout: str = "10m",
        online_window: str = "60s",
        org: str = "default",
        default_image: str | None = None,
        pool_token: str | None = None,
        admin_token: str | None = None,
        state_dir: str | os.PathLike | None = None,
        startup_timeout: float = 60.0,
        extra_env: dict[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.host = host
        self.pool_token = pool_token or "pul-" + secrets.token_hex(20)
        self.admin_token = admin_token or secrets.token_hex(20)
        self.heartbeat_timeout = heartbeat_timeout
        self.online_window = online_window
        self.org = org
        self.default_image = default_image
        self.startup_timeout = startup_timeout
        self.extra_env = dict(extra_env or {})
        self._own_dir = state_dir is None
        self.dir = pathlib.Path(state_dir or tempfile.mkdtemp(prefix="wfa-emulator-"))
        self.state_file = self.dir / "state.sqlite"
        self.url_file = self.dir / "url"
        self.log_path = self.dir / "emulator.log"
        self.url = ""
        self.port = 0
        self._proc: subprocess.Popen | None = None
        self._client: httpx.Client | None = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "Emulator":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def start(self) -> None:
        if self._proc is not None:
            raise EmulatorError("the emulator is already running")
        self.url_file.unlink(missing_ok=True)
        env = {
            **os.environ,
            "EMULATOR_ADMIN_TOKEN": self.admin_token,
            "EMULATOR_SEED_TOKEN": self.pool_token,
            "EMULATOR_HEARTBEAT_TIMEOUT": self.heartbeat_timeout,
            "EMULATOR_ONLINE_WINDOW": self.online_window,
            "EMULATOR_ORG": self.org,
            **self.extra_env,
        }
        if self.default_image:
            env["EMULATOR_DEFAULT_IMAGE"] = self.default_image
        cmd = [
            sys.executable,
            "-m",
            "workflow_emulator",
            "serve",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--state-file",
            str(self.state_file),
            "--url-file",
            str(self.url_file),
        ]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + self.startup_timeout
        while not self.url_file.exists():
            if self._proc.poll() is not None:
                self._proc = None
                raise EmulatorError(
                    f"the emulator exited at start; see {self.log_path}:\n" + self._log_tail()
                )
            if time.monotonic() > deadline:
                self.stop()
                raise EmulatorError(f"the emulator did not start in {self.startup_timeout}s")
            time.sleep(0.05)
        self.url = self.url_file.read_text().strip()
        self.port = int(self.url.rsplit(":", 1)[1])
        self._client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.admin_token}"},
            timeout=30.0,
        )

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)

    def restart(self) -> None:
        """Stop and start again on the same port with the same state file."""
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL the server (no clean shutdown), e.g. to prove the state file survives it."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=30)
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # ------------------------------------------------------------------ admin API
    def admin(self, method: str, path: str, json: object = None, **kw) -> httpx.Response:
        if self._client is None:
            raise EmulatorError("the emulator is not running")
        if json is not None:
            kw["json"] = json
        return self._client.request(method, path, **kw)

    def _ok(self, resp: httpx.Response) -> dict:
        if resp.status_code >= 400:
            raise EmulatorError(
                f"{resp.request.method} {resp.request.url.path} -> {resp.status_code}: {resp.text}"
            )
        return resp.json()

    def create_job(self, steps: list[dict], **kw) -> str:
        """Queue a job (kw: image, env, timeout, type, pool, os, architecture); returns its id."""
        return self._ok(self.admin("POST", "/admin/jobs", {"steps": steps, **kw}))["id"]

    def create_jobs(self, count: int, steps: list[dict], **kw) -> list[str]:
        return self._ok(self.admin("POST", "/admin/jobs", {"steps": steps, "count": count, **kw}))[
            "ids"
        ]

    def create_deployment(
        self,
        stack: str,
        source: dict,
        *,
        operation: str = "update",
        config: dict | None = None,
        pre_run_commands: list[str] | None = None,
        env: dict | None = None,
        **kw,
    ) -> str:
        """Queue a deployment job shaped like the service's; returns its id. `stack` is
        "org/project/stack" (or a stack name with project=...), `source` {"url", "branch"?,
        "repoDir"?}, `config` {key: "value" or {"value", "secret"}}; kw: project, image,
        timeout, pool. See docs/protocol.md."""
        body = {"stack": stack, "source": source, "operation": operation, **kw}
        if config is not None:
            body["config"] = config
        if pre_run_commands is not None:
            body["preRunCommands"] = pre_run_commands
        if env is not None:
            body["env"] = env
        return self._ok(self.admin("POST", "/admin/deployments", body))["id"]

    def job(self, job_id: str) -> dict:
        return self._ok(self.admin("GET", f"/admin/jobs/{job_id}"))

    def jobs(self, status: str | None = None) -> list[dict]:
        params = {"status": status} if status else None
        return self._ok(self.admin("GET", "/admin/jobs", params=params))["jobs"]

    def wait_jobs(self, ids: list[str], timeout: float = 120.0, poll: float = 0.2) -> list[dict]:
        """The jobs, once every one is terminal (succeeded, failed, canceled, skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            jobs = [self.job(i) for i in ids]
            if all(j["status"] in TERMINAL for j in jobs):
                return jobs
            if time.monotonic() > deadline:
                waiting = {j["id"]: j["status"] for j in jobs if j["status"] not in TERMINAL}
                raise TimeoutError(f"jobs not finished after {timeout}s: {waiting}")
            time.sleep(poll)

    def cancel(
        self, job_id: str, reason: str = "canceled by test", status: str = "canceled"
    ) -> dict:
        """End a job from the service side; status "skipped" reads "skipped" on the wire."""
        body = {"reason": reason, "status": status}
        return self._ok(self.admin("POST", f"/admin/jobs/{job_id}/cancel", body))

    def agents(self, online_within: float | None = 60, pool: str | None = None) -> list[dict]:
        params: dict = {}
        if online_within is not None:
            params["online_within"] = online_within
        if pool is not None:
            params["pool"] = pool
        return self._ok(self.admin("GET", "/admin/agents", params=params))["agents"]

    def wait_agents(
        self, count: int, online_within: float = 60, pool: str | None = None, timeout: float = 120
    ) -> list[dict]:
        """The online agents, once exactly `count` are online."""
        deadline = time.monotonic() + timeout
        while True:
            agents = self.agents(online_within=online_within, pool=pool)
            if len(agents) == count:
                return agents
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{len(agents)} agents online after {timeout}s, expected {count}: "
                    f"{[a['id'] for a in agents]}"
                )
            time.sleep(0.2)

    def faults(self, **settings) -> dict:
        """Replace the fault settings (no arguments: no faults). See docs/protocol.md."""
        return self._ok(self.admin("POST", "/admin/faults", settings))

    def executor(self) -> dict:
        """The served executor: {"etag", "size", "fetches": {"200": full downloads, "304": ...}}."""
        return self._ok(self.admin("GET", "/admin/executor"))

    def set_executor(self, content: bytes | None = None) -> dict:
        """Replace the served executor (None: the shipped stand-in again); returns its view."""
        return self._ok(self.admin("POST", "/admin/executor", content=content or b""))

    def background_activities(self, **kinds: dict) -> dict:
        """Replace what the bootstrap's configuration call answers, per kind (deployment,
        insights_scan, policy_evaluation): {"enabled", "pools" (ids or names; None: the
        caller's pool), "interval", "concurrency", ...}; no arguments: the defaults."""
        return self._ok(self.admin("POST", "/admin/background-activities", kinds))

    def backend_tar(self, org: str | None = None) -> bytes:
        """The organization's Pulumi state (the stand-in backend's `.pulumi/` tree) as a tar."""
        resp = self.admin("GET", f"/admin/backend/{org or self.org}")
        if resp.status_code >= 400:
            raise EmulatorError(f"GET /admin/backend -> {resp.status_code}: {resp.text}")
        return resp.content

    def extract_backend(self, dest: str | os.PathLike, org: str | None = None) -> pathlib.Path:
        """The organization's Pulumi state unpacked into `dest` (created, emptied first), ready
        for `pulumi login file://<dest>`; returns dest."""
        dest = pathlib.Path(dest)
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(self.backend_tar(org))) as tar:
            tar.extractall(dest, filter="data")
        return dest

    def reset(self, pools: bool = False) -> None:
        self._ok(self.admin("POST", "/admin/reset", {"pools": pools}))

    def create_pool(self, name: str, **kw) -> dict:
        """A new pool (kw: org, description, token); the result carries its `token`."""
        return self._ok(self.admin("POST", "/admin/pools", {"name": name, **kw}))

    def mint_oidc(self, **kw) -> str:
        """An ID token from the emulator's test issuer (kw: org, audience, subject, expires_in)."""
        return self._ok(self.admin("POST", "/admin/oidc/mint", kw))["token"]

    def access_token(self, org: str | None = None) -> str:
        """A token for the pool REST API /api/orgs/{org}/agent-pools (all orgs when None)."""
        return self._ok(self.admin("POST", "/admin/access-tokens", {"org": org or "*"}))["token"]

    def advance_clock(self, seconds: float) -> dict:
        """Move the emulator's clock forward (heartbeat timeouts, token expiry, online windows)."""
        return self._ok(self.admin("POST", "/admin/clock", {"advance": seconds}))

    def stats(self) -> dict:
        return self._ok(self.admin("GET", "/admin/stats"))

    def metrics(self) -> str:
        return self.admin("GET", "/metrics").text


class PulumiMissing(EmulatorError):
    """The Pulumi CLI or its YAML language host is not built (the message says which)."""


def pulumi_bin_dirs() -> list[str]:
    """The directories of `pulumi` and `pulumi-language-yaml`, to put on PATH: those of
    WFA_PULUMI_BIN_DIR (os.pathsep-separated) when set, else the newest builds in the Go tool
    cache. Raises PulumiMissing naming what is missing."""
    wanted = ("pulumi", "pulumi-language-yaml")
    found: dict[str, str] = {}
    given = os.environ.get("WFA_PULUMI_BIN_DIR")
    if given:
        for d in given.split(os.pathsep):
            for name in wanted:
                if name not in found and os.access(os.path.join(d, name), os.X_OK):
                    found[name] = d
        where = f"WFA_PULUMI_BIN_DIR={given}"
    else:
        for name in wanted:
            builds = glob.glob(os.path.join(GO_CACHE, "bin", f"{name}-v*", name))
            builds = [b for b in builds if os.access(b, os.X_OK)]
            if builds:
                found[name] = os.path.dirname(max(builds, key=os.path.getmtime))
        where = f"{GO_CACHE}/bin (build with scripts/build-go-tool.sh)"
    missing = [n for n in wanted if n not in found]
    if missing:
        raise PulumiMissing(f"no {' and no '.join(missing)} in {where}")
    return list(dict.fromkeys(found[n] for n in wanted))


def stack_outputs(
    emu: "Emulator",
    project: str,
    stack: str,
    *,
    passphrase: str | None = None,
    bin_dirs: list[str] | None = None,
) -> dict:
    """A stack's outputs, read with the real CLI from the emulator's copy of the state, outside
    any job (`pulumi stack output --json`; secrets shown when `passphrase` is given)."""
    dirs = bin_dirs or pulumi_bin_dirs()
    with tempfile.TemporaryDirectory(prefix="wfa-outputs-") as tmp:
        state = emu.extract_backend(os.path.join(tmp, "state"))
        env = {
            "PATH": os.pathsep.join([*dirs, os.environ.get("PATH", "")]),
            "HOME": tmp,
            "PULUMI_HOME": os.path.join(tmp, "home"),
            "PULUMI_BACKEND_URL": f"file://{state}",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
        }
        cmd = ["pulumi", "stack", "output", "--json", "--non-interactive"]
        cmd += ["--stack", f"organization/{project}/{stack}"]
        if passphrase is not None:
            env["PULUMI_CONFIG_PASSPHRASE"] = passphrase
            cmd.append("--show-secrets")
        res = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise EmulatorError(f"pulumi stack output failed ({res.returncode}): {res.stderr.strip()}")
    return json.loads(res.stdout)


_GIT_ENV = {
    # A fixed author and date: the same files make the same commit. No user or system config.
    "GIT_AUTHOR_NAME": "workflow-emulator",
    "GIT_AUTHOR_EMAIL": "emulator@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "workflow-emulator",
    "GIT_COMMITTER_EMAIL": "emulator@example.invalid",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


class GitServer:
    """`git daemon` serving bare repositories made from directories of files, for jobs to
    clone over git:// (read-only). Listens on `host` (a bridge address that containers reach,
    or loopback) and `port` (0: a free one).

        with GitServer() as git:
            url = git.add("programs", PROGRAMS)  # git://127.0.0.1:PORT/programs
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 30):
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="wfa-git-"))
        self.log_path = self.dir / "daemon.log"
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "GitServer":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"git://{host}:{self.port}"

    def url(self, name: str) -> str:
        return f"{self.base_url}/{name}"

    def _git(self, *args: str, cwd: str | os.PathLike | None = None) -> str:
        env = {**os.environ, **_GIT_ENV}
        try:
            res = subprocess.run(
                ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
            )
        except FileNotFoundError:
            raise EmulatorError("git is not installed (apt-get install -y git)") from None
        if res.returncode != 0:
            raise EmulatorError(f"git {args[0]} failed: {res.stderr.strip()}")
        return res.stdout

    def start(self) -> None:
        (self.dir / "repos").mkdir(exist_ok=True)
        (self.dir / "work").mkdir(exist_ok=True)
        # git-daemon itself, not `git daemon`, which would run it as a child of its own.
        daemon = os.path.join(self._git("--exec-path").strip(), "git-daemon")
        for _ in range(5):  # a free port can be taken between the probe and the daemon's bind
            port = self.port or _free_port(self.host)
            with open(self.log_path, "ab") as log:
                self._proc = subprocess.Popen(
                    [
                        daemon,
                        "--verbose",  # for its "Ready to rumble" once it listens
                        "--reuseaddr",
                        "--export-all",
                        "--informative-errors",
                        f"--base-path={self.dir / 'repos'}",
                        f"--listen={self.host}",
                        f"--port={port}",
                        str(self.dir / "repos"),
                    ],
                    env={**os.environ, **_GIT_ENV},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            if self._wait_listening(port):
                self.port = port
                return
            self._proc.wait(timeout=30)
            self._proc = None
            if self.port:
                break
        tail = self.log_path.read_text(errors="replace")[-2000:]
        raise EmulatorError(f"git daemon did not start on {self.host}:{self.port}: {tail}")

    def _wait_listening(self, port: int) -> bool:
        """Whether the daemon says it listens (a connect could reach another listener)."""
        deadline = time.monotonic() + self.startup_timeout
        ready = f"[{self._proc.pid}] Ready to rumble"
        while time.monotonic() < deadline:
            if ready in self.log_path.read_text(errors="replace"):
                return True
            if self._proc.poll() is not None:
                return False
            time.sleep(0.05)
        self._proc.kill()
        return False

    def add(self, name: str, src: str | os.PathLike, branch: str = "main") -> str:
        """Make (or move on) repository `name` to a commit of the files under `src`, on
        `branch`; returns its git:// URL."""
        work = self.dir / "work" / name
        if not work.exists():
            self._git("init", "--quiet", f"--initial-branch={branch}", str(work))
        else:
            self._git("checkout", "--quiet", "-B", branch, cwd=work)
            self._git("rm", "-r", "--quiet", "--ignore-unmatch", ".", cwd=work)
        shutil.copytree(src, work, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
        self._git("add", "--all", cwd=work)
        message = f"the files of {os.path.basename(os.path.abspath(src))}"
        self._git("commit", "--quiet", "--allow-empty", "-m", message, cwd=work)
        bare = self.dir / "repos" / name
        if not bare.exists():
            self._git("clone", "--quiet", "--bare", str(work), str(bare))
        self._git("push", "--quiet", "--force", str(bare), f"{branch}:{branch}", cwd=work)
        return self.url(name)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
