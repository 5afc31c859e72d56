"""The collection loadwise.loadwise as an operator installs and runs it.

`ansible-galaxy collection build` of the repository (a copy of its tracked and untracked files,
as a fresh clone has them, plus the caches a working tree collects: they must stay out of the
tarball), `ansible-galaxy collection install`
of that tarball into a collections path of the test's own (offline: kubernetes.core, its one
dependency, is the one the pip package ansible bundles), then `ansible-playbook
loadwise.loadwise.site` / `.rollback` from another directory with the operator's own
ansible.cfg, which knows nothing of this repository (no roles_path, no filter_plugins).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
INVENTORIES = Path(__file__).resolve().parent / "data" / "inventories"
ANSIBLE_CORE = ".".join(__import__("ansible.release").release.__version__.split(".")[:2])
SANITY_IGNORES = f"tests/sanity/ignore-{ANSIBLE_CORE}.txt"
# ansible-test's sanity tests that run without a network here: the others (ansible-doc,
# import, pep8, pylint, runtime-metadata, validate-modules, yamllint) first install their
# requirements into a virtualenv from PyPI. Their checks that apply are made below instead.
OFFLINE_SANITY = (
    "action-plugin-docs", "changelog", "compile", "empty-init", "ignores", "line-endings",
    "no-assert", "no-get-exception", "no-illegal-filenames", "no-smart-quotes",
    "replace-urlopen", "shebang", "symlinks", "use-argspec-type-path", "use-compat-six",
)  # fmt: skip
# What a working tree collects beside the sources (the Python tools' caches, the venv, an
# earlier build), none of which belongs in the collection.
CACHES = (
    "extender/__pycache__/cli.cpython-311.pyc",
    "extender/sources/__pycache__/base.cpython-311.pyc",
    "plugins/filter/__pycache__/loadwise_rollout.cpython-311.pyc",
    ".venv/bin/python",
    ".pytest_cache/README.md",
    ".mypy_cache/3.11/extender.json",
    ".ruff_cache/CACHEDIR.TAG",
    ".hypothesis/examples/x",
    ".ansible/collections/x",
    "loadwise.egg-info/PKG-INFO",
    "dist/loadwise-0.1.0-py3-none-any.whl",
    "loadwise-loadwise-0.0.9.tar.gz",
)
# Everything at the collection's top level; anything else is a gap in galaxy.yml's build_ignore.
# .yamllint ships because ansible-lint, and Galaxy's import, lint the artifact with it.
TOP_LEVEL = {
    "MANIFEST.json", "FILES.json", "LICENSE", "README.md", "CHANGELOG.md", ".yamllint",
    "pyproject.toml", "requirements.yml", "inventory.example",
    "meta", "playbooks", "plugins", "roles", "extender", "tui", "loadwise", "docs", "tests",
}  # fmt: skip


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _operator_env(home: Path) -> dict[str, str]:
    """This machine's environment without anything pointing Ansible at this repository."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANSIBLE_", "K8S_AUTH_")) and k != "KUBECONFIG"
    }
    env.update({"HOME": str(home), "ANSIBLE_NOCOLOR": "1", "PATH": f"{VENV_BIN}:/usr/bin:/bin"})
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The built tarball, and an operator's directory whose ansible.cfg names only the
    collections path the tarball was installed into."""
    base = tmp_path_factory.mktemp("collection")
    env = _operator_env(base)
    tree = base / "clone"
    tree.mkdir()
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    subprocess.run(
        f"tar -C {ROOT} --null --ignore-failed-read -T - -cf - | tar -C {tree} -xf -",
        shell=True, input=files, check=True, timeout=120,
    )  # fmt: skip
    for cache in CACHES:
        (tree / cache).parent.mkdir(parents=True, exist_ok=True)
        (tree / cache).write_text("a working tree's cache\n")
    build = _run(
        [str(VENV_BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(base)],
        tree,
        env,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (tarball,) = base.glob("loadwise-loadwise-*.tar.gz")
    collections = base / "collections"
    install = _run(
        [str(VENV_BIN / "ansible-galaxy"), "collection", "install", "--offline",
         "-p", str(collections), str(tarball)],
        base,
        env,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    operator = base / "operator"
    operator.mkdir()
    (operator / "ansible.cfg").write_text(
        f"[defaults]\ncollections_path = {collections}\nstdout_callback = ansible.builtin.default\n"
    )
    return {
        "tarball": tarball,
        "collections": collections,
        "operator": operator,
        "home": base,
        "tree": tree,
    }


def _playbook(installed: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    env = _operator_env(installed["home"])
    return _run([str(VENV_BIN / "ansible-playbook"), *args], installed["operator"], env)


def test_the_tarball_holds_the_installer_and_the_source_of_the_wheel(
    installed: dict[str, Path],
) -> None:
    with tarfile.open(installed["tarball"]) as tar:
        names = set(tar.getnames())
    for needed in (
        "MANIFEST.json",
        "meta/runtime.yml",
        "playbooks/site.yml",
        "playbooks/rollback.yml",
        "playbooks/control_plane.yml",
        "plugins/filter/loadwise_preflight.py",
        "plugins/filter/loadwise_rollout.py",
        "plugins/filter/loadwise_manifest.py",
        "roles/loadwise_preflight/tasks/main.yml",
        "roles/loadwise_extender/files/wheel_target.py",
        # loadwise_extender builds the extender's wheel from the collection's root
        # (loadwise_extender_project_dir): pyproject.toml and the packages it names
        "pyproject.toml",
        "README.md",
        "extender/cli.py",
        "tui/cli.py",
        # what an operator reads: the licence, the changelog, galaxy.yml's readme
        "LICENSE",
        "CHANGELOG.md",
        "docs/collection-README.md",
        ".yamllint",
    ):
        assert needed in names, needed
    assert {n.split("/", 1)[0] for n in names} == TOP_LEVEL
    # every source file of the packages pyproject.toml builds into the wheel, and its readme
    project = tomllib.loads((installed["tree"] / "pyproject.toml").read_text())
    packages = project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert project["project"]["readme"] in names
    for package in packages:
        sources = {
            str(p.relative_to(installed["tree"]))
            for p in (installed["tree"] / package).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }
        assert sources and sources <= names, sorted(sources - names)
    for name in names:
        top = name.split("/", 1)[0]
        assert top not in {"lab", "molecule", "benchmarks", ".venv", ".git"}, name
        # of tests/ only ansible-test's ignore file for the collection
        assert top != "tests" or name in {"tests", "tests/sanity", SANITY_IGNORES}, name
        assert not any(name == c or name.startswith(c.split("/")[0] + "/") for c in CACHES
                       if not c.startswith(("extender/", "plugins/"))), name  # fmt: skip
        assert "__pycache__" not in name and not name.endswith(".pyc"), name
        # the repository's link back to itself stays out (it would nest the collection)
        assert not name.startswith("playbooks/collections"), name


def test_the_wheel_built_from_the_installed_collection_holds_one_package(
    installed: dict[str, Path], tmp_path: Path
) -> None:
    """The wheel the extender role builds (pip wheel of the installed collection, as in
    roles/loadwise_extender/tasks/build.yml) installs one top-level package, `loadwise`,
    with both halves in it: the links in loadwise/ survive the tarball."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(tmp_path), str(installed["collections"] / "ansible_collections/loadwise/loadwise")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp_path.glob("loadwise-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"loadwise"}
    for module in ("loadwise/__init__.py", "loadwise/extender/cli.py", "loadwise/tui/cli.py"):
        assert module in names, module


