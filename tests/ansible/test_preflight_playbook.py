"""playbooks/site.yml and rollback.yml up to preflight, run by ansible-playbook on this machine.

The inventories under tests/ansible/data/inventories are laid out as kubespray, k3s-ansible and
a plain kubeadm cluster ship theirs, with nothing of loadwise's added. Every host is reached
over the local connection (no network) and is a k3s stand-in: preflight finds "the k3s binary"
at a file the test made and is told the version. `--tags loadwise_preflight` runs only the
plays' always-tagged parts (host resolution, preflight), so nothing on this machine is changed
even if a check under test were missing.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.ansible.playbook import ansible_playbook

ROOT = Path(__file__).resolve().parents[2]
INVENTORIES = Path(__file__).resolve().parent / "data" / "inventories"
REPORT = "TASK [loadwise_preflight : Preflight | Report what was found]"


def _cert(seed: str) -> str:
    body = base64.b64encode((seed * 40).encode()).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"


def _node_vars(tmp_path: Path) -> Path:
    """Variables that make the local machine a k3s 1.31 server stand-in, node-side only."""
    (tmp_path / "k3s").write_text("stand-in for the k3s binary\n")
    values = {
        "ansible_connection": "local",
        "ansible_become": False,
        "ansible_python_interpreter": sys.executable,
        "loadwise_node_python": sys.executable,
        "loadwise_preflight_k3s_binary": str(tmp_path / "k3s"),
        "loadwise_preflight_k3s_unit": str(tmp_path / "k3s.service"),
        "loadwise_preflight_kubernetes_version": "1.31.4",
        # No API server: node-side changes only, load read from a file (as molecule/ does).
        "loadwise_cluster_objects": False,
        "loadwise_extender_source": "file",
        "loadwise_extender_source_file": "/var/lib/loadwise-test/watcher.json",
    }
    path = tmp_path / "node-vars.yml"
    path.write_text(yaml.safe_dump(values))
    return path


def _run(
    tmp_path: Path, inventory: Path, *extra: str, playbook: str = "site.yml"
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")}
    for name in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT"):
        env.pop(name, None)
    tags = ["--tags", "loadwise_preflight"] if playbook == "site.yml" else []
    return ansible_playbook(
        ROOT / "playbooks" / playbook,
        *tags,
        "-e",
        f"@{_node_vars(tmp_path)}",
        *extra,
        inventory=inventory,
        env=env,
        timeout=300,
    )


def _reported_hosts(out: str) -> list[str]:
    """The hosts preflight reported on (its last task), in order."""
    section = out.split(REPORT, 1)[1]
    section = min((section.split(marker, 1)[0] for marker in ("\nTASK [", "\nPLAY ")), key=len)
    return [
        line.split("[", 1)[1].split("]", 1)[0]
        for line in section.splitlines()
        if line.startswith("ok: [")
    ]


@pytest.mark.parametrize(
    ("inventory", "control_plane"),
    [
        ("kubespray.ini", ["node1"]),
        ("k3s-ansible.yml", ["192.16.35.11"]),
        ("plain.ini", ["cp-1"]),
    ],
)
def test_operator_inventories_pass_preflight_unchanged(
    tmp_path: Path, inventory: str, control_plane: list[str]
) -> None:
    run = _run(tmp_path, INVENTORIES / inventory)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    # Preflight ran on the control-plane hosts and only on them (no worker or agent).
    assert _reported_hosts(run.stdout) == control_plane, out


def test_a_group_of_the_operators_own_naming_is_chosen_by_an_inventory_variable(
    tmp_path: Path,
) -> None:
    refused = _run(tmp_path, INVENTORIES / "custom-group.ini")
    assert refused.returncode != 0
    assert (
        "No host of this inventory is in kube_control_plane or server or control_plane"
        in refused.stdout
    )
    assert "loadwise_control_plane_group" in refused.stdout

    # The variable in the inventory itself ([all:vars]), where operators keep their settings.
    inventory = tmp_path / "inventory.ini"
    text = (INVENTORIES / "custom-group.ini").read_text()
    inventory.write_text(text + "\n[all:vars]\nloadwise_control_plane_group=masters\n")
    run = _run(tmp_path, inventory)
    assert run.returncode == 0, run.stdout + run.stderr
    assert _reported_hosts(run.stdout) == ["master-1"]


@pytest.mark.parametrize("playbook", ["site.yml", "rollback.yml"])
def test_no_control_plane_host_is_a_failure_not_a_silent_success(
    tmp_path: Path, playbook: str
) -> None:
    run = _run(tmp_path, INVENTORIES / "custom-group.ini", playbook=playbook)
    assert run.returncode != 0, run.stdout
    assert "No host of this inventory is in" in run.stdout
    assert "PLAY [Preflight]" not in run.stdout
    assert "PLAY [Detect the cluster]" not in run.stdout


@pytest.mark.parametrize("playbook", ["site.yml", "rollback.yml"])
def test_an_inventory_without_hosts_fails(tmp_path: Path, playbook: str) -> None:
    inventory = tmp_path / "empty.ini"
    inventory.write_text("# no hosts\n")
    run = _run(tmp_path, inventory, playbook=playbook)
    assert run.returncode != 0, run.stdout
    assert "loadwise_control_plane" in run.stdout + run.stderr


LOAD_WATCHER = {"loadwise_extender_source": "load-watcher"}


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"loadwise_scheduler_config_weight": -5}, "loadwise_scheduler_config_weight"),
        (
            {"loadwise_scheduler_config_http_timeout": "5 seconds"},
            "loadwise_scheduler_config_http_timeout",
        ),
        (
            {
                **LOAD_WATCHER,
                "loadwise_cluster_objects": True,
                "loadwise_load_watcher_enabled": False,
            },
            "loadwise_load_watcher_enabled is false but loadwise_extender_source is load-watcher",
        ),
        (
            {
                **LOAD_WATCHER,
                "loadwise_load_watcher_enabled": True,
                "loadwise_load_watcher_mode": "deployment",
                "loadwise_load_watcher_image": "registry.example.lan/load-watcher:v0.2.4",
            },
            "loadwise_cluster_objects is false, so no load-watcher Service",
        ),
        ({"loadwise_extender_stale_after_seconds": 10}, "loadwise_extender_stale_after_seconds"),
        (
            {"loadwise_extender_max_stale_seconds": 120},
            "loadwise_extender_max_stale_seconds must be a whole number of seconds, at least",
        ),
        (
            {"loadwise_extender_max_stale_seconds": -1},
            "loadwise_extender_max_stale_seconds must be a whole number of seconds, at least",
        ),
        (
            {**LOAD_WATCHER, "loadwise_extender_source_url": "load-watcher:2020"},
            "loadwise_extender_source_url must be an http(s):// URL",
        ),
        ({"loadwise_extender_polcy": "least-used"}, "did you mean loadwise_extender_policy?"),
        ({"loadwise_extender_policy": "most-used"}, "loadwise_extender_policy"),
        (
            {"loadwise_extender_health_listen": "0.0.0.0:8889"},
            "loadwise_extender_health_listen must be a loopback HOST:PORT",
        ),
        (
            {"loadwise_extender_health_listen": "127.0.0.1:8888"},
            "a loopback HOST:PORT other than loadwise_listen",
        ),
        (
            {"loadwise_extender_tls_renew_days": 365},
            "loadwise_extender_tls_renew_days must be 0 or more and less than",
        ),
        (
            {"loadwise_extender_tls_ca_valid_days": 100},
            "a certificate cannot outlive the CA that signed it",
        ),
        ({"loadwise_extender_tls_valid_days": "a year"}, "loadwise_extender_tls_valid_days"),
        (
            {"loadwise_scheduler_config_second_memory_limit": "512MB"},
            "loadwise_scheduler_config_second_memory_limit must be a positive Kubernetes memory",
        ),
        (
            {"loadwise_scheduler_config_second_image": "kube-scheduler:v1.36 extra"},
            "loadwise_scheduler_config_second_image is not an image reference",
        ),
        (
            {"loadwise_scheduler_config_second_memory_limit": "0Mi"},
            "loadwise_scheduler_config_second_memory_limit must be a positive Kubernetes memory",
        ),
    ],
)
def test_a_bad_variable_fails_in_preflight_naming_it(
    tmp_path: Path, bad: dict[str, object], named: str
) -> None:
    extra = tmp_path / "bad.yml"
    extra.write_text(yaml.safe_dump(bad))
    run = _run(tmp_path, INVENTORIES / "plain.ini", "-e", f"@{extra}")
    assert run.returncode != 0, run.stdout
    failed = run.stdout.split("fatal: [", 1)[0].rsplit("TASK [", 1)[1]
    assert failed.startswith("loadwise_preflight : Preflight |"), run.stdout
    assert named in " ".join(run.stdout.split())
    assert "Nothing was changed" in run.stdout or "validate" in failed
    assert REPORT not in run.stdout


def test_plain_http_is_allowed_with_a_warning_that_says_what_it_costs(tmp_path: Path) -> None:
    quiet = _run(tmp_path, INVENTORIES / "plain.ini")
    assert quiet.returncode == 0, quiet.stdout
    assert "WARNING: loadwise_extender_tls_enabled is false" not in quiet.stdout

    run = _run(tmp_path, INVENTORIES / "plain.ini", "-e", "loadwise_extender_tls_enabled=false")
    assert run.returncode == 0, run.stdout
    said = " ".join(run.stdout.split())
    assert "WARNING: loadwise_extender_tls_enabled is false" in said, run.stdout
    assert "any process on each control-plane node" in said


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _kubeconfig(path: Path, server: str, ca: str, *, by_file: bool) -> None:
    cluster: dict[str, str] = {"server": server}
    if by_file:
        (path.parent / (path.name + ".ca.crt")).write_text(ca)
        cluster["certificate-authority"] = path.name + ".ca.crt"  # relative: to the kubeconfig
    else:
        cluster["certificate-authority-data"] = base64.b64encode(ca.encode()).decode()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        # The current context is another cluster's: only the context named by the
        # variables under test leads to `cluster`.
        "clusters": [
            {"name": "c", "cluster": cluster},
            {
                "name": "o",
                "cluster": {
                    "server": "https://10.9.9.9:6443",
                    "certificate-authority-data": _b64(_cert("o")),
                },
            },
        ],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [
            {"name": "ctx", "context": {"cluster": "c", "user": "u"}},
            {"name": "other", "context": {"cluster": "o", "user": "u"}},
        ],
        "current-context": "other",
    }
    path.write_text(yaml.safe_dump(doc))


def k3s_scheduler_kubeconfig(tmp_path: Path, ca: str) -> Path:
    """A k3s server's scheduler kubeconfig trusting `ca`, which it names by an absolute path
    (server/tls/server-ca.crt on a real server)."""
    ca_file = tmp_path / "server-ca.crt"
    ca_file.write_text(ca)
    path = tmp_path / "scheduler.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {
                            "server": "https://127.0.0.1:6444",
                            "certificate-authority": str(ca_file),
                        },
                    }
                ],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
                "current-context": "local",
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("same_cluster", "naming"),
    [(True, "loadwise"), (False, "loadwise"), (True, "k3s-ansible"), (False, "k3s-ansible")],
)
def test_preflight_proves_the_controllers_api_is_the_inventorys_cluster(
    tmp_path: Path, same_cluster: bool, naming: str
) -> None:
    """naming k3s-ansible: the kubeconfig and context come from k3s-ansible's own inventory
    variables (kubeconfig, cluster_context), not loadwise's."""
    node_ca = _cert("node-cluster-ca")
    node_kubeconfig = k3s_scheduler_kubeconfig(tmp_path, node_ca)
    controller = tmp_path / "controller.kubeconfig"
    _kubeconfig(
        controller,
        "https://10.0.0.1:6443",
        node_ca if same_cluster else _cert("another-cluster"),
        by_file=True,
    )
    settings = tmp_path / "identity.yml"
    settings.write_text(
        yaml.safe_dump(
            {
                "loadwise_cluster_objects": True,
                "loadwise_load_watcher_enabled": False,
                "loadwise_extender_source": "metrics-server",
                **(
                    {"loadwise_kubeconfig": str(controller), "loadwise_context": "ctx"}
                    if naming == "loadwise"
                    else {"kubeconfig": str(controller), "cluster_context": "ctx"}
                ),
                "loadwise_preflight_scheduler_kubeconfigs": {
                    "k3s": str(node_kubeconfig),
                    "kubeadm": "/nonexistent",
                },
            }
        )
    )
    run = _run(tmp_path, INVENTORIES / "plain.ini", "-e", f"@{settings}")
    if same_cluster:
        assert run.returncode == 0, run.stdout + run.stderr
        assert _reported_hosts(run.stdout) == ["cp-1"]
    else:
        assert run.returncode != 0, run.stdout
        assert "cp-1 is not in the cluster the controller would change" in run.stdout
        assert str(controller) in run.stdout
        assert REPORT not in run.stdout


