"""app.py as the CDK CLI runs it: refusals are one line naming the stack, exit code 1; the README's
`npx cdk` lines work in a plain shell (no virtual environment activated)."""

from __future__ import annotations

from typing import Any

import pytest

import app as app_module
from tests.helpers import new_app


def run_app(capsys: pytest.CaptureFixture[str], **context: Any) -> tuple[int, str]:
    """app.main() on an App with this context (as `cdk synth -c ...` gives it); (exit code, stderr)."""
    code = app_module.main(new_app(context))
    return code, capsys.readouterr().err


def test_a_plain_key_refused_by_one_stack_names_it_and_the_per_stack_form(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`-c efa_count=16` suits Trn1nEfaCluster but reaches Trn1EfaCluster too (8 cards). Issue 60 item 12: the
    line named Trn1EfaCluster first, as if the user had asked for it (`cdk synth Trn1nEfaCluster -c ...`):
    it says the plain key reached every ready stack, then which refused it, then the per-stack form."""
    code, err = run_app(capsys, efa_count="16")
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith(
        "error: efa_count=16: a plain -c key reaches every ready stack, and Trn1EfaCluster refuses it: "
        "trn1.32xlarge takes 1 to 8 EFA interfaces"
    ), err
    assert "write -c <StackName>:efa_count=..." in err


def test_a_misspelt_stack_prefix_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_app(capsys, **{"Trn1EfaClustr:node_count": "3"})
    assert code == 1 and err.count("\n") == 1, err
    assert "'Trn1EfaClustr' is not a ready stack, so node_count would be ignored" in err
    assert "write Trn1EfaCluster:node_count" in err


def test_cdk_and_aws_context_keys_with_colons_are_not_stack_prefixes() -> None:
    from stacks.context_keys import check_context_keys

    check_context_keys(
        {
            "aws:cdk:enable-path-metadata": True,
            "@aws-cdk/core:newStyleStackSynthesis": True,
            "availability-zones:account=123456789012:region=us-east-1": ["us-east-1a"],
            "P5EfaCluster:node_count": "4",
        },
        {"P5EfaCluster": "cluster"},
    )


def test_a_key_the_prefixed_stack_does_not_read_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_app(capsys, **{"Trn1ParallelCluster:node_count": "3"})
    assert code == 1 and err.count("\n") == 1, err
    assert "Trn1ParallelCluster does not read node_count (only the cluster stacks do)" in err


@pytest.mark.parametrize(
    ("context", "says"),
    [
        ({"nodes": "3"}, "nodes': not a context key this app reads (it would be ignored). Fix: use one"),
        ({"foo": "bar"}, "context='foo': not a context key this app reads"),
        ({"az": "us-east-1c"}, "context='az': not a context key this app reads"),
        ({"nodecount": "3"}, "Fix: write node_count"),
        ({"Trn1EfaClustr:node-count": "3"}, "'Trn1EfaClustr' is not a ready stack, so the key would be"),
        ({"Trn1EfaCluster:nodes": "3"}, "Trn1EfaCluster reads no key 'nodes' (it would be ignored)"),
        ({"Trn1EfaCluster:node-count": "3"}, "Fix: write Trn1EfaCluster:node_count"),
    ],
)
def test_every_key_that_would_be_ignored_is_refused(
    capsys: pytest.CaptureFixture[str], context: dict[str, str], says: str
) -> None:
    """Issue 23 item 11: keys far from every known key, and typos in both prefix and key, exit 1."""
    code, err = run_app(capsys, **context)
    assert code == 1 and err.count("\n") == 1, err
    assert says in err, err


def test_the_keys_cdk_writes_itself_pass() -> None:
    """The CLI's own keys (read off `npx cdk synth` with a probe app: aws:cdk:bundling-stacks,
    aws:cdk:enable-asset-metadata, ...), feature flags, cached lookups and `cdk acknowledge`'s list."""
    from stacks.context_keys import check_context_keys

    check_context_keys(
        {
            "aws:cdk:bundling-stacks": ["**"],
            "aws:cdk:version-reporting": False,
            "@aws-cdk/core:newStyleStackSynthesis": True,
            "ssm:account=123456789012:parameterName=/a/b:region=us-east-1": "x",
            "acknowledged-issue-numbers": [32775],
        },
        {"P5EfaCluster": "cluster"},
    )