@pytest.mark.parametrize("playbook", ["site", "rollback"])
@pytest.mark.parametrize("inventory", ["kubespray.ini", "k3s-ansible.yml", "plain.ini"])
def test_the_installed_playbooks_run_from_the_operators_directory(
    installed: dict[str, Path], playbook: str, inventory: str
) -> None:
    inv = str(INVENTORIES / inventory)
    check = _playbook(installed, f"loadwise.loadwise.{playbook}", "-i", inv, "--syntax-check")
    assert check.returncode == 0, check.stdout + check.stderr
    listed = _playbook(installed, f"loadwise.loadwise.{playbook}", "-i", inv, "--list-tasks")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    # the installed copy, not this checkout
    assert f"playbook: {installed['collections']}/ansible_collections/loadwise/loadwise/" in (
        listed.stdout
    )
    if playbook == "site":  # its roles are static: listed, found without any roles_path
        assert "loadwise.loadwise.loadwise_preflight : Preflight |" in listed.stdout
        assert "loadwise.loadwise.loadwise_scheduler_config : " in listed.stdout
    else:  # include_role: resolved when the run gets there (the test below)
        assert "Detect flavour and version" in listed.stdout


def _stand_in(installed: dict[str, Path], **extra: object) -> str:
    """-e @file: this machine as a k3s 1.31 server over the local connection, node side only."""
    (installed["home"] / "k3s").write_text("stand-in for the k3s binary\n")
    node = {
        "ansible_connection": "local",
        "ansible_become": False,
        "ansible_python_interpreter": sys.executable,
        "loadwise_node_python": sys.executable,
        "loadwise_preflight_k3s_binary": str(installed["home"] / "k3s"),
        "loadwise_preflight_k3s_unit": str(installed["home"] / "k3s.service"),
        "loadwise_preflight_kubernetes_version": "1.31.4",
        "loadwise_cluster_objects": False,
        "loadwise_extender_source": "file",
        "loadwise_extender_source_file": "/var/lib/loadwise-test/watcher.json",
        **extra,
    }
    path = installed["home"] / "node.yml"
    path.write_text(yaml.safe_dump(node))
    return f"@{path}"


