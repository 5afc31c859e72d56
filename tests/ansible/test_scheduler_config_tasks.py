"""Task files of roles/loadwise_scheduler_config run by ansible-playbook on this machine.

foreign.yml (the refusal of a scheduler config that is not loadwise's, both flavours) and
rollback_manifest.yml (how the kubeadm manifest goes back) over the local connection, with
every path the role reads pointed into the test's directory and, for k3s, a systemctl on
PATH answering `show -p ExecStart` as systemd does. No API server: loadwise_cluster_objects
is false, so kubeadm-config is not read here (the lab reads it: tests/lab/test_e2e_site.py).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.fake_kubernetes_core import install
from tests.ansible.fakes import path_with
from tests.ansible.playbook import ansible_playbook
from tests.ansible.test_filter_plugin import MANIFEST, SHA, plugin

ROOT = Path(__file__).resolve().parents[2]
KUBESPRAY = "/etc/kubernetes/kubescheduler-config.yaml"
CONFIG = "/etc/kubernetes/loadwise-scheduler-config.yaml"
K3S_CONFIG = "/etc/rancher/k3s/loadwise-scheduler-config.yaml"

PLAYBOOK = """\
- name: Include a task file of the role
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Include
      ansible.builtin.include_role:
        name: loadwise_scheduler_config
        tasks_from: {tasks}
