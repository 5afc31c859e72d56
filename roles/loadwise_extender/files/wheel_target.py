"""Print the wheel target of the Python running this file, e.g. cp311-x86_64.

Run on the node by the loadwise_extender and loadwise_preflight roles (python -c). The
architecture is the userland's, not the kernel's: a 32-bit Raspberry Pi OS on a 64-bit kernel
reports machine() aarch64 but can only load 32-bit (armv7l) wheels. pip decides the same way
(pypa/packaging, packaging/tags.py `_linux_platforms`: a 32-bit interpreter on an x86_64 or
aarch64 kernel gets the i686 or armv7l platform tags).
"""

import platform
import sys

_USERLAND_32BIT = {"x86_64": "i686", "aarch64": "armv7l", "arm64": "armv7l", "armv8l": "armv7l"}


def wheel_target(version: tuple[int, int], machine: str, pointer_bits: int) -> str:
    """cpXY-<arch> for a CPython of ``version`` on ``machine`` with pointers of ``pointer_bits``."""
    arch = _USERLAND_32BIT.get(machine, machine) if pointer_bits == 32 else machine
    return f"cp{version[0]}{version[1]}-{arch}"


if __name__ == "__main__":
    print(wheel_target(sys.version_info[:2], platform.machine(), 64 if sys.maxsize > 2**32 else 32))
