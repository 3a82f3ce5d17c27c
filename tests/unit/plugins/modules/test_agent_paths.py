"""agent_paths on a real directory tree (tmp_path): directories, files and absent paths in one
run, their modes, check mode, the second run, and what a bad entry fails with. Owners stay the
test user's (the role's own owners are proven on systemd hosts by Molecule)."""

from __future__ import annotations

import getpass
import grp
import os
import stat

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.modules import agent_paths

ME = getpass.getuser()
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def _mode(path):
    return f"{stat.S_IMODE(os.lstat(path).st_mode):04o}"


def _tree(root):
    return [
        {"path": str(root / "etc"), "state": "directory", "owner": ME, "group": MY_GROUP,
         "mode": "0750"},
        {"path": str(root / "data" / "a" / "shared"), "state": "directory", "mode": "0711"},
        {"path": str(root / "etc" / "environment"), "state": "file", "mode": "0640",
         "content": "HTTPS_PROXY=http://user:secret@proxy:3128\n"},
        {"path": str(root / "etc" / "ca-bundle.pem"), "state": "absent"},
    ]  # fmt: skip


def test_makes_the_tree_then_changes_nothing(run_main, tmp_path):
    (tmp_path / "etc").mkdir(mode=0o755)
    (tmp_path / "etc" / "ca-bundle.pem").write_text("old CA\n")
    first = run_main(agent_paths, {"paths": _tree(tmp_path)})
    assert first["changed"] and first["files_changed"]
    assert [p["changed"] for p in first["paths"]] == [True, True, True, True]
    assert _mode(tmp_path / "etc") == "0750"
    assert _mode(tmp_path / "data" / "a" / "shared") == "0711"
    assert (tmp_path / "etc" / "environment").read_text().startswith("HTTPS_PROXY=")
    assert _mode(tmp_path / "etc" / "environment") == "0640"
    assert not (tmp_path / "etc" / "ca-bundle.pem").exists()
    # Nothing left of the write beside the file.
    assert sorted(os.listdir(tmp_path / "etc")) == ["environment"]
    # The diff names the paths and their state, and never a file's content.
    assert first["diff"]["after"][str(tmp_path / "etc" / "environment")]["state"] == "file"
    assert "secret" not in repr(first["diff"])

    second = run_main(agent_paths, {"paths": _tree(tmp_path)})
    assert not second["changed"] and not second["files_changed"]
    assert second["diff"] == {"before": {}, "after": {}}


def test_a_mode_put_back_is_not_a_file_change(run_main, tmp_path):
    run_main(agent_paths, {"paths": _tree(tmp_path)})
    os.chmod(tmp_path / "etc", 0o700)  # drifted from 0750
    res = run_main(agent_paths, {"paths": _tree(tmp_path)})
    assert res["changed"] and not res["files_changed"]
    assert [p["changed"] for p in res["paths"]] == [True, False, False, False]
    assert _mode(tmp_path / "etc") == "0750"


def test_new_content_replaces_the_file(run_main, tmp_path):
    run_main(agent_paths, {"paths": _tree(tmp_path)})
    paths = _tree(tmp_path)
    paths[2]["content"] = "NO_PROXY=localhost\n"
    res = run_main(agent_paths, {"paths": paths})
    assert res["files_changed"]
    assert (tmp_path / "etc" / "environment").read_text() == "NO_PROXY=localhost\n"
    assert _mode(tmp_path / "etc" / "environment") == "0640"


def test_check_mode_changes_nothing(run_main, tmp_path):
    res = run_main(agent_paths, {"paths": _tree(tmp_path), "_ansible_check_mode": True})
    assert res["changed"] and res["files_changed"]
    assert os.listdir(tmp_path) == []


def test_absent_removes_a_link_not_its_target(run_main, tmp_path):
    target = tmp_path / "v1"
    target.mkdir()
    (target / "keep").write_text("x")
    (tmp_path / "current").symlink_to(target)
    (tmp_path / "v0").mkdir()
    (tmp_path / "v0" / "old").write_text("x")
    res = run_main(
        agent_paths,
        {"paths": [{"path": str(tmp_path / "current"), "state": "absent"},
                   {"path": str(tmp_path / "v0"), "state": "absent"}]},
    )  # fmt: skip
    assert res["changed"]
    assert not os.path.lexists(tmp_path / "current") and not (tmp_path / "v0").exists()
    assert (target / "keep").exists()


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"path": "relative/dir", "state": "directory"}, "must be absolute"),
        ({"path": "/x", "state": "file"}, "/x: content is required with state=file"),
        ({"path": "/x", "state": "directory", "content": "y"}, "/x: content is required"),
    ],
)
def test_bad_entries_fail_naming_the_path(run_main, entry, message):
    res = run_main(agent_paths, {"paths": [entry]})
    assert res["failed"] and message in res["msg"]


def test_a_file_where_a_directory_belongs_fails_and_stays(run_main, tmp_path):
    (tmp_path / "etc").write_text("not a directory\n")
    res = run_main(agent_paths, {"paths": _tree(tmp_path)})
    assert res["failed"]
    assert res["msg"] == "agent_paths: %s is a file, not a directory: move it away first" % (
        tmp_path / "etc"
    )
    assert (tmp_path / "etc").read_text() == "not a directory\n"


def test_an_unknown_owner_fails_naming_the_path(run_main, tmp_path):
    res = run_main(
        agent_paths,
        {
            "paths": [
                {"path": str(tmp_path / "d"), "state": "directory", "owner": "no-such-user-wfa"}
            ]
        },
    )
    assert res["failed"] and "no-such-user-wfa" in res["msg"]
