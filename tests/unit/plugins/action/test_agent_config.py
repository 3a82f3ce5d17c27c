"""agent_config action plugin: rendering with the agent's schema, masking, diff, errors.

The pure parts (render, mask, diff, validate) run against the real vendored schema. run() is
driven with a stand-in for the host side (slurp and the copy action): a unit test has no host.
tests/system/test_plugins_agent_config.py runs the plugin for real through ansible-playbook.
"""

from __future__ import annotations

import base64
import hashlib
import sys
from unittest.mock import MagicMock

import pytest
import yaml
from ansible.errors import AnsibleActionFail
from ansible.playbook.task import Task
from ansible_collections.selfhosted.workflow_agent.plugins.action import agent_config as plugin
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import _agent_schema

TOKEN = "pul-0123456789abcdef0123456789abcdef01234567"
OTHER = "pul-fedcba9876543210fedcba9876543210fedcba98"


@pytest.fixture(scope="module")
def schema():
    return plugin.load_schema()


def render(schema, config, reveal=True):
    mod, yml = schema
    cfg = plugin.validate(mod, config)
    return plugin.render(mod, yml, cfg, set(config), reveal_secrets=reveal)


# --- the schema is the vendored agent's, imported lazily ------------------------------------


def test_schema_comes_from_the_collections_agent_source(schema):
    mod, _yml = schema
    assert mod.__file__.startswith(_agent_schema.AGENT_SRC)
    assert _agent_schema.AGENT_SRC.endswith("/agent/src")


def test_missing_pydantic_names_the_requirements_file(monkeypatch):
    monkeypatch.setitem(sys.modules, "pydantic", None)  # makes `import pydantic` fail
    with pytest.raises(AnsibleActionFail) as err:
        plugin.load_schema()
    msg = str(err.value)
    assert msg.startswith("agent_config: ") and "lacks pydantic" in msg
    assert "pip install -r " + _agent_schema.REQUIREMENTS in msg
    assert _agent_schema.REQUIREMENTS.endswith("/requirements.txt")


def test_missing_agent_source_is_a_clear_failure(monkeypatch, tmp_path):
    monkeypatch.setattr(_agent_schema, "AGENT_SRC", str(tmp_path / "agent" / "src"))
    with pytest.raises(AnsibleActionFail, match="config schema is missing from the collection"):
        plugin.load_schema()


# --- rendering ------------------------------------------------------------------------------


def test_render_normalizes_the_given_keys_in_schema_order(schema):
    text = render(
        schema,
        {
            "slots": "3",
            "polling_interval": "90s",
            "service_url": "http://emulator:8080/",
            "token": TOKEN,
            "enabled_workflow_types": ["deployment", "deployment"],
            "organization_name": 1234,
        },
    )
    assert text.startswith(plugin.HEADER)
    doc = yaml.safe_load(text)
    assert list(doc) == [
        "token",
        "service_url",
        "enabled_workflow_types",
        "organization_name",
        "polling_interval",
        "slots",
    ]
    assert doc == {
        "token": TOKEN,
        "service_url": "http://emulator:8080",
        "enabled_workflow_types": ["deployment"],
        "organization_name": "1234",
        "polling_interval": "1m30s",
        "slots": 3,
    }


def test_render_leaves_out_null_and_ignored_keys(schema):
    mod, yml = schema
    config = {"token": TOKEN, "ca_bundle": None, "version": 2}
    cfg = plugin.validate(mod, config)
    given = {k for k, v in config.items() if v is not None and k in mod.ALL_KEYS}
    doc = yaml.safe_load(plugin.render(mod, yml, cfg, given, reveal_secrets=True))
    assert doc == {"token": TOKEN}


def test_rendered_file_is_what_the_agent_loads(schema, tmp_path):
    mod, _yml = schema
    path = tmp_path / "pulumi-workflow-agent.yaml"
    path.write_text(render(schema, {"token": TOKEN, "drain_timeout": "90m", "slots": 2}))
    loaded = mod.load_config(path, env={}).config
    assert loaded.token.get_secret_value() == TOKEN
    assert loaded.slots == 2
    assert mod.durations.format(loaded.drain_timeout) == "1h30m0s"


def test_render_is_stable(schema):
    config = {"token": TOKEN, "polling_interval": "1m", "env_forward_allowlist": ["B", "A"]}
    assert render(schema, config) == render(schema, dict(reversed(list(config.items()))))


