"""local/pulumi:latest (scripts/build-pulumi-image.sh), the stand-in for the pulumi/pulumi job
image: what a deployment's steps rely on in it. The builds stage builds it, after the Go builds,
and runs this (make builds)."""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

IMAGE = "local/pulumi:latest"
DOCKER = shutil.which("docker", path="/usr/bin") or "docker"
# A YAML program with config, a variable and a secret output: no provider plugin needed.
PROGRAM = textwrap.dedent(
    """\
    name: hello
    runtime: yaml
    config:
      greeting:
        type: string
        default: hello
    variables:
      message: ${greeting}, world
    outputs:
      message: ${message}
      token:
        fn::secret: s3cr3t
    """
)


def in_image(script: str, *env: str) -> subprocess.CompletedProcess[str]:
    flags = [arg for e in env for arg in ("-e", e)]
    return subprocess.run(
        [DOCKER, "run", "--rm", *flags, IMAGE, "bash", "-ec", script],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module", autouse=True)
def image():
    found = subprocess.run([DOCKER, "image", "inspect", IMAGE], capture_output=True, check=False)
    if found.returncode != 0:
        pytest.skip(f"no {IMAGE}: make pulumi-image builds it")


def test_version_and_tools():
    proc = in_image(
        "pulumi version; command -v pulumi-language-yaml; id -u;"
        " git --version; python3 --version; curl --version"
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "v3.274.1", proc.stdout
    assert lines[1] == "/usr/local/bin/pulumi-language-yaml", proc.stdout
    assert lines[2] == "0", "pulumi/pulumi runs as root"
    assert lines[3].startswith("git version "), proc.stdout
    assert lines[4].startswith("Python 3."), proc.stdout
    assert lines[5].startswith("curl "), proc.stdout


def test_a_yaml_program_goes_up_on_a_file_backend():
    script = f"""
mkdir -p /tmp/state /tmp/hello && cd /tmp/hello
cat > Pulumi.yaml <<'EOF'
{PROGRAM}EOF
pulumi login file:///tmp/state
pulumi stack init dev --non-interactive
pulumi up --yes --non-interactive --skip-preview
echo "message=$(pulumi stack output message)"
echo "token=$(pulumi stack output token --show-secrets)"
pulumi destroy --yes --non-interactive --skip-preview
"""
    proc = in_image(script, "PULUMI_CONFIG_PASSPHRASE=not-a-secret")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "message=hello, world" in proc.stdout.splitlines(), proc.stdout
    assert "token=s3cr3t" in proc.stdout.splitlines(), proc.stdout
    assert "+ 1 created" in proc.stdout, proc.stdout
