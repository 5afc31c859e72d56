"""A stand-in for the kubernetes.core collection: its k8s and k8s_info modules over a JSON file.

Tests put the directory `install(tmp_path)` returns first on ANSIBLE_COLLECTIONS_PATH and point
LOADWISE_FAKE_API at a JSON document {"objects": [...]}: the cluster's objects as the API
server would return them. `k8s` answers like the real module (kubernetes.core 6.x
plugins/module_utils/k8s/runner.py): the applied objects as the server has them, which for a
service-account-token Secret the token controller has filled, data.token included; with
`state: patched` it merges the patch into the stored object (a JSON merge patch: maps at
every level, null removes) and writes the file; with
`state: absent` it removes the matching objects (given by `definition` or by
kind/namespace/name) and writes the file; with LOADWISE_FAKE_API_STORE set, `state: present`
stores what it applies too (merged into an object that is there, as the module's patch does).
`k8s_info` returns the stored objects matching
kind/namespace/name. `k8s_log` returns the lines stored under "logs" for
"<namespace>/<pod>/<container>". The modules also record the kubeconfig and context each call
received.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

_COMMON = """#!/usr/bin/python
import json, os
from ansible.module_utils.basic import AnsibleModule, _load_params


def _module():
    params = _load_params()
    spec = {key: {"type": "raw"} for key in params}
    return AnsibleModule(argument_spec=spec, supports_check_mode=True)


def _state():
    with open(os.environ["LOADWISE_FAKE_API"]) as handle:
        return json.load(handle)


def _record(module):
    log = os.environ.get("LOADWISE_FAKE_API_CALLS")
    if log:
        with open(log, "a") as handle:
            handle.write(json.dumps({"kubeconfig": module.params.get("kubeconfig"),
                                     "context": module.params.get("context")}) + "\\n")


def _matches(obj, kind, namespace, name):
    meta = obj.get("metadata", {})
    return (obj.get("kind") == kind and (not name or meta.get("name") == name)
            and (not namespace or meta.get("namespace", namespace) == namespace))
"""

_K8S = (
    _COMMON
    + """

def _merge(into, patch):
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif isinstance(value, dict):
            into[key] = {}
            _merge(into[key], value)
        else:
            into[key] = value


def main():
    module = _module()
    _record(module)
    stored = _state()["objects"]
    p = module.params
    definition = p.get("definition") or []
    if isinstance(definition, dict):
        definition = [definition]
    if not definition and p.get("kind"):
        definition = [{"kind": p["kind"], "metadata": {"name": p.get("name"),
                                                        "namespace": p.get("namespace")}}]
    results = []
    if p.get("state") == "absent":
        gone = [o for doc in definition for o in stored if _matches(
            o, doc.get("kind"), doc.get("metadata", {}).get("namespace"),
            doc.get("metadata", {}).get("name"))]
        if gone and not module.check_mode:
            kept = {**_state(), "objects": [o for o in stored if o not in gone]}
            with open(os.environ["LOADWISE_FAKE_API"], "w") as handle:
                json.dump(kept, handle)
        module.exit_json(changed=bool(gone), result={"results": [{"result": o} for o in gone]})
    for doc in definition:
        meta = doc.get("metadata", {})
        kind = doc.get("kind") or p.get("kind")
        ns = meta.get("namespace") or p.get("namespace")
        name = meta.get("name") or p.get("name")
        found = [o for o in stored if _matches(o, kind, ns, name)]
        store = bool(os.environ.get("LOADWISE_FAKE_API_STORE"))
        if found and (p.get("state") == "patched" or store) and not module.check_mode:
            # a merge patch, as `state: patched` sends for a ConfigMap or a Node's annotations
            # (and `present` for an existing object): maps merge at every level, null removes
            # a key (RFC 7386); kind and apiVersion stay the stored object's
            _merge(found[0], {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")})
            patched = {**_state(), "objects": stored}
            with open(os.environ["LOADWISE_FAKE_API"], "w") as handle:
                json.dump(patched, handle)
        if not found and store and not module.check_mode:
            created = {**_state(), "objects": stored + [{**doc, "kind": kind}]}
            with open(os.environ["LOADWISE_FAKE_API"], "w") as handle:
                json.dump(created, handle)
        results.append({"changed": True, "method": "update" if found else "create",
                        "result": found[0] if found else doc})
    module.exit_json(changed=True, result={"results": results})


main()
"""
)

_K8S_INFO = (
    _COMMON
    + """

def main():
    module = _module()
    _record(module)
    p = module.params
    kind, ns, name = p.get("kind"), p.get("namespace"), p.get("name")
    resources = [o for o in _state()["objects"] if _matches(o, kind, ns, name)]
    module.exit_json(changed=False, resources=resources, api_found=True)


main()
"""
)

_K8S_LOG = (
    _COMMON
    + """

def main():
    module = _module()
    _record(module)
    p = module.params
    key = "/".join(str(p.get(k) or "") for k in ("namespace", "name", "container"))
    lines = _state().get("logs", {}).get(key, [])
    tail = p.get("tail_lines")
    if tail:
        lines = lines[-int(tail):]
    module.exit_json(changed=False, log="".join(line + "\\n" for line in lines),
                     log_lines=lines)


main()
"""
)

_RUNTIME = """---
requires_ansible: ">=2.15.0"
action_groups:
  k8s:
    - k8s
    - k8s_info
    - k8s_log
"""


def install(root: Path) -> Path:
    """Write the fake collection under ``root`` and return the collections path to use."""
    base = root / "collections"
    collection = base / "ansible_collections" / "kubernetes" / "core"
    modules = collection / "plugins" / "modules"
    modules.mkdir(parents=True, exist_ok=True)
    (collection / "meta").mkdir(exist_ok=True)
    (collection / "meta" / "runtime.yml").write_text(_RUNTIME)
    # every key ansible-galaxy calls mandatory: Mitogen's strategy reads the file that way
    (collection / "galaxy.yml").write_text(
        "namespace: kubernetes\nname: core\nversion: 0.0.0\nreadme: README.md\n"
        "authors: [loadwise tests]\n"
    )
    (collection / "README.md").write_text("A stand-in for kubernetes.core (tests/ansible).\n")
    (modules / "k8s.py").write_text(_K8S)
    (modules / "k8s_info.py").write_text(_K8S_INFO)
    (modules / "k8s_log.py").write_text(_K8S_LOG)
    return base


def environment(root: Path, state: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an ansible-playbook run against the fake: `base` (default: this
    process's) with the fake collection under ``root`` and the objects in ``state``."""
    return {
        **(os.environ if base is None else base),
        "ANSIBLE_COLLECTIONS_PATH": str(install(root)),
        "ANSIBLE_LOCAL_TEMP": str(root / "ansible-tmp"),
        "LOADWISE_FAKE_API": str(state),
    }
