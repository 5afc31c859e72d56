"""Filters that edit kubeadm's kube-scheduler objects as data, never as text.

- ``loadwise_scheduler_manifest``: the static pod with ``--config=PATH``, a read-only
  hostPath mount of that file, with TLS a read-only hostPath mount of the directory of the
  scheduler's extender certificates (``tls_dir``), and an annotation carrying the config's
  checksum (so a config-only change still makes the kubelet recreate the pod).
- ``loadwise_cluster_configuration``: kubeadm's ClusterConfiguration with the same flag
  and volumes under ``scheduler``, in the v1beta3 (map) or v1beta4 (list) form, so that
  ``kubeadm upgrade`` regenerates the manifest with them.

Both are idempotent: applying them to their own output changes nothing. With
``present=False`` they remove exactly what they add.

- ``loadwise_rollback_manifest`` / ``loadwise_rollback_cluster_configuration``: what rollback
  writes back. The pristine text, byte for byte, only while the current text is exactly what
  loadwise left (its sha256 was recorded then); otherwise (``kubeadm upgrade apply`` rewrote
  the manifest with a new image tag, the operator added a flag) the inverse edit applied to
  the *current* object, so the new version and every foreign change survive.
- ``loadwise_foreign_scheduler_config``: a scheduler ``--config`` that is not loadwise's, in
  a kubeadm manifest or ClusterConfiguration (kubespray always passes its own).
- ``loadwise_k3s_scheduler_args``: the kube-scheduler-arg list k3s ends up with from its
  config file, the drop-ins and the unit's command line, merged as k3s documents it.
"""

from __future__ import annotations

import copy
import hashlib
import shlex
from typing import Any

import yaml

VOLUME = "loadwise-scheduler-config"
TLS_VOLUME = "loadwise-scheduler-tls"
OURS = (VOLUME, TLS_VOLUME)
ANNOTATION = "loadwise.dev/scheduler-config-sha256"


def _container(pod):
    for container in pod["spec"]["containers"]:
        if container.get("name") == "kube-scheduler":
            return container
    raise ValueError("no container named kube-scheduler in the manifest")


def _ours(config_path, tls_dir):
    """(name, host path, hostPath type) of each volume loadwise mounts into the scheduler."""
    volumes = [(VOLUME, config_path, "File")]
    if tls_dir:
        volumes.append((TLS_VOLUME, tls_dir, "Directory"))
    return volumes


def loadwise_scheduler_manifest(manifest, config_path, config_sha256="", present=True, tls_dir=""):
    pod = copy.deepcopy(manifest)
    container = _container(pod)
    command = [a for a in container.get("command", []) if not str(a).startswith("--config=")]
    if present:
        command.append(f"--config={config_path}")
        # kubeadm writes its flags sorted; keep the binary first and the rest sorted.
        command = command[:1] + sorted(command[1:])
    container["command"] = command

    mounts = [m for m in container.get("volumeMounts", []) or [] if m.get("name") not in OURS]
    volumes = [v for v in pod["spec"].get("volumes", []) or [] if v.get("name") not in OURS]
    if present:
        for name, path, kind in _ours(config_path, tls_dir):
            mounts.append({"mountPath": path, "name": name, "readOnly": True})
            volumes.append({"hostPath": {"path": path, "type": kind}, "name": name})
    container["volumeMounts"] = sorted(mounts, key=lambda m: m["name"])
    pod["spec"]["volumes"] = sorted(volumes, key=lambda v: v["name"])

    meta = pod.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    annotations.pop(ANNOTATION, None)
    if present and config_sha256:
        annotations[ANNOTATION] = config_sha256
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return pod


