"""The loadwise_extender role's task files and helper scripts, run on this machine.

Task files are included as the role includes them, by ansible-playbook over the local
connection; the cluster is tests/ansible/fake_kubernetes_core.py (objects in a JSON file).
"""

from __future__ import annotations

import contextlib
import http.server
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.ansible.fake_kubernetes_core import install
from tests.ansible.fakes import path_with
from tests.ansible.playbook import ansible_playbook
from tests.ansible.plugins import render_file, role_defaults

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles/loadwise_extender"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.loadwise-test-token-that-must-never-be-printed"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"under_test_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _play(
    tmp_path: Path,
    tasks_from: str,
    variables: dict[str, Any],
    objects: list[dict[str, Any]],
    *extra: str,
    base_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    state = tmp_path / "api.json"
    state.write_text(json.dumps({"objects": objects}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Include the task file as the role does",
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Include",
                            "ansible.builtin.include_role": {
                                "name": "loadwise_extender",
                                "tasks_from": tasks_from,
                            },
                            "vars": variables,
                        },
                        {
                            "name": "Show the load-watcher URL",
                            "ansible.builtin.debug": {
                                "msg": "URL={{ loadwise_extender_load_watcher_url | default('') }}"
                            },
                        },
                    ],
                }
            ]
        )
    )
    env = {
        **(base_env or os.environ),
        "ANSIBLE_COLLECTIONS_PATH": str(install(tmp_path)),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "LOADWISE_FAKE_API": str(state),
    }
    return ansible_playbook(playbook, *extra, env=env, timeout=300)


def _token_secret() -> dict[str, Any]:
    """The token Secret as the API server returns it once the token controller filled it."""
    import base64

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "loadwise-extender-token", "namespace": "kube-system"},
        "data": {"token": base64.b64encode(TOKEN.encode()).decode(), "ca.crt": "Y2E="},
    }


@pytest.mark.parametrize("verbosity", ["-v", "-vvv"])
def test_the_token_never_reaches_the_output(tmp_path: Path, verbosity: str) -> None:
    run = _play(
        tmp_path, "cluster.yml", {"loadwise_cluster_objects": True}, [_token_secret()], verbosity
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "Extender | Apply its ServiceAccount" in out  # the task ran
    assert TOKEN not in out
    assert _token_secret()["data"]["token"] not in out


def test_run_alone_the_extender_finds_load_watcher_itself(tmp_path: Path) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "load-watcher", "namespace": "kube-system"},
        "spec": {"clusterIP": "10.43.0.17", "ports": [{"port": 2020}]},
    }
    deployment = {
        "loadwise_extender_source": "load-watcher",
        "loadwise_load_watcher_enabled": True,
        "loadwise_load_watcher_mode": "deployment",
    }
    run = _play(tmp_path, "source.yml", deployment, [service])
    assert run.returncode == 0, run.stdout + run.stderr
    assert "URL=http://10.43.0.17:2020" in run.stdout


def test_run_alone_with_load_watcher_as_a_service_reads_it_on_loopback(tmp_path: Path) -> None:
    service_mode = {
        "loadwise_extender_source": "load-watcher",
        "loadwise_load_watcher_enabled": True,
    }
    run = _play(tmp_path, "source.yml", service_mode, [])
    assert run.returncode == 0, run.stdout + run.stderr
    assert "URL=http://127.0.0.1:2020" in run.stdout


def test_run_alone_without_load_watcher_it_refuses_before_changing(tmp_path: Path) -> None:
    run = _play(tmp_path, "source.yml", {"loadwise_extender_source": "load-watcher"}, [])
    assert run.returncode != 0
    assert "address is unknown" in run.stdout
    assert "loadwise_extender_source_url" in run.stdout


def test_the_extender_config_never_says_url_null(tmp_path: Path) -> None:
    """Rendered as node.yml renders it, after source.yml: a load-watcher source has its URL."""
    values = {
        **role_defaults("loadwise", "loadwise_extender"),
        "ansible_managed": "managed",
        "loadwise_extender_source": "load-watcher",
        "loadwise_extender_load_watcher_url": "http://10.43.0.17:2020",
    }
    text = render_file(ROLE / "templates/extender.yaml.j2", values)
    assert yaml.safe_load(text)["source"]["url"] == "http://10.43.0.17:2020"


