"""Secrets: agents at debug level run process and docker jobs, with a pool token (from the
config file, and from the environment) and with OIDC. Every credential that went over the wire
is learnt from a recording proxy between the agents and the emulator (pool tokens, job tokens,
per-job OIDC tokens, the OIDC ID token and the runner token it was exchanged for), and then
looked for in every byte of agent output, the job output shipped to the emulator, `ps`
snapshots, job environments (/proc/<pid>/environ, `docker inspect`, the env each job printed),
/metrics and /healthz, and every file under the agents' directories: 0 hits. Files that hold a
secret are 0600. Only allowlisted host variables (+ DOCKER_HOST) reach a job.

(The `agent_config` action plugin at -vvv with --diff is scanned by
tests/system/test_plugins_agent_config.py; the full converge and journal scan is Molecule's.)
"""

from __future__ import annotations

import base64
import json
import os
import signal
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from recorder import Recorder
from rel_harness import JOB_IMAGE, WAIT, AgentProcess, assert_no_crash, docker_available, wait_for

JOB_SECRET = "job-secret-value-9f8e7d6c"
REGISTRY_PASSWORD = "registry-password-1a2b3c4d"
HOST_ENV = {
    "WFA_ALLOWED": "allowed-value",
    "WFA_HOST_ONLY": "host-only-value",
    "DOCKER_HOST": "unix:///var/run/docker.sock",
}
ALLOWLIST = ["WFA_ALLOWED", "WFA_TOKEN_COPY", "PULUMI_AGENT_TOKEN"]
# Variables a job may have that come from its runtime, not from the host: the targets set HOME,
# PATH and the job runtime's PULUMI_ENV (a path), PULUMI_DEPLOY_EXECUTOR (a path) and
# PULUMI_OIDC_TOKEN (the job's own OIDC token, as Pulumi Deployments gives it [DOC]: a job
# credential, never the pool's), the shell sets PWD (and maybe SHLVL, OLDPWD, _), Docker sets
# HOSTNAME.
RUNTIME = {
    "HOME",
    "PATH",
    "PULUMI_ENV",
    "PULUMI_DEPLOY_EXECUTOR",
    "PULUMI_OIDC_TOKEN",
    "PWD",
    "SHLVL",
    "OLDPWD",
    "_",
    "HOSTNAME",
}
ENV_MARK = "ENV64:"
STEPS = [
    {
        "name": "env",
        "run": (
            f'printf "{ENV_MARK}"; env | base64 -w0; echo; echo "secret is $SECRET_ONE"; '
            # The job's volume: /mnt/workflow in a container (steps run in /), else the cwd.
            "w=/mnt/workflow; [ -d $w ] || w=.; "
            "touch $w/started; while [ ! -e $w/gate ]; do sleep 0.1; done"
        ),
    },
    {"name": "after", "run": "echo done"},
]
JOB_ENV = {"PLAIN": "plain", "SECRET_ONE": {"secret": JOB_SECRET}}


@dataclass
class Case:
    agent: AgentProcess
    pool: str
    env: dict[str, str]
    job: str = ""
    snapshots: dict[str, bytes] = field(default_factory=dict)  # where -> what was seen there


def job_env_dump(job: dict) -> dict[str, str]:
    """The environment the job printed (base64, so that redaction cannot hide a leak)."""
    [line] = [x for x in job["steps"][0]["logs"] if x.startswith(ENV_MARK)]
    text = base64.b64decode(line[len(ENV_MARK) :]).decode()
    return dict(item.split("=", 1) for item in text.splitlines() if "=" in item)


def process_environments(jobs_dir: Path) -> dict[str, bytes]:
    """/proc/<pid>/environ of every process working inside a job directory."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if cwd.startswith(str(jobs_dir)):
            found[f"/proc/{proc.name}/environ"] = environ
    return found


def docker_inspections(instance: str) -> dict[str, bytes]:
    import docker

    client = docker.from_env()
    containers = client.containers.list(filters={"label": f"workflow-agent/instance={instance}"})
    return {f"docker inspect {c.name}": json.dumps(c.attrs).encode() for c in containers}


def job_environments(case: Case) -> dict[str, bytes]:
    """What the running job's processes (process target) or container (docker) hold."""
    found = process_environments(case.agent.dir / "jobs")
    if "docker" in case.agent.name:
        found.update(docker_inspections(case.agent.name))
    return found


MODES: dict[Path, int] = {}  # the mode of each file when files_under read it


def files_under(root: Path, skip: Path) -> dict[Path, bytes]:
    out = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and skip not in path.parents:
            try:
                out[path] = path.read_bytes()
                MODES[path] = stat.S_IMODE(path.stat().st_mode)
            except OSError:
                continue
    return out


