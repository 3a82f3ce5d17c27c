"""Deployment jobs shaped like the service's (POST /admin/deployments): step 0 reserved, the
executor's steps, the PULUMI_CI_* variables [DOC] and a PULUMI_ACCESS_TOKEN scoped to the job."""

import json

import pytest
from emu_helpers import STEPS

SOURCE = {"url": "git://127.0.0.1:9418/base", "branch": "main", "repoDir": "infra"}


def served(agent) -> tuple[dict, dict]:
    claim = agent.claim()
    resp = agent.job(claim).definition()
    assert resp.status_code == 200, resp.text
    return claim, resp.json()


def test_the_definition_is_shaped_like_the_service_s(emu, agent):
    job = emu.create_deployment(
        f"{emu.org}/base/dev",
        SOURCE,
        config={"greeting": "hi", "word": {"value": "s3cr3t", "secret": True}},
        pre_run_commands=['echo one >> "$PULUMI_ENV"', "true"],
        env={"MINE": "1", "HIDDEN": {"secret": "x"}},
    )
    claim, d = served(agent)
    assert claim["jobID"] == job
    assert d["image"] == {"reference": "pulumi/pulumi:latest", "isDefault": True}
    assert [s["name"] for s in d["steps"]] == [
        "Get source",
        "Clone",
        "Pre-run command 1",
        "Pre-run command 2",
        "Pulumi update",
    ]
    assert [s["run"] for s in d["steps"][1:]] == [
        '"$PULUMI_DEPLOY_EXECUTOR" clone',
        'echo one >> "$PULUMI_ENV"',
        "true",
        '"$PULUMI_DEPLOY_EXECUTOR" update',
    ]
    assert all("workingDir" not in s for s in d["steps"]) and "shell" not in d
    env = d["env"]
    token = env.pop("PULUMI_ACCESS_TOKEN")["secret"]
    assert token.startswith("pul-") and token not in (claim["jobToken"], emu.pool_token)
    config = json.loads(env.pop("PULUMI_DEPLOY_CONFIG")["secret"])
    assert config == {
        "greeting": {"value": "hi", "secret": False},
        "word": {"value": "s3cr3t", "secret": True},
    }
    assert env == {
        "PULUMI_CI_SYSTEM": "Pulumi Deployments",
        "PULUMI_CI_BUILD_ID": claim["deploymentID"],
        "PULUMI_CI_BUILD_NUMBER": "1",
        "PULUMI_CI_BUILD_URL": f"{emu.url}/admin/jobs/{job}",
        "PULUMI_CI_ORGANIZATION": emu.org,
        "PULUMI_CI_PROJECT": "base",
        "PULUMI_CI_STACK": "dev",
        "PULUMI_CI_OPERATION": "update",
        "PULUMI_DEPLOY_SOURCE_URL": SOURCE["url"],
        "PULUMI_DEPLOY_SOURCE_BRANCH": "main",
        "PULUMI_DEPLOY_SOURCE_REPO_DIR": "infra",
        "PULUMI_DEPLOY_BACKEND_URL": f"{emu.url}/api/stand-in/backend/{emu.org}",
        "MINE": "1",
        "HIDDEN": {"secret": "x"},
    }
    # The admin view names the stack and hides the secrets.
    view = emu.job(job)
    assert view["deployment"] == {
        "org": emu.org,
        "project": "base",
        "stack": "dev",
        "operation": "update",
    }
    assert view["env"]["PULUMI_DEPLOY_CONFIG"] == "[secret]"
    assert "PULUMI_ACCESS_TOKEN" not in view["env"]  # made when served, stored nowhere


def test_each_deployment_has_its_own_token_and_the_stack_s_next_build_number(emu, agent):
    emu.create_deployment("dev", {"url": "git://x/r"}, project="base", operation="preview")
    emu.create_deployment(f"{emu.org}/base/dev", {"url": "git://x/r"}, operation="destroy")
    emu.create_deployment(f"{emu.org}/app/dev", {"url": "git://x/r"})
    emu.create_job(STEPS)  # a generic job takes no build number
    defs = [served(agent)[1] for _ in range(3)]
    tokens = {d["env"]["PULUMI_ACCESS_TOKEN"]["secret"] for d in defs}
    assert len(tokens) == 3
    assert [d["env"]["PULUMI_CI_BUILD_NUMBER"] for d in defs] == ["1", "2", "1"]
    assert [d["steps"][-1]["run"].split()[-1] for d in defs] == ["preview", "destroy", "update"]
    assert "PULUMI_DEPLOY_CONFIG" not in defs[0]["env"]  # no config, no variable
    assert "PULUMI_DEPLOY_SOURCE_BRANCH" not in defs[0]["env"]  # the remote's default branch


def test_a_named_image_is_not_the_default(emu, agent):
    emu.create_deployment(f"{emu.org}/p/s", {"url": "u"}, image="local/pulumi:1")
    emu.create_deployment(
        f"{emu.org}/p/s", {"url": "u"}, image={"reference": "x:1", "isDefault": True}
    )
    assert served(agent)[1]["image"] == {"reference": "local/pulumi:1", "isDefault": False}
    assert served(agent)[1]["image"] == {"reference": "x:1", "isDefault": True}


def test_the_token_survives_a_restart(emu, agent):
    emu.create_deployment(f"{emu.org}/p/s", {"url": "u"})
    claim, before = served(agent)
    emu.restart()
    after = agent.job(claim).definition().json()
    assert after["env"]["PULUMI_ACCESS_TOKEN"] == before["env"]["PULUMI_ACCESS_TOKEN"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({}, "stack must be"),
        ({"stack": "a/b"}, "stack must be"),
        ({"stack": "other/p/s", "source": {"url": "u"}}, "the stack's organization 'other'"),
        ({"stack": "default/p/s"}, "source must be"),
        ({"stack": "default/p/s", "source": {"url": "u", "ref": "x"}}, "source: unknown field"),
        ({"stack": "default/p/s", "source": {"url": "u", "repoDir": "../x"}}, "source.repoDir"),
        ({"stack": "default/p/s", "source": {"url": "u", "branch": "-x"}}, "source.branch"),
        ({"stack": "default/p/s x", "source": {"url": "u"}}, "stack must be a name"),
        ({"stack": "default/p/s", "source": {"url": "u"}, "operation": "up"}, "operation must"),
        ({"stack": "default/p/s", "source": {"url": "u"}, "config": {"k": 1}}, "config.k must"),
        ({"stack": "default/p/s", "source": {"url": "u"}, "preRunCommands": [""]}, "preRunCom"),
        (
            {"stack": "default/p/s", "source": {"url": "u"}, "env": {"PULUMI_CI_STACK": "x"}},
            "env PULUMI_CI_STACK: set by the service",
        ),
        (
            {"stack": "default/p/s", "source": {"url": "u"}, "env": {"PULUMI_DEPLOY_X": "x"}},
            "env PULUMI_DEPLOY_X: set by the service",
        ),
        (
            {
                "stack": "default/p/s",
                "source": {"url": "u"},
                "image": {"reference": "x", "isDefault": 1},
            },
            "image.isDefault",
        ),
        (
            {"stack": "default/p/s", "source": {"url": "u"}, "steps": []},
            "unknown deployment field(s): steps",
        ),
    ],
)
def test_bad_deployments_are_refused_with_one_message(emu, body, error):
    resp = emu.admin("POST", "/admin/deployments", body)
    assert resp.status_code == 400 and resp.json()["error"].startswith(error), resp.text
    assert emu.jobs() == []
