"""Release hygiene (issue 28; the README's Releases section): the version moves with breaking
changes as semantic versioning says, and the changelog's releases read as what shipped."""

from __future__ import annotations

from pathlib import Path

import yaml
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
CHANGELOG = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())
RELEASES = sorted(CHANGELOG["releases"], key=Version)
GALAXY_VERSION = Version(yaml.safe_load((REPO / "galaxy.yml").read_text())["version"])


def breaking_bump(old: Version, new: Version) -> bool:
    """Whether old -> new is the bump a breaking change needs (the minor one while 0.x)."""
    if old.major == 0:
        return (new.major, new.minor) > (old.major, old.minor)
    return new.major > old.major


def sections(release: str) -> set[str]:
    return set(CHANGELOG["releases"][release].get("changes", {}))


def test_the_first_release_breaks_and_fixes_nothing():
    # Nothing shipped before it: what it has are its features (and a summary).
    assert not sections(RELEASES[0]) & {"breaking_changes", "bugfixes", "deprecated_features"}


def test_each_breaking_release_moves_the_version():
    for old, new in zip(RELEASES, RELEASES[1:], strict=False):
        if "breaking_changes" in sections(new):
            assert breaking_bump(Version(old), Version(new)), (old, new)


def test_unreleased_breaking_changes_do_not_ship_under_a_released_version():
    latest = Version(RELEASES[-1])
    assert latest <= GALAXY_VERSION, "galaxy.yml's version is older than the last release"
    breaking = sorted(
        p.name
        for p in (REPO / "changelogs" / "fragments").glob("*.y*ml")
        if "breaking_changes" in (yaml.safe_load(p.read_text()) or {})
    )
    if breaking:
        assert breaking_bump(latest, GALAXY_VERSION), (
            f"fragments {breaking} break things, so the tarball's version must move past "
            f"{latest} (cut a release: README, Releases)"
        )