def wire_secrets(recorder: Recorder) -> dict[str, str]:
    """Every credential in the recorded traffic, by what it is."""
    found: dict[str, str] = {}
    for ex in recorder.recorded():
        auth = ex.request_headers.get("Authorization", "")
        if auth.startswith("token ") and auth[6:] not in found.values():
            found[f"authorization #{len(found)}"] = auth[len("token ") :]
        if ex.path.startswith("/api/deployments/poll") and ex.status == 200:
            claim = json.loads(ex.response_body)
            found[f"job token {claim['jobID']}"] = claim["jobToken"]
            found[f"job oidc token {claim['jobID']}"] = claim["oidcToken"]
        if ex.path == "/api/oauth/token" and ex.status == 200:
            found["runner access token"] = json.loads(ex.response_body)["access_token"]
    return found


def run_and_scan(emu, agents, tmp_path, cases: list[Case], extra_secrets: dict[str, str]):
    with Recorder(("127.0.0.1", emu.port)) as recorder:
        for case in cases:
            agents.append(case.agent)
            case.agent.start(env={**HOST_ENV, **case.env, "HTTP_PROXY": recorder.url})
        for case in cases:
            case.job = emu.create_job(
                steps=STEPS,
                env=JOB_ENV,
                pool=case.pool,
                image={
                    "reference": JOB_IMAGE,
                    "credentials": {"username": "u", "password": {"secret": REGISTRY_PASSWORD}},
                },
            )
        # While every job's step runs (held by its gate): job environments, ps, files. Wait for
        # the step's own marker first: a snapshot taken earlier can catch the agent's child
        # between fork and exec, which still holds the agent's environment, not the job's.
        for case in cases:
            wait_for(
                lambda c=case: any((c.agent.dir / "jobs").glob("*/work/started")),
                what=f"{case.agent.name} job step started",
            )
            case.snapshots.update(
                wait_for(lambda c=case: job_environments(c), what=f"{case.agent.name} job running")
            )
        ps = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True, check=True)
        files = files_under(tmp_path, skip=emu.dir)
        for case in cases:
            for work in (case.agent.dir / "jobs").glob("*/work"):
                (work / "gate").touch()
        done = {j["id"]: j for j in emu.wait_jobs([c.job for c in cases], timeout=WAIT)}
        metrics = {
            c.agent.name: c.agent.get("/metrics")[1] + str(c.agent.get("/healthz")[1])
            for c in cases
        }
        for case in cases:
            case.agent.signal(signal.SIGTERM)
        for case in cases:
            assert case.agent.wait() == 0, case.agent.stderr[-3000:]
            assert_no_crash(case.agent)
        secrets = {**wire_secrets(recorder), **extra_secrets}

    for case in cases:
        job = done[case.job]
        assert job["status"] == "succeeded", job
        assert f"job token {case.job}" in secrets and f"job oidc token {case.job}" in secrets
        assert "secret is [secret]" in job["steps"][0]["logs"]
        if case.agent.name.startswith("process"):
            # Positive control: the scan of files does see the job's OIDC token, in the one
            # file that may hold it (docker keeps it in the container's memory).
            oidc = secrets[f"job oidc token {case.job}"].encode()
            holders = [p for p, data in files.items() if oidc in data]
            assert [p.name for p in holders] == ["pulumi.oidc"], holders

    # Everything the agents produced or handed out, and where it was seen.
    everywhere: dict[str, bytes] = {"ps": ps.stdout}
    job_envs: dict[str, bytes] = {}
    for case in cases:
        job = done[case.job]
        everywhere[f"{case.agent.name} stderr"] = case.agent.stderr_path.read_bytes()
        everywhere[f"{case.agent.name} metrics+healthz"] = metrics[case.agent.name].encode()
        everywhere[f"{case.job} shipped"] = json.dumps([job["steps"], job["reason"]]).encode()
        dump = job_env_dump(job)
        job_envs[f"{case.job} printed env"] = "\n".join(
            f"{k}={v}" for k, v in dump.items()
        ).encode()
        job_envs.update(case.snapshots)
        check_job_env(case, dump)
    for path, data in files.items():
        everywhere[str(path)] = data

    # Positive control: the job's own secret is in every job environment seen, so the scan
    # below does look at real environments. It is the one secret that belongs there.
    for where, data in job_envs.items():
        assert JOB_SECRET.encode() in data, f"{where}: not a job environment?"
    hits = [
        (what, where)
        for what, secret in secrets.items()
        for where, data in everywhere.items()
        if secret.encode() in data and not (Path(where) in MODES and secret_file_ok(Path(where)))
    ]
    # A job's own OIDC token belongs in its environment, as PULUMI_OIDC_TOKEN (check_job_env);
    # the container's config and pod specs never hold it (agent/tests/targets/test_contract.py).
    hits += [
        (what, where)
        for what, secret in secrets.items()
        if secret != JOB_SECRET and not what.startswith("job oidc token ")
        for where, data in job_envs.items()
        if secret.encode() in data
    ]
    assert hits == [], f"secrets found: {hits}"
    return secrets