def test_a_refusal_names_the_context_key_the_user_typed(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 41 item 14: the ready cluster stack reads -c fsx_lustre_throughput into EfaLustreFileSystem's
    throughput; the refusal says fsx_lustre_throughput, and so does the per-stack hint."""
    code, err = run_app(
        capsys, **{"Trn1EfaCluster:fsx_lustre_capacity_gib": "1200", "fsx_lustre_throughput": "300"}
    )
    assert code == 1 and err.count("\n") == 1, err
    plain = "a plain -c key reaches every ready stack, and Trn1EfaCluster refuses it: "
    assert err.startswith(f"error: fsx_lustre_throughput=300: {plain}"), err
    assert "throughput=300" not in err.replace("fsx_lustre_throughput=300", "")
    code, err = run_app(capsys, fsx_lustre_capacity_gib="1000")
    assert err.startswith(f"error: fsx_lustre_capacity_gib=1000: {plain}"), err
    assert "write -c <StackName>:fsx_lustre_capacity_gib=..." in err, err


def test_the_storage_options_context_keys_are_the_constructs_names() -> None:
    """Issue 52: one name per quantity: each storage option a ready stack reads from the context is read
    under StorageOptions' own name (fsx_lustre_gib was the one context key of another name)."""
    from efa_constructs.cdk import StorageOptions
    from stacks.context_keys import RENAMED
    from stacks.params import BY_KEY

    read = {k for k in StorageOptions.__annotations__ if k in BY_KEY}
    assert read == set(StorageOptions.__annotations__) - {"storage_removal_policy"}  # retained, no key
    assert RENAMED["fsx_lustre_gib"] == "fsx_lustre_capacity_gib"


def test_a_renamed_key_still_works_and_warns_with_the_new_name(capsys: pytest.CaptureFixture[str]) -> None:
    """0.2.0 named two context keys as the constructs' options (ssh_cidr -> ssh_peers, replace_nodes ->
    node_replacements): the old keys are read as the new ones, each with one warning naming the new key."""
    app = app_module.build(
        new_app(
            {
                "Trn1EfaCluster:ssh_cidr": "203.0.113.0/24",
                "replace_nodes": "1:2026-11-26",
                "Trn1ParallelCluster:fsx_lustre_gib": "1200",
            }
        )
    )
    err = capsys.readouterr().err
    assert "warning: -c Trn1EfaCluster:ssh_cidr is renamed ssh_peers" in err
    assert "write -c Trn1EfaCluster:ssh_peers=..." in err
    assert "warning: -c replace_nodes is renamed node_replacements" in err and err.count("\n") == 3, err
    assert "warning: -c Trn1ParallelCluster:fsx_lustre_gib is renamed fsx_lustre_capacity_gib" in err
    stacks = {s.node.id: s for s in app.node.children}
    assert stacks["Trn1EfaCluster"].params.ssh_peers == ("203.0.113.0/24",)  # type: ignore[attr-defined]
    assert stacks["P4dEfaCluster"].params.ssh_peers == ()  # type: ignore[attr-defined]
    assert stacks["P5EfaCluster"].params.node_replacements == ((1, "2026-11-26"),)  # type: ignore[attr-defined]
    assert stacks["Trn1ParallelCluster"].params.fsx_lustre_capacity_gib == 1200  # type: ignore[attr-defined]


def test_an_old_and_a_new_key_for_the_same_stacks_are_refused() -> None:
    from efa_constructs.core import EfaConfigError
    from stacks.context_keys import renamed_keys

    with pytest.raises(EfaConfigError, match="ssh_cidr is the old name of ssh_peers, and ssh_peers is given"):
        renamed_keys({"ssh_cidr": "10.0.0.0/8", "ssh_peers": "10.0.0.0/16"})
    # one stack's old key beside the plain new key: two settings for two scopes, as before
    ctx, said = renamed_keys({"P5EfaCluster:ssh_cidr": "10.0.0.0/8", "ssh_peers": "10.0.0.0/16"})
    assert ctx == {"P5EfaCluster:ssh_peers": "10.0.0.0/8", "ssh_peers": "10.0.0.0/16"} and len(said) == 1
