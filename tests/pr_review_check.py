"""The pull-request review end to end: clone the repository, commit a change a reviewer must see, and run
the workflow's step (``efa-cdk pr-review``) on the two commits with the real synth.

Usage: python tests/pr_review_check.py WORKDIR   (run by tests/test_pr_review.py in the background). The head
commit changes a node script (every node is replaced: the scripts' asset is in the user data), opens TCP 8080
to the world on the cluster's group and gives the nodes' role ``ec2:*`` on every resource; the base and head
both run Trn1EfaCluster with 64 nodes, so the comment must fold. Prints pr-review's line; the comment is
WORKDIR/comment.md and the job summary WORKDIR/summary.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.template_diff_check import finish  # noqa: E402 (after the repository is on the path)

#: Where the head commit adds the two widenings (the ready cluster stack, after its cluster is made).
ANCHOR = "        self._restate_warnings(params)\n"
WIDENINGS = (
    "        self.cluster.connections.allow_from(\n"
    '            ec2.Peer.any_ipv4(), ec2.Port.tcp(8080), "a world ingress"\n'
    "        )\n"
    "        self.cluster.grant_principal.add_to_principal_policy(\n"
    '            iam.PolicyStatement(actions=["ec2:*"], resources=["*"])\n'
    "        )\n"
)
NODES = "64"


def main(workdir: Path) -> None:
    repo = workdir / "repo"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    stack = repo / "stacks" / "cluster_stack.py"
    text = stack.read_text()
    assert ANCHOR in text, f"{stack} no longer has {ANCHOR!r}"
    text = text.replace(ANCHOR, WIDENINGS + ANCHOR, 1)
    stack.write_text(
        text.replace(
            "from aws_cdk import aws_ec2 as ec2\n",
            "from aws_cdk import aws_ec2 as ec2\nfrom aws_cdk import aws_iam as iam\n",
            1,
        )
    )
    script = repo / "efa_constructs" / "node" / "boot" / "verify-efa.sh"
    script.write_text(script.read_text() + "# a change to the node scripts\n")
    git = ["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.com"]
    subprocess.run([*git, "commit", "--quiet", "-am", "a node-scripts change and two widenings"], check=True)
    env = {**os.environ, "PYTHONPATH": str(repo), "GITHUB_STEP_SUMMARY": str(workdir / "summary.md")}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "efa_constructs",
            "pr-review",
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
            "-c",
            f"Trn1EfaCluster:node_count={NODES}",
            "--comment-file",
            str(workdir / "comment.md"),
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    finish(run)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
