"""The house's layers: the pure core never loads the CDK, and docs/context.md's table is the code's."""

from __future__ import annotations

import subprocess
import sys

from stacks.params import context_table
from tests.helpers import ROOT

PURE = [
    "efa_constructs",
    "efa_constructs.core",
    "efa_constructs.core.checks",
    "efa_constructs.core.limits",
    "efa_constructs.core.pcluster",
    "efa_constructs.node.bench_parse",
    "stacks.params",
]


def test_the_pure_core_never_loads_aws_cdk() -> None:
    """Importing the core (and the context parsing, and the package root) starts no Node process."""
    code = "; ".join(
        [f"import {m}" for m in PURE]
        + [
            "import efa_constructs.__main__",
            "from efa_constructs import plan_layout, EfaUserData",
            "plan_layout('p5.48xlarge'); EfaUserData().stage()",
            "import sys",
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'jsii', 'constructs')))",
        ]
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_the_readme_context_table_is_generated_from_the_field_table() -> None:
    """Regenerate with `python -m stacks.params` and paste between the markers."""
    readme = (ROOT / "docs" / "context.md").read_text()
    start, end = "<!-- context-table: python -m stacks.params -->\n", "\n<!-- /context-table -->"
    assert start in readme and end in readme
    assert readme.split(start, 1)[1].split(end, 1)[0] == context_table()


def test_the_preflight_checks_table_is_the_register() -> None:
    """docs/deploy.md's table of preflight's checks is made from the register (``rules_table()``)."""
    from efa_constructs.tools.preflight import rules_table

    page = (ROOT / "docs" / "deploy.md").read_text()
    start, end = (
        "<!-- preflight-checks: efa_constructs.tools.preflight.rules_table() -->\n",
        "\n<!-- /preflight-checks -->",
    )
    assert start in page and end in page
    assert page.split(start, 1)[1].split(end, 1)[0] == rules_table()
