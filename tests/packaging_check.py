"""`pip install .` into a fresh venv, then a separate tiny CDK app imports the constructs and synthesizes.

Usage: python tests/packaging_check.py WORKDIR   (run by tests/test_packaging.py in the background)
Prints the path of the synthesized template. Uses uv (installed by scripts/setup): seconds, not a minute.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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


def main(workdir: Path) -> None:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        sys.exit("uv is missing: run scripts/setup --dev")
    venv = workdir / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), str(ROOT)], check=True)
    (workdir / "app.py").write_text(TINY_APP)
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "PYTHONPATH": ""}
    subprocess.run([str(python), "app.py"], cwd=workdir, env=env, check=True)
    print(workdir / "out" / "Tiny.template.json")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
