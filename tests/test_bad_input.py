"""The bad-input matrix: each invalid configuration fails at synth, naming the value, why and the fix.

Values that are unresolved tokens (CloudFormation parameters) are not rejected, and a rejected
configuration leaves no template behind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk import CfnParameter, Environment, Token
from aws_cdk import aws_ec2 as ec2

from efa_constructs import (
    Capacity,
    ContainerRun,
    EfaCluster,
    EfaInstaller,
    EfaLaunchTemplate,
    EfaMachineImage,
    EfaNetwork,
    EfaSecurityGroup,
    EfaUserData,
    ImageReadOnce,
    InternetEgress,
    Layout,
    LayoutMode,
    NetworkInterfaceSpec,
    NicLayout,
    NodeGroup,
    NodeSoftware,
    PublicIp,
    plan_layout,
)
from efa_constructs.cdk.security_group import ssh_peer
from efa_constructs.core.errors import EfaConfigError
from stacks.cluster_stack import EfaClusterStack
from stacks.params import ClusterParams
from tests.conftest import background_result
from tests.helpers import isolated_vpc, new_app

S = NetworkInterfaceSpec


def ctx(**context: Any) -> Callable[[Any], Any]:
    """A ready cluster stack from context, as `cdk synth -c ...` builds it."""

    def build(_make: Any) -> Any:
        params = ClusterParams.from_context(context, default_instance_type="trn1.32xlarge")
        return EfaClusterStack(new_app(), "FromContext", params=params)

    return build


def cluster(
    *,
    vpc: Callable[[Any], Any] = isolated_vpc,
    env: Environment | None = None,
    per_stack: Callable[[Any], dict[str, Any]] = lambda _stack: {},
    **kwargs: Any,
) -> Callable[[Any], Any]:
    """An EfaCluster in a fresh stack: `vpc` builds its VPC, `per_stack` more props in the stack."""

    def build(make: Any) -> Any:
        stack = make(env=env) if env else make()
        props = {"instance_type": ec2.InstanceType("trn1.32xlarge"), **kwargs, **per_stack(stack)}
        return EfaCluster(stack, "C", vpc=vpc(stack), **props)

    return build


def network(**kwargs: Any) -> Callable[[Any], Any]:
    return lambda stack: EfaNetwork(stack, "N", **kwargs).vpc


def public_only_vpc(stack: Any) -> Any:
    public = ec2.SubnetConfiguration(name="Pub", subnet_type=ec2.SubnetType.PUBLIC)
    return ec2.Vpc(stack, "V", max_azs=1, subnet_configuration=[public])


def a_placement_group(stack: Any) -> dict[str, Any]:
    return {"placement_group": ec2.PlacementGroup(stack, "Pg")}


def template(**kwargs: Any) -> Callable[[Any], Any]:
    def build(make: Any) -> Any:
        stack = make()
        vpc = isolated_vpc(stack)
        sg = EfaSecurityGroup(stack, "Sg", vpc=vpc)
        return EfaLaunchTemplate(
            stack,
            "Lt",
            **{"instance_type": ec2.InstanceType("trn1.32xlarge"), "security_groups": [sg], **kwargs},
        )

    return build


def pcs_cluster(*, own_network: bool = False, **kwargs: Any) -> Callable[[Any], Any]:
    """An EfaPcsCluster in a fresh stack (of us-east-1), in a network of its own or one given."""
    from efa_constructs import EfaPcsCluster

    def build(make: Any) -> Any:
        stack = make(env=Environment(region="us-east-1"))
        network = {}
        if own_network:
            net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
            network = {"vpc": net.vpc, "subnet": net.private_subnet}
        return EfaPcsCluster(
            stack, "Pcs", instance_type=ec2.InstanceType("trn1.32xlarge"), ami_id="ami-0123456789abcdef0",
            **network, **kwargs,
        )  # fmt: skip

    return build


def pcluster(**kwargs: Any) -> Callable[[Any], Any]:
    """An EfaParallelCluster in a fresh stack, in a network given."""
    from efa_constructs import EfaParallelCluster

    def build(make: Any) -> Any:
        stack = make(env=Environment(region="us-east-1"))
        net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
        return EfaParallelCluster(
            stack, "Pc", instance_type=ec2.InstanceType("trn1.32xlarge"), vpc=net.vpc,
            head_node_subnet=net.public_subnet, compute_subnet=net.private_subnet, **kwargs,
        )  # fmt: skip

    return build


def pcluster_head_in(zone: str) -> Callable[[Any], Any]:
    """An EfaParallelCluster whose head node subnet (imported, its zone known) is in `zone`; the
    compute subnet and so the EFS mount target in us-east-1c."""
    from efa_constructs import EfaParallelCluster

    def build(make: Any) -> Any:
        stack = make(env=Environment(region="us-east-1"))
        net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
        head = ec2.Subnet.from_subnet_attributes(stack, "Head", subnet_id="subnet-0123456789abcdef0",
                                                 availability_zone=zone)  # fmt: skip
        return EfaParallelCluster(
            stack, "Pc", instance_type=ec2.InstanceType("trn1.32xlarge"), vpc=net.vpc,
            head_node_subnet=head, compute_subnet=net.private_subnet,
        )  # fmt: skip

    return build


def pcs_unknown(**kwargs: Any) -> Callable[[Any], Any]:
    from efa_constructs import EfaPcsCluster

    return lambda make: EfaPcsCluster(
        make(), "P", instance_type=ec2.InstanceType("trn1.32xlarge"), ami_id="ami-0123456789abcdef0", **kwargs
    )


def nodegroup_with_vpc() -> Callable[[Any], Any]:
    from efa_constructs import EfaNodegroup

    def build(make: Any) -> Any:
        stack = make()
        vpc = ec2.Vpc(stack, "V", max_azs=1)
        return EfaNodegroup(stack, "N", vpc=vpc, instance_type=ec2.InstanceType("trn1.32xlarge"))  # type: ignore[call-arg]

    return build


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
    return lambda _make: fn(*args, **kwargs)


# (id, configuration, the key the message must start with, a phrase saying why)
MATRIX: list[tuple[str, Callable[[Any], Any], str, str]] = [
    # instance type
    ("unknown type", ctx(instance_type="trn1.32xlarg"), "instance_type", "not in the EFA instance catalogue"),
    ("type without EFA", ctx(instance_type="m5.large"), "instance_type", "does not support EFA"),
    (
        "type without EFA in a construct",
        cluster(instance_type=ec2.InstanceType("t3.micro")),
        "instance_type",
        "does not support EFA",
    ),
    # EFA count and layout
    ("more EFAs than cards", ctx(efa_count="9"), "efa_count", "between 1 and 8"),
    (
        "more EFAs than the type allows",
        call(plan_layout, "i7ie.48xlarge", efa_count=2),
        "efa_count",
        "1 to 1",
    ),
    ("zero EFAs", cluster(nic_layout=Layout.recommended(efa_count=0)), "efa_count", "between 1 and 8"),
    ("unknown layout", ctx(nic_layout="fast"), "nic_layout", "not a known layout"),
    (
        "legacy where cards take only efa-only",
        ctx(instance_type="p6e-gb200.36xlarge", nic_layout="legacy"),
        "nic_layout",
        "accepts only ['efa-only']",
    ),
    (
        "efa-only as primary",
        call(NicLayout.custom, "trn1.32xlarge", [S(0, 0, "efa-only")]),
        "nic_layout",
        "cannot be efa-only",
    ),
    (
        "two EFAs on one card",
        call(NicLayout.custom, "trn1.32xlarge", [S(0, 0, "efa"), S(0, 1, "efa-only")]),
        "nic_layout",
        "at most one EFA per network card",
    ),
    (
        "DeviceIndex = card index on p5 (eksctl bug)",
        call(NicLayout.custom, "p5.48xlarge", [S(0, 0, "interface"), S(2, 2, "efa-only")]),
        "nic_layout",
        "below the card's MaximumNetworkInterfaces",
    ),
    (
        "card that does not exist",
        call(NicLayout.custom, "p4d.24xlarge", [S(0, 0, "interface"), S(4, 0, "efa-only")]),
        "nic_layout",
        "network cards 0..3",
    ),
    (
        "EFA on an ENA-only card",
        call(NicLayout.custom, "p6-b300.48xlarge", [S(0, 0, "efa")]),
        "nic_layout",
        "accepts ['interface']",
    ),
    (
        "misspelt interface type",
        call(NicLayout.custom, "trn1.32xlarge", [S(0, 0, "efx")]),
        "nic_layout",
        "unknown interface type",
    ),
    (
        "layout planned for another type",
        template(nic_layout=Layout.custom(plan_layout("p5.48xlarge"))),
        "nic_layout",
        "another type",
    ),
    # nodes
    ("zero nodes", ctx(node_count="0"), "node_count", "at least one node"),
    ("negative nodes", ctx(node_count="-1"), "node_count", "not a whole number"),
    ("fractional nodes", ctx(node_count="2.5"), "node_count", "not a whole number"),
    ("zero nodes in a construct", cluster(node_count=0), "node_count", "at least one node"),
    (
        "more explicit nodes than a template holds",
        cluster(node_count=401),
        "node_count",
        "500-resource limit",
    ),
    ("unknown node group", ctx(node_group="fleet"), "node_group", "not a node-group mode"),
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
    ),
    # capacity
    (
        "malformed reservation id",
        ctx(capacity_reservation="cr-123", availability_zone="us-east-1a"),
        "capacity_reservation",
        "not a Capacity Reservation id",
    ),
    (
        "malformed reservation group",
        call(Capacity.reservation_group, "my-group"),
        "capacity_reservation",
        "not a resource-group ARN",
    ),
    (
        "reservation without its AZ",
        ctx(capacity_block="cr-0123456789abcdef0"),
        "availability_zone",
        "lives in one Availability Zone",
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
    ),
    (
        "reservation size without reservation",
        ctx(capacity_instances="4"),
        "capacity_instances",
        "none is given",
    ),
    (
        "more nodes than the reservation holds",
        cluster(node_count=3, capacity=Capacity.reservation("cr-0123456789abcdef0", instance_count=2)),
        "node_count",
        "holds 2 instances",
    ),
    (
        "reservation of another type",
        cluster(capacity=Capacity.capacity_block("cr-0123456789abcdef0", instance_type="p5.48xlarge")),
        "capacity_block",
        "reserves p5.48xlarge",
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
    ),
    (
        "placement group with a Capacity Block",
        cluster(capacity=Capacity.capacity_block("cr-0123456789abcdef0"), per_stack=a_placement_group),
        "placement_group",
        "placed by EC2",
    ),
    # placement
    (
        "placement group given and disabled",
        cluster(use_placement_group=False, per_stack=a_placement_group),
        "placement_group",
        "use_placement_group=False",
    ),
    # network and access
    ("malformed CIDR", ctx(ssh_peers="10.0.0.0/33"), "ssh_peers", "not a CIDR"),
    ("CIDR with host bits", call(ssh_peer, "192.168.1.7/24"), "ssh_peers", "host bits set"),
    ("a hostname as CIDR", ctx(ssh_peers="laptop.example.com"), "ssh_peers", "not a CIDR"),
    # issue 34 item 18: an empty source list, a malformed prefix list id, a zone in every construct
    ("empty ssh_peers", ctx(ssh_peers=""), "ssh_peers", "empty (an unset shell variable"),
    ("empty node_count", ctx(node_count=" "), "node_count", "empty (an unset shell variable"),
    ("commas only in ssh_peers", ctx(ssh_peers=" , "), "ssh_peers", "empty: it names no source"),
    ("malformed prefix list id", ctx(ssh_peers="pl-xyz"), "ssh_peers", "not a CIDR block or prefix list id"),
    (
        "prefix list id of 9 digits",
        call(ssh_peer, "pl-0123abcde"),
        "ssh_peers",
        "not a CIDR block or prefix list",
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
    ),
    (
        "a Capacity Block of no instances, in code",
        call(Capacity.capacity_block, "cr-0123456789abcdef0", instance_count=0),
        "instance_count",
        "holds at least one instance",
    ),
    (
        "a region as a reservation's zone, in code",
        call(Capacity.reservation, "cr-0123456789abcdef0", availability_zone="us-east-1"),
        "availability_zone",
        "not an Availability Zone name",
    ),
    (
        "a region as EfaNetwork's zone",
        cluster(vpc=network(availability_zone="us-east-1")),
        "availability_zone",
        "not an Availability Zone name",
    ),
    (
        "banana as EfaNetwork's zone",
        cluster(vpc=network(availability_zone="banana")),
        "availability_zone",
        "not an Availability Zone name",
    ),
    (
        "EfaNetwork CIDR not a network",
        cluster(vpc=network(cidr="10.0.0.1/16")),
        "cidr",
        "not an IPv4 network",
    ),
    (
        "EfaNetwork CIDR too large",
        cluster(vpc=network(cidr="10.0.0.0/8")),
        "cidr",
        "a VPC's block is /16 to /28",
    ),
    (
        "EfaNetwork private subnet that does not fit",
        cluster(vpc=network(cidr="10.0.0.0/24", private_subnet_mask=25)),
        "private_subnet_mask",
        "does not fit in 10.0.0.0/24",
    ),
    (
        "a region as the PCS zone",
        pcs_cluster(availability_zone="us-east-1"),
        "availability_zone",
        "not an Availability Zone name",
    ),
    (
        "a PCS zone its subnet is not in",
        pcs_cluster(availability_zone="us-east-1d", own_network=True),
        "availability_zone",
        "the subnet given is in us-east-1c",
    ),
    (
        "a ParallelCluster zone its subnets decide",
        pcluster(availability_zone="us-east-1d"),
        "availability_zone",
        "is in us-east-1c",
    ),
    # issue 34 item 18: a typo in a head or login node type; strings where Benchmark members go
    (
        "a misspelt PCS login type",
        pcs_cluster(availability_zone="us-east-1c", login_instance_type=ec2.InstanceType("c7i.xlarg")),
        "login_instance_type",
        "not an EC2 instance type",
    ),
    (
        "a misspelt head node type",
        pcluster(head_node_instance_type=ec2.InstanceType("c5.2xlarg")),
        "head_node_instance_type",
        "not an EC2 instance type",
    ),
    (
        "benchmarks as strings",
        call(EfaUserData, benchmarks=["nccl-tests"]),
        "benchmarks",
        "item 0 is the str",
    ),
    ("benchmarks as one string", call(EfaUserData, benchmarks="nccl-tests"), "benchmarks", "not a str"),
    (
        "region instead of AZ",
        ctx(availability_zone="us-east-1"),
        "availability_zone",
        "not an Availability Zone",
    ),
    ("VPC without subnet", ctx(vpc_id="vpc-0123456789abcdef0"), "vpc_id", "needs all of"),
    (
        "subnet without AZ",
        ctx(vpc_id="vpc-0123456789abcdef0", subnet_id="subnet-0123456789abcdef0"),
        "vpc_id",
        "availability_zone",
    ),
    ("malformed VPC id", ctx(vpc_id="vpc-12"), "vpc_id", "not a VPC id"),
    ("malformed subnet id", ctx(subnet_id="subnet_1"), "subnet_id", "not a subnet id"),
    (
        "VPC without private subnet",
        cluster(vpc=public_only_vpc),
        "subnet",
        "no private subnet",
    ),
    ("unknown egress policy", ctx(internet_egress="open"), "internet_egress", "not a known egress policy"),
    ("key pair name with a newline", ctx(key_pair="a\nb"), "key_pair", "not an EC2 key pair name"),
    # template
    ("no security group", template(security_groups=[]), "security_groups", "need a security group"),
    ("root volume too small", ctx(root_volume_gib="4"), "root_volume_gib", "1-16384 GiB"),
    ("root volume too small in a construct", template(root_volume_gib=2), "root_volume_gib", "1-16384 GiB"),
    ("root volume below the DLAMI's", template(root_volume_gib=50), "root_volume_gib", "at least 100 GiB"),
    # images
    (
        "p3dn (V100) without an image",
        cluster(instance_type=ec2.InstanceType("p3dn.24xlarge")),
        "machine_image",
        "older than Turing",
    ),
    ("AMI id of the wrong form", ctx(ami_id="ami-123"), "ami_id", "not an AMI id"),
    (
        "AMI id of the wrong form in code",
        call(EfaMachineImage.from_ami_id, "image-1"),
        "ami_id",
        "8 or 17 hex",
    ),
    ("unknown AMI OS", ctx(ami_id="ami-0123456789abcdef0", ami_os="centos"), "ami_os", "not an OS family"),
    ("AMI OS without an AMI", ctx(ami_os="al2023"), "ami_os", "describes ami_id"),
    (
        "image refresh with a fixed AMI",
        ctx(ami_id="ami-0123456789abcdef0", ami_refresh="2026-12-01"),
        "ami_refresh",
        "ami_id replaces that image",
    ),
    ("image refresh label with a slash", call(ImageReadOnce, "/x", "2026/12"), "ami_refresh", "logical id"),
    # containers
    (
        "container image with a space",
        ctx(container_image="my image"),
        "container_image",
        "not an image reference",
    ),
    (
        "container SSH port of the host's sshd",
        ctx(container_image="registry.example/train:1", container_ssh_port="22"),
        "container_ssh_port",
        "the host's sshd has 22",
    ),
    (
        "container SSH port without an image",
        ctx(container_ssh_port="3022"),
        "container_ssh_port",
        "no container_image",
    ),
    (
        "container without node software",
        cluster(container=ContainerRun("r.example/x:1"), node_software=NodeSoftware.none()),
        "container",
        "the node software starts the image",
    ),
    (
        "monitoring without node software",
        cluster(monitoring=True, node_software=NodeSoftware.none()),
        "monitoring",
        "installed by the node software",
    ),
    ("alarm email that is not one", ctx(alarm_email="ops"), "alarm_email", "not an email address"),
    # issue 41 item 13: a head node where the EFS has no mount target
    (
        "head node in another zone",
        pcluster_head_in("us-east-1d"),
        "head_node_subnet",
        "could not mount /shared",
    ),
    # issue 41 item 13: the construct refuses it too (a user's own app has no context parse)
    (
        "alarm email to the construct",
        cluster(alarm_email="ops@example"),
        "alarm_email",
        "not an email address",
    ),
    # access
    ("unknown public IP choice", ctx(public_ip="yes"), "public_ip", "not a public IP choice"),
    (
        "Elastic IP on an EFA primary interface",
        cluster(public_ip=PublicIp.LEADER, nic_layout=Layout.legacy()),
        "public_ip",
        "puts an EFA on card 0",
    ),
    (
        "Elastic IP without a public subnet",
        cluster(public_ip=PublicIp.ALL),
        "public_subnet",
        "the VPC has none",
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
    ),
    # node software
    ("unknown benchmark", ctx(benchmarks="iperf"), "benchmarks", "not a benchmark"),
    ("nccl-tests on Trainium", ctx(benchmarks="nccl-tests"), "benchmarks", "has no NVIDIA GPUs"),
    (
        "nccom-test on NVIDIA",
        ctx(instance_type="p5.48xlarge", benchmarks="fi_pingpong,nccom-test"),
        "benchmarks",
        "has no Trainium devices",
    ),
    # The options that were unions take their class's factories; the old forms are refused at the door
    ("a mode for a Layout", cluster(nic_layout=LayoutMode.LEGACY), "nic_layout", "e.g. Layout.recommended()"),
    ("a bool for NodeSoftware", cluster(node_software=False), "node_software", "e.g. NodeSoftware.efa()"),
    (
        "a custom layout that is not a NicLayout",
        call(Layout.custom, "legacy"),
        "nic_layout",
        "takes a NicLayout",
    ),
    ("an unknown layout mode by name", call(Layout.mode, "fast"), "nic_layout", "not a known layout"),
    (
        "node software without egress",
        cluster(internet_egress=InternetEgress.NONE),
        "internet_egress",
        "calls AWS APIs",
    ),
    (
        "installer checksum that is not a SHA-256",
        call(EfaInstaller, version="1.49.0", sha256="d41d8cd98f00b204e9800998ecf8427e"),
        "sha256",
        "not a SHA-256",
    ),
    ("installer version 'latest'", call(EfaInstaller, version="latest"), "version", "not a pinned"),
    (
        "user step named like a library step",
        call(lambda: EfaUserData().add_step("signal", "true")),
        "name",
        "not a library step",
    ),
    ("empty user step", call(lambda: EfaUserData().add_commands("x", " ")), "script", "the step is empty"),
    ("wait shorter than a minute", call(EfaUserData, wait_seconds=5), "wait_seconds", "out of range"),
    (
        "replacement of a node that does not exist",
        cluster(node_count=2, node_replacements={2: "x"}),
        "node_replacements",
        "no node has index 2",
    ),
    (
        "replacement label unfit for a logical id",
        cluster(node_replacements={0: "24 Nov"}),
        "node_replacements",
        "part of the node's CloudFormation logical id",
    ),
    (
        "replacement in an Auto Scaling group",
        cluster(node_group=NodeGroup.ASG, node_replacements={0: "x"}),
        "node_replacements",
        "replaces its own nodes",
    ),
    ("node_replacements without a label", ctx(node_replacements="1"), "node_replacements", "not INDEX:LABEL"),
    # the degenerate input and both edges of the label's length (1 to 64: 65 refused, 64 accepted below)
    ("an empty replacement label", cluster(node_replacements={1: ""}), "node_replacements", "logical id"),
    ("an empty label from context", ctx(node_replacements="1:"), "node_replacements", "logical id"),
    ("a 65-character label", cluster(node_replacements={1: "x" * 65}), "node_replacements", "logical id"),
    # values that contradict the rest (issue 23 item 15)
    (
        "a subnet of another VPC",
        cluster(per_stack=lambda stack: {"subnet": ec2.Vpc(stack, "Other", max_azs=1).private_subnets[0]}),
        "subnet",
        "belongs to the VPC Scratch/Other",
    ),
    (
        "a reservation declared in a zone of another region",
        cluster(
            env=Environment(region="us-east-1"),
            capacity=Capacity.reservation("cr-0123456789abcdef0", availability_zone="us-west-2a"),
        ),
        "capacity",
        "deploys to us-east-1, and this zone is not in it",
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
    ),
    # construct arguments of the wrong type (issue 23 item 14): one line, not a crash inside CDK
    (
        "a str for the VPC",
        cluster(vpc=lambda _s: "vpc-0123456789abcdef0"),
        "vpc",
        "takes ec2.IVpc here (a construct",
    ),
    ("None for the VPC", cluster(vpc=lambda _s: None), "vpc", "needs ec2.IVpc here (None given)"),
    (
        "a str for the instance type",
        cluster(instance_type="trn1.32xlarge"),
        "instance_type",
        "not a str. Fix: pass instance_type=<ec2.InstanceType or efa_constructs.InstanceType>, "
        "e.g. ec2.InstanceType(",
    ),
    (
        "a str for node_group",
        cluster(node_group="asg"),
        "node_group",
        "takes NodeGroup here, not a str. Fix: pass node_group=<NodeGroup>, e.g. NodeGroup.EXPLICIT or",
    ),
    (
        "a str for the os family",
        call(lambda: EfaMachineImage.from_ami_id("ami-0123456789abcdef0", os_family="al2023")),
        "os_family",
        "takes an OsFamily",
    ),
    ("a str for node_count", cluster(node_count="3"), "node_count", "takes int here, not a str"),
    (
        "None for the instance type",
        cluster(instance_type=None),
        "instance_type",
        "takes ec2.InstanceType or efa_constructs.InstanceType here",
    ),
    ("a CIDR string for ssh_peers", cluster(ssh_peers="10.0.0.0/8"), "ssh_peers", "(a list), not a str"),
    ("CIDR strings in ssh_peers", cluster(ssh_peers=["10.0.0.0/8"]), "ssh_peers", "item 0 is a str"),
    ("a subnet id for subnet", cluster(subnet="subnet-0123456789abcdef0"), "subnet", "ec2.ISubnet or None"),
    (
        "a list for node_replacements",
        cluster(node_replacements=[1]),
        "node_replacements",
        "a mapping of int to str",
    ),
    (
        "a str for the security group's VPC",
        lambda make: EfaSecurityGroup(make(), "Sg", vpc="vpc-1"),
        "vpc",
        "EfaSecurityGroup takes ec2.IVpc",
    ),
    ("an unknown keyword", cluster(nodes=3), "nodes", "EfaCluster has no argument 'nodes'"),
    ("a missing keyword", call(EfaCluster), "EfaCluster", "missing a required argument"),
    # context keys
    ("dashed context key", ctx(**{"node-count": "3"}), "context", "not a context key"),
    ("misspelt context key", ctx(instancetype="p5.48xlarge"), "context", "not a context key"),
]

#: The stable id each refusal above raises (EfaConfigError.code): the wording may change, the id may not.
MATRIX_CODES: dict[str, str] = {
    "unknown type": "efa-cdk:instance-type-unknown",
    "type without EFA": "efa-cdk:instance-type-without-efa",
    "type without EFA in a construct": "efa-cdk:instance-type-without-efa",
    "more EFAs than cards": "efa-cdk:efa-count-range",
    "more EFAs than the type allows": "efa-cdk:efa-count-range",
    "zero EFAs": "efa-cdk:efa-count-range",
    "unknown layout": "efa-cdk:layout-mode-unknown",
    "legacy where cards take only efa-only": "efa-cdk:layout-legacy-card",
    "efa-only as primary": "efa-cdk:layout-invalid",
    "two EFAs on one card": "efa-cdk:layout-invalid",
    "DeviceIndex = card index on p5 (eksctl bug)": "efa-cdk:layout-invalid",
    "card that does not exist": "efa-cdk:layout-invalid",
    "EFA on an ENA-only card": "efa-cdk:layout-invalid",
    "misspelt interface type": "efa-cdk:layout-invalid",
    "layout planned for another type": "efa-cdk:layout-other-instance-type",
    "zero nodes": "efa-cdk:node-count-zero",
    "negative nodes": "efa-cdk:context-not-a-number",
    "fractional nodes": "efa-cdk:context-not-a-number",
    "zero nodes in a construct": "efa-cdk:node-count-zero",
    "more explicit nodes than a template holds": "efa-cdk:too-many-explicit-nodes",
    "unknown node group": "efa-cdk:node-group-unknown",
    "Elastic IPs on an Auto Scaling group": "efa-cdk:public-ip-needs-explicit-nodes",
    "malformed reservation id": "efa-cdk:capacity-reservation-id",
    "malformed reservation group": "efa-cdk:capacity-group-arn",
    "reservation without its AZ": "efa-cdk:capacity-without-zone",
    "reservation and block together": "efa-cdk:capacity-block-and-reservation",
    "reservation size without reservation": "efa-cdk:capacity-instances-without-reservation",
    "more nodes than the reservation holds": "efa-cdk:capacity-too-small",
    "reservation of another type": "efa-cdk:capacity-other-instance-type",
    "reservation in another AZ": "efa-cdk:capacity-other-zone",
    "placement group with a Capacity Block": "efa-cdk:placement-group-with-capacity-block",
    "placement group given and disabled": "efa-cdk:placement-group-and-none",
    "malformed CIDR": "efa-cdk:ssh-source-form",
    "CIDR with host bits": "efa-cdk:ssh-source-form",
    "a hostname as CIDR": "efa-cdk:ssh-source-form",
    "empty ssh_peers": "efa-cdk:context-empty",
    "empty node_count": "efa-cdk:context-empty",
    "commas only in ssh_peers": "efa-cdk:context-ssh-source-empty",
    "malformed prefix list id": "efa-cdk:ssh-source-form",
    "prefix list id of 9 digits": "efa-cdk:ssh-source-form",
    "a reservation of no instances": "efa-cdk:context-below-one",
    "a Capacity Block of no instances, in code": "efa-cdk:capacity-instance-count",
    "a region as a reservation's zone, in code": "efa-cdk:zone-name-form",
    "a region as EfaNetwork's zone": "efa-cdk:zone-name-form",
    "banana as EfaNetwork's zone": "efa-cdk:zone-name-form",
    "EfaNetwork CIDR not a network": "efa-cdk:vpc-cidr-form",
    "EfaNetwork CIDR too large": "efa-cdk:vpc-cidr-size",
    "EfaNetwork private subnet that does not fit": "efa-cdk:private-subnet-mask-fit",
    "a region as the PCS zone": "efa-cdk:zone-name-form",
    "a PCS zone its subnet is not in": "efa-cdk:zone-not-the-subnets",
    "a ParallelCluster zone its subnets decide": "efa-cdk:zone-not-the-subnets",
    "a misspelt PCS login type": "efa-cdk:not-an-ec2-instance-type",
    "a misspelt head node type": "efa-cdk:not-an-ec2-instance-type",
    "benchmarks as strings": "efa-cdk:benchmarks-item-type",
    "benchmarks as one string": "efa-cdk:benchmarks-a-string",
    "region instead of AZ": "efa-cdk:context-form",
    "VPC without subnet": "efa-cdk:existing-vpc-incomplete",
    "subnet without AZ": "efa-cdk:existing-vpc-incomplete",
    "malformed VPC id": "efa-cdk:context-form",
    "malformed subnet id": "efa-cdk:context-form",
    "VPC without private subnet": "efa-cdk:vpc-without-private-subnet",
    "unknown egress policy": "efa-cdk:internet-egress-unknown",
    "key pair name with a newline": "efa-cdk:context-form",
    "no security group": "efa-cdk:security-groups-empty",
    "root volume too small": "efa-cdk:root-volume-range",
    "root volume too small in a construct": "efa-cdk:root-volume-range",
    "root volume below the DLAMI's": "efa-cdk:root-volume-below-image",
    "p3dn (V100) without an image": "efa-cdk:no-default-image",
    "AMI id of the wrong form": "efa-cdk:context-form",
    "AMI id of the wrong form in code": "efa-cdk:ami-id-form",
    "unknown AMI OS": "efa-cdk:ami-os-unknown",
    "AMI OS without an AMI": "efa-cdk:context-given-without",
    "image refresh with a fixed AMI": "efa-cdk:ami-refresh-and-ami-id",
    "image refresh label with a slash": "efa-cdk:ami-refresh-label",
    "container image with a space": "efa-cdk:container-image-reference",
    "container SSH port of the host's sshd": "efa-cdk:container-ssh-port",
    "container SSH port without an image": "efa-cdk:context-given-without",
    "container without node software": "efa-cdk:container-needs-node-software",
    "monitoring without node software": "efa-cdk:monitoring-needs-node-software",
    "alarm email that is not one": "efa-cdk:context-form",
    "alarm email to the construct": "efa-cdk:email-form",
    "head node in another zone": "efa-cdk:pcluster-head-node-zone",
    "unknown public IP choice": "efa-cdk:public-ip-unknown",
    "Elastic IP on an EFA primary interface": "efa-cdk:public-ip-needs-ena-primary",
    "Elastic IP without a public subnet": "efa-cdk:public-ip-without-public-subnet",
    "Elastic IP in an existing VPC without its public subnet": "efa-cdk:existing-vpc-public-subnet-missing",
    "unknown benchmark": "efa-cdk:benchmark-unknown",
    "nccl-tests on Trainium": "efa-cdk:benchmark-wrong-accelerator",
    "nccom-test on NVIDIA": "efa-cdk:benchmark-wrong-accelerator",
    "a mode for a Layout": "efa-cdk:argument-wrong-type",
    "a bool for NodeSoftware": "efa-cdk:argument-wrong-type",
    "a custom layout that is not a NicLayout": "efa-cdk:layout-custom-type",
    "an unknown layout mode by name": "efa-cdk:layout-mode-unknown",
    "node software without egress": "efa-cdk:node-software-without-egress",
    "installer checksum that is not a SHA-256": "efa-cdk:installer-sha256-form",
    "installer version 'latest'": "efa-cdk:installer-version-form",
    "user step named like a library step": "efa-cdk:step-name-form",
    "empty user step": "efa-cdk:step-empty",
    "wait shorter than a minute": "efa-cdk:software-range",
    "replacement of a node that does not exist": "efa-cdk:replacement-index",
    "replacement label unfit for a logical id": "efa-cdk:replacement-label",
    "replacement in an Auto Scaling group": "efa-cdk:replacement-in-auto-scaling-group",
    "node_replacements without a label": "efa-cdk:context-replacement-form",
    "an empty replacement label": "efa-cdk:replacement-label",
    "an empty label from context": "efa-cdk:replacement-label",
    "a 65-character label": "efa-cdk:replacement-label",
    "a subnet of another VPC": "efa-cdk:subnet-of-another-vpc",
    "a reservation declared in a zone of another region": "efa-cdk:zone-outside-region",
    "a reservation group of another region": "efa-cdk:reservation-group-other-region",
    "a str for the VPC": "efa-cdk:argument-wrong-type",
    "None for the VPC": "efa-cdk:argument-wrong-type",
    "a str for the instance type": "efa-cdk:argument-wrong-type",
    "a str for node_group": "efa-cdk:argument-wrong-type",
    "a str for the os family": "efa-cdk:os-family-type",
    "a str for node_count": "efa-cdk:argument-wrong-type",
    "None for the instance type": "efa-cdk:argument-wrong-type",
    "a CIDR string for ssh_peers": "efa-cdk:argument-wrong-type",
    "CIDR strings in ssh_peers": "efa-cdk:argument-wrong-type",
    "a subnet id for subnet": "efa-cdk:argument-wrong-type",
    "a list for node_replacements": "efa-cdk:argument-wrong-type",
    "a str for the security group's VPC": "efa-cdk:argument-wrong-type",
    "an unknown keyword": "efa-cdk:argument-unknown",
    "a missing keyword": "efa-cdk:argument-missing",
    "dashed context key": "efa-cdk:context-key-unknown",
    "misspelt context key": "efa-cdk:context-key-unknown",
}


@pytest.mark.parametrize(
    ("build", "key", "why", "code"),
    [(*m[1:], MATRIX_CODES[m[0]]) for m in MATRIX],
    ids=[m[0] for m in MATRIX],
)
def test_bad_input_fails_at_synth_with_value_reason_and_fix(
    make_stack: Any, build: Any, key: str, why: str, code: str
) -> None:
    with pytest.raises(EfaConfigError) as err:
        build(make_stack)
    message = str(err.value)
    assert message.startswith(f"{key}="), message
    assert why in message, message
    assert "Fix: " in message and len(err.value.fix) > 10
    assert err.value.code == code, message
    if not build.__qualname__.startswith("ctx."):  # issue 41 item 14: -c fixes only for a ready stack
        assert " -c " not in message and "(-c " not in message, message


def test_every_refusal_has_a_stable_id_of_its_own() -> None:
    """Every EfaConfigError raised in the package and the ready stacks names its id as a literal
    (``code="efa-cdk:..."``, the form warnings' ids take); two sites share one only when they refuse the
    same thing. The two that pass an id on (a refusal re-raised for its stack, an enum's unknown choice)
    are the exceptions. Every id the matrix raises is one of them."""
    import ast
    import re

    from efa_constructs.core.errors import CODE_PATTERN
    from tests.helpers import ROOT

    sites: dict[str, list[str]] = {}
    for path in sorted([*(ROOT / "efa_constructs").rglob("*.py"), *(ROOT / "stacks").rglob("*.py")]):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            name = getattr(node, "func", None)
            if not (
                isinstance(node, ast.Call)
                and getattr(name, "id", getattr(name, "attr", "")) == "EfaConfigError"
            ):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            code = next((k.value for k in node.keywords if k.arg == "code"), None)
            assert code is not None, f"{where}: an EfaConfigError without code="
            if where.startswith("efa_constructs/core/errors.py"):
                continue  # in_stack passes self.code on; parse_choice names the enum's
            assert isinstance(code, ast.Constant) and re.match(CODE_PATTERN, code.value), where
            sites.setdefault(code.value, []).append(where)
    shared = {code: places for code, places in sites.items() if len(places) > 1}
    # a zone outside the stack's region: the network's own check and the cluster's
    assert shared.keys() == {"efa-cdk:zone-outside-region"}, shared
    import enum

    import efa_constructs

    kebab = [re.sub(r"(?<!^)(?=[A-Z])", "-", n).lower() for n in efa_constructs.__all__]
    enums = {
        f"efa-cdk:{k}-unknown"
        for n, k in zip(efa_constructs.__all__, kebab, strict=True)
        if isinstance(getattr(efa_constructs, n), type) and issubclass(getattr(efa_constructs, n), enum.Enum)
    }
    assert set(MATRIX_CODES.values()) <= sites.keys() | enums


def test_a_refusal_keeps_its_id_when_the_app_names_the_stack() -> None:
    """The app re-raises a construct's refusal with the stack's name (in_stack): the id goes with it."""
    err = EfaConfigError("efa_count", code="efa-cdk:efa-count-range", value=9, why="why", fix="fix")
    assert err.in_stack("Trn1EfaCluster").code == "efa-cdk:efa-count-range"
    with pytest.raises(ValueError, match="efa-cdk:<lowercase-words>"):
        EfaConfigError("x", code="Efa-Count", value=1, why="w", fix="f")


def test_unresolved_tokens_are_not_rejected(make_stack: Any) -> None:
    stack = make_stack()
    size = CfnParameter(stack, "RootGiB", type="Number", default=300).value_as_number
    cidr = CfnParameter(stack, "SshCidr", default="10.0.0.0/8").value_as_string
    assert Token.is_unresolved(size) and Token.is_unresolved(cidr)
    vpc = isolated_vpc(stack)
    EfaCluster(
        stack,
        "C",
        vpc=vpc,
        instance_type=ec2.InstanceType("p4d.24xlarge"),
        root_volume_gib=size,
        ssh_peers=[ssh_peer(cidr)],
    )


def test_a_rejected_configuration_leaves_no_template(request: pytest.FixtureRequest) -> None:
    """app.py exits non-zero with the refusal, and writes no template (runs in the background)."""
    run, tmp = background_result(request.node.nodeid)
    assert run.returncode != 0
    assert "node_count=0: a cluster needs at least one node" in run.stderr
    assert not list(tmp.glob("out/*.template.json"))


@pytest.mark.parametrize(
    ("build", "says"),
    [
        # issue 34 item 19: the argument meant, and values as the user wrote them
        (cluster(nodes=3), "nodes=3: EfaCluster has no argument 'nodes'. Fix: did you mean node_count?"),
        (cluster(node_cont=3), "Fix: did you mean node_count?"),
        (
            pcs_unknown(node_count=3),
            "node_count=3: EfaPcsCluster has no argument 'node_count'. Fix: did you "
            "mean max_count (min_count: the nodes PCS keeps running)?",
        ),
        (
            nodegroup_with_vpc(),
            "vpc=<Vpc Scratch/V>: EfaNodegroup has no argument 'vpc'. Fix: did you mean "
            "nothing: the nodes are in the cluster's VPC",
        ),
    ],
)
def test_an_unknown_argument_names_the_one_meant_and_shows_values_readably(
    make_stack: Any, build: Any, says: str
) -> None:
    with pytest.raises(EfaConfigError) as err:
        build(make_stack)
    assert str(err.value).startswith(says) or says in str(err.value), str(err.value)
    assert "object at 0x" not in str(err.value)


def test_values_in_messages_are_readable() -> None:
    from efa_constructs.core.errors import readable

    assert readable(LayoutMode.LEGACY) == "LayoutMode.LEGACY"
    assert readable({"min_size": 0, "max_size": 2}) == "min_size=0, max_size=2"
    assert readable(ec2.InstanceType("p5.48xlarge")) == "'p5.48xlarge'"
    assert readable("us-east-1") == "'us-east-1'"


# --- issue 34 item 18: groups without EFA's self rules, placement groups that are not cluster groups,
# multi-interface nodes in a public subnet without an address


def _template_with(groups: Callable[[Any, Any], list[Any]]) -> Any:
    from aws_cdk import Stack

    stack = Stack(new_app(), "Groups")
    vpc = isolated_vpc(stack)
    EfaLaunchTemplate(
        stack, "Lt", instance_type=ec2.InstanceType("trn1.32xlarge"), security_groups=groups(stack, vpc)
    )
    return stack


def _plain(stack: Any, vpc: Any, name: str, *, self_in: bool = True, self_out: bool = True) -> Any:
    # (CDK ignores egress rules of a group that allows all outbound; 0.0.0.0/0 does not carry EFA anyway)
    sg = ec2.SecurityGroup(stack, name, vpc=vpc, allow_all_outbound=not self_out)
    if self_in:
        sg.add_ingress_rule(sg, ec2.Port.all_traffic())
    if self_out:
        sg.add_egress_rule(sg, ec2.Port.all_traffic())
    return sg


@pytest.mark.parametrize(("self_in", "self_out"), [(True, False), (False, True), (False, False)])
def test_a_group_without_efas_self_rules_is_refused_at_synth(self_in: bool, self_out: bool) -> None:
    stack = _template_with(lambda s, v: [_plain(s, v, "Mine", self_in=self_in, self_out=self_out)])
    with pytest.raises(Exception) as err:  # CDK's validation error, with our one line in it
        stack.node.root.synth()
    text = str(err.value)
    assert "security_groups=['Groups/Mine']: no group of the EFA interfaces allows all traffic" in text
    assert "add group.add_ingress_rule(group, ec2.Port.all_traffic())" in text


def test_a_group_with_the_self_rules_or_an_imported_one_passes() -> None:
    _template_with(lambda s, v: [_plain(s, v, "Mine")]).node.root.synth()
    _template_with(lambda s, v: [EfaSecurityGroup(s, "Efa", vpc=v)]).node.root.synth()
    imported = lambda s, v: [ec2.SecurityGroup.from_security_group_id(s, "Theirs", "sg-0123456789abcdef0")]  # noqa: E731
    _template_with(imported).node.root.synth()  # its rules are not known here: not refused


def test_a_placement_group_that_is_not_a_cluster_group_is_warned_of() -> None:
    from aws_cdk import Stack, assertions

    stack = Stack(new_app(), "Spread")
    vpc = isolated_vpc(stack)
    for strategy in (ec2.PlacementGroupStrategy.SPREAD, ec2.PlacementGroupStrategy.CLUSTER):
        EfaLaunchTemplate(
            stack, f"Lt{strategy.name}", instance_type=ec2.InstanceType("trn1.32xlarge"),
            security_groups=[EfaSecurityGroup(stack, f"Sg{strategy.name}", vpc=vpc)],
            placement_group=ec2.PlacementGroup(stack, f"Pg{strategy.name}", strategy=strategy),
        )  # fmt: skip
    found = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("is a")
    )
    assert [w.id for w in found] == ["/Spread/LtSPREAD"]
    assert "is a SPREAD group" in str(found)


@pytest.mark.parametrize(
    ("itype", "layout", "public_ip", "warned"),
    [
        ("trn1.32xlarge", "recommended", "none", True),
        ("trn1.32xlarge", "recommended", "all", False),
        ("c5n.18xlarge", "recommended", "none", True),  # ENA + efa-only on its one card: two interfaces
        ("c5n.18xlarge", "legacy", "none", False),  # one efa interface: the subnet's public address
    ],
)
def test_multi_interface_nodes_in_a_public_subnet_without_an_address_are_warned_of(
    itype: str, layout: str, public_ip: str, warned: bool
) -> None:
    """They get no public address (EC2 assigns none to an instance launched with several interfaces), and
    a public subnet's route out needs one."""
    from aws_cdk import Stack, assertions

    stack = Stack(new_app(), "Public")
    public = ec2.SubnetConfiguration(name="pub", subnet_type=ec2.SubnetType.PUBLIC)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0, subnet_configuration=[public])
    EfaCluster(
        stack, "C", vpc=vpc, subnet=vpc.public_subnets[0], instance_type=ec2.InstanceType(itype),
        node_count=2, public_ip=PublicIp(public_ip), node_software=NodeSoftware.none(),
        nic_layout=Layout.mode(layout),
    )  # fmt: skip
    found = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("get no public address")
    )
    assert bool(found) is warned


