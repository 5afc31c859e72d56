"""Round trips against the exact JSON kube-scheduler sends and expects
(k8s.io/kube-scheduler extender/v1 types_test.go)."""

import json
import re

import msgspec
import pytest

from loadwise.extender.wire import (
    ExtenderArgs,
    FilterResult,
    HostPriority,
    NodeKeys,
    NodeListOut,
    WireError,
    decode_args,
    decode_node,
    encode,
)

from .helpers import node_json, pod_json


def test_host_priority_uses_capitalised_keys():
    assert encode(HostPriority("myhost", 1)) == b'{"Host":"myhost","Score":1}'
    assert encode([HostPriority("a", 7)]) == b'[{"Host":"a","Score":7}]'


def test_filter_result_cache_capable_matches_go_marshal():
    out = json.loads(
        encode(
            FilterResult(
                node_names=["node1"],
                failed_nodes={"foo": "bar"},
                failed_and_unresolvable={"baz": "qux"},
                error="myerror",
            )
        )
    )
    assert out == {
        "Nodes": None,
        "NodeNames": ["node1"],
        "FailedNodes": {"foo": "bar"},
        "FailedAndUnresolvableNodes": {"baz": "qux"},
        "Error": "myerror",
    }


def test_types_test_extender_args_document_decodes():
    body = (
        b'{"Pod":{"metadata":{"name":"podname"},"spec":{"containers":null},"status":{}},'
        b'"Nodes":{"metadata":{},"items":[{"metadata":{"name":"nodename"},"spec":{},'
        b'"status":{"capacity":{"cpu":"4"}}}]},"NodeNames":["node1"]}'
    )
    args = decode_args(body)
    assert args.pod is not None and args.pod.metadata.name == "podname"
    assert args.node_names == ["node1"]
    assert decode_node(args.nodes.items[0]).metadata.name == "nodename"


def test_cache_capable_request_with_null_nodes():
    body = json.dumps({"Pod": pod_json(), "Nodes": None, "NodeNames": ["a", "b"]}).encode()
    args = decode_args(body)
    assert args.nodes is None and args.node_names == ["a", "b"]


def test_full_node_items_are_echoed_byte_for_byte():
    node = node_json("n1", images=3)
    raw = json.dumps(
        {"Pod": pod_json(), "Nodes": {"metadata": {}, "items": [node]}, "NodeNames": None}
    ).encode()
    args = decode_args(raw)
    out = json.loads(encode(FilterResult(nodes=NodeListOut(items=list(args.nodes.items)))))
    assert out["Nodes"]["items"][0] == node
    assert out["NodeNames"] is None


@pytest.mark.parametrize("raw_nodes", [True, False])
def test_a_repeated_node_list_is_the_last_ones_strings_in_a_list_of_its_own(raw_nodes):
    def names(listed, uid="u"):
        body = json.dumps({"Pod": pod_json(uid=uid), "NodeNames": listed}).encode()
        return decode_args(body, raw_nodes=raw_nodes).node_names

    first = names(["a", "bb", "c"])
    again = names(["a", "bb", "c"], uid="v")
    assert again == ["a", "bb", "c"] and all(x is y for x, y in zip(first, again, strict=True))
    again.append("mine")  # a caller's list is its own
    assert names(["a", "bb", "c"]) == ["a", "bb", "c"]
    assert names(["a", "c", "bb"]) == ["a", "c", "bb"]  # other bytes: decoded
    assert names(["a", "bb", "c"]) == ["a", "bb", "c"]
    assert names([]) == [] and names(None) is None
    missing = json.dumps({"Pod": pod_json()}).encode()
    assert decode_args(missing, raw_nodes=raw_nodes).node_names is None
    with pytest.raises(WireError, match=r"at `\$\.NodeNames\[1\]`") as bad:
        names(["a", 5])
    assert bad.value.reason == "invalid"
    assert names(["a", "bb", "c"]) == ["a", "bb", "c"]


def test_the_raw_names_structs_mirror_the_args_they_build():
    """decode_args decodes into _ArgsIn/_PrioritizeIn (NodeNames kept raw) and builds
    ExtenderArgs/PrioritizeArgs from them field by field: a field added to one side only
    would be dropped silently."""
    from loadwise.extender import wire

    for received, built in (
        (wire._ArgsIn, ExtenderArgs),
        (wire._PrioritizeIn, wire.PrioritizeArgs),
    ):
        assert received.__struct_fields__ == built.__struct_fields__
        assert received.__struct_encode_fields__ == built.__struct_encode_fields__