def test_a_32_bit_userland_on_a_64_bit_kernel_is_refused(tmp_path: Path) -> None:
    """Raspberry Pi OS 32-bit on the Pi's 64-bit kernel: uname says aarch64, pointers are 32 bit.

    The node Python is this Python made to see the world as such an interpreter does
    (sys.maxsize of a 32-bit build, platform.machine() from the 64-bit kernel); it runs the
    code preflight hands it unchanged.
    """
    python = tmp_path / "python3"
    python.write_text(
        "#!/bin/sh\n"
        "# usage as preflight calls it: python3 -c CODE\n"
        f"exec {sys.executable} -c 'import sys, platform; sys.maxsize = 2**31 - 1; "
        'platform.machine = lambda: "aarch64"; code = sys.argv[1]; sys.argv = sys.argv[:1]; '
        'exec(compile(code, "<c>", "exec"), {"__name__": "__main__"})\' "$2"\n'
    )
    python.chmod(0o755)
    run = _run(tmp_path, INVENTORIES / "plain.ini", "-e", f"loadwise_node_python={python}")
    assert run.returncode != 0, run.stdout
    assert "runs a armv7l userland (wheel target cp" in run.stdout
    assert "no msgspec wheel for 32-bit ARM" in run.stdout
    assert REPORT not in run.stdout