"""


@pytest.fixture(autouse=True)
def _ansible_playbook() -> None:
    if not Path(sys.executable).with_name("ansible-playbook").exists():
        pytest.fail("ansible-playbook is not installed next to this Python (scripts/setup)")


def _play(
    tmp_path: Path, tasks: str, variables: dict[str, Any], env: dict[str, str] | None = None
) -> str:
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK.format(tasks=tasks))
    extra = tmp_path / "vars.yml"
    extra.write_text(
        yaml.safe_dump(
            {
                "loadwise_cluster_objects": False,
                "loadwise_backup_dir": str(tmp_path / "backup"),
                "ansible_python_interpreter": sys.executable,
                **variables,
            }
        )
    )
    proc = ansible_playbook(playbook, "-e", f"@{extra}", env=env or path_with(tmp_path / "bin", {}))
    return f"rc={proc.returncode}\n{proc.stdout}{proc.stderr}"


def _manifest(tmp_path: Path, *extra_args: str, version: str = "v1.31.2") -> Path:
    pod = yaml.safe_load(MANIFEST.read_text().replace("@VERSION@", version))
    pod["spec"]["containers"][0]["command"] += list(extra_args)
    path = tmp_path / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(pod))
    return path


def _kubeadm_vars(tmp_path: Path, manifest: Path) -> dict[str, Any]:
    return {
        "loadwise_preflight_detected_flavour": "kubeadm",
        "loadwise_scheduler_config_kubeadm_manifest": str(manifest),
        "loadwise_scheduler_config_kubeadm_config_path": CONFIG,
    }


def test_kubespray_config_in_the_manifest_is_refused(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, f"--config={KUBESPRAY}")
    before = manifest.read_bytes()
    out = _play(tmp_path, "foreign", _kubeadm_vars(tmp_path, manifest))
    assert out.startswith("rc=2"), out
    assert f"already has a configuration file of its own: {manifest}: --config={KUBESPRAY}" in out
    assert "kube_scheduler_extenders" in out and "Nothing was changed" in out
    assert manifest.read_bytes() == before


def test_stock_and_loadwise_manifests_pass(tmp_path: Path) -> None:
    stock = _manifest(tmp_path)
    assert _play(tmp_path, "foreign", _kubeadm_vars(tmp_path, stock)).startswith("rc=0")
    ours = tmp_path / "ours.yaml"
    ours.write_text(
        yaml.safe_dump(
            plugin.loadwise_scheduler_manifest(
                yaml.safe_load(stock.read_text()),
                "/etc/kubernetes/loadwise-scheduler-config.yaml",
                SHA,
            )
        )
    )
    out = _play(tmp_path, "foreign", _kubeadm_vars(tmp_path, ours))
    assert out.startswith("rc=0"), out


EXEC_PLAIN = (
    "{ path=/usr/local/bin/k3s ; argv[]=/usr/local/bin/k3s server ; ignore_errors=no ; pid=0 }"
)


def _k3s(tmp_path: Path, files: dict[str, Any], exec_start: str = EXEC_PLAIN) -> str:
    etc = tmp_path / "k3s"
    (etc / "config.yaml.d").mkdir(parents=True)
    for name, data in files.items():
        (etc / name).write_text(yaml.safe_dump(data))
    calls = tmp_path / "calls"
    env = path_with(tmp_path / "bin", {"systemctl": f"echo \"$*\" >> {calls}; echo '{exec_start}'"})
    out = _play(
        tmp_path,
        "foreign",
        {
            "loadwise_preflight_detected_flavour": "k3s",
            "loadwise_scheduler_config_k3s_config_file": str(etc / "config.yaml"),
            "loadwise_scheduler_config_k3s_config_path": K3S_CONFIG,
        },
        env,
    )
    assert calls.read_text().splitlines() == ["show -p ExecStart --value k3s"]
    return out


def test_k3s_operator_config_arg_is_refused(tmp_path: Path) -> None:
    out = _k3s(
        tmp_path, {"config.yaml": {"kube-scheduler-arg": ["config=/etc/rancher/k3s/mine.yaml"]}}
    )
    assert out.startswith("rc=2"), out
    assert "kube-scheduler-arg: config=/etc/rancher/k3s/mine.yaml" in out


def test_k3s_later_dropin_without_plus_is_refused(tmp_path: Path) -> None:
    out = _k3s(
        tmp_path,
        {
            "config.yaml": {"kube-scheduler-arg": ["bind-address=0.0.0.0"]},
            "config.yaml.d/99-metrics.yaml": {"kube-scheduler-arg": ["v=2"]},
        },
    )
    assert out.startswith("rc=2"), out
    assert "99-metrics.yaml sets kube-scheduler-arg without" in out


def test_k3s_unit_flag_is_refused(tmp_path: Path) -> None:
    exec_start = (
        "{ path=/usr/local/bin/k3s ; argv[]=/usr/local/bin/k3s server"
        " --kube-scheduler-arg=bind-address=0.0.0.0 ; ignore_errors=no ; pid=0 }"
    )
    out = _k3s(tmp_path, {"config.yaml": {}}, exec_start)
    assert out.startswith("rc=2"), out
    assert "--kube-scheduler-arg on the command line of unit k3s" in out


def test_k3s_operator_args_and_earlier_dropins_pass(tmp_path: Path) -> None:
    out = _k3s(
        tmp_path,
        {
            "config.yaml": {"kube-scheduler-arg": ["bind-address=0.0.0.0"]},
            "config.yaml.d/10-site.yaml": {"kube-scheduler-arg+": ["v=2"]},
            "config.yaml.d/90-loadwise.yaml": {
                "kube-scheduler-arg+": ["config=/etc/rancher/k3s/loadwise-scheduler-config.yaml"]
            },
            "config.yaml.d/95-later.yaml": {
                "kube-scheduler-arg+": ["leader-elect-retry-period=3s"]
            },
        },
    )
    assert out.startswith("rc=0"), out


# --- rollback_manifest.yml: after `kubeadm upgrade apply` ---


def _backed_up(tmp_path: Path, manifest: Path, pristine: str, left: str) -> None:
    """What site.yml keeps for `manifest`: its pristine copy, and the sha256 of the text it
    left (recorded once that scheduler was proven healthy)."""
    backup = tmp_path / "backup"
    (backup / f"pristine{manifest}").parent.mkdir(parents=True)
    (backup / f"pristine{manifest}").write_text(pristine)
    (backup / f"written{manifest}.sha256").parent.mkdir(parents=True)
    (backup / f"written{manifest}.sha256").write_text(
        f"{hashlib.sha256(left.encode()).hexdigest()}  {manifest}\n"
    )


def test_rollback_after_an_upgrade_keeps_the_new_version_and_flag(tmp_path: Path) -> None:
    config = CONFIG
    stock = _manifest(tmp_path)
    pristine = stock.read_text()
    left = yaml.safe_dump(
        plugin.loadwise_scheduler_manifest(yaml.safe_load(pristine), config, SHA), indent=2
    )
    _backed_up(tmp_path, stock, pristine, left)
    # kubeadm upgrade apply to v1.32.0 renders the manifest again from the patched
    # kubeadm-config (--config and the volume come back), plus the operator's flag.
    upgraded = yaml.safe_load(left)
    container = upgraded["spec"]["containers"][0]
    container["image"] = "registry.k8s.io/kube-scheduler:v1.32.0"
    container["command"].append("--profiling=false")
    upgraded["metadata"].pop("annotations")
    stock.write_text(yaml.safe_dump(upgraded, indent=4))

    out = _play(tmp_path, "rollback_manifest", _kubeadm_vars(tmp_path, stock))
    assert out.startswith("rc=0"), out
    back = yaml.safe_load(stock.read_text())
    container = back["spec"]["containers"][0]
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.32.0"
    assert "--profiling=false" in container["command"]
    assert f"--config={config}" not in container["command"]
    assert [v["name"] for v in back["spec"]["volumes"]] == ["kubeconfig"]


def test_rollback_on_a_node_joined_after_site_takes_loadwise_out(tmp_path: Path) -> None:
    """`kubeadm join --control-plane` after site.yml renders the new node's manifest from the
    patched kubeadm-config: loadwise's flag and mounts, no annotation. site.yml --limit on that
    node backs it up as "pristine", writes its own edit and records it. Those backed-up bytes
    are not the stock scheduler: rollback takes loadwise out of the current manifest."""
    stock = yaml.safe_load(_manifest(tmp_path).read_text())
    tls = "/etc/kubernetes/loadwise-tls"
    joined = yaml.safe_dump(plugin.loadwise_scheduler_manifest(stock, CONFIG, "", True, tls))
    left = yaml.safe_dump(plugin.loadwise_scheduler_manifest(yaml.safe_load(joined), CONFIG, SHA,
                                                             True, tls), indent=2)  # fmt: skip
    node = tmp_path / "kube-scheduler.yaml"
    node.write_text(left)
    _backed_up(tmp_path, node, joined, left)

    out = _play(tmp_path, "rollback_manifest", _kubeadm_vars(tmp_path, node))
    assert out.startswith("rc=0"), out
    back = yaml.safe_load(node.read_text())
    assert f"--config={CONFIG}" not in back["spec"]["containers"][0]["command"]
    assert [v["name"] for v in back["spec"]["volumes"]] == ["kubeconfig"]
    assert back["spec"]["containers"][0]["image"] == stock["spec"]["containers"][0]["image"]


def test_rollback_of_kubeadm_config_never_restores_a_copy_that_names_loadwise() -> None:
    """The same for kube-system/kubeadm-config: a "pristine" ClusterConfiguration a later node
    kept while loadwise was already in it is not put back; loadwise is taken out instead."""
    stock = {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
             "kubernetesVersion": "v1.31.2", "scheduler": {}}  # fmt: skip
    patched = yaml.safe_dump(plugin.loadwise_cluster_configuration(stock, CONFIG))
    sha = hashlib.sha256(patched.encode()).hexdigest()
    result = plugin.loadwise_rollback_cluster_configuration(patched, CONFIG, sha, patched)
    assert result["how"] == "inverse", result
    assert yaml.safe_load(result["content"]) == stock
    # a copy without loadwise still comes back byte for byte
    pristine = yaml.safe_dump(stock, indent=4)
    result = plugin.loadwise_rollback_cluster_configuration(patched, CONFIG, sha, pristine)
    assert result == {"content": pristine, "how": "pristine"}


def test_rollback_of_an_untouched_manifest_leaves_it_for_the_byte_exact_restore(
    tmp_path: Path,
) -> None:
    config = CONFIG
    stock = _manifest(tmp_path)
    pristine = stock.read_text()
    left = yaml.safe_dump(
        plugin.loadwise_scheduler_manifest(yaml.safe_load(pristine), config, SHA), indent=2
    )
    stock.write_text(left)
    _backed_up(tmp_path, stock, pristine, left)
    out = _play(tmp_path, "rollback_manifest", _kubeadm_vars(tmp_path, stock))
    assert out.startswith("rc=0"), out
    # rollback_manifest.yml decided "pristine": it wrote nothing, restore.yml puts the copy back.
    assert stock.read_text() == left
    assert "Remove loadwise from the current manifest" in out and "skipping: [localhost]" in out


# --- kubeadm-config and a control plane of two nodes ---

CLUSTER_CONFIGURATION = """\
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.31.2
controlPlaneEndpoint: cp.example.lan:6443
scheduler: {}
"""

TWO_NODES_PLAY = """\
- name: The scheduler play's last node, as the role's tasks/main.yml includes it
  hosts: loadwise_control_plane
  gather_facts: false
  serial: 1
  max_fail_percentage: 0
  tasks:
    - name: Include
      ansible.builtin.include_role:
        name: loadwise_scheduler_config
        tasks_from: kubeadm_config
      when: inventory_hostname == ansible_play_hosts_all[-1]