def secret_file_ok(path: Path) -> bool:
    """A file may hold a secret only if it is a config or token file, mode 0600 (pulumi.oidc:
    the job's OIDC token, which the process target hands its job in the job's directory; gone
    with the job, so judged by the mode it had when read)."""
    mode = MODES[path]
    assert mode == 0o600, f"{path} holds a secret with mode {oct(mode)}"
    return path.name in ("pulumi-workflow-agent.yaml", "oidc-token", "pulumi.oidc")


def check_job_env(case: Case, env: dict[str, str]) -> None:
    """Only the job's variables, the allowlisted host ones and DOCKER_HOST (+ the runtime's)."""
    host = {**os.environ, **HOST_ENV, **case.env}
    allowed = set(JOB_ENV) | set(ALLOWLIST) | {"DOCKER_HOST"} | RUNTIME
    assert set(env) <= allowed, f"{case.agent.name}: unexpected job variables {set(env) - allowed}"
    assert env["WFA_ALLOWED"] == "allowed-value"
    assert env["DOCKER_HOST"] == HOST_ENV["DOCKER_HOST"]
    assert env["PLAIN"] == "plain" and env["SECRET_ONE"] == JOB_SECRET
    # The runtime's values are its own, not the host's (HOME may be /root on both sides).
    for name in ("PATH", "PWD", "OLDPWD"):
        if name in env:
            assert env[name] != host.get(name), f"{case.agent.name}: host's {name} reached the job"
    if case.agent.name.startswith("process"):
        assert env["HOME"].startswith(str(case.agent.dir / "jobs"))
    # A variable carrying one of the agent's own credentials is withheld, allowlisted or not.
    assert "PULUMI_AGENT_TOKEN" not in env and "WFA_TOKEN_COPY" not in env


def agent(emu, tmp_path, name: str, **settings) -> AgentProcess:
    return AgentProcess(
        emu, tmp_path, name, log_level="debug", env_forward_allowlist=ALLOWLIST, **settings
    )


def test_process_agents_with_a_pool_token_and_with_oidc_leak_nothing(emu, agents, tmp_path):
    oidc_pool = emu.create_pool("oidc-pool")
    id_token_file = tmp_path / "oidc-token"
    id_token = emu.mint_oidc(org=emu.org)
    id_token_file.write_text(id_token)
    id_token_file.chmod(0o600)
    cases = [
        # The pool token comes from the environment and is allowlisted: it must still not pass.
        Case(
            agent(emu, tmp_path, "process-token", token=""),
            "default",
            {"PULUMI_AGENT_TOKEN": emu.pool_token},
        ),
        Case(
            agent(
                emu,
                tmp_path,
                "process-oidc",
                token="",
                oidc_token_file=str(id_token_file),
                organization_name=emu.org,
                runner_pool_id="oidc-pool",
            ),
            "oidc-pool",
            {"WFA_TOKEN_COPY": id_token},
        ),
    ]
    secrets = run_and_scan(
        emu,
        agents,
        tmp_path,
        cases,
        {
            "pool token": emu.pool_token,
            "oidc pool token": oidc_pool["token"],
            "oidc id token": id_token,
            "job secret": JOB_SECRET,
            "registry password": REGISTRY_PASSWORD,
        },
    )
    assert "runner access token" in secrets  # the exchange happened, and was scanned for
    assert "not forwarding PULUMI_AGENT_TOKEN" in cases[0].agent.stderr
    assert "not forwarding WFA_TOKEN_COPY" in cases[1].agent.stderr


def test_a_docker_agent_leaks_nothing(emu, agents, tmp_path):
    reason = docker_available()
    if reason:
        pytest.skip(reason)
    pool = emu.create_pool("docker-pool")
    case = Case(
        agent(
            emu,
            tmp_path,
            "docker-token",
            token=pool["token"],
            deploy_target="docker",
            pull_image=False,
        ),
        "docker-pool",
        {"WFA_TOKEN_COPY": pool["token"]},
    )
    run_and_scan(
        emu,
        agents,
        tmp_path,
        [case],
        {
            "pool token": pool["token"],
            "default pool token": emu.pool_token,
            "job secret": JOB_SECRET,
            "registry password": REGISTRY_PASSWORD,
        },
    )
    assert "not forwarding WFA_TOKEN_COPY" in case.agent.stderr