def test_masked_render_hides_the_token(schema):
    text = render(schema, {"token": TOKEN, "slots": 2}, reveal=False)
    assert TOKEN not in text
    assert yaml.safe_load(text)["token"] == "***"


def test_plain_strips_string_subclasses():
    class Tagged(str):
        pass

    out = _agent_schema.plain({Tagged("token"): Tagged("x"), "l": (Tagged("a"), 1, True, None)})
    assert out == {"token": "x", "l": ["a", 1, True, None]}
    assert next(iter(out)).__class__ is str
    assert out["token"].__class__ is str


# --- bad config: one message naming the key, never the secret -------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"token": TOKEN, "polling_interval": "5x"},
            'agent_config: config.polling_interval: "5x" is not a duration',
        ),
        ({"token": TOKEN, "slots": 0}, "agent_config: config.slots: 0 is out of range (1..150)"),
        ({"tokne": TOKEN}, 'agent_config: config.tokne: unknown key; did you mean "token"?'),
        ({"service_url": "https://x"}, "agent_config: config.token: not set"),
        ({"token": "pul-a b"}, "agent_config: config.token: contains whitespace (value not shown)"),
        ({"token": TOKEN, "deploy_target": "ecs"}, 'config.deploy_target: "ecs" is not supported'),
    ],
)
def test_bad_config_names_the_key(schema, config, message):
    mod, _yml = schema
    with pytest.raises(AnsibleActionFail) as err:
        plugin.validate(mod, config)
    assert message in str(err.value)
    assert "pul-a b" not in str(err.value)
    assert TOKEN not in str(err.value)


# --- masking and diff -----------------------------------------------------------------------


def test_mask_text_hides_known_values_token_lines_and_token_shapes():
    text = (
        "# old file\n"
        "token: " + OTHER + "\n"
        "  token:   'quoted-secret'\n"
        "service_url: https://x\n"
        "note: leftover " + TOKEN + " here\n"
        "token_expiration: 1h\n"
    )
    masked = plugin.mask_text(text, ["quoted-secret"], ["token"])
    assert OTHER not in masked and TOKEN not in masked and "quoted-secret" not in masked
    assert "token: '***'" in masked
    assert "token_expiration: 1h" in masked
    assert "service_url: https://x" in masked


def diff_for(schema, config, before):
    mod, yml = schema
    cfg = plugin.validate(mod, config)
    return plugin.masked_diff(mod, yml, cfg, set(config), before, "/etc/agent.yaml")


def test_diff_of_a_new_file(schema):
    diff = diff_for(schema, {"token": TOKEN, "slots": 2}, None)
    assert diff["before"] == ""
    assert diff["before_header"] == "/etc/agent.yaml (absent)"
    assert "token: '***'" in diff["after"]
    assert TOKEN not in repr(diff)


def test_diff_shows_a_changed_setting_and_masks_both_tokens(schema):
    before = render(schema, {"token": OTHER, "slots": 1})
    diff = diff_for(schema, {"token": TOKEN, "slots": 2}, before)
    assert TOKEN not in repr(diff) and OTHER not in repr(diff)
    assert "slots: 1" in diff["before"] and "slots: 2" in diff["after"]
    assert "token: '***'" in diff["before"]
    # A changed token is visible as a change, without either value.
    assert "token: '*** changed'" in diff["after"]


def test_diff_same_token_is_not_marked_changed(schema):
    before = render(schema, {"token": TOKEN, "slots": 1})
    diff = diff_for(schema, {"token": TOKEN, "slots": 2}, before)
    assert "token: '***'" in diff["after"]
    assert "changed" not in diff["after"]
    before_lines = diff["before"].splitlines()
    after_lines = diff["after"].splitlines()
    assert [a for a, b in zip(before_lines, after_lines, strict=True) if a != b] == ["slots: 1"]


def test_diff_of_a_hand_written_file_hides_its_token(schema):
    before = "token: '" + OTHER + "'\nslots: 1\n"
    diff = diff_for(schema, {"token": TOKEN}, before)
    assert OTHER not in repr(diff) and TOKEN not in repr(diff)


# --- run(): the action itself, with a stand-in host -----------------------------------------


