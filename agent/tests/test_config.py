"""config: defaults, discovery, env overlay, validation and one-line, secret-free errors."""

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from workflow_agent import config as c
from workflow_agent.config import ConfigError, load_config, to_document, validate_mapping

SECRET = "pul-0123456789abcdefSECRET"
NAME = c.CONFIG_FILE_NAME
LEGACY = c.LEGACY_CONFIG_FILE_NAME


def write(directory: Path, text: str, name: str = NAME) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


@pytest.fixture
def dirs(tmp_path):
    """Empty, injected discovery directories: nothing on the real machine leaks in."""
    d = {k: tmp_path / k for k in ("cwd", "home", "etc", "exe")}
    for p in d.values():
        p.mkdir()
    return d


def load(dirs, path=None, env=None):
    return load_config(
        path,
        env=env or {},
        cwd=dirs["cwd"],
        home=dirs["home"],
        etc=dirs["etc"],
        exe_dir=dirs["exe"],
    )


def error_of(data: dict, source: str = NAME) -> str:
    with pytest.raises(ConfigError) as info:
        validate_mapping(data, source)
    text = str(info.value)
    assert "\n" not in text
    assert SECRET not in text
    return text


# --- defaults -----------------------------------------------------------------------------

DEFAULTS = {
    "service_url": "https://api.pulumi.com",
    "working_directory": "",
    "shared_volume_directory": "",
    "deploy_target": "docker",
    "single_run": False,
    "pull_image": True,
    "enabled_workflow_types": ["deployment", "insights_scan", "policy_evaluation"],
    "env_forward_allowlist": [],
    "oidc_token_file": "",
    "organization_name": "",
    "runner_pool_id": "",
    "token_expiration": None,
    "polling_interval": timedelta(minutes=1),
    "polling_interval_override": False,
    "job_status_loop_interval": timedelta(seconds=30),
    "request_timeout": timedelta(seconds=30),
    "request_retry_count": 2,
    "request_retry_wait": timedelta(seconds=20),
    "request_retry_max_wait": timedelta(minutes=2),
    "circuit_breaker_failures": 2,
    "circuit_breaker_timeout": timedelta(minutes=10),
    "http_server_port": 8080,
    "health_threshold": None,
    "syslog": False,
    "workflow_runners_directory": "",
    "workflow_runners_embeddable": "",
    "ecs": c.EcsConfig(
        cluster="",
        subnets=[],
        security_groups=[],
        launch_type="FARGATE",
        assign_public_ip=False,
        task_definition_template_file="",
    ),
    "slots": 1,
    "drain_timeout": timedelta(minutes=5),
    "log_format": "text",
    "log_level": "info",
    "debug_keep_runner": False,
    "ca_bundle": "",
    "default_image": "pulumi/pulumi:latest",
    "job_ca_bundle": False,
    "job_docker": False,
    "job_security_profile": "image",
    "process_job_user": "",
}


@pytest.mark.parametrize(("key", "value"), DEFAULTS.items())
def test_every_default(key, value):
    assert getattr(validate_mapping({"token": SECRET}), key) == value


def test_defaults_cover_every_key():
    assert set(DEFAULTS) | {"token"} == set(c.ALL_KEYS)
    assert set(c.REFERENCE_KEYS) | set(c.EXTENSION_KEYS) == set(c.ALL_KEYS)
    # The 25 keys of the docs' reference, and the 3 more of upstream's sample and newest docs.
    assert len(c.REFERENCE_KEYS) == 28
    assert set(c.INERT_KEYS) - c.IGNORED_KEYS <= set(c.REFERENCE_KEYS)


def test_token_is_secret_and_model_is_frozen():
    cfg = validate_mapping({"token": SECRET})
    assert cfg.token.get_secret_value() == SECRET
    assert SECRET not in repr(cfg)
    with pytest.raises(ValidationError):
        cfg.slots = 2


