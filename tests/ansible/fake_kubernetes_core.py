"""A stand-in for the kubernetes.core collection: its k8s and k8s_info modules over a JSON file.

Tests put the directory `install(tmp_path)` returns first on ANSIBLE_COLLECTIONS_PATH and point
LOADWISE_FAKE_API at a JSON document {"objects": [...]}: the cluster's objects as the API
server would return them. `k8s` answers like the real module (kubernetes.core 6.x
plugins/module_utils/k8s/runner.py): the applied objects as the server has them, which for a
service-account-token Secret the token controller has filled, data.token included; with
`state: patched` it merges the patch into the stored object and writes the file. `k8s_info`
returns the stored objects matching kind/namespace/name. The modules also record the
kubeconfig and context each call received.
"""

from __future__ import annotations

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

def main():
    module = _module()
    _record(module)
    stored = _state()["objects"]
    definition = module.params.get("definition") or []
    if isinstance(definition, dict):
        definition = [definition]
    p = module.params
    results = []
    for doc in definition:
        meta = doc.get("metadata", {})
        kind = doc.get("kind") or p.get("kind")
        ns = meta.get("namespace") or p.get("namespace")
        name = meta.get("name") or p.get("name")
        found = [o for o in stored if _matches(o, kind, ns, name)]
        if found and p.get("state") == "patched" and not module.check_mode:
            # a merge patch of the top-level maps, as `state: patched` sends for a ConfigMap
            for key, value in doc.items():
                if isinstance(value, dict) and isinstance(found[0].get(key), dict):
                    found[0][key].update(value)
                elif key not in ("apiVersion", "kind", "metadata"):
                    found[0][key] = value
            with open(os.environ["LOADWISE_FAKE_API"], "w") as handle:
                json.dump({"objects": stored}, handle)
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

_RUNTIME = """---
requires_ansible: ">=2.15.0"
action_groups:
  k8s:
    - k8s
    - k8s_info
"""


def install(root: Path) -> Path:
    """Write the fake collection under ``root`` and return the collections path to use."""
    base = root / "collections"
    collection = base / "ansible_collections" / "kubernetes" / "core"
    modules = collection / "plugins" / "modules"
    modules.mkdir(parents=True, exist_ok=True)
    (collection / "meta").mkdir(exist_ok=True)
    (collection / "meta" / "runtime.yml").write_text(_RUNTIME)
    (collection / "galaxy.yml").write_text("namespace: kubernetes\nname: core\nversion: 0.0.0\n")
    (modules / "k8s.py").write_text(_K8S)
    (modules / "k8s_info.py").write_text(_K8S_INFO)
    return base