class FakeHost:
    """Stands in for the managed host: a file store for stat, slurp and the copy action."""

    def __init__(self, files=None, copy_result=None):
        self.files = dict(files or {})
        self.attrs = {path: {"mode": "0600", "owner": "workflow-agent"} for path in self.files}
        self.calls = []
        self.copy_calls = []
        self.copy_result = copy_result

    def execute_module(self, module_name, module_args, task_vars):
        self.calls.append(module_name)
        if module_name == "ansible.legacy.stat":
            path = module_args["path"]
            assert module_args["checksum_algorithm"] == "sha1"
            if path not in self.files:
                return {"stat": {"exists": False}}
            attrs = self.attrs[path]
            return {
                "stat": {
                    "exists": True,
                    "isreg": True,
                    "checksum": hashlib.sha1(self.files[path]).hexdigest(),  # noqa: S324 - as stat
                    "mode": attrs["mode"],
                    "pw_name": attrs["owner"],
                    "uid": 990,
                }
            }
        assert module_name == "ansible.legacy.slurp"
        data = self.files.get(module_args["src"])
        if data is None:
            return {"failed": True, "msg": "File not found: " + module_args["src"]}
        return {"content": base64.b64encode(data).decode(), "encoding": "base64"}

    def copy_action(self, task):
        host = self

        class Copy:
            def run(self, task_vars):
                host.copy_calls.append(task)
                if host.copy_result is not None:
                    return host.copy_result
                dest = task.args["dest"]
                new = task.args["content"].encode()
                attrs = {"mode": task.args["mode"], "owner": task.args.get("owner", "root")}
                changed = host.files.get(dest) != new or host.attrs.get(dest) != attrs
                if changed and not task.check_mode:
                    host.files[dest] = new
                    host.attrs[dest] = attrs
                return {"changed": changed}

        return Copy()


def make_action(args, host, check_mode=False, diff=False):
    task = Task()
    task.action = "selfhosted.workflow_agent.agent_config"
    task.args = args
    task.check_mode = check_mode
    task.diff = diff
    connection = MagicMock()
    connection._shell.tmpdir = "/tmp/fake-remote-tmp"
    loader_obj = MagicMock()
    loader_obj.action_loader.get.side_effect = lambda name, task, **kw: host.copy_action(task)
    action = plugin.ActionModule(
        task=task,
        connection=connection,
        play_context=MagicMock(),
        loader=MagicMock(),
        templar=MagicMock(),
        shared_loader_obj=loader_obj,
    )
    action._shared_loader_obj = loader_obj  # ActionBase ignores the argument in ansible-core 2.19
    action._execute_module = host.execute_module
    action._remove_tmp_path = lambda path: None
    return action


STAT_ARGS = {"path": "/etc/wa/a.yaml", "checksum_algorithm": "sha1"}
ARGS = {
    "dest": "/etc/wa/a.yaml",
    "config": {"token": TOKEN, "slots": 2},
    "owner": "workflow-agent",
}


def test_run_writes_via_copy_with_no_log_and_no_copy_diff():
    host = FakeHost()
    result = make_action(dict(ARGS), host, diff=True).run(task_vars={})
    assert result["changed"] is True
    assert result["dest"] == "/etc/wa/a.yaml"
    assert result["config"]["token"] == "***"
    assert result["config"]["polling_interval"] == "1m0s"  # effective: defaults included
    (call,) = host.copy_calls
    assert call.no_log is True and call.diff is False
    assert call.args["mode"] == "0600" and call.args["owner"] == "workflow-agent"
    assert "group" not in call.args
    assert TOKEN in host.files["/etc/wa/a.yaml"].decode()
    assert TOKEN not in repr(result)
    assert "token: '***'" in result["diff"]["after"]


@pytest.mark.parametrize(
    ("drain", "seconds"), [(None, 300), ("90s", 90), ("1h1m", 3660), ("1.5s", 2), ("0s", 0)]
)
def test_the_drain_timeout_in_seconds_rounded_up(drain, seconds):
    args = dict(ARGS, config={**ARGS["config"], "drain_timeout": drain})
    result = make_action(args, FakeHost()).run(task_vars={})
    assert result["drain_timeout_seconds"] == seconds


