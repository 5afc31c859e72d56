"""Static checks that are part of the test run, so CI fails on them like on any test.

mypy strict over the shipped packages and the lab (the configuration is in pyproject.toml,
`[tool.mypy]`); `make lint` runs the same command.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_strict_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"mypy reported problems:\n{result.stdout}{result.stderr}"
