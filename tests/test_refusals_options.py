"""Bad input refused by the options' own forms (core/options.py), capacity (core/capacity.py) and the network
(cdk/network.py): each fails at synth naming the value, why, the fix and its id."""

from __future__ import annotations

from typing import Any

from aws_cdk import Environment

from efa_constructs import (
    Capacity,
)
from efa_constructs.cdk.security_group import ssh_peer
from tests.refusals import (
    Row,
    assert_refused,
    call,
    cluster,
    ctx,
    network,
    parametrize,
    pcluster,
    pcs_cluster,
)

ROWS: list[Row] = [
    (
        "malformed reservation id",
        ctx(capacity_reservation="cr-123", availability_zone="us-east-1a"),
        "capacity_reservation",
        "not a Capacity Reservation id",
        "efa-cdk:capacity-reservation-id",
    ),
    (
        "malformed reservation group",
        call(Capacity.reservation_group, "my-group"),
        "capacity_reservation",
        "not a resource-group ARN",
        "efa-cdk:capacity-group-arn",
    ),
    (
        "more nodes than the reservation holds",
        cluster(node_count=3, capacity=Capacity.reservation("cr-0123456789abcdef0", instance_count=2)),
        "node_count",
        "holds 2 instances",
        "efa-cdk:capacity-too-small",
    ),
    (
        "reservation of another type",
        cluster(capacity=Capacity.capacity_block("cr-0123456789abcdef0", instance_type="p5.48xlarge")),
        "capacity_block",
        "reserves p5.48xlarge",
        "efa-cdk:capacity-other-instance-type",
    ),
    (
        "reservation in another AZ",
        cluster(
            vpc=network(availability_zone="us-east-1a"),
            env=Environment(region="us-east-1"),
            capacity=Capacity.reservation("cr-0123456789abcdef0", availability_zone="us-east-1c"),
        ),
        "capacity_reservation",
        "is in us-east-1c",
        "efa-cdk:capacity-other-zone",
    ),
    ("malformed CIDR", ctx(ssh_peers="10.0.0.0/33"), "ssh_peers", "not a CIDR", "efa-cdk:ssh-source-form"),
    (
        "CIDR with host bits",
        call(ssh_peer, "192.168.1.7/24"),
        "ssh_peers",
        "host bits set",
        "efa-cdk:ssh-source-form",
    ),
    (
        "a hostname as CIDR",
        ctx(ssh_peers="laptop.example.com"),
        "ssh_peers",
        "not a CIDR",
        "efa-cdk:ssh-source-form",
    ),
    (
        "malformed prefix list id",
        ctx(ssh_peers="pl-xyz"),
        "ssh_peers",
        "not a CIDR block or prefix list id",
        "efa-cdk:ssh-source-form",
    ),
    (
        "prefix list id of 9 digits",
        call(ssh_peer, "pl-0123abcde"),
        "ssh_peers",
        "not a CIDR block or prefix list",
        "efa-cdk:ssh-source-form",
    ),
    (
        "a Capacity Block of no instances, in code",
        call(Capacity.capacity_block, "cr-0123456789abcdef0", instance_count=0),
        "instance_count",
        "holds at least one instance",
        "efa-cdk:capacity-instance-count",
    ),
    (
        "a region as a reservation's zone, in code",
        call(Capacity.reservation, "cr-0123456789abcdef0", availability_zone="us-east-1"),
        "availability_zone",
        "not an Availability Zone name",
        "efa-cdk:zone-name-form",
    ),
    (
        "a region as EfaNetwork's zone",
        cluster(vpc=network(availability_zone="us-east-1")),
        "availability_zone",
        "not an Availability Zone name",
        "efa-cdk:zone-name-form",
    ),
    (
        "banana as EfaNetwork's zone",
        cluster(vpc=network(availability_zone="banana")),
        "availability_zone",
        "not an Availability Zone name",
        "efa-cdk:zone-name-form",
    ),
    (
        "EfaNetwork CIDR not a network",
        cluster(vpc=network(cidr="10.0.0.1/16")),
        "cidr",
        "not an IPv4 network",
        "efa-cdk:vpc-cidr-form",
    ),
    (
        "EfaNetwork CIDR too large",
        cluster(vpc=network(cidr="10.0.0.0/8")),
        "cidr",
        "a VPC's block is /16 to /28",
        "efa-cdk:vpc-cidr-size",
    ),
    (
        "EfaNetwork private subnet that does not fit",
        cluster(vpc=network(cidr="10.0.0.0/24", private_subnet_mask=25)),
        "private_subnet_mask",
        "does not fit in 10.0.0.0/24",
        "efa-cdk:private-subnet-mask-fit",
    ),
    (
        "a region as the PCS zone",
        pcs_cluster(availability_zone="us-east-1"),
        "availability_zone",
        "not an Availability Zone name",
        "efa-cdk:zone-name-form",
    ),
    (
        "a PCS zone its subnet is not in",
        pcs_cluster(availability_zone="us-east-1d", own_network=True),
        "availability_zone",
        "the subnet given is in us-east-1c",
        "efa-cdk:zone-not-the-subnets",
    ),
    (
        "a ParallelCluster zone its subnets decide",
        pcluster(availability_zone="us-east-1d"),
        "availability_zone",
        "is in us-east-1c",
        "efa-cdk:zone-not-the-subnets",
    ),
    (
        "alarm email to the construct",
        cluster(alarm_email="ops@example"),
        "alarm_email",
        "not an email address",
        "efa-cdk:email-form",
    ),
    (
        "a reservation declared in a zone of another region",
        cluster(
            env=Environment(region="us-east-1"),
            capacity=Capacity.reservation("cr-0123456789abcdef0", availability_zone="us-west-2a"),
        ),
        "capacity",
        "deploys to us-east-1, and this zone is not in it",
        "efa-cdk:zone-outside-region",
    ),
]


@parametrize(ROWS)
def test_the_options_capacity_and_network_refuse_bad_input_at_synth(
    make_stack: Any, build: Any, key: str, why: str, code: str
) -> None:
    assert_refused(make_stack, build, key, why, code)
