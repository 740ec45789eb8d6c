"""app.py as the CDK CLI runs it: refusals are one line naming the stack, exit code 1; the README's
`npx cdk` lines work in a plain shell (no virtual environment activated)."""

from __future__ import annotations

from typing import Any

import pytest

import app as app_module
from tests.conftest import background_result
from tests.helpers import new_app


def run_app(capsys: pytest.CaptureFixture[str], **context: Any) -> tuple[int, str]:
    """app.main() on an App with this context (as `cdk synth -c ...` gives it); (exit code, stderr)."""
    code = app_module.main(new_app(context))
    return code, capsys.readouterr().err


def test_a_plain_key_refused_by_one_stack_names_it_and_the_per_stack_form(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`-c efa_count=16` suits Trn1nEfaCluster but reaches Trn1EfaCluster too (8 cards)."""
    code, err = run_app(capsys, efa_count="16")
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("error: Trn1EfaCluster: efa_count=16: trn1.32xlarge takes 1 to 8 EFA interfaces")
    assert "write -c <StackName>:efa_count=..." in err


def test_a_misspelt_stack_prefix_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_app(capsys, **{"Trn1EfaClustr:node_count": "3"})
    assert code == 1 and err.count("\n") == 1, err
    assert "'Trn1EfaClustr' is not a ready stack, so node_count would be ignored" in err
    assert "write Trn1EfaCluster:node_count" in err


def test_cdk_and_aws_context_keys_with_colons_are_not_stack_prefixes() -> None:
    from stacks.params import check_stack_prefixes

    check_stack_prefixes(
        {
            "aws:cdk:enable-path-metadata": True,
            "@aws-cdk/core:newStyleStackSynthesis": True,
            "availability-zones:account=123456789012:region=us-east-1": ["us-east-1a"],
            "P5EfaCluster:node_count": "4",
        },
        {"P5EfaCluster": "cluster"},
    )


def test_npx_cdk_ls_works_in_a_plain_shell(request: pytest.FixtureRequest) -> None:
    """`npx cdk ls` with a bare environment: cdk.json runs scripts/cdk-app, which finds the project's
    Python itself (runs in the background from collection time)."""
    run, _ = background_result(request.node.nodeid)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == [
        "Trn1EfaCluster",
        "Trn1nEfaCluster",
        "P4dEfaCluster",
        "P5EfaCluster",
        "P3dnEfaCluster",
        "Dl1EfaCluster",
        "Trn1ParallelCluster",
    ]
    assert "end-of-life" not in run.stderr  # no jsii banner in the user's way


def test_a_key_the_prefixed_stack_does_not_read_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_app(capsys, **{"Trn1ParallelCluster:node_count": "3"})
    assert code == 1 and err.count("\n") == 1, err
    assert "Trn1ParallelCluster does not read node_count (only the cluster stacks do)" in err
