"""The Node and Pod document builders: the shape the API server returns, read by wire.py."""

from __future__ import annotations

import msgspec

from loadwise.extender.kubeobjects import container, node, node_conditions, pod, pod_template, taint
from loadwise.extender.wire import Node, Pod


def test_container_leaves_out_what_is_not_given():
    assert container("c") == {"name": "c", "image": "nginx", "resources": {}}
    assert container(
        "web",
        image="nginx:1.27",
        requests={"cpu": "250m"},
        limits={"memory": "512Mi"},
        ports=[80],
        extra={"imagePullPolicy": "IfNotPresent"},
    ) == {
        "name": "web",
        "image": "nginx:1.27",
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "250m"}, "limits": {"memory": "512Mi"}},
        "imagePullPolicy": "IfNotPresent",
    }


def test_minimal_pod():
    assert pod("p", containers=[container("c")]) == {
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {}}]},
        "status": {},
    }


def test_full_pod_reads_back_through_the_wire_types():
    doc = pod(
        "web-1",
        namespace="shop",
        uid="u1",
        containers=[container("app", requests={"cpu": "1"})],
        init_containers=[container("init", requests={"cpu": "2"})],
        overhead={"cpu": "100m"},
        node_name="n1",
        node_selector={"type": "kwok"},
        tolerations=[{"key": "k", "operator": "Exists"}],
        phase="Running",
        scheduled_at="2025-01-01T00:00:00Z",
        labels={"app": "web"},
        annotations={"a": "b"},
        generate_name="web-",
        owner={"kind": "ReplicaSet", "name": "web"},
        resource_version="7",
        created="2025-01-01T00:00:00Z",
        status={"qosClass": "Burstable"},
        extra={"schedulerName": "default-scheduler"},
    )
    assert doc["metadata"]["ownerReferences"] == [{"kind": "ReplicaSet", "name": "web"}]
    assert doc["metadata"]["generateName"] == "web-"
    assert doc["spec"]["schedulerName"] == "default-scheduler"
    assert doc["status"] == {
        "qosClass": "Burstable",
        "phase": "Running",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ],
    }
    read = msgspec.convert(doc, type=Pod)
    assert read.key == "u1"
    assert (read.metadata.namespace, read.metadata.name) == ("shop", "web-1")
    assert read.spec.nodeName == "n1"
    assert read.metadata.uid == "u1"


def test_pod_template_has_no_identity():
    doc = pod_template(
        containers=[container("app")], labels={"app": "x"}, node_selector={"type": "kwok"}
    )
    assert doc == {
        "metadata": {"labels": {"app": "x"}},
        "spec": {
            "containers": [{"name": "app", "image": "nginx", "resources": {}}],
            "nodeSelector": {"type": "kwok"},
        },
    }


def test_minimal_node():
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "61255492Ki"}
    assert node("n", cpu="4", memory="8Gi") == {
        "metadata": {"name": "n", "labels": {"kubernetes.io/hostname": "n"}},
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def test_full_node_reads_back_through_the_wire_types():
    doc = node(
        "n1",
        cpu="8",
        memory="16Gi",
        pods="250",
        capacity={"hugepages-2Mi": "0"},
        allocatable={"cpu": "7800m", "memory": "15Gi", "pods": "250"},
        labels={"zone": "a"},
        annotations={"x": "y"},
        taints=[taint("node.kubernetes.io/unschedulable")],
        unschedulable=True,
        ready=False,
        internal_ip="10.0.0.5",
        node_info={"kubeletVersion": "v1.33.4"},
        images=[{"names": ["img:1"], "sizeBytes": 5}],
        uid="u",
        resource_version="3",
        created="2024-06-01T12:00:00Z",
        spec={"podCIDR": "10.42.0.0/24"},
        extra={"daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}},
    )
    assert doc["spec"] == {
        "podCIDR": "10.42.0.0/24",
        "unschedulable": True,
        "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    }
    assert doc["status"]["capacity"]["hugepages-2Mi"] == "0"
    assert doc["status"]["addresses"][0] == {"type": "InternalIP", "address": "10.0.0.5"}
    ready = [c for c in doc["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "Unknown"
    read = msgspec.convert(doc, type=Node)
    assert read.metadata.name == "n1"


def test_node_conditions():
    healthy = node_conditions()
    assert [c["type"] for c in healthy] == [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    ]
    assert healthy[-1]["status"] == "True" and "lastHeartbeatTime" not in healthy[-1]
    beat = node_conditions(heartbeat="2025-01-01T00:00:00Z")
    assert all(c["lastHeartbeatTime"] == "2025-01-01T00:00:00Z" for c in beat)
    exact = [{"type": "Ready", "status": "True"}]
    assert node("n", cpu="1", memory="1Gi", conditions=exact)["status"]["conditions"] == exact
    assert taint("k", effect="NoExecute", value="v") == {
        "key": "k",
        "effect": "NoExecute",
        "value": "v",
    }