def test_effective_health_threshold():
    cfg = validate_mapping({"token": SECRET})
    assert cfg.effective_health_threshold == timedelta(minutes=2)
    cfg = validate_mapping(
        {"token": SECRET, "polling_interval": "10s", "job_status_loop_interval": "45s"}
    )
    assert cfg.effective_health_threshold == timedelta(seconds=90)
    cfg = validate_mapping({"token": SECRET, "health_threshold": "7m"})
    assert cfg.effective_health_threshold == timedelta(minutes=7)


def test_reference_empty_strings_mean_unset():
    cfg = validate_mapping({"token": SECRET, "token_expiration": "", "health_threshold": ""})
    assert cfg.token_expiration is None and cfg.health_threshold is None


def test_null_values_take_the_default():
    assert validate_mapping({"token": SECRET, "polling_interval": None}).polling_interval == (
        timedelta(minutes=1)
    )


def test_upstream_docs_version_key_is_ignored():
    assert validate_mapping({"token": SECRET, "version": "v0.0.5"}).slots == 1


def test_service_url_trailing_slashes_stripped():
    cfg = validate_mapping({"token": SECRET, "service_url": "http://127.0.0.1:8081///"})
    assert cfg.service_url == "http://127.0.0.1:8081"


def test_duplicate_workflow_types_collapse():
    cfg = validate_mapping({"token": SECRET, "enabled_workflow_types": ["deployment"] * 2})
    assert cfg.enabled_workflow_types == ["deployment"]


# --- credentials ----------------------------------------------------------------------------

OIDC = {"oidc_token_file": "/run/oidc", "organization_name": "acme", "runner_pool_id": "pool-1"}


def test_oidc_without_token_is_valid():
    cfg = validate_mapping(dict(OIDC))
    assert cfg.token is None and cfg.runner_pool_id == "pool-1"


def test_numeric_ids_from_yaml_become_strings():
    assert validate_mapping({**OIDC, "runner_pool_id": 1234}).runner_pool_id == "1234"


@pytest.mark.parametrize("missing", ["organization_name", "runner_pool_id"])
def test_oidc_needs_all_three(missing):
    data = {k: v for k, v in OIDC.items() if k != missing}
    assert error_of(data) == f"{NAME}: {missing}: required when oidc_token_file is set"


@pytest.mark.parametrize(
    "data", [{}, {"organization_name": "acme", "runner_pool_id": "p"}, {"token": ""}]
)
def test_missing_token(data):
    assert error_of(data).startswith(f"{NAME}: token: not set")


# --- validation errors --------------------------------------------------------------------

