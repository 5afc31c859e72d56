"""Which release each contender's scheduler is, read from the lab's pinned Go modules, and
the report's contender table that shows it.

The contenders do not all run the same kube-scheduler: the stock and loadwise ones run the
lab's own (k8s.io/kubernetes as pinned in lab/go/kubernetes/go.mod), the Trimaran ones
the kube-scheduler that sigs.k8s.io/scheduler-plugins is released on (its module pins in
lab/go-tools/trimaran-scheduler/go.mod). No scheduler-plugins release is built on the
lab's minor (lab/VERSIONS.md), so the table states the skew beside every figure instead
of leaving it to a footnote. The versions are read from the go.mod files, not written
here, so that a bump of either pin shows in the next report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from benchmarks.placement.contenders import CONTENDERS, extender_weight
from benchmarks.placement.exceptions import PlacementError

REPO = Path(__file__).resolve().parents[2]
GO_MODS = {
    "kube-scheduler": REPO / "lab/go/kubernetes/go.mod",
    "trimaran-scheduler": REPO / "lab/go-tools/trimaran-scheduler/go.mod",
    "descheduler": REPO / "lab/go/descheduler/go.mod",
}


def required(go_mod: Path, module: str) -> str:
    """The version `go_mod` requires of `module` (a require line, not a replace or a
    comment); PlacementError when it requires none."""
    pattern = re.compile(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)")
    for line in go_mod.read_text().splitlines():
        if "=>" in line:
            continue
        m = pattern.match(line)
        if m:
            return m[1]
    raise PlacementError(f"{go_mod}: no require of {module}")


def scheduler_version(binary: str) -> str:
    """The kube-scheduler release a lab/build scheduler binary is, with the plugin
    release for Trimaran's."""
    if binary == "kube-scheduler":
        return required(GO_MODS[binary], "k8s.io/kubernetes")
    if binary == "trimaran-scheduler":
        go_mod = GO_MODS[binary]
        plugins = required(go_mod, "sigs.k8s.io/scheduler-plugins")
        return f"{required(go_mod, 'k8s.io/kubernetes')} (scheduler-plugins {plugins})"
    raise PlacementError(f"no version known for scheduler binary {binary!r}")


def contender_table(names: Sequence[str]) -> list[str]:
    """One line per contender in `names` (in that order): what decides, its score weight
    and the release of its scheduler; [] for no contender."""
    if not names:
        return []
    versions = {b: scheduler_version(b) for b in ("kube-scheduler", "trimaran-scheduler")}
    out = [
        "Contenders, and the kube-scheduler release each runs:",
        "",
        "| contender | what scores | score weight | kube-scheduler |",
        "|---|---|---|---|",
    ]
    for name in names:
        c = CONTENDERS.get(name)
        if c is None:  # a contender of older results that no longer exists
            out.append(f"| {name} | (no longer defined) | | |")
            continue
        if c.kind == "trimaran":
            what, weight = f"Trimaran {c.policy} plugin", str(c.plugin_weight)
        elif c.kind == "loadwise":
            what, weight = f"loadwise extender, {c.policy}", str(extender_weight())
            if c.watcher_only:
                what += ", reading load-watcher"
        elif c.kind == "null":
            what, weight = "null extender (scores 0)", str(extender_weight())
        else:
            what, weight = "default plugins", ""
        if c.kind in ("loadwise", "null") and not c.filter_verb:
            what += ", prioritize only"
        if c.descheduler:
            what += f", descheduler {required(GO_MODS['descheduler'], 'sigs.k8s.io/descheduler')}"
        out.append(f"| {name} | {what} | {weight} | {versions[c.binary]} |")
    return [
        *out,
        "",
        "An extender's weight multiplies its 0..10 priority, which kube-scheduler scales by "
        "10 to the plugins' 0..100 (pkg/scheduler/schedule_one.go): at weight 10 an extender "
        "and a plugin have the same say. The Trimaran scheduler is the kube-scheduler "
        "scheduler-plugins is released on; against the lab's API server it is outside "
        "Kubernetes' version skew policy when its minor is more than one behind "
        "(lab/VERSIONS.md). The loadwise extender reads load where the Ansible role points "
        "it by default, metrics.k8s.io (metrics-server scrapes every 15 s); in a scenario "
        "whose load is read through Prometheus, load-watcher over it, which gives each "
        "node's mean and standard deviation; Trimaran reads load-watcher, which collects "
        "once a minute (runs before 2026-11-30 07:00 UTC: loadwise read load-watcher too).",
        "",
    ]
