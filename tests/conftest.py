"""Suite-wide policy: in CI nothing may be skipped silently.

A skip locally is allowed (say, no podman on a laptop), but under CI=true every
skip is turned into a failure so that a suite that did not run cannot pass.
"""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under CI=true, which is not allowed: {reason}"
