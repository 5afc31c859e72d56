"""The release an operator pins: one version everywhere it is written, a dated changelog, the
collection's metadata and licence. Reads the repository's files only (the built tarball is
checked in test_collection.py)."""

from __future__ import annotations

import datetime
import re
import tomllib
from pathlib import Path

import yaml
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
# hatchling's default pattern for a version file ([tool.hatch.version] path, no `pattern`)
HATCH_VERSION = re.compile(r"""(?i)^(__version__|VERSION) *= *(['"])v?(?P<version>.+?)\2""", re.M)
RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\S+))?$", re.M)
# Keep a Changelog's kinds of change
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def _python_version() -> str:
    path = PYPROJECT["tool"]["hatch"]["version"]["path"]
    found = [m["version"] for m in HATCH_VERSION.finditer((ROOT / path).read_text())]
    assert len(found) == 1, f"{path}: expected one __version__, found {found}"
    return found[0]


def test_the_version_is_written_once_per_tool_and_equal() -> None:
    """pyproject.toml reads the version from the file hatchling is pointed at; galaxy.yml holds
    it literally (ansible-galaxy reads nothing else). Both say the same release."""
    project = PYPROJECT["project"]
    assert "version" not in project, "pyproject.toml: the version comes from [tool.hatch.version]"
    assert "version" in project["dynamic"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "extender/__init__.py"
    from loadwise import extender

    assert extender.__version__ == _python_version()
    assert str(GALAXY["version"]) == _python_version()
    Version(_python_version())  # a valid version, as both pip and ansible-galaxy need


def _releases() -> list[tuple[str, str | None]]:
    return [(m["version"], m["date"]) for m in RELEASE.finditer(CHANGELOG)]


def test_the_changelog_dates_every_release_newest_first() -> None:
    releases = _releases()
    assert releases[0] == ("Unreleased", None), "the first section is [Unreleased]"
    dated = releases[1:]
    assert dated, "no release in CHANGELOG.md"
    assert dated[0][0] == GALAXY["version"], "the newest release is not galaxy.yml's version"
    for version, date in dated:
        assert date is not None, f"release {version} has no date"
        datetime.date.fromisoformat(date)
    assert [Version(v) for v, _ in dated] == sorted((Version(v) for v, _ in dated), reverse=True)
    assert [d for _, d in dated] == sorted((d or "" for _, d in dated), reverse=True)
    kinds = set(re.findall(r"^### (.+)$", CHANGELOG, re.M))
    assert kinds <= KINDS, kinds - KINDS


def test_every_tarball_name_in_the_docs_is_this_release() -> None:
    """The install commands name the tarball ansible-galaxy build writes for this version."""
    names = [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), ROOT / "inventory.example"]
    seen = 0
    for path in names:
        for version in re.findall(r"loadwise-loadwise-(\d[^\s/]*?)\.tar\.gz", path.read_text()):
            seen += 1
            assert version == GALAXY["version"], f"{path.relative_to(ROOT)} names {version}"
    assert seen >= 2  # docs/ansible.md's and the collection readme's install commands


def test_version_added_is_a_release() -> None:
    """A plugin's version_added names a release in the changelog, none newer than this one."""
    released = {v for v, _ in _releases()[1:]}
    for doc in sorted((ROOT / "plugins").rglob("*.yml")):
        for added in re.findall(r"^\s*version_added:\s*\"?([^\"\s]+)", doc.read_text(), re.M):
            assert added in released, f"{doc.relative_to(ROOT)}: version_added {added}"


def test_galaxy_names_where_the_collection_lives_and_its_licence() -> None:
    for key in ("repository", "documentation", "homepage", "issues"):
        assert re.fullmatch(r"https://\S+", str(GALAXY.get(key, ""))), key
    assert GALAXY["license"] == [PYPROJECT["project"]["license"]] == ["Apache-2.0"]
    assert "license_file" not in GALAXY  # ansible-galaxy takes license or license_file, not both
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence


def test_the_collection_readme_is_for_an_operator() -> None:
    """What an installed collection's reader can run: no Makefile ships, the playbooks are
    reached by their full names, and the ansible-core floor is meta/runtime.yml's."""
    readme = (ROOT / GALAXY["readme"]).read_text()
    assert GALAXY["readme"] != "README.md"
    assert not re.search(r"\bmake\b", readme), "the Makefile is not in the collection"
    for needed in (
        "ansible-galaxy collection install",
        "loadwise.loadwise.site --check --diff",
        "loadwise.loadwise.rollback",
        "[control_plane]",
        "docs/ansible.md",
    ):
        assert needed in readme, needed
    runtime = yaml.safe_load((ROOT / "meta/runtime.yml").read_text())
    floor = re.fullmatch(r">=(\d+)\.(\d+)\.0", runtime["requires_ansible"])
    assert floor, runtime["requires_ansible"]
    assert f"ansible-core {floor[1]}.{floor[2]} or newer" in " ".join(readme.split())


def test_no_galaxy_rule_is_skipped() -> None:
    """galaxy.yml's metadata is linted in full (the repository run reads galaxy.yml)."""
    config = yaml.safe_load((ROOT / ".ansible-lint").read_text())
    for key in ("skip_list", "warn_list"):
        assert not [r for r in config.get(key) or [] if str(r).startswith("galaxy")], key
