"""`pip install .` into a fresh venv, then someone else's CDK app composes the constructs and synthesizes.

The app composes EfaCluster with aws-cdk-lib's own constructs the way a user would: an S3 bucket
granted to the cluster (`iam.IGrantable`), a database security group that admits the cluster
(`ec2.IConnectable`), and a bucket granted to a bare EfaLaunchTemplate. It also runs the shipped
`efa-cdk template-diff` command without its extra installed, which must refuse with one line, and
checks that importing the package loads no aws_cdk until a construct is used.

Usage: python tests/packaging_check.py WORKDIR   (run by tests/test_packaging.py in the background)
Prints the template-diff refusal, then the path of the synthesized template. Uses uv (installed by
scripts/setup): seconds, not a minute.
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
from aws_cdk import aws_ec2 as ec2, aws_s3 as s3
from efa_constructs import EfaCluster, EfaLaunchTemplate, EfaSecurityGroup

app = cdk.App(outdir="out")
stack = cdk.Stack(app, "Tiny")
vpc = ec2.Vpc(stack, "Vpc", max_azs=1)
cluster = EfaCluster(stack, "Training", vpc=vpc, instance_type=ec2.InstanceType("p4d.24xlarge"), node_count=2)
data = s3.Bucket(stack, "TrainingData")
data.grant_read(cluster)
db = ec2.SecurityGroup(stack, "Database", vpc=vpc, allow_all_outbound=False)
db.connections.allow_from(cluster, ec2.Port.tcp(5432), "training nodes to Postgres")
sg = EfaSecurityGroup(stack, "Sg", vpc=vpc)
lt = EfaLaunchTemplate(
    stack,
    "Lt",
    instance_type=ec2.InstanceType("p4d.24xlarge"),
    security_groups=[sg],
    subnet=vpc.private_subnets[0],
)
s3.Bucket(stack, "Checkpoints").grant_read_write(lt)
app.synth()
"""


# Whether aws_cdk is loaded after importing the package, then after touching a construct.
LAZY = """
import sys
import efa_constructs
before = "aws_cdk" in sys.modules
efa_constructs.EfaCluster
print(before, "aws_cdk" in sys.modules)
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
    diff = subprocess.run(
        [str(venv / "bin" / "efa-cdk"), "template-diff"], cwd=workdir, env=env, capture_output=True, text=True
    )
    print(f"template-diff exit {diff.returncode}: {diff.stderr.strip()}")
    lazy = subprocess.run(
        [str(python), "-c", LAZY], cwd=workdir, env=env, capture_output=True, text=True, check=True
    )
    print(f"aws_cdk loaded: {lazy.stdout.strip()}")
    subprocess.run([str(python), "app.py"], cwd=workdir, env=env, check=True)
    print(workdir / "out" / "Tiny.template.json")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