def test_elastic_ip_copies_of_a_template_are_not_checked_again() -> None:
    """An Elastic-IP node launches from a copy of the cluster's template (same groups, same placement):
    the checks run on the original once, not once more per copy (the warning is said once)."""
    from aws_cdk import Stack, assertions

    stack = Stack(new_app(), "Copies")
    public = ec2.SubnetConfiguration(name="pub", subnet_type=ec2.SubnetType.PUBLIC)
    private = ec2.SubnetConfiguration(name="priv", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=1, subnet_configuration=[public, private])
    spread = ec2.PlacementGroup(stack, "Spread", strategy=ec2.PlacementGroupStrategy.SPREAD)
    EfaCluster(
        stack, "C", vpc=vpc, instance_type=ec2.InstanceType("trn1.32xlarge"), node_count=3,
        public_ip=PublicIp.ALL, node_software=NodeSoftware.none(), placement_group=spread,
    )  # fmt: skip
    found = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("is a SPREAD group")
    )
    assert len(found) == 1, [w.id for w in found]
    stack.node.root.synth()  # the copies' groups are the original's: still checked, and they pass


def test_the_edges_a_replacement_accepts_synthesize() -> None:
    """The other side of the edges refused above: the last node's index and a 64-character label."""
    from aws_cdk import Stack, assertions

    stack = Stack(new_app(), "Edges")
    EfaCluster(
        stack, "C", vpc=isolated_vpc(stack), instance_type=ec2.InstanceType("c5n.18xlarge"), node_count=2,
        node_software=NodeSoftware.none(), node_replacements={1: "x" * 64},
    )  # fmt: skip
    ids = assertions.Template.from_stack(stack).find_resources("AWS::EC2::Instance")
    assert len(ids) == 2 and sum(i.startswith("CNode1") and "R" in i[6:] for i in ids) == 1


def test_a_head_node_in_the_compute_subnets_zone_is_accepted(make_stack: Any) -> None:
    """The edge of issue 41 item 13's head-node rule: the same zone as the EFS mount target passes."""
    pcluster_head_in("us-east-1c")(make_stack)


def test_a_construct_refusal_gains_its_context_fix_only_in_a_ready_stack(make_stack: Any) -> None:
    """Issue 41 item 14: in a user's app the fix names the construct's option; through the ready app
    (in_stack) the same refusal also names the -c key."""
    from aws_cdk import CfnParameter

    stack = make_stack()
    with pytest.raises(EfaConfigError) as err:
        EfaCluster(stack, "C", vpc=isolated_vpc(stack), instance_type=ec2.InstanceType("trn1.32xlarge"),
                   node_count=CfnParameter(stack, "Count", type="Number").value_as_number)  # fmt: skip
    assert "-c " not in str(err.value) and "node_group=NodeGroup.ASG" in str(err.value)
    assert "(-c node_group=asg)" in str(err.value.in_stack("Trn1EfaCluster"))
