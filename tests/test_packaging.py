"""The package installs from source and works in someone else's CDK app (see packaging_check.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import background_result


def test_installed_package_synthesizes_in_a_separate_app(request: pytest.FixtureRequest) -> None:
    run, _ = background_result(request.node.nodeid)
    assert run.returncode == 0, run.stderr[-3000:]
    template = json.loads(Path(run.stdout.strip().splitlines()[-1]).read_text())
    lts = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"]
    nics = lts[0]["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
    assert sum(n.get("InterfaceType") == "efa-only" for n in nics) == 4  # catalogue data shipped in the wheel
