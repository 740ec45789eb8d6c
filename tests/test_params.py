"""Context parameters: each bad value fails with its key, the value, why, and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from efa_constructs.errors import EfaConfigError
from efa_constructs.layout import LayoutMode
from stacks.cluster_stack import stack_context
from stacks.params import ClusterParams


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
        ssh_cidr=" 10.0.0.0/8 ",
    )
    assert (p.node_count, p.nic_layout, p.efa_count, p.region, p.ssh_cidrs) == (
        16,
        LayoutMode.LEGACY,
        4,
        "us-east-2",
        ("10.0.0.0/8",),
    )


BAD = [
    ({"instance_type": "trn1.32xlarg"}, "instance_type", "trn1.32xlarge"),
    ({"instance_type": "m5.large"}, "instance_type", "does not support EFA"),
    ({"node_count": "0"}, "node_count", "out of range"),
    ({"node_count": 0}, "node_count", "out of range"),
    ({"node_count": "-3"}, "node_count", "not a whole number"),
    ({"node_count": "two"}, "node_count", "not a whole number"),
    ({"node_count": True}, "node_count", "not a whole number"),
    ({"efa_count": "9"}, "efa_count", "between 1 and 8"),
    ({"efa_count": "0"}, "efa_count", "out of range"),
    ({"nic_layout": "fast"}, "nic_layout", "recommended, max-bandwidth, legacy"),
    ({"instance_type": "p6e-gb200.36xlarge", "nic_layout": "legacy"}, "nic_layout", "efa-only"),
    ({"availability_zone": "us-east-1"}, "availability_zone", "not an Availability Zone"),
    ({"ssh_cidr": "10.1.2.3/8"}, "ssh_cidr", "host bits set"),
    ({"ssh_cidr": "everyone"}, "ssh_cidr", "not a CIDR"),
    ({"key_pair": "bad\nname"}, "key_pair", "not a valid EC2 key pair name"),
    ({"vpc_id": "vpc-123"}, "vpc_id", "not a VPC id"),
    ({"vpc_id": "vpc-0123456789abcdef0"}, "vpc_id", "needs all of vpc_id, subnet_id and availability_zone"),
    (
        {"subnet_id": "subnet-0123456789abcdef0", "vpc_id": "vpc-0123456789abcdef0"},
        "vpc_id",
        "availability_zone",
    ),
    ({"subnet_id": "sub-1"}, "subnet_id", "not a subnet id"),
    ({"root_volume_gib": "4"}, "root_volume_gib", "out of range"),
    ({"internet_egress": "some"}, "internet_egress", "web, all, none"),
    ({"node-count": "3"}, "context", "write node_count"),
    ({"nodecount": "3"}, "context", "write node_count"),
    ({"instance-type": "p5.48xlarge"}, "context", "write instance_type"),
]


@pytest.mark.parametrize(
    ("ctx", "key", "why"), BAD, ids=[f"{b[1]}={next(iter(b[0].values()))!r}" for b in BAD]
)
def test_bad_context(ctx: dict[str, Any], key: str, why: str) -> None:
    with pytest.raises(EfaConfigError) as err:
        parse(**ctx)
    message = str(err.value)
    assert message.startswith(f"{key}=")
    assert why in message
    assert "Fix: " in message


def test_stack_prefixed_context_wins_for_that_stack_only() -> None:
    ctx = {"node_count": "4", "P4dEfaCluster:efa_count": "2", "@aws-cdk/core:flag": True, "my_own_key": "x"}
    assert stack_context(ctx, "P4dEfaCluster") == {"node_count": "4", "efa_count": "2", "my_own_key": "x"}
    assert stack_context(ctx, "Trn1EfaCluster") == {"node_count": "4", "my_own_key": "x"}
    parse(**stack_context(ctx, "Trn1EfaCluster"))  # keys far from ours are the user's business
