"""lab/realnodes.py's memory-limited workers, without a cluster: the /proc/meminfo a worker
is shown and the kubelet configuration its memory eviction comes from. The cluster-side proof
(the kubelet reporting that capacity and evicting) is tests/lab/test_real_placement.py."""

from __future__ import annotations

import yaml

from lab import realnodes

HOST = """MemTotal:       24684096 kB
MemFree:        18562956 kB
MemAvailable:     900000 kB
Buffers:          566536 kB
SwapTotal:             0 kB
"""


def test_a_workers_meminfo_says_its_limit_and_keeps_the_rest():
    lines = realnodes.meminfo(2 * 2**30, HOST).splitlines()
    fields = {ln.split(":")[0]: ln.split()[1] for ln in lines}
    assert fields["MemTotal"] == "2097152"  # what cAdvisor reads as the node's capacity
    assert fields["MemFree"] == "2097152"  # at most the limit
    assert fields["MemAvailable"] == "900000"  # already below it: unchanged
    assert lines[3:] == HOST.splitlines()[3:]


def kubelet(**kw) -> dict:
    docs = list(
        yaml.safe_load_all(realnodes.kubeadm_config("10.88.0.2", "abcdef.0123456789abcdef", **kw))
    )
    (doc,) = [d for d in docs if d["kind"] == "KubeletConfiguration"]
    return doc


def test_memory_eviction_adds_the_memory_threshold_and_keeps_the_disk_ones():
    default, limited = kubelet(), kubelet(memory_eviction=True)
    # the default cluster's kubelets name the disk signals only, so they have no memory
    # threshold (cmd/kubelet/app/server.go merges the defaults only when asked)
    assert "memory.available" not in default["evictionHard"]
    assert "evictionPressureTransitionPeriod" not in default
    assert limited["evictionHard"] == {**default["evictionHard"], "memory.available": "100Mi"}
    assert limited["evictionPressureTransitionPeriod"] == "30s"
    rest = {
        k: v
        for k, v in limited.items()
        if k not in ("evictionHard", "evictionPressureTransitionPeriod")
    }
    assert rest == {k: v for k, v in default.items() if k != "evictionHard"}