"""


def _two_nodes(
    tmp_path: Path, cp2_converged: bool, *limit: str, cp2_certificates: bool = True
) -> tuple[str, str]:
    """cp-1 and cp-2 of one kubeadm cluster, each with its own manifest and directory of the
    scheduler's extender certificates; cp-1 runs loadwise's --config, cp-2 too or still the
    stock manifest (as its automatic restore leaves it after a failed restart, or as a run
    with --limit cp-1 leaves it). cp2_certificates False: cp-2 has no certificates (the
    extender role has not run there). Returns the run's output and kubeadm-config's
    ClusterConfiguration afterwards."""
    stock = yaml.safe_load(MANIFEST.read_text().replace("@VERSION@", "v1.31.2"))
    config = tmp_path / "loadwise-scheduler-config.yaml"
    config.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n")
    tls = {host: tmp_path / f"{host}-tls" for host in ("cp-1", "cp-2")}
    for host, directory in tls.items():
        if host == "cp-1" or cp2_certificates:
            (directory / "scheduler").mkdir(parents=True)
            (directory / "scheduler" / "client.crt").write_text("a certificate\n")
    mount = str(tls["cp-1"] / "scheduler")
    ours = plugin.loadwise_scheduler_manifest(stock, str(config), SHA, tls_dir=mount)
    manifests = {}
    for host, pod in (("cp-1", ours), ("cp-2", ours if cp2_converged else stock)):
        manifests[host] = tmp_path / f"{host}-kube-scheduler.yaml"
        manifests[host].write_text(yaml.safe_dump(pod))
    api = tmp_path / "api.json"
    api.write_text(
        json.dumps(
            {
                "objects": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"namespace": "kube-system", "name": "kubeadm-config"},
                        "data": {"ClusterConfiguration": CLUSTER_CONFIGURATION},
                    }
                ]
            }
        )
    )
    inventory = tmp_path / "inventory.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(
        yaml.safe_dump(
            {
                "loadwise_control_plane": {
                    "hosts": {
                        host: {
                            **local,
                            "loadwise_scheduler_config_kubeadm_manifest": str(path),
                            "loadwise_extender_tls_dir": str(tls[host]),
                        }
                        for host, path in manifests.items()
                    }
                }
            }
        )
    )
    playbook = tmp_path / "play.yml"
    playbook.write_text(TWO_NODES_PLAY)
    extra = tmp_path / "vars.yml"
    extra.write_text(
        yaml.safe_dump(
            {
                "loadwise_preflight_detected_flavour": "kubeadm",
                "loadwise_scheduler_config_kubeadm_config_path": str(config),
                "loadwise_backup_dir": str(tmp_path / "backup"),
            }
        )
    )
    env = {
        **path_with(tmp_path / "bin", {}),
        "ANSIBLE_COLLECTIONS_PATH": str(install(tmp_path)),
        "LOADWISE_FAKE_API": str(api),
    }
    proc = ansible_playbook(
        playbook, "-e", f"@{extra}", *limit, inventory=inventory, env=env, timeout=300
    )
    out = f"rc={proc.returncode}\n{proc.stdout}{proc.stderr}"
    stored = json.loads(api.read_text())["objects"][0]["data"]["ClusterConfiguration"]
    return out, str(stored)


def test_kubeadm_config_is_left_alone_while_a_node_lacks_loadwise(tmp_path: Path) -> None:
    """A run that got to the last node of the play while another control-plane node does not
    run loadwise's config (here: --limit cp-1) must not point kubeadm-config at a file that
    node lacks: its next `kubeadm upgrade node` would render a scheduler that cannot start."""
    out, stored = _two_nodes(tmp_path, False, "--limit", "cp-1")
    assert out.startswith("rc=0"), out
    assert stored == CLUSTER_CONFIGURATION
    assert "kubeadm-config was not changed" in out
    # cp-2 is outside the run: not contacted, and the cluster holds no record of it
    assert "cp-2 (outside this run, and not recorded as running" in out


def test_kubeadm_config_is_left_alone_while_a_node_lacks_the_schedulers_certificates(
    tmp_path: Path,
) -> None:
    """kubeadm renders the certificates' directory as a hostPath of type Directory: a node
    without it would get a scheduler that cannot start."""
    out, stored = _two_nodes(tmp_path, True, cp2_certificates=False)
    assert out.startswith("rc=0"), out
    assert stored == CLUSTER_CONFIGURATION
    assert f"cp-2 (no {tmp_path}/cp-2-tls/scheduler/client.crt)" in " ".join(out.split()), out


def test_kubeadm_config_is_patched_once_every_node_runs_loadwise(tmp_path: Path) -> None:
    out, stored = _two_nodes(tmp_path, True)
    assert out.startswith("rc=0"), out
    scheduler = yaml.safe_load(stored)["scheduler"]
    config = str(tmp_path / "loadwise-scheduler-config.yaml")
    assert {"name": "config", "value": config} in scheduler["extraArgs"], stored
    # the certificates' directory too, so that kubeadm upgrade and join keep it mounted
    mounts = {v["name"]: (v["hostPath"], v["pathType"]) for v in scheduler["extraVolumes"]}
    assert mounts["loadwise-scheduler-tls"] == (f"{tmp_path}/cp-2-tls/scheduler", "Directory")
    assert yaml.safe_load(stored)["kubernetesVersion"] == "v1.31.2"


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (
            "/opt/loadwise-test/no-such/kube-scheduler --config %s",
            "loadwise_scheduler_config_validate_command could not run on localhost",
        ),
        ("sh -c 'echo unknown plugin LoadwiseX >&2; exit 1' %s", "The scheduler rejects"),
    ],
    ids=["missing-program", "rejected"],
)
def test_validate_tells_a_missing_program_from_the_schedulers_refusal(
    tmp_path: Path, command: str, said: str
) -> None:
    """A validate command whose program is not on the node is named as such, not reported as
    the scheduler rejecting the configuration; a real refusal quotes the program's words."""
    out = _play(
        tmp_path,
        "validate",
        {
            "loadwise_scheduler_config_validate_command": command,
            "loadwise_scheduler_config_text": "apiVersion: kubescheduler.config.k8s.io/v1\n",
        },
    )
    assert out.startswith("rc=2"), out
    flat = " ".join(out.split())
    assert said in flat, out
    if "rejects" in said:
        assert "unknown plugin LoadwiseX" in flat and "could not run" not in flat, out
    else:
        assert "/opt/loadwise-test/no-such/kube-scheduler was not found" in flat, out
        assert "rejects" not in flat, out