def test_a_virtualenv_of_another_python_is_rebuilt(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(prefix / "venv")], check=True
    )
    cfg = prefix / "venv" / "pyvenv.cfg"
    # As left by the node's previous Python: its minor differs from the one running now.
    cfg.write_text(re.sub(r"(?m)^version\s*=.*$", "version = 3.10.12", cfg.read_text()))
    (prefix / "installed-wheel").write_text("0" * 64 + "\n")
    target = f"cp{sys.version_info[0]}{sys.version_info[1]}-x86_64"
    variables = {
        "loadwise_extender_prefix": str(prefix),
        "loadwise_node_python": sys.executable,
        "loadwise_extender_target": {"stdout": target},
    }
    # systemctl as on a node, recording the calls: the rebuilt venv restarts the extender.
    calls = tmp_path / "systemctl.calls"
    show = (
        "Id=loadwise-extender.service\\nLoadState=loaded\\nActiveState=active\\nSubState=running\\n"
    )
    env = path_with(
        tmp_path / "bin",
        {"systemctl": f'echo "$*" >> {calls}\ncase "$*" in *show*) printf "{show}";; esac'},
    )
    run = _play(tmp_path, "venv.yml", variables, [], base_env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "restart loadwise-extender" in calls.read_text()
    made_with = re.search(r"(?m)^version\s*=\s*(\d+)\.(\d+)", cfg.read_text())
    assert made_with is not None
    assert (int(made_with[1]), int(made_with[2])) == sys.version_info[:2]
    assert not (prefix / "installed-wheel").exists()  # so the wheel is installed again

    # The same Python again: nothing is removed.
    before = cfg.stat().st_mtime_ns
    again = _play(tmp_path, "venv.yml", variables, [], base_env=env)
    assert again.returncode == 0, again.stdout
    assert cfg.stat().st_mtime_ns == before


@pytest.mark.parametrize(
    ("version", "machine", "bits", "expected"),
    [
        ((3, 11), "x86_64", 64, "cp311-x86_64"),
        ((3, 12), "aarch64", 64, "cp312-aarch64"),
        # Raspberry Pi OS 32-bit on the 64-bit Pi kernel: uname says aarch64.
        ((3, 11), "aarch64", 32, "cp311-armv7l"),
        ((3, 11), "armv7l", 32, "cp311-armv7l"),
        ((3, 11), "x86_64", 32, "cp311-i686"),
    ],
)
def test_the_wheel_target_is_the_userlands(
    version: tuple[int, int], machine: str, bits: int, expected: str
) -> None:
    module = _load(ROLE / "files/wheel_target.py")
    assert module.wheel_target(version, machine, bits) == expected


def test_the_role_probes_the_target_with_that_script() -> None:
    main = yaml.safe_load((ROLE / "tasks/main.yml").read_text())
    probe = next(t for t in main if t.get("register") == "loadwise_extender_target")
    assert "wheel_target.py" in probe["ansible.builtin.command"]["argv"][2]


def test_the_wheelhouse_tarball_is_reproducible(tmp_path: Path) -> None:
    module = _load(ROLE / "files/pack_wheelhouse.py")
    tarballs = []
    for run, names in enumerate((["b-1.whl", "a-1.whl"], ["a-1.whl", "b-1.whl"])):
        directory = tmp_path / str(run) / "cp311-x86_64"
        directory.mkdir(parents=True)
        for name in names:
            (directory / name).write_bytes(name.encode() * 100)
            time.sleep(0.01)
        (directory / ".deps-0123").write_text("marker, not packed\n")
        os.utime(directory / names[0], (run * 1000, run * 1000))
        tarballs.append(module.pack(directory).read_bytes())
    assert tarballs[0] == tarballs[1]
    with tarfile.open(fileobj=io.BytesIO(tarballs[0])) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["a-1.whl", "b-1.whl"]
    assert {(m.mtime, m.uid, m.gid, m.mode) for m in members} == {(0, 0, 0, 0o644)}


def test_controller_tasks_use_no_gnu_only_find_or_tar_flags() -> None:
    """macOS/BSD controllers: find has no -printf; tar has no --sort/--mtime/--owner/--group."""
    gnu_only = re.compile(
        r"-printf|--sort=|--mtime|--owner|--group=|--numeric-owner|--mode=|--null"
    )
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            if task.get("delegate_to") != "localhost":
                continue
            text = json.dumps(task)
            assert not gnu_only.search(text), f"{path.relative_to(ROOT)}: {task.get('name')}"


def _rules() -> dict[tuple[str, str], set[str]]:
    text = render_file(
        ROLE / "templates/rbac.yaml.j2",
        {
            "loadwise_extender_service_account": "loadwise-extender",
            "loadwise_namespace": "kube-system",
            "loadwise_labels": {},
        },
    )
    role = next(d for d in yaml.safe_load_all(text) if d and d["kind"] == "ClusterRole")
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    return granted


def test_rbac_grants_exactly_the_calls_the_extender_makes() -> None:
    """Derived from the extender's own API paths: GET on a collection is list, a watch is
    watch, a POST is create (Kubernetes API conventions, "Verbs on resources")."""
    source = "\n".join(p.read_text() for p in (ROOT / "extender").rglob("*.py"))
    used: dict[tuple[str, str], set[str]] = {}
    # the reflector lists and then watches every collection it is given
    for resource in re.findall(r'"/api/v1/(nodes|pods)"', source):
        used.setdefault(("", resource), set()).update({"list", "watch"})
    for resource in re.findall(r'"/apis/metrics\.k8s\.io/v1beta1/(nodes|pods)"', source):
        used.setdefault(("metrics.k8s.io", resource), set()).add("list")
    for resource in re.findall(r'post\(f?"/api/v1/namespaces/\{ns\}/(events)"', source):
        used.setdefault(("", resource), set()).add("create")
    assert used, "no API path found in extender/: the patterns above need updating"
    assert _rules() == used


class _Extender:
    """The extender's two health endpoints as extender/server.py answers them: /healthz 200
    "ok" as soon as it serves, /readyz 503 with the reason until the first load snapshot
    (here: for the first `not_ready` polls, or always when None)."""

    REASON = "no load snapshot from metrics-server: 404 Not Found from /apis/metrics.k8s.io"

    def __init__(self, not_ready: int | None) -> None:
        self.not_ready = not_ready
        self.paths: list[str] = []

    def answer(self, path: str) -> tuple[int, str]:
        self.paths.append(path)
        if path == "/healthz":
            return 200, "ok\n"
        if path != "/readyz":
            return 404, "not found\n"
        polls = self.paths.count("/readyz")
        if self.not_ready is None or polls <= self.not_ready:
            return 503, self.REASON + "\n"
        return 200, "ok: 3 nodes from metrics-server, 4s old\n"


@contextlib.contextmanager
def _serve_extender(ext: _Extender) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
            status, text = ext.answer(self.path)
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def _wait(tmp_path: Path, listen: str) -> subprocess.CompletedProcess[str]:
    """The wait node.yml includes after a (re)start, with a short poll budget. It asks the
    health listener: with TLS the scheduler's port answers the scheduler only."""
    return _play(
        tmp_path,
        "wait_ready.yml",
        {
            "loadwise_extender_health_listen": listen,
            "loadwise_extender_health_retries": 4,
            "loadwise_extender_health_delay": 1,
        },
        [],
    )


def test_the_wait_fails_with_the_reason_readyz_gives(tmp_path: Path) -> None:
    """An extender that serves HTTP but never gets load data is a failed install, and the
    operator reads why in the failure, not only "status 503"."""
    ext = _Extender(not_ready=None)
    with _serve_extender(ext) as listen:
        run = _wait(tmp_path, listen)
    assert run.returncode != 0, run.stdout
    assert _Extender.REASON in run.stdout, run.stdout
    assert ext.paths.count("/readyz") == 4 + 1, ext.paths  # Ansible: retries after the first


def test_the_wait_retries_until_readyz_says_ready(tmp_path: Path) -> None:
    ext = _Extender(not_ready=2)
    with _serve_extender(ext) as listen:
        run = _wait(tmp_path, listen)
    assert run.returncode == 0, run.stdout + run.stderr
    assert ext.paths == ["/readyz"] * 3


RENDER_PLAY = """\
- name: Render the extender's config file as node.yml does, with the roles' defaults
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The defaults of roles/loadwise and roles/loadwise_extender
      ansible.builtin.include_vars:
        file: "{{ item }}"
      loop:
        - "%(root)s/roles/loadwise/defaults/main.yml"
        - "%(root)s/roles/loadwise_extender/defaults/main.yml"
    - name: Render
      ansible.builtin.template:
        src: "%(root)s/roles/loadwise_extender/templates/extender.yaml.j2"
        dest: "%(dest)s"
        mode: "0600"
"""


# A source that needs no kubeconfig, so the extender's loader checks the file alone.
FILE_SOURCE = ("-e", "loadwise_extender_source=file", "-e", "loadwise_extender_source_file=/w.json")


def _render(tmp_path: Path, *extra: str) -> Path:
    dest = tmp_path / "extender.yaml"
    playbook = tmp_path / "render.yml"
    playbook.write_text(RENDER_PLAY % {"root": ROOT, "dest": dest})
    run = ansible_playbook(playbook, *extra)
    assert run.returncode == 0, run.stdout + run.stderr
    return dest


def test_max_stale_seconds_reaches_the_extender(tmp_path: Path) -> None:
    """Set in the inventory (a string there, as an INI inventory gives it), it is in the file
    the role writes and the extender's own loader reads it as that many seconds."""
    from loadwise.extender.config import load_settings

    dest = _render(tmp_path, *FILE_SOURCE, "-e", "loadwise_extender_max_stale_seconds=900")
    assert yaml.safe_load(dest.read_text())["source"]["max_stale_seconds"] == 900
    assert load_settings(dest).source.max_stale == 900


def test_max_stale_seconds_unset_leaves_the_extenders_default(tmp_path: Path) -> None:
    from loadwise.extender.config import load_settings

    dest = _render(tmp_path, *FILE_SOURCE, "-e", "loadwise_extender_stale_after_seconds=700")
    assert "max_stale_seconds" not in yaml.safe_load(dest.read_text())["source"]
    # the extender's documented default, max(600, stale_after) (docs/contracts.md)
    assert load_settings(dest).source.max_stale == 700


@pytest.mark.parametrize("enabled", [True, False])
def test_filter_enabled_reaches_the_extender(tmp_path: Path, enabled: bool) -> None:
    """The same variable that drops the scheduler's filter verb (tests/ansible/
    test_scheduler_config_tls.py) tells the extender to score those nodes lowest instead."""
    from loadwise.extender.config import load_settings

    dest = _render(tmp_path, *FILE_SOURCE, "-e", f"loadwise_filter_enabled={str(enabled).lower()}")
    assert load_settings(dest).filter.enabled is enabled
