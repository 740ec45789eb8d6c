"""A dependency bump in a user's app, shown with what it changes (issue 58 point 1): two commits of a CDK app
whose only difference is requirements.txt's aws-cdk-lib (2.240.0, then 2.275.0, both from the registry),
reviewed with ``efa-cdk template-diff --output json``. Each revision is synthesized in an environment of its
own, built from its own requirements.txt (in a cache of this run's, so the build itself is exercised).

aws-cdk-lib 2.240.0 gives the bucket's auto-delete provider function the Node.js 22 runtime and 2.275.0 the
Node.js 24 one (aws-cdk-lib's ``determineLatestNodeRuntime``, read off both versions' templates): the review
must name the bump and the function it updates, where one environment for both saw no change.

Usage: python tests/review_deps_check.py WORKDIR   (run by tests/test_review_deps.py in the background).
Prints the review's JSON.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.template_diff_check import finish  # noqa: E402 (after the repository is on the path)

APP = """\
import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

app = cdk.App()
stack = cdk.Stack(app, "Data")
s3.Bucket(stack, "Results", auto_delete_objects=True, removal_policy=cdk.RemovalPolicy.DESTROY)
app.synth()
"""
BASE, HEAD = "2.240.0", "2.275.0"


def main(workdir: Path) -> None:
    repo = workdir / "app"
    repo.mkdir(parents=True)
    (repo / "app.py").write_text(APP)
    (repo / "cdk.json").write_text('{"app": "python3 app.py"}\n')
    requirements = repo / "requirements.txt"
    requirements.write_text(f"aws-cdk-lib=={BASE}\nconstructs>=10.5.1,<11\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for step in (["init", "-q"], ["add", "."], ["commit", "-qm", "base"]):
        subprocess.run([*git, *step], check=True, capture_output=True)
    requirements.write_text(f"aws-cdk-lib=={HEAD}\nconstructs>=10.5.1,<11\n")
    subprocess.run([*git, "commit", "-qam", "bump aws-cdk-lib"], check=True, capture_output=True)
    env = {**os.environ, "EFA_CDK_CACHE": str(workdir / "cache"), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "efa_constructs", "template-diff", "--base", "HEAD~1", "--head", "HEAD"]
    finish(subprocess.run([*command, "--output", "json"], cwd=repo, env=env, capture_output=True, text=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