def test_run_twice_is_idempotent_with_one_look_at_the_host():
    host = FakeHost()
    make_action(dict(ARGS), host).run(task_vars={})
    host.calls.clear()
    host.copy_calls.clear()
    again = make_action(dict(ARGS), host, diff=True).run(task_vars={})
    assert again["changed"] is False
    assert "diff" not in again
    # An unchanged file costs one stat: no read, no copy.
    assert host.calls == ["ansible.legacy.stat"]
    assert host.copy_calls == []


def test_mode_drift_is_left_to_copy():
    host = FakeHost()
    make_action(dict(ARGS), host).run(task_vars={})
    host.attrs["/etc/wa/a.yaml"]["mode"] = "0644"
    again = make_action(dict(ARGS), host).run(task_vars={})
    assert again["changed"] is True
    assert host.attrs["/etc/wa/a.yaml"]["mode"] == "0600"


def test_a_current_stat_that_matches_spares_the_host():
    host = FakeHost()
    make_action(dict(ARGS), host).run(task_vars={})
    seen = host.execute_module("ansible.legacy.stat", STAT_ARGS, {})["stat"]
    host.calls.clear()
    result = make_action(dict(ARGS, current=seen), host).run(task_vars={})
    assert result["changed"] is False
    assert host.calls == [] and len(host.copy_calls) == 1  # only the first run's copy


def test_a_current_stat_that_differs_asks_the_host():
    host = FakeHost(files={"/etc/wa/a.yaml": b"token: " + OTHER.encode() + b"\n"})
    seen = host.execute_module("ansible.legacy.stat", STAT_ARGS, {})["stat"]
    host.calls.clear()
    result = make_action(dict(ARGS, current=seen), host).run(task_vars={})
    assert result["changed"] is True
    assert host.calls == ["ansible.legacy.stat"] and len(host.copy_calls) == 1
    assert TOKEN in host.files["/etc/wa/a.yaml"].decode()
    # What the caller saw is outdated (the host has the wanted file by now): the host's own
    # answer decides, and nothing is written.
    host.calls.clear()
    result = make_action(dict(ARGS, current=seen), host).run(task_vars={})
    assert result["changed"] is False
    assert host.calls == ["ansible.legacy.stat"] and len(host.copy_calls) == 1


@pytest.mark.parametrize(
    ("mode", "want"),
    [("0600", "0600"), ("600", "0600"), (0o600, "0600"), ("u=rw", None), (True, None)],
)
def test_octal_mode(mode, want):
    assert plugin.octal_mode(mode) == want


def test_check_mode_on_a_fresh_host_predicts_without_copy():
    host = FakeHost()
    result = make_action(dict(ARGS), host, check_mode=True, diff=True).run(task_vars={})
    assert result["changed"] is True
    assert host.copy_calls == [] and host.files == {}
    assert result["diff"]["before"] == ""


def test_check_mode_on_an_existing_file_asks_copy_in_check_mode():
    host = FakeHost(files={"/etc/wa/a.yaml": b"token: " + OTHER.encode() + b"\n"})
    result = make_action(dict(ARGS), host, check_mode=True, diff=True).run(task_vars={})
    assert result["changed"] is True
    assert host.copy_calls[0].check_mode is True
    assert host.files["/etc/wa/a.yaml"] == b"token: " + OTHER.encode() + b"\n"
    assert OTHER not in repr(result) and TOKEN not in repr(result)


def test_copy_failure_is_reported_with_the_path():
    host = FakeHost(copy_result={"failed": True, "msg": "chown failed: no user workflow-agent"})
    with pytest.raises(AnsibleActionFail) as err:
        make_action(dict(ARGS), host).run(task_vars={})
    assert str(err.value) == (
        "agent_config: cannot write /etc/wa/a.yaml: chown failed: no user workflow-agent"
    )


def test_unreadable_file_is_reported():
    host = FakeHost()
    host.execute_module = lambda **kw: {"failed": True, "msg": "File is not readable: /x"}
    with pytest.raises(AnsibleActionFail, match="cannot read /etc/wa/a.yaml: File is not readable"):
        make_action(dict(ARGS), host).run(task_vars={})


def test_bad_arguments_fail_before_touching_the_host():
    host = FakeHost()
    host.execute_module = MagicMock()
    with pytest.raises(AnsibleActionFail, match="missing required arguments: dest"):
        make_action({"config": {"token": TOKEN}}, host).run(task_vars={})
    host.execute_module.assert_not_called()
