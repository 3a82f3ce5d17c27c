"""agent_host_info's reading of each candidate's output and its problems (plugins/action).

The whole action, on a real host through ansible-playbook, is tests/system/
test_plugins_agent_host_info.py; Molecule runs it in the role on Debian 12 and 13."""

from __future__ import annotations

from ansible_collections.selfhosted.workflow_agent.plugins.action.agent_host_info import (
    problems,
    report_of,
)


def tried(path, version=None, ok=False, error=None):
    return {"path": path, "ran": version is not None, "version": version, "ok": ok, "error": error}


def test_report_is_the_last_json_object_line():
    out = 'Warning: something on stdout\n{"python": "3.11", "ok": true}\n'
    assert report_of(out) == {"python": "3.11", "ok": True}
    assert report_of("") is None
    assert report_of('{"not": "a report"}\n') is None
    assert report_of("{broken json\n") is None


def test_a_usable_python_is_no_problem():
    assert (
        problems(
            [
                tried("/usr/bin/python3.12", error="not found"),
                tried("/usr/bin/python3", "3.11", True),
            ],
            True,
        )
        == []
    )


def test_no_candidate_ran():
    got = problems(
        [
            tried("/usr/bin/python3.12", error="sh: 1: /usr/bin/python3.12: not found"),
            tried("/usr/bin/python3", error=None),
        ],
        True,
    )
    assert got == [
        "None of /usr/bin/python3.12, /usr/bin/python3 runs on this host (sh: 1: "
        "/usr/bin/python3.12: not found); install Python 3.10 or later or set workflow_agent_python"
    ]
    assert "(no output)" in problems([tried("/usr/bin/python3")], True)[0]
    # Even to remove the agent something must run.
    assert problems([tried("/usr/bin/python3")], False)


def test_only_old_pythons_matter_when_the_agent_needs_one():
    old = [tried("/usr/bin/python3.12", error="not found"), tried("/usr/bin/python3", "3.9")]
    (message,) = problems(old, True)
    assert message.startswith(
        "The agent needs Python 3.10 or later on the host; none of /usr/bin/python3.12, "
        "/usr/bin/python3 is one (found: 3.9). Install one"
    )
    assert problems(old, False) == []
