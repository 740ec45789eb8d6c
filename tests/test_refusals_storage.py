"""Bad input refused by the storage rules (core/lustre.py; cdk/storage.py, cdk/lustre.py): FSx for Lustre
sizes and tiers, EFA clients, the EFA connections a file system takes, the zone EFA clients need. Each fails
at synth naming the value, why, the fix and its id; the numbers are the FSx for Lustre user guide's."""

from __future__ import annotations

from typing import Any

from aws_cdk import Environment, RemovalPolicy
from aws_cdk import aws_ec2 as ec2

from efa_constructs import EfaCluster, EfaLustreFileSystem, EfaNetwork, EfaSharedStorage
from tests.refusals import Row, assert_refused, ctx, parametrize, pcluster


def lustre_in_another_zone(make: Any) -> Any:
    """A cluster in us-east-1c and an EFA-enabled file system in a subnet of us-east-1d."""
    stack = make(env=Environment(region="us-east-1"))
    net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
    other = ec2.Subnet.from_subnet_attributes(
        stack, "Other", subnet_id="subnet-0123456789abcdef0", availability_zone="us-east-1d"
    )
    lustre = EfaLustreFileSystem(stack, "Fsx", vpc=net.vpc, subnet=other, capacity_gib=19200, efa=True)
    return EfaCluster(stack, "C", instance_type=ec2.InstanceType("trn1.32xlarge"), vpc=net.vpc,
                      subnet=net.private_subnet, lustre=lustre)  # fmt: skip


def storage_removal_policy_twice(make: Any) -> Any:
    """EfaSharedStorage's deprecated removal_policy beside its new name: two settings of one quantity."""
    stack = make()
    net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
    group = ec2.SecurityGroup(stack, "Clients", vpc=net.vpc)
    return EfaSharedStorage(stack, "Storage", vpc=net.vpc, subnet=net.private_subnet, clients=group,
                            removal_policy=RemovalPolicy.DESTROY,
                            storage_removal_policy=RemovalPolicy.RETAIN)  # fmt: skip


ROWS: list[Row] = [
    (
        "an EFA file system off its tier's capacity step",
        ctx(fsx_lustre_capacity_gib="2400", fsx_lustre_efa="true"),
        "capacity_gib",
        "grows in steps of 19,200 GiB",
        "efa-cdk:fsx-efa-capacity-step",
    ),
    (
        "a throughput FSx does not sell",
        ctx(fsx_lustre_capacity_gib="2400", fsx_lustre_throughput="300"),
        "throughput",
        "one of 125, 250, 500 or 1000",
        "efa-cdk:fsx-throughput-tier",
    ),
    (
        "a TCP file system of no size FSx makes",
        pcluster(fsx_lustre_capacity_gib=1000),
        "fsx_lustre_capacity_gib",
        "1200 GiB or a multiple of 2400",
        "efa-cdk:fsx-capacity-size",
    ),
    (
        "trn2 nodes as EFA clients",
        ctx(instance_type="trn2.48xlarge", fsx_lustre_capacity_gib="19200", fsx_lustre_efa="true"),
        "efa",
        "serves no trn2 client over EFA",
        "efa-cdk:fsx-efa-client-type",
    ),
    (
        "more EFA connections than a file system takes",
        pcluster(
            instance_type=ec2.InstanceType("p5.48xlarge"),
            max_count=129,
            fsx_lustre_capacity_gib=19200,
            fsx_lustre_efa=True,
        ),
        "fsx_lustre_efa",
        "1032 EFA connections",
        "efa-cdk:fsx-efa-connections",
    ),
    (
        "a file system with no node software to mount it",
        ctx(fsx_lustre_capacity_gib="2400", node_software="false"),
        "lustre",
        "no node mounts the file system",
        "efa-cdk:lustre-needs-node-software",
    ),
    (
        "GPUDirect Storage without EFA",
        ctx(fsx_lustre_capacity_gib="2400", fsx_lustre_gds="true"),
        "gds",
        "reaches FSx for Lustre over EFA only",
        "efa-cdk:fsx-gds-needs-efa",
    ),
    (
        "GPUDirect Storage on a type FSx does not name for it",
        ctx(fsx_lustre_capacity_gib="19200", fsx_lustre_efa="true", fsx_lustre_gds="true"),
        "gds",
        "names P5, P5e, P5en, P6-B200 and P6e-GB200 instances",
        "efa-cdk:fsx-gds-client-type",
    ),
    (
        "EFA clients in another zone than the file system",
        lustre_in_another_zone,
        "lustre",
        "in the file system's Availability Zone only",
        "efa-cdk:fsx-efa-zone",
    ),
    (
        "a renamed storage option beside its new name",
        storage_removal_policy_twice,
        "removal_policy",
        "the old name of storage_removal_policy",
        "efa-cdk:storage-option-renamed-and-new",
    ),
]


@parametrize(ROWS)
def test_the_storage_rules_refuse_bad_input_at_synth(
    make_stack: Any, build: Any, key: str, why: str, code: str
) -> None:
    assert_refused(make_stack, build, key, why, code)