ERRORS = [
    ({"polling_interval": "5 minutes"}, 'polling_interval: "5 minutes" is not a duration'),
    ({"polling_interval": 30}, "polling_interval: 30 is not a duration: add a unit"),
    ({"polling_interval": "0s"}, 'polling_interval: "0s" must be longer than 0s'),
    ({"request_timeout": "-5s"}, 'request_timeout: "-5s" is negative'),
    ({"token_expiration": "1d"}, 'token_expiration: "1d" is not a duration'),
    ({"health_threshold": True}, "health_threshold: true is not a duration"),
    ({"pollng_interval": "1m"}, 'pollng_interval: unknown key; did you mean "polling_interval"?'),
    ({"zzz": 1}, "zzz: unknown key"),
    ({"ecs": {"clustr": "c"}}, 'ecs.clustr: unknown key; did you mean "cluster"?'),
    ({"ecs": ["c"]}, "ecs: expected a mapping of ECS settings, got a list"),
    ({"ecs": {"launch_type": "fargate"}}, 'ecs.launch_type: "fargate" is not an ECS launch'),
    ({"ecs": {"subnets": [""]}}, "ecs.subnets: expected a list of ids"),
    ({"ecs": {"assign_public_ip": "yes"}}, 'ecs.assign_public_ip: "yes" is not a boolean'),
    ({"deploy_target": "ecs"}, 'deploy_target: "ecs" is not supported by this agent (use dock'),
    ({"workflow_runners_directory": 1}, "workflow_runners_directory: expected a string"),
    ({"token_expiration": 1.5}, "token_expiration: 1.5 is not a duration"),
    ({"token_expiration": -60}, "token_expiration: -60 is negative"),
    ({"token_expiration": 0}, "token_expiration: 0 must be longer than 0s"),
    ({"deploy_target": "dokcer"}, 'did you mean "docker"?'),
    ({"enabled_workflow_types": ["deploy"]}, 'enabled_workflow_types: "deploy" is not a workflow'),
    ({"enabled_workflow_types": []}, "enabled_workflow_types: must list at least one"),
    ({"enabled_workflow_types": "deployment"}, "enabled_workflow_types: expected a list"),
    ({"env_forward_allowlist": ["A B"]}, 'env_forward_allowlist: "A B" is not an environment'),
    ({"env_forward_allowlist": "AWS_REGION"}, "env_forward_allowlist: expected a list"),
    ({"single_run": "yes"}, 'single_run: "yes" is not a boolean'),
    ({"pull_image": 1}, "pull_image: 1 is not a boolean"),
    ({"slots": 0}, "slots: 0 is out of range (1..150)"),
    ({"slots": 151}, "slots: 151 is out of range (1..150)"),
    ({"slots": 1.5}, "slots: 1.5 is not a whole number"),
    ({"http_server_port": 65536}, "http_server_port: 65536 is out of range (0..65535)"),
    ({"http_server_port": -1}, "http_server_port: -1 is out of range (0..65535)"),
    ({"request_retry_count": "two"}, 'request_retry_count: "two" is not a whole number'),
    ({"circuit_breaker_failures": 0}, "circuit_breaker_failures: 0 is out of range"),
    ({"service_url": "api.pulumi.com"}, 'service_url: "api.pulumi.com" is not an http(s) URL'),
    ({"service_url": 5}, "service_url: expected a string, got a number"),
    ({"working_directory": ["a"]}, "working_directory: expected a string, got a list"),
    ({"log_format": "xml"}, 'log_format: "xml" is not a log format'),
    ({"log_level": "verbose"}, 'log_level: "verbose" is not a log level'),
    ({"request_retry_max_wait": "10s"}, "request_retry_max_wait: 10s is shorter than"),
]


@pytest.mark.parametrize(("data", "expected"), ERRORS)
def test_validation_errors_are_one_clear_line(data, expected):
    text = error_of({"token": SECRET, **data})
    assert text.startswith(f"{NAME}: ")
    assert expected in text


@pytest.mark.parametrize("edge", [0, 65535])
def test_port_edges(edge):
    assert validate_mapping({"token": SECRET, "http_server_port": edge}).http_server_port == edge


def test_slots_upper_edge():
    assert validate_mapping({"token": SECRET, "slots": 150}).slots == 150


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (SECRET + " trailing", "contains whitespace (value not shown)"),
        (SECRET + "\x07", "contains control characters (value not shown)"),
        (12345, "expected a string, got a number (value not shown)"),
        ([SECRET], "expected a string, got a list (value not shown)"),
    ],
)
def test_bad_token_is_described_not_echoed(token, reason):
    assert error_of({"token": token}) == f"{NAME}: token: {reason}"


def test_validate_mapping_rejects_non_mapping():
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        validate_mapping(["token"], "x.yaml")


def test_non_string_key():
    assert error_of({"token": SECRET, 3: "x"}) == f"{NAME}: 3: keys must be strings"


# --- discovery and precedence -----------------------------------------------------------------


