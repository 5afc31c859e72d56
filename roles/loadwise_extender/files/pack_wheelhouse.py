"""Pack the *.whl files of one directory into <directory>.tar, byte-reproducibly.

Run on the controller by the loadwise_extender role with the controller's own Python, so it
needs no GNU find or tar flags (-printf, --sort, --mtime, --owner) that macOS and BSD lack.
Sorted names, zero mtimes, owner 0:0, mode 0644: the same wheels always give the same bytes,
so the copy to the node is idempotent. The tarball is written under a per-process temporary
name and renamed into place, so two runs sharing the wheelhouse never take each other's file.
"""

import io
import os
import sys
import tarfile
import tempfile
from pathlib import Path


def pack(directory: Path) -> Path:
    """Write ``directory``.tar from the wheels in ``directory`` and return its path."""
    target = directory.with_name(directory.name + ".tar")
    wheels = sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(".whl"))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for wheel in wheels:
            info = tarfile.TarInfo(wheel.name)
            info.size = wheel.stat().st_size
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with wheel.open("rb") as handle:
                tar.addfile(info, handle)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(buffer.getvalue())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return target


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        pack(Path(arg))
