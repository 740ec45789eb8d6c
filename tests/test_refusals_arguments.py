"""Bad input refused by the constructs' argument types (cdk/arguments.py): each fails at synth naming the
value, why, the fix and its id."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_ec2 as ec2

from efa_constructs import (
    EfaCluster,
    EfaSecurityGroup,
    LayoutMode,
)
from tests.refusals import (
    Row,
    assert_refused,
    call,
    cluster,
    parametrize,
)

ROWS: list[Row] = [
    (
        "a mode for a Layout",
        cluster(nic_layout=LayoutMode.LEGACY),
        "nic_layout",
        "e.g. Layout.recommended()",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "a bool for NodeSoftware",
        cluster(node_software=False),
        "node_software",
        "e.g. NodeSoftware.efa()",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "a str for the VPC",
        cluster(vpc=lambda _s: "vpc-0123456789abcdef0"),
        "vpc",
        "takes ec2.IVpc here (a construct",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "None for the VPC",
        cluster(vpc=lambda _s: None),
        "vpc",
        "needs ec2.IVpc here (None given)",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "a str for the instance type",
        cluster(instance_type="trn1.32xlarge"),
        "instance_type",
        "not a str. Fix: pass instance_type=<ec2.InstanceType or efa_constructs.InstanceType>, "
        "e.g. ec2.InstanceType(",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "a str for node_group",
        cluster(node_group="asg"),
        "node_group",
        "takes NodeGroup here, not a str. Fix: pass node_group=<NodeGroup>, e.g. NodeGroup.EXPLICIT or",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "a str for node_count",
        cluster(node_count="3"),
        "node_count",
        "takes int here, not a str",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "None for the instance type",
        cluster(instance_type=None),
        "instance_type",
        "takes ec2.InstanceType or efa_constructs.InstanceType here",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "a CIDR string for ssh_peers",
        cluster(ssh_peers="10.0.0.0/8"),
        "ssh_peers",
        "(a list), not a str",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "CIDR strings in ssh_peers",
        cluster(ssh_peers=["10.0.0.0/8"]),
        "ssh_peers",
        "item 0 is a str",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "a subnet id for subnet",
        cluster(subnet="subnet-0123456789abcdef0"),
        "subnet",
        "ec2.ISubnet or None",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "a list for node_replacements",
        cluster(node_replacements=[1]),
        "node_replacements",
        "a mapping of int to str",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "a str for the security group's VPC",
        lambda make: EfaSecurityGroup(make(), "Sg", vpc="vpc-1"),
        "vpc",
        "EfaSecurityGroup takes ec2.IVpc",
        "efa-cdk:argument-wrong-type",
    ),
    (
        "an unknown keyword",
        cluster(nodes=3),
        "nodes",
        "EfaCluster has no argument 'nodes'",
        "efa-cdk:argument-unknown",
    ),
    (
        "a missing keyword",
        call(EfaCluster),
        "EfaCluster",
        "missing a required argument",
        "efa-cdk:argument-missing",
    ),
    (
        # the node options (instance_type) are the construct's own names: the missing vpc is what is said
        "a missing keyword beside the node options",
        lambda make: EfaCluster(make(), "C", instance_type=ec2.InstanceType("trn1.32xlarge"), node_count=2),
        "EfaCluster",
        "missing a required argument: 'vpc'",
        "efa-cdk:argument-missing",
    ),
    (
        "an unknown keyword beside a missing one and the node options",
        lambda make: EfaCluster(
            make(), "C", instance_type=ec2.InstanceType("trn1.32xlarge"), zone="us-east-1c"
        ),
        "zone",
        "EfaCluster has no argument 'zone'",
        "efa-cdk:argument-unknown",
    ),
]


@parametrize(ROWS)
def test_the_argument_types_refuse_bad_input_at_synth(
    make_stack: Any, build: Any, key: str, why: str, code: str
) -> None:
    assert_refused(make_stack, build, key, why, code)
