"""Filters that edit kubeadm's kube-scheduler objects as data, never as text.

- ``loadwise_scheduler_manifest``: the static pod with ``--config=PATH``, a read-only
  hostPath mount of that file and an annotation carrying the config's checksum (so a
  config-only change still makes the kubelet recreate the pod).
- ``loadwise_cluster_configuration``: kubeadm's ClusterConfiguration with the same flag
  and volume under ``scheduler``, in the v1beta3 (map) or v1beta4 (list) form, so that
  ``kubeadm upgrade`` regenerates the manifest with them.

Both are idempotent: applying them to their own output changes nothing. With
``present=False`` they remove exactly what they add.
"""

from __future__ import annotations

import copy

VOLUME = "loadwise-scheduler-config"
ANNOTATION = "loadwise.dev/scheduler-config-sha256"


def _container(pod):
    for container in pod["spec"]["containers"]:
        if container.get("name") == "kube-scheduler":
            return container
    raise ValueError("no container named kube-scheduler in the manifest")


def loadwise_scheduler_manifest(manifest, config_path, config_sha256="", present=True):
    pod = copy.deepcopy(manifest)
    container = _container(pod)
    command = [a for a in container.get("command", []) if not str(a).startswith("--config=")]
    if present:
        command.append(f"--config={config_path}")
        # kubeadm writes its flags sorted; keep the binary first and the rest sorted.
        command = command[:1] + sorted(command[1:])
    container["command"] = command

    mounts = [m for m in container.get("volumeMounts", []) or [] if m.get("name") != VOLUME]
    volumes = [v for v in pod["spec"].get("volumes", []) or [] if v.get("name") != VOLUME]
    if present:
        mounts.append({"mountPath": config_path, "name": VOLUME, "readOnly": True})
        volumes.append({"hostPath": {"path": config_path, "type": "File"}, "name": VOLUME})
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


def loadwise_cluster_configuration(cluster_config, config_path, present=True):
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

    volumes = [v for v in scheduler.get("extraVolumes") or [] if v.get("name") != VOLUME]
    if present:
        volumes.append(
            {
                "name": VOLUME,
                "hostPath": config_path,
                "mountPath": config_path,
                "readOnly": True,
                "pathType": "File",
            }
        )
    if volumes:
        scheduler["extraVolumes"] = volumes
    else:
        scheduler.pop("extraVolumes", None)
    if not scheduler and not had_scheduler:
        cfg.pop("scheduler", None)
    return cfg


class FilterModule:
    def filters(self):
        return {
            "loadwise_scheduler_manifest": loadwise_scheduler_manifest,
            "loadwise_cluster_configuration": loadwise_cluster_configuration,
        }