def test_inventory_example_passes_preflight_as_shipped(tmp_path: Path) -> None:
    """Every loadwise_* variable inventory.example sets or suggests is one a role declares."""
    text = (ROOT / "inventory.example").read_text()
    # the suggestions too: uncomment every `# loadwise_...=value` line
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(re.sub(r"(?m)^# (loadwise_[a-z0-9_]+=)", r"\1", text))
    names = set(re.findall(r"(?m)^(loadwise_[a-z0-9_]+)=", inventory.read_text()))
    assert {"loadwise_control_plane_group", "loadwise_kubeconfig", "loadwise_context"} <= names
    run = _run(
        tmp_path,
        inventory,
        "-e",
        "loadwise_control_plane_group=server",
        "-e",
        "loadwise_cluster_objects=false",
        "-e",
        "loadwise_extender_source=file",
        "-e",
        "loadwise_scheduler_config_validate_command=''",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert _reported_hosts(run.stdout) == ["k3s-server-1"]


def test_inventory_example_does_not_offer_second_scheduler_mode_for_managed_clusters() -> None:
    """A managed control plane (EKS, GKE, AKS) has no node loadwise can log in to; every mode
    needs root on the control-plane nodes."""
    text = (ROOT / "inventory.example").read_text()
    block = text.split("loadwise_scheduler_config_mode=second-scheduler", 1)[0].rsplit("\n\n", 1)[1]
    assert "control-plane nodes" in block
    for sentence in re.split(r"(?<=[.:])\s", " ".join(block.replace("#", " ").split())):
        if "managed" in sentence.lower():
            assert re.search(r"\bno way\b|\bcannot\b|\bnot\b", sentence), sentence


@pytest.mark.parametrize(
    "where",
    ["config.yaml", "config.yaml.d/50-operator.yaml"],
)
def test_a_foreign_k3s_scheduler_config_stops_site_in_preflight(tmp_path: Path, where: str) -> None:
    """An operator's own `kube-scheduler-arg: [config=...]` (k3s-io/k3s#5354's recipe) is
    refused by the preflight play, naming the file and the flag, and no later play starts,
    so the add-ons and the extender (play 2 and 3) are never touched."""
    etc = tmp_path / "rancher-k3s"
    (etc / "config.yaml.d").mkdir(parents=True)
    (etc / "config.yaml").write_text("write-kubeconfig-mode: '0644'\n")
    (etc / where).write_text(
        "kube-scheduler-arg:\n  - bind-address=0.0.0.0\n  - config=/var/lib/scheduler/mine.yaml\n"
    )
    before = {p: p.read_bytes() for p in etc.rglob("*") if p.is_file()}
    run = _run(
        tmp_path,
        INVENTORIES / "plain.ini",
        "-e",
        f"loadwise_scheduler_config_k3s_config_file={etc / 'config.yaml'}",
    )
    assert run.returncode != 0, run.stdout
    assert f"{etc / where}: kube-scheduler-arg: config=/var/lib/scheduler/mine.yaml" in run.stdout
    assert "Nothing was changed" in run.stdout
    assert "PLAY [Preflight]" in run.stdout
    assert "PLAY [Cluster add-ons" not in run.stdout
    assert "PLAY [Extender" not in run.stdout
    assert {p: p.read_bytes() for p in etc.rglob("*") if p.is_file()} == before


def test_loadwise_own_k3s_scheduler_config_passes_preflight(tmp_path: Path) -> None:
    """A re-run: the drop-in loadwise wrote last time is not a foreign config."""
    etc = tmp_path / "rancher-k3s"
    (etc / "config.yaml.d").mkdir(parents=True)
    (etc / "config.yaml").write_text("kube-scheduler-arg:\n  - bind-address=0.0.0.0\n")
    (etc / "config.yaml.d/90-loadwise.yaml").write_text(
        "kube-scheduler-arg+:\n  - config=/etc/rancher/k3s/loadwise-scheduler-config.yaml\n"
    )
    run = _run(
        tmp_path,
        INVENTORIES / "plain.ini",
        "-e",
        f"loadwise_scheduler_config_k3s_config_file={etc / 'config.yaml'}",
    )
    assert run.returncode == 0, run.stdout + run.stderr