def test_discovery_order(dirs):
    for i, key in enumerate(("cwd", "home", "etc", "exe")):
        write(dirs[key], f"token: {SECRET}\nhttp_server_port: {9000 + i}\n")
    for i, key in enumerate(("cwd", "home", "etc", "exe")):
        loaded = load(dirs)
        assert loaded.source == str(dirs[key] / NAME)
        assert loaded.config.http_server_port == 9000 + i
        (dirs[key] / NAME).unlink()
    assert load(dirs, env={"PULUMI_AGENT_TOKEN": SECRET}).source is None


def test_searched_lists_the_order(dirs):
    loaded = load(dirs, env={"PULUMI_AGENT_TOKEN": SECRET})
    order = ("cwd", "home", "etc", "exe")
    assert loaded.searched == tuple(str(dirs[k] / name) for name in (NAME, LEGACY) for k in order)


def test_each_directory_is_searched_once(dirs, tmp_path):
    """cwd == $HOME (a service's default), and a symlink to a directory already searched."""
    (tmp_path / "link").symlink_to(dirs["etc"])
    loaded = load_config(
        env={"PULUMI_AGENT_TOKEN": SECRET},
        cwd=dirs["home"],
        home=dirs["home"],
        etc=dirs["etc"],
        exe_dir=tmp_path / "link",
    )
    assert loaded.searched == tuple(
        str(d / name) for name in (NAME, LEGACY) for d in (dirs["home"], dirs["etc"])
    )
    with pytest.raises(ConfigError) as info:
        load_config(env={}, cwd=dirs["home"], home=dirs["home"], etc=dirs["etc"])
    listed = str(info.value).split("looked in: ", 1)[1]
    assert listed.count(str(dirs["home"] / NAME)) == 1


@pytest.mark.parametrize("where", ["cwd", "home", "etc", "exe"])
def test_the_legacy_name_is_found_in_every_directory(dirs, where):
    path = write(dirs[where], f"token: {SECRET}\nslots: 4\n", LEGACY)
    loaded = load(dirs)
    assert loaded.source == str(path) and loaded.config.slots == 4
    assert loaded.notices == ()


def test_the_current_name_wins_over_the_legacy_one_with_a_warning(dirs):
    """Wherever each is: the current name of an /etc file beats a legacy file in cwd, as
    upstream's 2.x agent (which reads only the current name) would decide."""
    legacy = write(dirs["cwd"], f"token: {SECRET}\nslots: 1\n", LEGACY)
    current = write(dirs["etc"], f"token: {SECRET}\nslots: 2\n")
    loaded = load(dirs)
    assert loaded.source == str(current) and loaded.config.slots == 2
    [(level, text)] = loaded.notices
    assert level == "warning"
    assert text.startswith(f"{legacy}: not read: {current} (the current file name) wins")


def test_no_file_no_token_lists_both_names(dirs):
    with pytest.raises(ConfigError) as info:
        load(dirs)
    assert str(dirs["exe"] / LEGACY) in str(info.value)


def test_keys_without_effect_are_noticed_once_each(dirs):
    write(
        dirs["cwd"],
        f"token: {SECRET}\nversion: v0.0.5\nworkflow_runners_directory: $PWD\n"
        "working_directory: /opt/agent\necs:\n  cluster: jobs\n",
    )
    loaded = load(dirs, env={"PULUMI_AGENT_ECS_SUBNETS": "subnet-1", "PULUMI_AGENT_IMAGE": "x"})
    levels = {level for level, _ in loaded.notices}
    keys = [text.split(":", 1)[0] for _, text in loaded.notices]
    assert levels == {"info"}
    assert keys == [
        "version",
        "working_directory",
        "workflow_runners_directory",
        "ecs",
        "PULUMI_AGENT_IMAGE",
    ]
    assert all(": has no effect here: " in text for _, text in loaded.notices)
    assert loaded.config.ecs.cluster == "jobs" and loaded.config.ecs.subnets == ["subnet-1"]
    assert load(dirs, path=write(dirs["home"], f"token: {SECRET}\n")).notices == ()


