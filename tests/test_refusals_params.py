"""Bad input refused by the ready stacks' context parsing (stacks/params.py) and unknown choices of the
options' enums (core/errors.parse_choice): each fails at synth naming the value, why, the fix and its id."""

from __future__ import annotations

from typing import Any

import pytest

from efa_constructs import (
    Layout,
    PublicIp,
)
from tests.refusals import (
    Row,
    assert_refused,
    call,
    ctx,
    parametrize,
)

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

ROWS: list[Row] = [
    (
        "unknown layout",
        ctx(nic_layout="fast"),
        "nic_layout",
        "not a known layout",
        "efa-cdk:layout-mode-unknown",
    ),
    (
        "negative nodes",
        ctx(node_count="-1"),
        "node_count",
        "not a whole number",
        "efa-cdk:context-not-a-number",
    ),
    (
        "fractional nodes",
        ctx(node_count="2.5"),
        "node_count",
        "not a whole number",
        "efa-cdk:context-not-a-number",
    ),
    (
        "unknown node group",
        ctx(node_group="fleet"),
        "node_group",
        "not a node-group mode",
        "efa-cdk:node-group-unknown",
    ),
    (
        "reservation without its AZ",
        ctx(capacity_block="cr-0123456789abcdef0"),
        "availability_zone",
        "lives in one Availability Zone",
        "efa-cdk:capacity-without-zone",
    ),
    (
        "reservation and block together",
        ctx(
            capacity_block="cr-0123456789abcdef0",
            capacity_reservation="cr-0123456789abcdef1",
            availability_zone="us-east-1a",
        ),
        "capacity_block",
        "one reservation",
        "efa-cdk:capacity-block-and-reservation",
    ),
    (
        "reservation size without reservation",
        ctx(capacity_instances="4"),
        "capacity_instances",
        "none is given",
        "efa-cdk:capacity-instances-without-reservation",
    ),
    (
        "empty ssh_peers",
        ctx(ssh_peers=""),
        "ssh_peers",
        "empty (an unset shell variable",
        "efa-cdk:context-empty",
    ),
    (
        "empty node_count",
        ctx(node_count=" "),
        "node_count",
        "empty (an unset shell variable",
        "efa-cdk:context-empty",
    ),
    (
        "commas only in ssh_peers",
        ctx(ssh_peers=" , "),
        "ssh_peers",
        "empty: it names no source",
        "efa-cdk:context-ssh-source-empty",
    ),
    (
        "a reservation of no instances",
        ctx(
            capacity_reservation="cr-0123456789abcdef0",
            capacity_instances="0",
            availability_zone="us-east-1c",
        ),
        "capacity_instances",
        "at least one",
        "efa-cdk:context-below-one",
    ),
    (
        "region instead of AZ",
        ctx(availability_zone="us-east-1"),
        "availability_zone",
        "not an Availability Zone",
        "efa-cdk:context-form",
    ),
    (
        "VPC without subnet",
        ctx(vpc_id="vpc-0123456789abcdef0"),
        "vpc_id",
        "needs all of",
        "efa-cdk:existing-vpc-incomplete",
    ),
    (
        "subnet without AZ",
        ctx(vpc_id="vpc-0123456789abcdef0", subnet_id="subnet-0123456789abcdef0"),
        "vpc_id",
        "availability_zone",
        "efa-cdk:existing-vpc-incomplete",
    ),
    ("malformed VPC id", ctx(vpc_id="vpc-12"), "vpc_id", "not a VPC id", "efa-cdk:context-form"),
    (
        "malformed subnet id",
        ctx(subnet_id="subnet_1"),
        "subnet_id",
        "not a subnet id",
        "efa-cdk:context-form",
    ),
    (
        "unknown egress policy",
        ctx(internet_egress="open"),
        "internet_egress",
        "not a known egress policy",
        "efa-cdk:internet-egress-unknown",
    ),
    (
        "key pair name with a newline",
        ctx(key_pair="a\nb"),
        "key_pair",
        "not an EC2 key pair name",
        "efa-cdk:context-form",
    ),
    ("AMI id of the wrong form", ctx(ami_id="ami-123"), "ami_id", "not an AMI id", "efa-cdk:context-form"),
    (
        "AMI OS without an AMI",
        ctx(ami_os="al2023"),
        "ami_os",
        "describes ami_id",
        "efa-cdk:context-given-without",
    ),
    (
        "image refresh with a fixed AMI",
        ctx(ami_id="ami-0123456789abcdef0", ami_refresh="2026-12-01"),
        "ami_refresh",
        "ami_id replaces that image",
        "efa-cdk:ami-refresh-and-ami-id",
    ),
    (
        "container SSH port without an image",
        ctx(container_ssh_port="3022"),
        "container_ssh_port",
        "no container_image",
        "efa-cdk:context-given-without",
    ),
    (
        "alarm email that is not one",
        ctx(alarm_email="ops"),
        "alarm_email",
        "not an email address",
        "efa-cdk:context-form",
    ),
    (
        "unknown public IP choice",
        ctx(public_ip="yes"),
        "public_ip",
        "not a public IP choice",
        "efa-cdk:public-ip-unknown",
    ),
    (
        "Elastic IP in an existing VPC without its public subnet",
        ctx(
            vpc_id="vpc-0123456789abcdef0",
            subnet_id="subnet-0123456789abcdef0",
            availability_zone="us-west-2d",
            public_ip=PublicIp.LEADER,
        ),
        "public_subnet_id",
        "needs its public subnet",
        "efa-cdk:existing-vpc-public-subnet-missing",
    ),
    (
        "unknown benchmark",
        ctx(benchmarks="iperf"),
        "benchmarks",
        "not a benchmark",
        "efa-cdk:benchmark-unknown",
    ),
    (
        "an unknown layout mode by name",
        call(Layout.mode, "fast"),
        "nic_layout",
        "not a known layout",
        "efa-cdk:layout-mode-unknown",
    ),
    (
        "node_replacements without a label",
        ctx(node_replacements="1"),
        "node_replacements",
        "not INDEX:LABEL",
        "efa-cdk:context-replacement-form",
    ),
    (
        "dashed context key",
        ctx(**{"node-count": "3"}),
        "context",
        "not a context key",
        "efa-cdk:context-key-unknown",
    ),
    (
        "misspelt context key",
        ctx(instancetype="p5.48xlarge"),
        "context",
        "not a context key",
        "efa-cdk:context-key-unknown",
    ),
]


@parametrize(ROWS)
def test_the_context_and_choices_refuse_bad_input_at_synth(
    make_stack: Any, build: Any, key: str, why: str, code: str
) -> None:
    assert_refused(make_stack, build, key, why, code)
