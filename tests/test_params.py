"""Context parameters: each bad value fails with its key, the value, why, and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from efa_constructs.core import EfaConfigError
from efa_constructs.core.layout import LayoutMode
from stacks.cluster_stack import stack_context
from stacks.params import ClusterParams

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free


def parse(**ctx: Any) -> ClusterParams:
    return ClusterParams.from_context(ctx, default_instance_type="trn1.32xlarge")


def test_defaults() -> None:
    p = parse()
    assert (p.instance_type, p.node_count, p.nic_layout, p.efa_count) == (
        "trn1.32xlarge",
        2,
        LayoutMode.RECOMMENDED,
        None,
    )
    assert p.region is None


def test_strings_from_the_command_line() -> None:
    p = parse(
        node_count="16",
        nic_layout="legacy",
        efa_count="4",
        availability_zone="us-east-2b",
        ssh_peers=" 10.0.0.0/8 ",
    )
    assert (p.node_count, p.nic_layout, p.efa_count, p.region, p.ssh_peers) == (
        16,
        LayoutMode.LEGACY,
        4,
        "us-east-2",
        ("10.0.0.0/8",),
    )


def test_stack_prefixed_context_wins_for_that_stack_only() -> None:
    ctx = {"node_count": "4", "P4dEfaCluster:efa_count": "2", "@aws-cdk/core:flag": True, "my_own_key": "x"}
    assert stack_context(ctx, "P4dEfaCluster") == {"node_count": "4", "efa_count": "2", "my_own_key": "x"}
    assert stack_context(ctx, "Trn1EfaCluster") == {"node_count": "4", "my_own_key": "x"}
    with pytest.raises(EfaConfigError, match="my_own_key': not a context key this app reads"):
        parse(**stack_context(ctx, "Trn1EfaCluster"))  # issue 23 item 11: it would be ignored


def test_every_context_key_is_declared_once_where_its_value_lives() -> None:
    """Issue 52: one declaration per key (a `key(...)` field of the dataclass that holds its value, shared
    keys in a base the kinds share), never a table row beside a dataclass field; each kind reads the keys
    docs/context.md says (its table is generated from the same fields: tests/test_layers.py)."""
    import ast
    import dataclasses
    from pathlib import Path

    from stacks.params import BY_KEY, PARAMS, PclusterParams, PcsParams

    tree = ast.parse((Path(__file__).parent.parent / "stacks" / "params.py").read_text())
    declared = [
        n.target.id
        for n in ast.walk(tree)
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and isinstance(n.value, ast.Call)
        and getattr(n.value.func, "id", "") == "key"
    ]
    assert sorted(declared) == sorted(set(declared)) == sorted(BY_KEY)
    for params in PARAMS.values():  # every field a context key but the catalogue's record
        assert {f.name for f in dataclasses.fields(params) if "help" not in f.metadata} == {"catalogue_entry"}
    # the one key whose default differs by kind: the OS of ami_id (PCS's sample AMIs are Amazon Linux 2023)
    assert (
        parse().ami_family,
        PcsParams.from_context({}, default_instance_type="trn1.32xlarge").ami_family,
    ) == (
        "ubuntu",
        "al2023",
    )
    block = {"capacity_block": "cr-0123456789abcdef0", "availability_zone": "us-east-1c"}
    pcluster = PclusterParams.from_context(block, default_instance_type="trn1.32xlarge")
    assert (pcluster.capacity.kind.value, pcluster.capacity.target) == (
        "capacity-block",
        "cr-0123456789abcdef0",
    )


def test_the_capacity_keys_are_refused_together_while_the_context_is_read() -> None:
    """Before any stack is built: a launch targets one reservation (EC2 RunInstances'
    CapacityReservationSpecification names one), and the Capacity made once is the one the stack reads."""
    with pytest.raises(EfaConfigError) as err:
        parse(capacity_block="cr-0123456789abcdef0", capacity_reservation="cr-0123456789abcdef1",
              availability_zone="us-east-1c")  # fmt: skip
    assert err.value.code == "efa-cdk:capacity-block-and-reservation"
    p = parse(capacity_block="cr-0123456789abcdef0", availability_zone="us-east-1c")
    assert p.capacity is p.capacity and p.capacity.target == "cr-0123456789abcdef0"
