"""Write the entries of the extender's hash-pinned lock that one node target installs.

Usage: locked_requirements.py LOCK TARGET OUT   (TARGET as files/wheel_target.py prints it,
e.g. cp310-aarch64)

Run on the controller by the loadwise_extender role, with the controller's Python, before
`pip download --require-hashes --no-deps -r OUT` fills that target's wheelhouse. The lock
(requirements.lock beside this file, `make lock`) is universal: one file for every node
Python, with environment markers where the versions differ (`multidict==7.1.0 ;
python_full_version < '3.11'`). pip evaluates a requirement's marker against the Python
running pip, even under `pip download --python-version 3.10` (tried with pip 25.2: a 3.11
controller skipped async-timeout for a 3.10 target), so the controller decides the markers
for the target here and writes the entries that apply, marker removed, hashes kept. The
node itself installs from the whole lock, where its own pip evaluates the same markers.

The target's environment: CPython X.Y on Linux on the target's architecture.
`python_full_version` is taken as X.Y.0; a lock marker naming a patch release would be
judged by that (none does: the lock's markers come from the dependencies' own metadata,
which split on minor versions).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement

__all__ = ["LockError", "entries", "environment", "for_target"]

_TARGET = re.compile(r"^cp(?P<major>\d)(?P<minor>\d{1,2})-(?P<arch>[a-z0-9_]+)$")


class LockError(ValueError):
    """The lock or the target is not what this script reads."""


def environment(target: str) -> dict[str, str]:
    """The PEP 508 marker environment of a node target such as cp311-x86_64."""
    match = _TARGET.match(target)
    if match is None:
        raise LockError(f"{target!r} is not a node target like cp311-x86_64")
    version = f"{match['major']}.{match['minor']}"
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{version}.0",
        "os_name": "posix",
        "platform_machine": match["arch"],
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": f"{version}.0",
        "python_version": version,
        "sys_platform": "linux",
    }


def entries(text: str) -> list[tuple[Requirement, list[str]]]:
    """The lock's requirements, each with its `--hash=sha256:...` options, in file order.

    Refuses an entry that is not pinned with `==` or carries no hash: pip's
    --require-hashes would refuse it too, only later and on the node.
    """
    logical = re.sub(r"\\\n", " ", text)
    found: list[tuple[Requirement, list[str]]] = []
    for number, line in enumerate(logical.splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        spec, *options = re.split(r"\s+(?=--)", line)
        requirement = Requirement(spec)
        hashes = [o for o in options if o.startswith("--hash=sha256:")]
        pins = [s for s in requirement.specifier if s.operator == "=="]
        if len(pins) != 1 or not hashes:
            raise LockError(f"lock line {number}: {spec!r} is not pinned with == and hashed")
        found.append((requirement, hashes))
    if not found:
        raise LockError("the lock holds no requirement")
    return found


def for_target(text: str, target: str) -> str:
    """The lock's entries that apply to `target`, as a requirements file for pip."""
    env = environment(target)
    lines = []
    for requirement, hashes in entries(text):
        marker: Marker | None = requirement.marker
        if marker is not None and not marker.evaluate(env):
            continue
        lines.append(" ".join([f"{requirement.name}{requirement.specifier}", *hashes]))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: locked_requirements.py LOCK TARGET OUT")
    lock, target, out = sys.argv[1:]
    try:
        Path(out).write_text(for_target(Path(lock).read_text(), target))
    except (OSError, LockError, ValueError) as exc:
        sys.exit(f"locked_requirements.py: {exc}")
