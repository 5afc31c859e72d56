"""The extender's unit as the role renders it, scored by ``systemd-analyze security``
(offline: the unit file alone, no running service): exposure at most 1.6 ("OK" starts
below 2), with /proc hidden, a restart policy that never ends in a failed unit, and the IP
allow list only when the role variable lists networks."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.ansible.test_extender_unit import _render, _service

# What the unit scored with ProtectProc=invisible and ProcSubset=pid (systemd 252)
EXPOSURE_AT_MOST = 1.6


def _exposure(unit: Path) -> float:
    run = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", run.stdout + run.stderr)
    assert found, run.stdout + run.stderr
    return float(found.group(1))


def test_the_unit_exposes_little_and_never_stays_failed(tmp_path):
    text = _render(tmp_path)
    service = _service(text)
    assert service["ProtectProc"] == ["invisible"] and service["ProcSubset"] == ["pid"]
    assert "IPAddressDeny" not in service  # no list given: no IP restriction
    assert "\nStartLimitIntervalSec=0\n" in text and service["RestartSec"] == ["2s"]
    assert _exposure(tmp_path / "loadwise-extender.service") <= EXPOSURE_AT_MOST


def test_an_ip_allow_list_denies_everything_else(tmp_path):
    service = _service(_render(tmp_path, loadwise_extender_ip_allow=["10.0.0.0/24", "fd00::/64"]))
    assert service["IPAddressDeny"] == ["any"]
    assert service["IPAddressAllow"] == ["localhost 10.0.0.0/24 fd00::/64"]
    assert _exposure(tmp_path / "loadwise-extender.service") < EXPOSURE_AT_MOST
