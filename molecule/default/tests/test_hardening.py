"""issue 16: `systemd-analyze security` of the role's unit, per deploy target.

The process target's unit is the one this scenario runs; the docker and kubernetes variants are
the same template rendered for those targets, loaded next to it under another name (never
started) and measured by the host's systemd. The limits: 3.5 for docker and kubernetes, 5.0 for
process (it keeps CAP_SETUID, CAP_SETGID and CAP_KILL, Delegate=yes and /proc in full view).
"""

import pathlib
import re
import shlex

import jinja2
import pytest
from wfa_testlib import hosts, unit

testinfra_hosts = hosts()
TEMPLATE = pathlib.Path(__file__).parents[3] / "roles/agent/templates/workflow-agent@.service.j2"


def exposure(host, name: str) -> float:
    out = host.check_output(f"systemd-analyze security --no-pager {shlex.quote(name)}")
    print(out.splitlines()[-1])  # the score, for the record
    return float(re.search(r"Overall exposure level for \S+: ([0-9.]+)", out).group(1))


def render(target: str) -> str:
    # As Ansible's template lookup renders it (trim_blocks); a unit file, not HTML.
    env = jinja2.Environment(  # noqa: S701
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True
    )
    env.filters["comment"] = lambda text: "# " + text
    return env.from_string(TEMPLATE.read_text()).render(
        ansible_managed="Ansible managed (test_hardening.py)",
        _workflow_agent_deploy_targets=[target],
        _workflow_agent_plan={
            "env_path": "/etc/workflow-agent/environment",
            "job_user": "workflow-agent-job",
            "job_home": {"path": "/var/lib/workflow-agent/job-home"},
        },
        _workflow_agent_stop_timeout=150,
        workflow_agent_user="workflow-agent",
        workflow_agent_group="workflow-agent",
        workflow_agent_config_dir="/etc/workflow-agent",
        workflow_agent_install_dir="/opt/workflow-agent",
        workflow_agent_data_dir="/var/lib/workflow-agent",
    )


def test_process_unit_scores_at_most_5(host):
    assert exposure(host, unit("1")) <= 5.0


def test_the_scenarios_unit_is_the_templates_process_variant(host):
    installed = host.file("/etc/systemd/system/workflow-agent@.service").content_string
    strip = lambda text: [x for x in text.splitlines() if not x.startswith("#")]  # noqa: E731
    assert strip(installed) == strip(render("process"))


@pytest.mark.parametrize("target", ["docker", "kubernetes"])
def test_docker_and_kubernetes_units_score_at_most_3_5(host, target):
    name = f"wfa-hardening-{target}"
    path = f"/etc/systemd/system/{name}@.service"
    text = shlex.quote(render(target))
    host.check_output(f"printf %s {text} > {path} && systemctl daemon-reload")
    try:
        assert exposure(host, f"{name}@1.service") <= 3.5
    finally:
        host.run(f"rm -f {path} && systemctl daemon-reload")