def test_ecs_from_the_environment_merges_per_setting(dirs):
    write(dirs["cwd"], f"token: {SECRET}\necs:\n  cluster: a\n  launch_type: EC2\n")
    loaded = load(
        dirs,
        env={
            "PULUMI_AGENT_ECS_CLUSTER": "b",
            "PULUMI_AGENT_ECS_SECURITY_GROUPS": "sg-1  sg-2",
            "PULUMI_AGENT_ECS_ASSIGN_PUBLIC_IP": "true",
        },
    )
    ecs = loaded.config.ecs
    assert (ecs.cluster, ecs.launch_type, ecs.security_groups) == ("b", "EC2", ["sg-1", "sg-2"])
    assert ecs.assign_public_ip is True
    with pytest.raises(ConfigError) as info:
        load(dirs, env={"PULUMI_AGENT_ECS_LAUNCH_TYPE": "SPOT"})
    assert str(info.value).startswith("PULUMI_AGENT_ECS_LAUNCH_TYPE: ecs.launch_type: ")


@pytest.mark.parametrize("value", [3600, "3600", " 3600 "])
def test_bare_token_expiration_is_seconds_in_the_file(value):
    cfg = validate_mapping({**OIDC, "token_expiration": value})
    assert cfg.token_expiration == timedelta(hours=1)


def test_bare_token_expiration_is_seconds_in_the_environment(dirs):
    env = {c.env_var(k): v for k, v in OIDC.items()}
    loaded = load(dirs, env={**env, "PULUMI_AGENT_TOKEN_EXPIRATION": "5400"})
    assert loaded.config.token_expiration == timedelta(minutes=90)
    assert to_document(loaded.config)["token_expiration"] == "1h30m0s"


def test_directory_with_the_file_name_is_skipped(dirs):
    (dirs["cwd"] / NAME).mkdir()
    write(dirs["home"], f"token: {SECRET}\n")
    assert load(dirs).source == str(dirs["home"] / NAME)


def test_exe_dir_defaults_to_argv0_directory(tmp_path, monkeypatch, dirs):
    bindir = tmp_path / "bin"
    write(bindir, f"token: {SECRET}\nslots: 3\n")
    monkeypatch.setattr("sys.argv", [str(bindir / "workflow-agent")])
    loaded = load_config(env={}, cwd=dirs["cwd"], home=dirs["home"], etc=dirs["etc"])
    assert loaded.source == str(bindir / NAME) and loaded.config.slots == 3


def test_explicit_path_and_env_config_win_over_discovery(dirs, tmp_path):
    write(dirs["cwd"], f"token: {SECRET}\nslots: 1\n")
    by_env = write(tmp_path / "env", f"token: {SECRET}\nslots: 2\n", "a.yaml")
    by_arg = write(tmp_path / "arg", f"token: {SECRET}\nslots: 3\n", "b.yaml")
    assert load(dirs, env={"PULUMI_AGENT_CONFIG": str(by_env)}).config.slots == 2
    assert load(dirs, path=by_arg, env={"PULUMI_AGENT_CONFIG": str(by_env)}).config.slots == 3
    assert load(dirs).config.slots == 1


def test_env_beats_file_and_origins_say_so(dirs):
    path = write(dirs["cwd"], f"token: {SECRET}\npolling_interval: 5m\nslots: 2\n")
    loaded = load(dirs, env={"PULUMI_AGENT_POLLING_INTERVAL": "90s"})
    assert loaded.config.polling_interval == timedelta(seconds=90)
    assert loaded.config.slots == 2
    assert loaded.origins["polling_interval"] == "PULUMI_AGENT_POLLING_INTERVAL"
    assert loaded.origins["slots"] == str(path)
    assert loaded.origins["request_timeout"] == "default"


