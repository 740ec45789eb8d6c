"""A real two-revision template diff: clone the repository, commit one change, diff the revisions.

Usage: python tests/template_diff_check.py WORKDIR   (run by tests/test_template_diff.py in the
background). The change makes P4dEfaCluster launch p4de.24xlarge: its launch template changes, so
both of its nodes must show as replaced, and every other stack as unchanged. Prints the report.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OLD, NEW = '"P4dEfaCluster", CLUSTER, "p4d.24xlarge"', '"P4dEfaCluster", CLUSTER, "p4de.24xlarge"'


def main(workdir: Path) -> None:
    repo = workdir / "repo"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    stacks = repo / "stacks" / "params.py"  # the table of ready stacks
    text = stacks.read_text()
    assert OLD in text, f"{stacks} no longer says {OLD}"
    stacks.write_text(text.replace(OLD, NEW))
    git = ["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.com"]
    subprocess.run([*git, "commit", "--quiet", "-am", "P4d stack launches p4de"], check=True)
    env = {**os.environ, "PYTHONPATH": str(repo)}
    run = subprocess.run(
        [sys.executable, "-m", "efa_constructs", "template-diff", "--base", "HEAD~1", "--head", "HEAD"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    finish(run)


def finish(run: subprocess.CompletedProcess[str]) -> None:
    """The command's output as this script's, and its exit code (the test that waits reads both)."""
    print(run.stdout, end="")
    print(run.stderr, end="", file=sys.stderr)
    sys.exit(run.returncode)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