def _preflight(
    installed: dict[str, Path], variables: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    """loadwise.loadwise.site's preflight tag on the stand-in (plain inventory); the run and
    its whole output."""
    run = _playbook(
        installed,
        "loadwise.loadwise.site",
        "-i",
        str(INVENTORIES / "plain.ini"),
        "--tags",
        "loadwise_preflight",
        "-e",
        variables,
    )
    return run, run.stdout + run.stderr


def test_the_installed_roles_find_their_filters(installed: dict[str, Path]) -> None:
    """Preflight evaluates the collection's filter plugins (unknown variables, here a misspelt
    one, with its suggestion): a role inside a collection finds no role-level filter_plugins,
    only the collection's plugins/filter, by their full names."""
    # default-scheduler mode: its foreign-config check (loadwise_scheduler_config's
    # foreign.yml, always run) evaluates the manifest filters of plugins/filter too
    variables = _stand_in(installed, loadwise_extender_polcy="least-used")
    run, out = _preflight(installed, variables)
    assert run.returncode != 0, out
    said = " ".join(out.split())
    assert (
        "unknown variable loadwise_extender_polcy (did you mean loadwise_extender_policy?)" in said
    )
    assert "No filter named" not in out, out


def test_the_installed_rollback_includes_its_roles(installed: dict[str, Path]) -> None:
    """rollback.yml's roles are included at run time (include_role); --tags loadwise_preflight
    runs only its always-tagged detection, which changes nothing."""
    variables = _stand_in(installed)
    inv = str(INVENTORIES / "plain.ini")
    run = _playbook(
        installed, "loadwise.loadwise.rollback", "-i", inv, "--tags", "loadwise_preflight",
        "-e", variables,
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "TASK [loadwise.loadwise.loadwise_preflight : Preflight | Record the flavour]" in out


def _installed_root(installed: dict[str, Path]) -> Path:
    return installed["collections"] / "ansible_collections" / "loadwise" / "loadwise"


def test_the_manifest_says_what_galaxy_yml_says(installed: dict[str, Path]) -> None:
    """What Galaxy and `ansible-galaxy collection list` show comes from MANIFEST.json."""
    galaxy = yaml.safe_load((installed["tree"] / "galaxy.yml").read_text())
    info = json.loads((_installed_root(installed) / "MANIFEST.json").read_text())["collection_info"]
    for key in ("version", "readme", "license", "repository", "documentation", "homepage",
                "issues", "tags", "dependencies"):  # fmt: skip
        assert info[key] == galaxy[key], key
    assert (_installed_root(installed) / info["readme"]).is_file()
    assert installed["tarball"].name == f"loadwise-loadwise-{galaxy['version']}.tar.gz"


def test_the_installed_collection_passes_ansible_lint_production(
    installed: dict[str, Path],
) -> None:
    """ansible-lint's production profile (what Galaxy's import runs) on a copy of the installed
    collection, with the .yamllint it ships and no configuration from this repository. The copy
    keeps the linter's caches away from the collection the other tests run."""
    copy = installed["home"] / "lint" / "ansible_collections" / "loadwise" / "loadwise"
    shutil.copytree(_installed_root(installed), copy)
    env = {
        **_operator_env(installed["home"]),
        # the playbooks name their roles as a collection's playbooks do: ansible-playbook
        # --syntax-check finds them only when the copy is on the collections path
        "ANSIBLE_COLLECTIONS_PATH": str(copy.parents[2]),
        "NO_COLOR": "1",
    }
    argv = [str(VENV_BIN / "ansible-lint"), "--offline", "--profile", "production", "--nocolor",
            "-f", "pep8"]  # fmt: skip
    run = _run(argv, copy, env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "Profile 'production' was required, and it passed." in out, out
    # it linted the roles and playbooks, not an empty directory (205 files on 2026-11-28)
    processed = re.search(r"in (\d+) files processed", out)
    assert processed and int(processed[1]) >= 150, out


def test_ansible_test_sanity(installed: dict[str, Path]) -> None:
    """`ansible-test sanity`, the tests of it that need no network, on the installed collection
    (ansible-test runs inside ansible_collections/<namespace>/<name>)."""
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    argv = [str(VENV_BIN / "ansible-test"), "sanity", "--python", python]
    for name in OFFLINE_SANITY:
        argv += ["--test", name]
    run = _run(argv, _installed_root(installed), _operator_env(installed["home"]))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    for name in OFFLINE_SANITY:
        assert f'Running sanity test "{name}"' in out, out


def test_sanity_equivalents_that_need_no_network(installed: dict[str, Path]) -> None:
    """What ansible-test's network-bound sanity tests check that applies here, run directly:
    ansible-doc (every filter plugin documented), yamllint (ansible-test's own linter and
    configuration, YAML inside plugins included), runtime-metadata (requires_ansible), and
    validate-modules' first check, the module's documentation as ansible-doc reads it."""
    root = _installed_root(installed)
    env = {
        **_operator_env(installed["home"]),
        "ANSIBLE_COLLECTIONS_PATH": str(installed["collections"]),
    }
    doc = str(VENV_BIN / "ansible-doc")
    listed = _run([doc, "-t", "filter", "--list", "loadwise.loadwise"], root, env)
    assert listed.returncode == 0, listed.stderr
    filters = re.findall(r"^(loadwise\.loadwise\.\S+)", listed.stdout, re.M)
    assert len(filters) >= 8, listed.stdout
    assert "UNDOCUMENTED" not in listed.stdout, listed.stdout
    for name in filters:
        shown = _run([doc, "-t", "filter", name], root, env)
        assert shown.returncode == 0 and "[ERROR]" not in shown.stderr, shown.stderr

    import ansible_test

    linter = Path(ansible_test.__file__).parent / "_util/controller/sanity/yamllint/yamllinter.py"
    paths = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.suffix in (".yml", ".yaml") or p.parent.name == "filter" and p.suffix == ".py"
    )
    assert "meta/runtime.yml" in paths and "playbooks/site.yml" in paths
    linted = _run([sys.executable, str(linter), *paths], root, env)
    assert linted.returncode == 0, linted.stderr
    assert json.loads(linted.stdout)["messages"] == [], linted.stdout

    from packaging.specifiers import SpecifierSet

    runtime = yaml.safe_load((root / "meta/runtime.yml").read_text())
    assert set(runtime) <= {"requires_ansible", "plugin_routing", "action_groups",
                            "import_redirection"}  # fmt: skip
    kubernetes_core = Path(ansible_test.__file__).parents[1] / "ansible_collections/kubernetes/core"
    needed = yaml.safe_load((kubernetes_core / "meta/runtime.yml").read_text())["requires_ansible"]
    assert SpecifierSet(runtime["requires_ansible"]) == SpecifierSet(needed)
    assert __import__("ansible.release").release.__version__ in SpecifierSet(needed)
    assert sorted(p.name for p in (root / "plugins").iterdir()) == ["filter", "modules"]
    module = _run([doc, "-t", "module", "loadwise.loadwise.loadwise_scheduler_health"], root, env)
    assert module.returncode == 0 and "[ERROR]" not in module.stderr, module.stderr
    assert "check_mode" in module.stdout, module.stdout


def test_the_installed_default_mode_reads_the_schedulers_config_with_its_filters(
    installed: dict[str, Path],
) -> None:
    """default-scheduler mode's foreign-config check (loadwise_scheduler_config's foreign.yml,
    included by preflight) merges k3s's kube-scheduler-arg with the collection's manifest
    filters (plugins/filter/loadwise_manifest.py), reached by their full names."""
    variables = _stand_in(installed)
    run, out = _preflight(installed, variables)
    assert run.returncode == 0, out
    assert "No filter named" not in out, out
    assert "Work out the kube-scheduler-arg list k3s would use" in out, out
    assert "cp-1: k3s 1.31.4, scheduler config kubescheduler.config.k8s.io/v1" in out, out


def test_every_placement_record_under_docs_is_left_out_of_lint_and_the_collection() -> None:
    """A report of the placement benchmark keeps its runs and drawn scenarios (YAML that is
    not Ansible content) in <report>/placement/: ansible-lint's production profile refused
    them, and the tarball would carry them, when a new report's directory was missing from
    .ansible-lint's exclude_paths and galaxy.yml's build_ignore (docs/generated* did)."""
    lint = {
        p.rstrip("/") for p in yaml.safe_load((ROOT / ".ansible-lint").read_text())["exclude_paths"]
    }
    ignored = set(yaml.safe_load((ROOT / "galaxy.yml").read_text())["build_ignore"])
    # docs/placement/results.json (docs/placement is the records), docs/<report>/placement/...
    records = [p.parent.relative_to(ROOT) for p in ROOT.glob("docs/**/placement/results.json")]
    assert len(records) > 1, "no placement records found under docs/"
    for record in records:
        # the record's directory or one above it (docs/history/ holds the older reports)
        covers = {str(record), *(str(p) for p in record.parents)}
        assert covers & lint, (str(record), ".ansible-lint exclude_paths")
        assert covers & ignored, (str(record), "galaxy.yml build_ignore")
