"""Bad input refused by the node rules: core/checks.py, and what the node base and the constructs check
beside them (cdk/_shared.py, cdk/cluster.py, cdk/launch_template.py, cdk/parallel_cluster.py): each fails
at synth naming the value, why, the fix and its id."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Environment
from aws_cdk import aws_ec2 as ec2

from efa_constructs import (
    Capacity,
    ContainerRun,
    InternetEgress,
    Layout,
    NodeGroup,
    NodeSoftware,
    PublicIp,
)
from tests.refusals import (
    Row,
    a_placement_group,
    assert_refused,
    cluster,
    ctx,
    network,
    parametrize,
    pcluster_head_in,
    public_only_vpc,
    template,
)

ROWS: list[Row] = [
    ("zero nodes", ctx(node_count="0"), "node_count", "at least one node", "efa-cdk:node-count-zero"),
    (
        "zero nodes in a construct",
        cluster(node_count=0),
        "node_count",
        "at least one node",
        "efa-cdk:node-count-zero",
    ),
    (
        "more explicit nodes than a template holds",
        cluster(node_count=401),
        "node_count",
        "500-resource limit",
        "efa-cdk:too-many-explicit-nodes",
    ),
    (
        "Elastic IPs on an Auto Scaling group",
        cluster(
            vpc=network(),
            instance_type=ec2.InstanceType("p5.48xlarge"),
            node_group=NodeGroup.ASG,
            public_ip=PublicIp.LEADER,
        ),
        "public_ip",
        "needs explicit nodes",
        "efa-cdk:public-ip-needs-explicit-nodes",
    ),
    (
        "placement group with a Capacity Block",
        cluster(capacity=Capacity.capacity_block("cr-0123456789abcdef0"), per_stack=a_placement_group),
        "placement_group",
        "placed by EC2",
        "efa-cdk:placement-group-with-capacity-block",
    ),
    (
        "placement group given and disabled",
        cluster(use_placement_group=False, per_stack=a_placement_group),
        "placement_group",
        "use_placement_group=False",
        "efa-cdk:placement-group-and-none",
    ),
    (
        "VPC without private subnet",
        cluster(vpc=public_only_vpc),
        "subnet",
        "no private subnet",
        "efa-cdk:vpc-without-private-subnet",
    ),
    (
        "no security group",
        template(security_groups=[]),
        "security_groups",
        "need a security group",
        "efa-cdk:security-groups-empty",
    ),
    (
        "root volume too small",
        ctx(root_volume_gib="4"),
        "root_volume_gib",
        "1-16384 GiB",
        "efa-cdk:root-volume-range",
    ),
    (
        "root volume too small in a construct",
        template(root_volume_gib=2),
        "root_volume_gib",
        "1-16384 GiB",
        "efa-cdk:root-volume-range",
    ),
    (
        "root volume below the DLAMI's",
        template(root_volume_gib=50),
        "root_volume_gib",
        "at least 100 GiB",
        "efa-cdk:root-volume-below-image",
    ),
    (
        "container without node software",
        cluster(container=ContainerRun("r.example/x:1"), node_software=NodeSoftware.none()),
        "container",
        "the node software starts the image",
        "efa-cdk:container-needs-node-software",
    ),
    (
        "a fabric sweep interval without monitoring",
        cluster(monitoring=False, sweep_interval=Duration.hours(6)),
        "sweep_interval",
        "the leader's health timer runs the fabric sweep, and the monitoring (with the timer) is off",
        "efa-cdk:sweep-interval-needs-monitoring",
    ),
    (
        "a fabric sweep interval without monitoring, from context",
        ctx(monitoring="false", sweep_minutes="360"),
        "sweep_interval",
        "the monitoring (with the timer) is off",
        "efa-cdk:sweep-interval-needs-monitoring",
    ),
    (
        "a fabric sweep interval shorter than the health timer's",
        cluster(sweep_interval=Duration.minutes(2)),
        "sweep_interval",
        "the health timer that runs it ticks every 5 minutes",
        "efa-cdk:sweep-interval-range",
    ),
    (
        "monitoring without node software",
        cluster(monitoring=True, node_software=NodeSoftware.none()),
        "monitoring",
        "installed by the node software",
        "efa-cdk:monitoring-needs-node-software",
    ),
    (
        "head node in another zone",
        pcluster_head_in("us-east-1d"),
        "head_node_subnet",
        "could not mount /shared",
        "efa-cdk:pcluster-head-node-zone",
    ),
    (
        "Elastic IP on an EFA primary interface",
        cluster(public_ip=PublicIp.LEADER, nic_layout=Layout.legacy()),
        "public_ip",
        "puts an EFA on card 0",
        "efa-cdk:public-ip-needs-ena-primary",
    ),
    (
        "Elastic IP without a public subnet",
        cluster(public_ip=PublicIp.ALL),
        "public_subnet",
        "the VPC has none",
        "efa-cdk:public-ip-without-public-subnet",
    ),
    (
        "node software without egress",
        cluster(internet_egress=InternetEgress.NONE),
        "internet_egress",
        "calls AWS APIs",
        "efa-cdk:node-software-without-egress",
    ),
    (
        "replacement of a node that does not exist",
        cluster(node_count=2, node_replacements={2: "x"}),
        "node_replacements",
        "no node has index 2",
        "efa-cdk:replacement-index",
    ),
    (
        "replacement label unfit for a logical id",
        cluster(node_replacements={0: "24 Nov"}),
        "node_replacements",
        "part of the node's CloudFormation logical id",
        "efa-cdk:replacement-label",
    ),
    (
        "replacement in an Auto Scaling group",
        cluster(node_group=NodeGroup.ASG, node_replacements={0: "x"}),
        "node_replacements",
        "replaces its own nodes",
        "efa-cdk:replacement-in-auto-scaling-group",
    ),
    (
        "an empty replacement label",
        cluster(node_replacements={1: ""}),
        "node_replacements",
        "logical id",
        "efa-cdk:replacement-label",
    ),
    (
        "an empty label from context",
        ctx(node_replacements="1:"),
        "node_replacements",
        "logical id",
        "efa-cdk:replacement-label",
    ),
    (
        "a 65-character label",
        cluster(node_replacements={1: "x" * 65}),
        "node_replacements",
        "logical id",
        "efa-cdk:replacement-label",
    ),
    (
        "a subnet of another VPC",
        cluster(per_stack=lambda stack: {"subnet": ec2.Vpc(stack, "Other", max_azs=1).private_subnets[0]}),
        "subnet",
        "belongs to the VPC Scratch/Other",
        "efa-cdk:subnet-of-another-vpc",
    ),
    (
        "a reservation group of another region",
        cluster(
            vpc=network(availability_zone="us-east-1a"),
            env=Environment(region="us-east-1"),
            capacity=Capacity.reservation_group("arn:aws:resource-groups:us-west-2:123456789012:group/trn1"),
        ),
        "capacity_reservation",
        "the reservation group is in us-west-2",
        "efa-cdk:reservation-group-other-region",
    ),
]


@parametrize(ROWS)
def test_the_node_rules_refuse_bad_input_at_synth(
    make_stack: Any, build: Any, key: str, why: str, code: str
) -> None:
    assert_refused(make_stack, build, key, why, code)
