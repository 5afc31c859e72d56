"""Regenerate the recorded cluster in `cluster/` and the watch streams in `watch/`.

The documents follow the shapes kube-apiserver (v1.33) and metrics-server (v0.7) serve —
lists with resourceVersion, pods with PodScheduled conditions and container resources,
metrics in nanocores/Ki, the extender's `LoadwiseScored` Events with their
`loadwise.dev/decision` annotation (docs/contracts.md) and descheduler eviction Events
as its events.k8s.io recorder writes them (reason = strategy, action `Descheduled`,
reportingComponent `sigs.k8s.io.descheduler`). They were written by this script, not
captured from a live cluster; the lab tests cover the live side.

    .venv/bin/python tests/tui/data/build.py
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from loadwise.tui.sources.synthetic import synthetic_cluster

HERE = Path(__file__).parent

NOW = datetime(2026, 5, 4, 10, 30, 0, tzinfo=UTC)


def main() -> None:
    cluster = synthetic_cluster(nodes=8, pods=60, now=NOW, seed=11, polls=16)
    cluster.write(HERE / "cluster")
    pods = cluster.pods["items"]
    rv = int(cluster.pods["metadata"]["resourceVersion"])
    moved = json.loads(json.dumps(pods[0]))
    moved["status"]["phase"] = "Succeeded"
    moved["metadata"]["resourceVersion"] = str(rv + 2)
    new = json.loads(json.dumps(pods[1]))
    new["metadata"]["name"] = "web-7d9f9-zzzzz"
    new["metadata"]["uid"] = "0b6f4a52-9f0e-4b8e-a7a4-2f3c0c1d2e3f"
    new["metadata"]["resourceVersion"] = str(rv + 3)
    new["spec"]["nodeName"] = "worker-02"
    new["status"]["conditions"][0]["lastTransitionTime"] = "2026-05-04T10:30:05Z"
    stream = [
        {
            "type": "BOOKMARK",
            "object": {
                "kind": "Pod",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(rv + 1)},
            },
        },
        {"type": "MODIFIED", "object": moved},
        {"type": "ADDED", "object": new},
        {
            "type": "DELETED",
            "object": pods[2]
            | {"metadata": pods[2]["metadata"] | {"resourceVersion": str(rv + 4)}},
        },
    ]
    gone = [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "reason": "Expired",
                "code": 410,
                "message": f"too old resource version: {rv} ({rv + 50})",
            },
        }
    ]
    (HERE / "watch").mkdir(exist_ok=True)
    (HERE / "watch" / "pods.jsonl").write_text("".join(json.dumps(e) + "\n" for e in stream))
    (HERE / "watch" / "pods-gone.jsonl").write_text("".join(json.dumps(e) + "\n" for e in gone))


if __name__ == "__main__":
    main()
