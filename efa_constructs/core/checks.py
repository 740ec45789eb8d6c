"""Every refusal of an :class:`EfaCluster` request of its own inputs, one named function each, listed in
one place (the rules about the node every orchestrator shares are ``core/node_rules.py``'s register, which
the node base runs).

The construct describes what it was asked as a :class:`ClusterRequest` (plain values; an
unresolved CDK token becomes ``None``, "unknown", and is not checked) and runs
:func:`check_cluster` before it creates any child. The ready stacks' context parsing only turns
strings into values: the refusals live here, once. Pure Python, no CDK.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .capacity import Capacity, CapacityKind
from .catalogue import AcceleratorKind, InstanceType
from .errors import EfaConfigError
from .layout import NicLayout
from .monitoring import HEALTH_MINUTES
from .options import InternetEgress, NodeGroup, PublicIp

#: Explicit nodes cost one resource each (more with an Elastic IP); CloudFormation allows 500 per
#: template, and the rest of a cluster stack needs room too. Larger clusters use node_group=asg.
MAX_EXPLICIT_NODES = 400

#: An AMI id: "ami-" and 8 or 17 hex digits (EC2's short and long resource ids).
AMI_ID_PATTERN = r"^ami-[0-9a-f]{8}([0-9a-f]{9})?$"
#: An image refresh or node replacement label: it becomes part of a CloudFormation logical id.
REFRESH_LABEL_PATTERN = r"^[A-Za-z0-9._-]{0,64}$"


@dataclass(frozen=True)
class ClusterRequest:
    """What an :class:`EfaCluster` was asked for, as plain values (``None``: unknown until deploy)."""

    instance_type: InstanceType
    layout: NicLayout
    node_count: int | None
    node_group: NodeGroup = NodeGroup.EXPLICIT
    public_ip: PublicIp = PublicIp.NONE
    internet_egress: InternetEgress = InternetEgress.WEB
    node_software: bool = True
    placement_group: str | None = None
    use_placement_group: bool = True
    capacity: Capacity = field(default_factory=Capacity.on_demand)
    availability_zone: str | None = None
    public_subnet: bool = True
    public_subnet_availability_zone: str | None = None
    monitoring: bool | None = None
    sweep_minutes: int | None = None  # the fabric sweep's interval, run by the leader's health timer
    container: bool = False
    node_replacements: tuple[tuple[int, str], ...] = ()


def check_container(r: ClusterRequest) -> None:
    """The image is started and checked by the node software."""
    if r.container and not r.node_software:
        raise EfaConfigError(
            "container",
            code="efa-cdk:container-needs-node-software",
            value=True,
            why="the node software starts the image on every node and checks EFA inside it, and it is off",
            fix="turn the node software on, or start your containers yourself",
        )


def check_monitoring(r: ClusterRequest) -> None:
    """Monitoring runs on the nodes (agent, health timer): it needs the node software."""
    if r.monitoring and not r.node_software:
        raise EfaConfigError(
            "monitoring",
            code="efa-cdk:monitoring-needs-node-software",
            value=True,
            why="the CloudWatch agent and the health timer are installed by the node software, which is off",
            fix="turn the node software on, or leave monitoring unset (it follows the node software)",
        )


def check_sweep_interval(r: ClusterRequest) -> None:
    """The leader's health timer runs the fabric sweep: it needs the monitoring (the timer), and runs it
    at most once a tick."""
    if r.sweep_minutes is None:
        return
    monitored = r.node_software if r.monitoring is None else r.monitoring
    if not monitored:
        raise EfaConfigError(
            "sweep_interval",
            code="efa-cdk:sweep-interval-needs-monitoring",
            value=f"{r.sweep_minutes} minutes",
            why="the leader's health timer runs the fabric sweep, and the monitoring (with the timer) is off",
            fix="turn the monitoring on, or drop sweep_interval (run it on demand: efa-cdk sweep <stack>)",
            context_fix="-c monitoring=true, or drop -c sweep_minutes",
        )
    if (
        isinstance(r.sweep_minutes, bool)
        or not isinstance(r.sweep_minutes, int)
        or r.sweep_minutes < HEALTH_MINUTES
    ):
        raise EfaConfigError(
            "sweep_interval",
            code="efa-cdk:sweep-interval-range",
            value=f"{r.sweep_minutes} minutes",
            why=f"the health timer that runs it ticks every {HEALTH_MINUTES} minutes",
            fix=f"pass Duration.minutes({HEALTH_MINUTES}) or more (a sweep uses the fabric: hours suit a "
            "cluster that trains)",
            context_fix=f"-c sweep_minutes={HEALTH_MINUTES} or more",
        )


def check_node_replacements(r: ClusterRequest) -> None:
    """A replacement label names an explicit node of the cluster and can be part of a logical id."""
    for index, label in r.node_replacements:
        if r.node_group is NodeGroup.ASG:
            raise EfaConfigError(
                "node_replacements",
                code="efa-cdk:replacement-in-auto-scaling-group",
                value=f"{index}:{label}",
                why="an Auto Scaling group replaces its own nodes",
                fix="terminate the instance (aws ec2 terminate-instances): the group launches another",
            )
        if (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not (r.node_count is None or 0 <= index < r.node_count)
        ):
            raise EfaConfigError(
                "node_replacements",
                code="efa-cdk:replacement-index",
                value=f"{index}:{label}",
                why=f"no node has index {index} (nodes are 0 to node_count - 1)",
                fix="name the index of the node to replace, as its efa-cdk:node-index tag says",
            )
        if not isinstance(label, str) or not label or not re.fullmatch(REFRESH_LABEL_PATTERN, label):
            raise EfaConfigError(
                "node_replacements",
                code="efa-cdk:replacement-label",
                value=f"{index}:{label}",
                why="the label becomes part of the node's CloudFormation logical id",
                fix="use 1 to 64 letters, digits, '.', '_' or '-' (a date such as 2026-11-24)",
            )


def replacement_without_spare(r: ClusterRequest) -> str | None:
    """A warning when a node replacement needs an instance the reservation does not have: CloudFormation
    creates the replacement before it deletes the node it replaces (CloudFormation user guide, "Update
    behaviors of stack resources": Replacement), so in a reservation or Capacity Block that holds exactly
    the cluster's nodes the new instance finds no capacity. None when there is a spare or it is unknown."""
    count = r.capacity.instance_count
    if not r.node_replacements or r.node_count is None or count is None or count > r.node_count:
        return None
    what = "Capacity Block" if r.capacity.kind is CapacityKind.CAPACITY_BLOCK else "reservation"
    nodes = ", ".join(str(index) for index, _ in r.node_replacements)
    return (
        f"node_replacements (node {nodes}): the {what} {r.capacity.target} holds {count} instances for "
        f"{r.node_count} nodes, and CloudFormation launches a replacement before it deletes the old node, "
        "so the new one would find no capacity. Terminate the node first (aws ec2 terminate-instances "
        "--instance-ids <its id>), then deploy the label."
    )


def check_explicit_node_limit(r: ClusterRequest) -> None:
    """Explicit nodes stay far enough below CloudFormation's 500 resources per template."""
    if r.node_group is NodeGroup.EXPLICIT and r.node_count is not None and r.node_count > MAX_EXPLICIT_NODES:
        raise EfaConfigError(
            "node_count",
            code="efa-cdk:too-many-explicit-nodes",
            value=r.node_count,
            why=f"explicit nodes cost at least one CloudFormation resource each; more than "
            f"{MAX_EXPLICIT_NODES} approach the 500-resource limit of one template",
            fix="use node_group=asg (one Auto Scaling group: the template does not grow with node_count)",
        )


def check_placement_group(r: ClusterRequest) -> None:
    """A given placement group goes with a capacity that accepts one, and with use_placement_group."""
    check_placement_for_capacity(r.placement_group, r.capacity)
    if r.placement_group is not None and not r.use_placement_group:
        raise EfaConfigError(
            "placement_group",
            code="efa-cdk:placement-group-and-none",
            value=r.placement_group,
            why="a placement group was given together with use_placement_group=False",
            fix="drop one of the two",
        )


def check_placement_for_capacity(placement_group: str | None, capacity: Capacity) -> None:
    """:func:`check_placement_group` for the capacity alone (``cdk.launch_template.cluster_placement_group``
    runs it too, for the constructs without a :class:`ClusterRequest`)."""
    if placement_group is not None and not capacity.accepts_placement_group:
        raise EfaConfigError(
            "placement_group",
            code="efa-cdk:placement-group-with-capacity-block",
            value=placement_group,
            why="a Capacity Block's instances are placed by EC2; a placement group cannot be applied",
            fix="drop placement_group when launching into a Capacity Block",
        )


def check_egress_for_software(r: ClusterRequest) -> None:
    """The node software reaches AWS APIs over HTTPS."""
    if r.node_software and r.internet_egress is InternetEgress.NONE:
        raise EfaConfigError(
            "internet_egress",
            code="efa-cdk:node-software-without-egress",
            value=r.internet_egress.value,
            why="the node software calls AWS APIs over HTTPS (S3, SSM, EC2, CloudFormation) and the "
            "nodes could reach none of them",
            fix="use internet_egress=web (the default), or turn the node software off "
            "(node_software=NodeSoftware.none())",
            context_fix="-c internet_egress=web, or -c node_software=false",
        )


def check_public_ip(r: ClusterRequest) -> None:
    """Elastic IPs need explicit nodes, an ENA primary interface and a public subnet in the nodes' AZ."""
    if r.public_ip is PublicIp.NONE:
        return
    if r.node_group is not NodeGroup.EXPLICIT:
        raise EfaConfigError(
            "public_ip",
            code="efa-cdk:public-ip-needs-explicit-nodes",
            value=r.public_ip.value,
            why="an Elastic IP goes on a pre-created interface per node, which needs explicit nodes",
            fix="use node_group=explicit for public nodes, or reach an ASG's nodes with Session Manager",
        )
    if r.layout.primary.is_efa:
        raise EfaConfigError(
            "public_ip",
            code="efa-cdk:public-ip-needs-ena-primary",
            value=r.public_ip.value,
            why=f"the {r.layout.mode.value if r.layout.mode else 'custom'} layout puts an EFA on "
            "card 0 / DeviceIndex 0; an Elastic IP needs that interface in a public subnet, and EFA "
            "traffic cannot cross subnets",
            fix="use nic_layout=recommended (the default) or max-bandwidth (ENA primary interface)",
        )
    if not r.public_subnet:
        raise EfaConfigError(
            "public_subnet",
            code="efa-cdk:public-ip-without-public-subnet",
            value=None,
            why=f"public_ip={r.public_ip.value} needs a public subnet (route to an internet gateway) "
            "and the VPC has none",
            fix="pass public_subnet= (in the same AZ as the nodes' subnet)",
        )
    public_az, az = r.public_subnet_availability_zone, r.availability_zone
    if public_az and az and public_az != az:
        raise EfaConfigError(
            "public_subnet",
            code="efa-cdk:public-subnet-other-zone",
            value=public_az,
            why=f"the nodes are in {az}; an instance's interfaces must all be in its AZ",
            fix=f"pass a public subnet in {az}",
        )


#: Every check, in the order they run (the first refusal is the one reported).
CLUSTER_CHECKS: tuple[Callable[[ClusterRequest], None], ...] = (
    check_monitoring,
    check_sweep_interval,
    check_container,
    check_explicit_node_limit,
    check_node_replacements,
    check_placement_group,
    check_egress_for_software,
    check_public_ip,
)


def check_cluster(request: ClusterRequest) -> None:
    """Run every check; raise the first refusal (:class:`EfaConfigError`)."""
    for check in CLUSTER_CHECKS:
        check(request)


#: NVIDIA GPUs older than Turing among EFA types (NVIDIA open-gpu-kernel-modules README: the open
#: modules support Turing and later). EC2 names them in DescribeInstanceTypes' GpuInfo.
PRE_TURING_GPUS = frozenset({"K80", "M60", "V100", "K520"})


def has_default_image(it: InstanceType) -> bool:
    """False for types no current AWS image supports (pre-Turing NVIDIA GPUs: p3dn)."""
    return not (it.accelerator.kind is AcceleratorKind.NVIDIA_GPU and it.accelerator.name in PRE_TURING_GPUS)
