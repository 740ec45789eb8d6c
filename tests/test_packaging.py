"""`pip install .` into a fresh venv, then a separate tiny CDK app imports the constructs and synthesizes.

Proves the package data (catalogue JSON) ships in the wheel and the public imports work outside
this repository. Uses uv (installed by scripts/setup) so it costs seconds, not a minute.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TINY_APP = """
import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from efa_constructs import EfaLaunchTemplate, EfaSecurityGroup

app = cdk.App(outdir="out")
stack = cdk.Stack(app, "Tiny")
vpc = ec2.Vpc(stack, "Vpc", max_azs=1)
sg = EfaSecurityGroup(stack, "Sg", vpc=vpc)
EfaLaunchTemplate(
    stack, "Lt", instance_type="p4d.24xlarge", security_groups=[sg], subnet=vpc.private_subnets[0]
)
app.synth()
"""


def test_installed_package_synthesizes_in_a_separate_app(tmp_path: Path) -> None:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.fail("uv is missing: run scripts/setup --dev")
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), str(ROOT)], check=True)
    (tmp_path / "app.py").write_text(TINY_APP)
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "PYTHONPATH": ""}
    subprocess.run([str(python), "app.py"], cwd=tmp_path, env=env, check=True, capture_output=True)
    template = json.loads((tmp_path / "out" / "Tiny.template.json").read_text())
    lts = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"]
    nics = lts[0]["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
    assert sum(n.get("InterfaceType") == "efa-only" for n in nics) == 4