def test_no_file_no_token_names_the_current_file(dirs):
    with pytest.raises(ConfigError) as info:
        load(dirs)
    text = str(info.value)
    assert text.startswith(f"{NAME}: no config file found (looked in: {dirs['cwd'] / NAME}")
    assert "PULUMI_AGENT_TOKEN is not set" in text


def test_env_only_oidc(dirs):
    env = {c.env_var(k): v for k, v in OIDC.items()}
    loaded = load(dirs, env=env)
    assert loaded.source is None and loaded.config.organization_name == "acme"


# --- env overlay formats --------------------------------------------------------------------


def env_config(dirs, **env):
    return load(dirs, env={"PULUMI_AGENT_TOKEN": SECRET, **env}).config


def test_env_lists(dirs):
    cfg = env_config(
        dirs,
        PULUMI_AGENT_ENABLED_WORKFLOW_TYPES=" deployment, policy_evaluation,",
        PULUMI_AGENT_ENV_FORWARD_ALLOWLIST="AWS_REGION  AWS_PROFILE\tX",
    )
    assert cfg.enabled_workflow_types == ["deployment", "policy_evaluation"]
    assert cfg.env_forward_allowlist == ["AWS_REGION", "AWS_PROFILE", "X"]


@pytest.mark.parametrize("raw", ["1", "t", "T", "TRUE", "true", "True"])
def test_env_true_like_go(dirs, raw):
    assert env_config(dirs, PULUMI_AGENT_SINGLE_RUN=raw).single_run is True


@pytest.mark.parametrize("raw", ["0", "f", "F", "FALSE", "false", "False"])
def test_env_false_like_go(dirs, raw):
    assert env_config(dirs, PULUMI_AGENT_PULL_IMAGE=raw).pull_image is False


def test_env_ints_durations_and_strings(dirs):
    cfg = env_config(
        dirs,
        PULUMI_AGENT_HTTP_SERVER_PORT="9100",
        PULUMI_AGENT_SLOTS="+4",
        PULUMI_AGENT_JOB_STATUS_LOOP_INTERVAL="1.5s",
        PULUMI_AGENT_SERVICE_URL="http://127.0.0.1:1/",
        PULUMI_AGENT_DEPLOY_TARGET="process",
    )
    assert (cfg.http_server_port, cfg.slots) == (9100, 4)
    assert cfg.job_status_loop_interval == timedelta(seconds=1.5)
    assert cfg.service_url == "http://127.0.0.1:1"
    assert cfg.deploy_target == "process"


def test_empty_env_var_counts_as_unset(dirs):
    assert env_config(dirs, PULUMI_AGENT_POLLING_INTERVAL="").polling_interval == timedelta(
        minutes=1
    )


def test_non_key_env_vars_are_ignored(dirs):
    cfg = env_config(
        dirs,
        PULUMI_AGENT_IMAGE="local/agent:1",
        PULUMI_AGENT_IMAGE_PULL_POLICY="Never",
        PULUMI_AGENT_NUM_CPUS="2",
        PULUMI_AGENT_MEM_QUANTITY="4",
        PULUMI_AGENT_DEBUG_POD="true",
        PULUMI_AGENT_SERVICE_ACCOUNT_NAME="sa",
    )
    assert cfg == validate_mapping({"token": SECRET})


@pytest.mark.parametrize(
    ("var", "raw", "expected"),
    [
        ("PULUMI_AGENT_SYSLOG", "yes", 'PULUMI_AGENT_SYSLOG: syslog: "yes" is not a boolean'),
        ("PULUMI_AGENT_SLOTS", "1.0", 'PULUMI_AGENT_SLOTS: slots: "1.0" is not a whole number'),
        ("PULUMI_AGENT_REQUEST_TIMEOUT", "30", 'REQUEST_TIMEOUT: request_timeout: "30" is not'),
        ("PULUMI_AGENT_ENABLED_WORKFLOW_TYPES", "deployment insights_scan", "is not a workflow"),
        ("PULUMI_AGENT_TOKEN", SECRET + "\x01", "PULUMI_AGENT_TOKEN: token: contains control"),
    ],
)
def test_env_errors_name_the_variable(dirs, var, raw, expected):
    write(dirs["cwd"], f"token: {SECRET}\n")
    with pytest.raises(ConfigError) as info:
        load(dirs, env={var: raw})
    assert expected in str(info.value)
    assert str(info.value).startswith(var + ": ")
    assert SECRET not in str(info.value)