def test_prioritize_decodes_of_a_node_only_what_it_reads():
    """Name, resourceVersion, creation time, size, unschedulable and loadwise's own
    threshold keys; a kubelet's labels and annotations are skipped, not built (the filter
    still echoes them, above)."""
    node = node_json("n1", images=3)
    node["metadata"]["labels"] = {"kubernetes.io/hostname": "n1"}
    node["metadata"]["annotations"] = {"k3s.io/internal-ip": "10.0.0.1"}
    node["metadata"]["resourceVersion"] = "42"
    node["metadata"]["creationTimestamp"] = "2026-11-29T18:00:00Z"
    node["spec"] = {"unschedulable": True, "podCIDR": "10.42.0.0/24"}
    raw = json.dumps({"Pod": pod_json(), "Nodes": {"items": [node]}}).encode()
    (item,) = decode_args(raw, raw_nodes=False).nodes.items
    meta = msgspec.structs.asdict(item.metadata)
    assert meta == {
        "name": "n1",
        "resourceVersion": "42",
        "creationTimestamp": "2026-11-29T18:00:00Z",
        "labels": NodeKeys(),  # only loadwise.dev/cpu-threshold and memory-threshold are read
        "annotations": NodeKeys(),
    }
    assert item.spec.unschedulable is True
    assert item.status.capacity["cpu"] == "4" and item.status.allocatable["memory"] == "8Gi"
    assert decode_node(json.dumps(node).encode()) == item


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "body is not JSON"),
        (b"[]", "Expected `object`, got `array`"),
        (b'{"NodeNames":["a"]}', "no Pod in the request"),
        (b'{"Pod":{},"NodeNames":"a"}', "at `$.NodeNames`"),
        (b'{"NodeNames":[7]}', "at `$.NodeNames[0]`"),  # a bad list before a missing Pod
        (
            b'{"Pod":{"spec":{"containers":[{"resources":{"requests":{"cpu":[1]}}}]}}}',
            "at `$.Pod.spec.containers[0].resources.requests",
        ),
        (b'{"Pod":{"metadata":{"name":5}}}', "at `$.Pod.metadata.name`"),
    ],
)
def test_bad_bodies_raise_wire_error_naming_the_problem(body, message):
    with pytest.raises(WireError, match=message.replace("[", r"\[").replace("$", r"\$")):
        decode_args(body)


def test_lowercase_response_keys_are_not_what_we_emit():
    # Go decodes case-insensitively, but we emit exactly the Go field names.
    assert b'"host"' not in encode(HostPriority("h", 1))


def test_extender_args_struct_names():
    fields = {f.encode_name for f in msgspec.structs.fields(ExtenderArgs)}
    assert fields == {"Pod", "Nodes", "NodeNames"}


@pytest.mark.parametrize(
    ("body", "reason", "message"),
    [
        (b'{"Pod":{},"x":' + b"[" * 5000 + b"]" * 5000 + b"}", "too_deep", "nested too deeply"),
        (b'{"Pod":{"metadata":{"name":"caf\xe9"}}}', "not_utf8", "not UTF-8"),
        (b"\xff\xfe{}", "not_utf8", "body is not UTF-8: invalid bytes at offset 0"),
        # in a field msgspec skips, and in a Node the filter would echo byte for byte
        (b'{"Pod":{},"x":"\x80"}', "not_utf8", "at offset 15"),
        (b'{"Pod":{},"Nodes":{"items":[{"status":{"images":["\xc3"]}}]}}', "not_utf8", "UTF-8"),
        (b"{]", "not_json", "body is not JSON"),
        (b"null", "invalid", "Expected `object`, got `null`"),
        (b'{"Pod":null}', "no_pod", "no Pod in the request"),
    ],
)
@pytest.mark.parametrize("raw_nodes", [True, False])
def test_hostile_bodies_are_wire_errors_with_a_reason(body, reason, message, raw_nodes):
    with pytest.raises(WireError, match=re.escape(message)) as info:
        decode_args(body, raw_nodes=raw_nodes)
    assert info.value.reason == reason and info.value.status == 400


def test_a_deep_node_item_is_a_wire_error():
    node = b'{"metadata":{"name":"n"},"x":' + b"[" * 5000 + b"]" * 5000 + b"}"
    with pytest.raises(WireError, match="nested too deeply"):
        decode_node(node)


def test_sidecar_restart_policy_and_pod_level_resources_are_decoded():
    body = json.dumps(
        {
            "Pod": {
                "spec": {
                    "initContainers": [{"name": "proxy", "restartPolicy": "Always"}],
                    "resources": {"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}},
                    "overhead": {"cpu": "100m"},
                }
            },
            "NodeNames": ["a"],
        }
    ).encode()
    spec = decode_args(body).pod.spec
    assert spec.initContainers[0].restartPolicy == "Always"
    assert spec.resources.requests == {"cpu": "2"} and spec.resources.limits == {"memory": "1Gi"}
    assert spec.overhead == {"cpu": "100m"}
