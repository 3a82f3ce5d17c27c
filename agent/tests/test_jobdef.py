"""jobdef: claims and job definitions from the service, and the job environment."""

import pytest
from workflow_agent.jobdef import BadPayload, Claim, build_env, parse_definition

CLAIM = {
    "jobID": "j1",
    "jobToken": "jt-secret",
    "oidcToken": "oidc-secret",
    "runID": "r1",
    "typeSpecificID": "dep-1",
    "deploymentID": "dep-1",
}


def test_claim_parses_and_hides_tokens():
    claim = Claim.parse(CLAIM)
    assert (claim.job_id, claim.run_id, claim.type_specific_id, claim.type) == (
        "j1",
        "r1",
        "dep-1",
        "deployment",
    )
    assert "jt-secret" not in repr(claim) and "oidc-secret" not in repr(claim)


def test_claim_deprecated_alias_and_lease_type():
    claim = Claim.parse({"jobID": "j", "jobToken": "t", "deploymentID": "d"})
    assert claim.type_specific_id == "d" and claim.run_id == ""
    lease = Claim.parse({**CLAIM, "type": "insights_scan"}, default_type="policy_evaluation")
    assert lease.type == "insights_scan"
    assert Claim.parse({"jobID": "j", "jobToken": "t"}, "policy_evaluation").type == (
        "policy_evaluation"
    )


@pytest.mark.parametrize(
    "data",
    [None, [], "x", {}, {"jobID": "j"}, {"jobID": 5, "jobToken": "t"}, {**CLAIM, "runID": 3}],
)
def test_bad_claims(data):
    with pytest.raises(BadPayload):
        Claim.parse(data)


DEFINITION = {
    "os": "linux",
    "architecture": "amd64",
    "image": {
        "reference": "local/job:1",
        "credentials": {"username": "u", "password": {"secret": "registry-pass"}},
    },
    "timeout": "1h0m0s",
    "env": {"PLAIN": "v", "SECRET_ONE": {"secret": "s3cr3t-value"}},
    "steps": [
        {"name": "checkout", "run": "git clone"},
        {"name": "build", "run": "make", "timeout": "10m"},
        {"name": "test", "run": "make test"},
    ],
}


def test_definition_parses_and_skips_step_zero():
    d = parse_definition(DEFINITION)
    assert d.image == "local/job:1"
    assert d.credentials == ("u", "registry-pass")
    assert d.timeout == 3600.0
    assert d.env == {"PLAIN": "v", "SECRET_ONE": "s3cr3t-value"}
    assert set(d.secrets) == {"registry-pass", "s3cr3t-value"}
    assert [(s.index, s.name, s.run, s.timeout) for s in d.steps] == [
        (1, "build", "make", 600.0),
        (2, "test", "make test", None),
    ]
    assert "s3cr3t-value" not in repr(d) and "registry-pass" not in repr(d)


def test_minimal_definition():
    d = parse_definition({"image": {"reference": "x"}, "steps": [{"name": "c"}]})
    assert d.steps == () and d.timeout is None and d.env == {} and d.credentials is None


@pytest.mark.parametrize(
    ("patch", "reason"),
    [
        ({"steps": None}, "steps: expected a list"),
        ({"steps": "run"}, "steps: expected a list"),
        ({"steps": [{}, "x"]}, r"steps\[1\]: expected an object"),
        ({"timeout": "1 hour"}, "timeout: '1 hour' is not a duration"),
        ({"timeout": 60}, "timeout: expected a duration string"),
        ({"timeout": "-1s"}, "not a positive duration"),
        ({"steps": [{}, {"timeout": "x"}]}, r"steps\[1\].timeout"),
        ({"env": {"A": 1}}, "env.A: expected a string"),
        ({"env": {"A": {"secret": 1}}}, "env.A"),
        ({"env": {"A=B": "x"}}, "is not a variable name"),
        ({"env": ["A"]}, "env: expected an object"),
        ({"image": "local/x"}, "image: expected an object"),
        ({"image": {"reference": "x", "credentials": "u:p"}}, "credentials: expected an object"),
        ({"steps": [{}, {"run": ["make"]}]}, "run: expected a non-empty string"),
    ],
)
def test_bad_definitions(patch, reason):
    with pytest.raises(BadPayload, match=reason):
        parse_definition({**DEFINITION, **patch})


def test_env_is_job_env_plus_allowlist_plus_docker_host_only():
    host = {
        "AWS_REGION": "eu-west-1",
        "HOME": "/root",
        "PATH": "/usr/bin",
        "DOCKER_HOST": "unix:///run/docker.sock",
        "UNLISTED": "x",
    }
    env, refused = build_env({"PLAIN": "v"}, ["AWS_REGION", "NOT_SET"], host)
    assert env == {
        "PLAIN": "v",
        "AWS_REGION": "eu-west-1",
        "DOCKER_HOST": "unix:///run/docker.sock",
    }
    assert refused == []


def test_env_without_docker_host():
    env, _ = build_env({}, [], {"PATH": "/bin"})
    assert env == {}


def test_allowlisted_host_values_override_the_job_env():
    env, _ = build_env({"AWS_REGION": "us-east-1"}, ["AWS_REGION"], {"AWS_REGION": "eu-west-1"})
    assert env["AWS_REGION"] == "eu-west-1"


def test_agent_credentials_are_never_forwarded():
    host = {"PULUMI_AGENT_TOKEN": "pul-abc123", "MY_TOKEN": "Bearer pul-abc123", "OK": "1"}
    env, refused = build_env({}, ["PULUMI_AGENT_TOKEN", "MY_TOKEN", "OK"], host, ["pul-abc123"])
    assert env == {"OK": "1"}
    assert refused == ["PULUMI_AGENT_TOKEN", "MY_TOKEN"]