def loadwise_cluster_configuration(cluster_config, config_path, present=True, tls_dir=""):
    cfg = copy.deepcopy(cluster_config)
    # kubeadm stores `scheduler: {}` when it has nothing to say; keep such a key on removal.
    had_scheduler = "scheduler" in cfg
    scheduler = cfg.setdefault("scheduler", {}) or {}
    cfg["scheduler"] = scheduler
    v1beta4 = str(cfg.get("apiVersion", "")).endswith("/v1beta4")

    args = scheduler.get("extraArgs") or ([] if v1beta4 else {})
    if isinstance(args, list):
        args = [a for a in args if a.get("name") != "config"]
        if present:
            args.append({"name": "config", "value": config_path})
    else:
        args = {k: v for k, v in args.items() if k != "config"}
        if present:
            args["config"] = config_path
    if args:
        scheduler["extraArgs"] = args
    else:
        scheduler.pop("extraArgs", None)

    volumes = [v for v in scheduler.get("extraVolumes") or [] if v.get("name") not in OURS]
    if present:
        for name, path, kind in _ours(config_path, tls_dir):
            volumes.append(
                {
                    "name": name,
                    "hostPath": path,
                    "mountPath": path,
                    "readOnly": True,
                    "pathType": kind,
                }
            )
    if volumes:
        scheduler["extraVolumes"] = volumes
    else:
        scheduler.pop("extraVolumes", None)
    if not scheduler and not had_scheduler:
        cfg.pop("scheduler", None)
    return cfg


def _sha256(text):
    return hashlib.sha256(str(text).encode("utf-8")).hexdigest()


def _dump(data):
    # The same layout as Ansible's to_nice_yaml(indent=2, width=256), which wrote the file.
    return yaml.safe_dump(data, indent=2, width=256, default_flow_style=False, allow_unicode=True)


def _rollback(current_text, left_sha256, pristine_text, edit, ours):
    """{"content": text to write, "how": "pristine" | "inverse" | "untouched"}.

    The pristine bytes only when the current text is what loadwise left AND loadwise's edit is
    all that separates it from the pristine copy. A later site.yml records a new "written"
    sha256 but keeps the first pristine copy, so after `kubeadm upgrade apply` and a re-run the
    text is what loadwise left, yet on a base with the new image tag: the old bytes would
    downgrade the scheduler. Then the inverse edit of the current text is what goes back.
    Nor when the "pristine" copy already has loadwise in it (ours(obj) says so): a
    control-plane node joined after site.yml got its manifest from the patched kubeadm-config,
    and the first run there backed that up; its bytes would leave the node's scheduler
    pointed at the config rollback deletes.
    edit(obj, present) is loadwise's edit (present=True) or its inverse (present=False)."""
    current_text = str(current_text)
    current = yaml.safe_load(current_text)
    if not isinstance(current, dict):
        raise ValueError("the current text is not a YAML mapping")
    reverted = edit(current, False)
    if (
        left_sha256
        and pristine_text is not None
        and _sha256(current_text) == str(left_sha256).strip()
        and _same_base(current, pristine_text, lambda obj: edit(edit(obj, True), False), ours)
    ):
        return {"content": str(pristine_text), "how": "pristine"}
    if reverted == current:
        return {"content": current_text, "how": "untouched"}
    return {"content": _dump(reverted), "how": "inverse"}


def _same_base(current, pristine_text, canonical, ours):
    """Whether the current object and the pristine text differ only by loadwise's edit
    (compared after the edit and its inverse, which also sort what the edit sorts), and the
    pristine text has none of loadwise in it."""
    try:
        pristine = yaml.safe_load(str(pristine_text))
    except yaml.YAMLError:
        return False
    return (
        isinstance(pristine, dict)
        and not ours(pristine)
        and canonical(pristine) == canonical(current)
    )


def _manifest_has_ours(pod, config_path):
    """loadwise's flag or one of its volumes in a scheduler manifest."""
    try:
        command = [str(a) for a in _container(pod).get("command") or []]
    except (KeyError, TypeError, ValueError):
        return False
    volumes = (pod.get("spec") or {}).get("volumes") or []
    return f"--config={config_path}" in command or any(v.get("name") in OURS for v in volumes)


def _cluster_configuration_has_ours(cfg, config_path):
    """loadwise's config argument or one of its volumes in a ClusterConfiguration."""
    scheduler = cfg.get("scheduler") or {}
    args = scheduler.get("extraArgs") or {}
    if isinstance(args, list):
        named = any(a.get("name") == "config" and a.get("value") == config_path for a in args)
    else:
        named = args.get("config") == config_path
    volumes = scheduler.get("extraVolumes") or []
    return named or any(v.get("name") in OURS for v in volumes)


def loadwise_rollback_manifest(current_text, config_path, left_sha256="", pristine_text=None):
    return _rollback(
        current_text,
        left_sha256,
        pristine_text,
        lambda pod, present: loadwise_scheduler_manifest(pod, config_path, present=present),
        lambda pod: _manifest_has_ours(pod, config_path),
    )


