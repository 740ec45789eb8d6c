"""Run the shell commands of the README and docs/*.md as printed, the way a newcomer would.

Each ``bash`` block that needs no account runs whole (``bash -e -o pipefail``) in a bare shell (no
virtual environment on PATH, nothing exported), from a copy of the repository's files (a git
repository of two commits, so the template-diff examples have revisions to compare) whose ``.venv``
and ``node_modules`` are the project's own. Each ``npx cdk deploy|destroy|diff`` line of an account
block runs as the ``npx cdk synth`` of the same stack, app and context. ``scripts/test`` is not run
(it is this suite; .ci/run runs it).

Usage: python tests/docs_check.py WORKDIR   (run by tests/test_docs.py in the background)
Prints one JSON list, a record per command run, as its last line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.docs_blocks import ROOT, blocks, synth_instead

NODE = Path(shutil.which("node") or "/usr/bin/node").parent
BARE = ["env", "-i", f"PATH=/usr/local/bin:/usr/bin:/bin:{NODE}", f"HOME={Path.home()}"]


def copy_tracked(dest: Path) -> None:
    """The files git tracks, as they are in the working tree (tests/packaging_check.py builds from them)."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)


def copy_repository(dest: Path) -> None:
    """The tracked files as a git repository of two commits, sharing the project's .venv and node_modules."""
    copy_tracked(dest)
    for shared in (".venv", "node_modules"):
        (dest / shared).symlink_to(ROOT / shared)
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@example.com"]
    for step in (
        ["init", "--quiet", "--initial-branch=main"],
        ["add", "--all"],
        ["commit", "--quiet", "-m", "base"],
        ["commit", "--quiet", "--allow-empty", "-m", "head"],
    ):
        subprocess.run([*git, *step], cwd=dest, check=True, capture_output=True)


def check_set_up() -> None:
    """The copy shares the project's .venv: a scripts/setup run from it that found the stamps stale would
    reinstall efa-cdk editable from the copy (and a bare shell has no proxy settings to do it with)."""
    import hashlib

    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + (ROOT / "constraints.txt").read_bytes())
    stamp = ROOT / ".venv" / ".efa-cdk-installed[dev]-bytecode"
    lock = ROOT / "node_modules" / ".efa-cdk-lock"
    if (
        not stamp.exists()
        or stamp.read_text().strip() != want.hexdigest()[:16]
        or not lock.exists()
        or lock.read_bytes() != (ROOT / "package-lock.json").read_bytes()
    ):
        sys.exit("docs_check: .venv or node_modules is stale for this pyproject.toml: scripts/setup --dev")


def main(workdir: Path) -> None:
    check_set_up()
    repo = workdir / "repo"
    copy_repository(repo)
    records: list[dict[str, object]] = []
    done: dict[str, dict[str, object]] = {}  # the same synth twice (a deploy and its destroy) runs once
    for block in blocks():
        if block.kind == "shell":
            runs = [(c, c) for c in block.commands() if c == "scripts/test"]  # recorded, not run
            script = "\n".join(c for c in block.commands() if c != "scripts/test")
            runs = [(script, script), *runs] if script else runs
        elif block.kind == "account":
            # a destroy synthesizes nothing a deploy line has not: tests/test_docs.py checks its stack
            runs = [(c, s) for c in block.commands() if (s := synth_instead(c)) and " destroy " not in c]
        else:
            continue
        for printed, command in runs:
            if command == "scripts/test":
                records.append({"where": block.where, "printed": printed, "rc": None, "out": "", "err": ""})
                continue
            if command not in done:
                start = time.monotonic()
                run = subprocess.run(
                    [*BARE, "bash", "-e", "-o", "pipefail", "-c", command],
                    cwd=repo,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                done[command] = {
                    "ran": command,
                    "rc": run.returncode,
                    "out": run.stdout[-4000:],
                    "err": run.stderr[-4000:],
                    "seconds": round(time.monotonic() - start, 1),
                }
            records.append({"where": block.where, "printed": printed, **done[command]})
    print(json.dumps(records))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