# --- files ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("# only a comment\n", "the file is empty"),
        ("- token\n", "top level must be a mapping of settings, got a list"),
        ("just words\n", "top level must be a mapping of settings, got a string"),
        (f"token: {SECRET}\nslots: [1\n", "line 3: invalid YAML"),
        (f'token: "{SECRET}\n', "invalid YAML"),
        (f"token: {SECRET}\nslots: 1\nslots: 2\n", "line 3: invalid YAML: duplicate key 'slots'"),
        (f"token: {SECRET}\n\tslots: 2\n", "line 2: invalid YAML"),
    ],
)
def test_file_errors(dirs, text, expected):
    path = write(dirs["cwd"], text)
    with pytest.raises(ConfigError) as info:
        load(dirs)
    assert str(info.value).startswith(f"{path}: ")
    assert expected in str(info.value)
    assert SECRET not in str(info.value) and "\n" not in str(info.value)


def test_errors_name_the_file_and_key(dirs):
    path = write(dirs["cwd"], f"token: {SECRET}\npolling_interval: 5 minutes\n")
    with pytest.raises(ConfigError) as info:
        load(dirs)
    assert str(info.value) == (
        f'{path}: polling_interval: "5 minutes" is not a duration (examples: 30s, 1m, 1h30m)'
    )
    assert (info.value.source, info.value.key) == (str(path), "polling_interval")


def test_unreadable_files(dirs, tmp_path):
    with pytest.raises(ConfigError, match="cannot read: No such file"):
        load(dirs, path=tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="cannot read: is a directory"):
        load(dirs, path=tmp_path)
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"token: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"not valid UTF-8 \(byte offset 10\)"):
        load(dirs, path=bad)


# --- to_document ------------------------------------------------------------------------------


def test_to_document_masks_and_formats():
    cfg = validate_mapping({"token": SECRET, "polling_interval": "90s", "slots": 3})
    doc = to_document(cfg)
    assert doc["token"] == "***"
    assert doc["polling_interval"] == "1m30s"
    assert doc["request_retry_max_wait"] == "2m0s"
    assert doc["token_expiration"] == ""
    assert doc["slots"] == 3
    assert "drain_timeout" not in doc and "log_level" not in doc
    assert list(doc)[:28] == list(c.REFERENCE_KEYS)
    assert doc["ecs"]["launch_type"] == "FARGATE"
    assert to_document(cfg, reveal_secrets=True)["token"] == SECRET
    assert set(to_document(cfg, include_defaults=True)) == set(c.ALL_KEYS)


def test_to_document_round_trips():
    cfg = validate_mapping(
        {"token": SECRET, "health_threshold": "3m", "log_format": "json", **OIDC}
    )
    assert validate_mapping(to_document(cfg, reveal_secrets=True)) == cfg


def test_to_document_without_token():
    assert to_document(validate_mapping(dict(OIDC)))["token"] == ""


# --- fuzz -------------------------------------------------------------------------------------

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


@settings(max_examples=300)
@given(
    st.dictionaries(
        st.sampled_from(c.ALL_KEYS) | st.text(max_size=10) | st.integers(), _values, max_size=6
    )
)
def test_validate_mapping_raises_only_config_error(data):
    try:
        cfg = validate_mapping(data, "fuzz.yaml")
    except ConfigError as exc:
        assert "\n" not in str(exc)
        assert str(exc).startswith("fuzz.yaml: ")
        return
    assert isinstance(cfg, c.AgentConfig)