@pytest.mark.parametrize(
    ("timeout", "ok"),
    [("5s", True), ("1m30s", True), ("500ms", True), ("1.5h", True), ("0s", False), ("5 s", False)],
)
def test_the_rendered_configurations_timeout_is_read_as_preflight_reads_it(
    tmp_path: Path, timeout: str, ok: bool
) -> None:
    """The check before any change reads httpTimeout as Go's time.ParseDuration does, the
    reading preflight applies to loadwise_scheduler_config_http_timeout: a value preflight
    let through (1m30s) is not refused here after the add-ons have changed."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf"},
        "extenders": [
            {"urlPrefix": "https://127.0.0.1:8888", "weight": 10, "httpTimeout": timeout}
        ],
    }
    out = _play(tmp_path, "check", {"loadwise_scheduler_config_text": yaml.safe_dump(config)})
    assert out.startswith("rc=0" if ok else "rc=2"), out
    if not ok:
        assert "The generated scheduler configuration is not valid" in " ".join(out.split())


# --- validation by the node's own kube-scheduler (validate.yml, validate_command auto) ---

GOOD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
# A stand-in for the static pod's kube-scheduler: its --version, and --config read as
# kube-scheduler reads it (a config naming an unknown plugin is refused, exit 1, its words on
# stderr); every call's arguments are appended to @CALLS@ (run as /proc/<pid>/exe, $0 says
# nothing of where the program lies).
FAKE_SCHEDULER = """#!/bin/sh
echo "$*" >> @CALLS@
[ "$1" = --version ] && { echo "Kubernetes v1.36.4"; exit 0; }
for a in "$@"; do case $a in --config=*) config=${a#--config=} ;; esac; done
if grep -q LoadwiseUnknown "$config"; then
    echo 'E1128 "command failed" err="plugin LoadwiseUnknown does not exist"' >&2
    exit 1
fi
exit 0
"""


def _process(proc: Path, pid: int, argv: list[str], program: Path) -> None:
    directory = proc / str(pid)
    directory.mkdir(parents=True)
    (directory / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
    (directory / "exe").symlink_to(program)


def _own_scheduler(tmp_path: Path) -> tuple[Path, Path]:
    """A /proc of the test's own, with kubeadm's kube-scheduler and an unrelated process; the
    proc directory and the calls file."""
    program = tmp_path / "image" / "kube-scheduler"
    program.parent.mkdir()
    program.write_text(FAKE_SCHEDULER.replace("@CALLS@", str(program.parent / "calls")))
    program.chmod(0o755)
    proc = tmp_path / "proc"
    _process(proc, 7, ["/usr/bin/containerd"], Path("/bin/true"))
    _process(
        proc,
        4242,
        ["kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf", "--leader-elect=true"],
        program,
    )
    return proc, program.parent / "calls"


def _validate(
    tmp_path: Path, flavour: str, text: str, *args: str, **variables: Any
) -> tuple[str, str]:
    """validate.yml run alone; its output and the record it left ('' when none)."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK.format(tasks="validate"))
    extra = tmp_path / "vars.yml"
    extra.write_text(
        yaml.safe_dump(
            {
                "loadwise_cluster_objects": False,
                "loadwise_backup_dir": str(tmp_path / "backup"),
                "ansible_python_interpreter": sys.executable,
                "loadwise_preflight_detected_flavour": flavour,
                "loadwise_scheduler_config_text": text,
                **variables,
            }
        )
    )
    proc = ansible_playbook(playbook, "-e", f"@{extra}", *args, env=path_with(tmp_path / "bin", {}))
    record = tmp_path / "backup" / "VALIDATION"
    out = " ".join(f"rc={proc.returncode}\n{proc.stdout}{proc.stderr}".split())
    return out, record.read_text() if record.exists() else ""


def test_auto_validates_with_the_nodes_own_running_scheduler(tmp_path: Path) -> None:
    proc, calls = _own_scheduler(tmp_path)
    out, record = _validate(tmp_path, "kubeadm", GOOD, loadwise_scheduler_config_proc_dir=str(proc))
    assert out.startswith("rc=0"), out
    made = calls.read_text().splitlines()
    assert made[0] == "--version", made
    config, *rest = made[1].split()
    assert config.startswith("--config=") and config.endswith(".loadwise-scheduler-config.yaml")
    assert rest == ["--write-config-to=/dev/null", "--secure-port=0"], made
    assert record == (
        f"validated by the node's own kube-scheduler, Kubernetes v1.36.4 ({proc}/4242/exe)\n"
    )
    assert "the scheduler configuration is not validated" not in out, out
    # (the output quotes the apostrophe of "node's" YAML's way)
    assert f"own kube-scheduler, Kubernetes v1.36.4 ({proc}/4242/exe)." in out, out


@pytest.mark.parametrize(
    "gates", [["--feature-gates=A=true,B=false"], ["--feature-gates", "A=true,B=false"]]
)
def test_auto_validates_with_the_feature_gates_the_scheduler_runs_with(
    tmp_path: Path, gates: list[str]
) -> None:
    """A configuration field behind a feature gate is valid only with that gate on: the
    check runs with the running scheduler's own --feature-gates, in either spelling."""
    proc, calls = _own_scheduler(tmp_path)
    argv = ["kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf", *gates]
    (proc / "4242" / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
    out, record = _validate(tmp_path, "kubeadm", GOOD, loadwise_scheduler_config_proc_dir=str(proc))
    assert out.startswith("rc=0"), out
    _config, *rest = calls.read_text().splitlines()[1].split()
    assert rest == [
        "--write-config-to=/dev/null",
        "--secure-port=0",
        "--feature-gates=A=true,B=false",
    ]
    assert record.endswith(f"({proc}/4242/exe), with its --feature-gates\n"), record


def test_auto_refuses_what_the_nodes_scheduler_refuses_under_check_too(tmp_path: Path) -> None:
    proc, _calls = _own_scheduler(tmp_path)
    bad = GOOD + "profiles:\n- plugins: {score: {enabled: [{name: LoadwiseUnknown}]}}\n"
    # without TLS: under --check the certificates TLS names would not be there yet
    for check in ((), ("--check",)):
        out, record = _validate(
            tmp_path,
            "kubeadm",
            bad,
            *check,
            loadwise_scheduler_config_proc_dir=str(proc),
            loadwise_extender_tls_enabled=False,
        )
        assert out.startswith("rc=2"), out
        assert "The scheduler rejects the generated configuration" in out, out
        assert "plugin LoadwiseUnknown does not exist" in out, out
        assert "nothing was changed" in out, out
        assert record == ""  # refused before the record, and before any file is written


@pytest.mark.parametrize(
    ("flavour", "variables", "reason"),
    [
        (
            "kubeadm",
            {"second": True},
            "no running kube-scheduler using /etc/kubernetes/scheduler.conf was found on the node",
        ),
        ("k3s", {}, "k3s runs kube-scheduler inside its own process"),
        ("kubeadm", {"loadwise_scheduler_config_validate_command": ""}, "is empty"),
    ],
    ids=["kubeadm-no-scheduler-running", "k3s", "turned-off"],
)
def test_a_configuration_not_validated_is_said_and_recorded(
    tmp_path: Path, flavour: str, variables: dict[str, Any], reason: str
) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    if variables.pop("second", False):
        # another scheduler on the node (its own kubeconfig) is not the node's scheduler
        _process(
            proc,
            99,
            ["kube-scheduler", "--kubeconfig=/etc/second/kubeconfig"],
            Path("/bin/false"),
        )
    out, record = _validate(
        tmp_path, flavour, GOOD, loadwise_scheduler_config_proc_dir=str(proc), **variables
    )
    assert out.startswith("rc=0"), out
    assert record.startswith("not validated: ") and reason in record, record
    assert "the scheduler configuration is not validated: " in out and reason in out, out
    # under --check the same is said, and nothing is written
    (tmp_path / "backup" / "VALIDATION").unlink()
    out, record = _validate(
        tmp_path,
        flavour,
        GOOD,
        "--check",
        loadwise_scheduler_config_proc_dir=str(proc),
        **variables,
    )
    assert out.startswith("rc=0") and reason in out, out
    assert record == ""


def test_validation_comes_before_any_change_to_the_node() -> None:
    """node.yml validates before it works out, backs up or writes any file (apply.yml)."""
    tasks = yaml.safe_load((ROOT / "roles/loadwise_scheduler_config/tasks/node.yml").read_text())
    included = [t.get("ansible.builtin.include_tasks") for t in tasks]
    validate = included.index("validate.yml")
    assert "when" not in tasks[validate], "validation is never skipped: validate.yml decides"
    assert validate < included.index("apply.yml")
    writes = [
        i for i, t in enumerate(tasks) if {"ansible.builtin.copy", "ansible.builtin.file"} & set(t)
    ]
    assert all(i > validate for i in writes), writes


def test_rollback_forgets_the_validation_record() -> None:
    """roles/loadwise's cleanup keeps the backup directory while any file is left in it: the
    record validate.yml writes there must go with the rollback's backups."""
    tasks = yaml.safe_load(
        (ROOT / "roles/loadwise_scheduler_config/tasks/rollback.yml").read_text()
    )
    removals = [
        t["ansible.builtin.file"]["path"]
        for t in tasks
        if isinstance(t.get("ansible.builtin.file"), dict)
        and t["ansible.builtin.file"].get("state") == "absent"
    ]
    assert "{{ loadwise_backup_dir }}/VALIDATION" in removals, removals
    validate = (ROOT / "roles/loadwise_scheduler_config/tasks/validate.yml").read_text()
    assert 'dest: "{{ loadwise_backup_dir }}/VALIDATION"' in validate


def test_a_first_check_run_says_the_certificates_it_would_write_are_not_there(
    tmp_path: Path,
) -> None:
    """Under --check the extender role writes no certificate, so the node's scheduler would
    refuse the configuration for the missing files alone: not validated, and said why."""
    proc, calls = _own_scheduler(tmp_path)
    out, _record = _validate(
        tmp_path,
        "kubeadm",
        GOOD,
        "--check",
        loadwise_scheduler_config_proc_dir=str(proc),
        loadwise_extender_tls_enabled=True,
        loadwise_extender_tls_dir=str(tmp_path / "no-tls-here"),
    )
    assert out.startswith("rc=0"), out
    assert "not validated in this check run: the extender certificates" in out, out
