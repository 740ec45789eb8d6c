"""The fenced code blocks of the README and docs/*.md, and what the docs tests do with each.

* ``python``: a complete program; tests/test_docs.py runs it as printed.
* ``bash``: shell commands; tests/docs_check.py runs each block as printed, in a bare shell, in a copy
  of the repository, except:

  - a block whose first line is ``# needs an AWS account...``: checked, not run. Each ``npx cdk
    deploy|destroy|diff`` line is synthesized instead (``npx cdk synth`` with the same stack, app and
    context: what the deploy would send); each ``aws`` line is checked against botocore's service model
    (the service, the operation and every option exist); other lines must name a program that runs on
    the cluster (ON_CLUSTER);
  - a block whose first line is ``# not run by the docs tests: <reason naming a test file>``;
  - ``scripts/test``, the test command itself: .ci/run runs it (tests/test_docs.py checks that).
* anything else (``json``, ``text``, no language): output shown to the reader, not a command.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ACCOUNT = "# needs an AWS account"
NOT_RUN = "# not run by the docs tests:"
#: Programs of the account blocks that run on a node or against a running cluster, not here.
ON_CLUSTER = frozenset(
    {".", "cat", "docker", "kubectl", "mpirun", "pcluster", "python3", "sbatch", "set", "sudo", "pip"}
)


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind(self) -> str:
        if self.lang == "python":
            return "python"
        if self.lang != "bash":
            return "output"
        first = self.text.lstrip().splitlines()[0] if self.text.strip() else ""
        if first.startswith(ACCOUNT):
            return "account"
        if first.startswith(NOT_RUN):
            return "not-run"
        return "shell"

    def commands(self) -> list[str]:
        """The block's commands: continuation lines joined, comments and blank lines dropped."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        lines = (re.sub(r"\s+#\s.*$", "", line).strip() for line in joined.splitlines())
        return [line for line in lines if line and not line.startswith("#")]


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks() -> list[Block]:
    found = []
    for page in pages():
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"^```(\w*)\s*$", lines[i])
            if m:
                end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
                text = "\n".join(lines[i + 1 : end]) + "\n"
                found.append(Block(str(page.relative_to(ROOT)), i + 1, m.group(1), text))
                i = end
            i += 1
    return found


def synth_instead(command: str) -> str | None:
    """``npx cdk deploy|destroy|diff ARGS`` as the offline ``npx cdk synth ARGS`` (None for other lines)."""
    words = shlex.split(command)
    if words[:2] != ["npx", "cdk"] or len(words) < 3 or words[2] not in {"deploy", "destroy", "diff"}:
        return None
    return shlex.join(["npx", "cdk", "synth", *words[3:], "--quiet"])