def loadwise_rollback_cluster_configuration(
    current_text, config_path, left_sha256="", pristine_text=None
):
    return _rollback(
        current_text,
        left_sha256,
        pristine_text,
        lambda cfg, present: loadwise_cluster_configuration(cfg, config_path, present=present),
        lambda cfg: _cluster_configuration_has_ours(cfg, config_path),
    )


def _flag_values(args, flag):
    """Values of --flag=V and --flag V in an argv list."""
    out = []
    args = [str(a) for a in args]
    for i, a in enumerate(args):
        if a.startswith(f"--{flag}="):
            out.append(a.split("=", 1)[1])
        elif a == f"--{flag}" and i + 1 < len(args):
            out.append(args[i + 1])
    return out


def loadwise_foreign_scheduler_config(obj, config_path):
    """Config paths other than config_path that obj gives the scheduler: obj is a static pod
    manifest or a kubeadm ClusterConfiguration (v1beta3 map or v1beta4 list of extraArgs)."""
    if not isinstance(obj, dict):
        return []
    found = []
    if obj.get("kind") == "Pod":
        for container in (obj.get("spec") or {}).get("containers") or []:
            if container.get("name") == "kube-scheduler":
                argv = list(container.get("command") or []) + list(container.get("args") or [])
                found += _flag_values(argv, "config")
    else:
        args = (obj.get("scheduler") or {}).get("extraArgs") or {}
        if isinstance(args, list):
            found += [a.get("value") for a in args if a.get("name") == "config"]
        else:
            found += [v for k, v in args.items() if k == "config"]
    return [str(p) for p in found if str(p) != str(config_path)]


def _as_list(value):
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def loadwise_k3s_scheduler_args(config_files, exec_start=""):
    """The kube-scheduler-arg list k3s uses, with where each part came from.

    config_files: [{"path": p, "data": parsed YAML or None}] for the config file first, then
    its drop-ins in the order k3s reads them (alphabetical). k3s's documented rules
    (docs.k3s.io, "Configuration File"): the last file that sets a key wins; ``key+`` appends
    to what earlier files set; CLI values of a repeatable flag replace the files' list.
    exec_start: the unit's command line (``systemctl show -p ExecStart --value``, or argv).
    Returns {"args": [...], "replaced_by": path or "", "cli": bool, "origin": {arg: where}}:
    replaced_by names the last file that set the key without ``+`` (so it dropped everything
    before it); origin names the file (or the unit's command line) each argument came from.
    """
    args: list[str] = []
    origin: dict[str, str] = {}
    replaced_by = ""
    for entry in config_files or []:
        data = entry.get("data") or {}
        if not isinstance(data, dict):
            continue
        path = str(entry.get("path", ""))
        if "kube-scheduler-arg" in data:
            args, replaced_by = _as_list(data["kube-scheduler-arg"]), path
            origin = dict.fromkeys(args, path)
        if "kube-scheduler-arg+" in data:
            added = _as_list(data["kube-scheduler-arg+"])
            args = args + added
            origin = {**dict.fromkeys(added, path), **origin}
    argv = exec_start if isinstance(exec_start, list) else _exec_argv(str(exec_start or ""))
    cli = _flag_values(argv, "kube-scheduler-arg")
    if cli:
        where = "the unit's ExecStart"
        return {"args": cli, "replaced_by": "", "cli": True, "origin": dict.fromkeys(cli, where)}
    return {"args": args, "replaced_by": replaced_by, "cli": False, "origin": origin}


def _exec_argv(text):
    # `systemctl show -p ExecStart --value` prints
    # "{ path=... ; argv[]=k3s server ... ; ignore_errors=no ; ... }".
    if "argv[]=" in text:
        text = text.split("argv[]=", 1)[1].split(" ; ", 1)[0]
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "loadwise_scheduler_manifest": loadwise_scheduler_manifest,
            "loadwise_cluster_configuration": loadwise_cluster_configuration,
            "loadwise_rollback_manifest": loadwise_rollback_manifest,
            "loadwise_rollback_cluster_configuration": loadwise_rollback_cluster_configuration,
            "loadwise_foreign_scheduler_config": loadwise_foreign_scheduler_config,
            "loadwise_k3s_scheduler_args": loadwise_k3s_scheduler_args,
        }
