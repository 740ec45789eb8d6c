"""The fixed choices a cluster is configured with, as plain enums (no CDK).

The constructs take these; the ready stacks parse them from context; the checks read them.
"""

from __future__ import annotations

import enum
import ipaddress
import re

from .errors import EfaConfigError, parse_choice

#: The defaults of a cluster, written once: the constructs, the checks, the ready stacks' context
#: parsing and docs/context.md's table read them from here.
DEFAULT_NODE_COUNT = 2
DEFAULT_ROOT_VOLUME_GIB = 200  # gp3, encrypted: room for a DLAMI (100 GiB) and checkpoints
#: A scheduler's node group (ParallelCluster, AWS PCS, EKS): none kept running, up to two.
DEFAULT_MIN_COUNT, DEFAULT_MAX_COUNT = 0, 2
#: Where the shared file system is mounted on every node of a ParallelCluster or PCS cluster.
SHARED_DIR = "/shared"


class NodeGroup(enum.Enum):
    """How the nodes are declared."""

    #: One AWS::EC2::Instance per node (Node0..NodeN-1): per-node outputs and Elastic IPs; the
    #: template grows with the node count. For small clusters.
    EXPLICIT = "explicit"
    #: One fixed-size Auto Scaling group from the same launch template: the template does not grow
    #: with the node count. For large clusters.
    ASG = "asg"

    @classmethod
    def parse(cls, value: str | NodeGroup) -> NodeGroup:
        """The member for a string such as ``"asg"``."""
        return parse_choice(cls, value, what="node_group", why="not a node-group mode")


class PublicIp(enum.Enum):
    """Which nodes get an Elastic IP on their card-0 / DeviceIndex-0 interface."""

    NONE = "none"  # reach the nodes with SSM Session Manager (default)
    LEADER = "leader"  # node 0 only, e.g. as the SSH entry point
    ALL = "all"

    @classmethod
    def parse(cls, value: str | PublicIp) -> PublicIp:
        """The member for a string such as ``"leader"``."""
        return parse_choice(cls, value, what="public_ip", why="not a public IP choice")

    def count(self, node_count: int) -> int:
        """How many nodes (the first ones) get an Elastic IP."""
        return {PublicIp.NONE: 0, PublicIp.LEADER: 1, PublicIp.ALL: node_count}[self]


class InternetEgress(enum.Enum):
    """What the nodes may reach beyond the cluster (EFA traffic to the group itself is always allowed)."""

    #: TCP 80 and 443 to anywhere: package mirrors, the EFA installer, S3, SSM Session Manager.
    WEB = "web"
    #: All traffic to anywhere (IPv4).
    ALL = "all"
    #: Nothing but the cluster itself (for VPCs with endpoints and no internet path).
    NONE = "none"

    @classmethod
    def parse(cls, value: str | InternetEgress) -> InternetEgress:
        """Accept an enum member or its string value; reject anything else with the choices."""
        return parse_choice(cls, value, what="internet_egress", why="not a known egress policy")


#: An Availability Zone's name: its region's name and a letter (us-east-1c), or a Local Zone's
#: (us-east-1-bos-1a) (EC2 user guide, "Regions and Zones").
AZ_PATTERN = re.compile(r"^(?P<region>[a-z]{2}(-gov)?-[a-z]+-\d+)(-[a-z]+-\d+)?[a-z]$")
#: A prefix list id: pl- and 8 or 17 hexadecimal digits (EC2 user guide, "Resource IDs").
PREFIX_LIST_PATTERN = re.compile(r"^pl-([0-9a-f]{8}|[0-9a-f]{17})$")


def check_availability_zone(zone: str, key: str = "availability_zone") -> None:
    """Refuse what is not an Availability Zone's name (a region such as us-east-1, a typo)."""
    if not AZ_PATTERN.match(zone):
        raise EfaConfigError(
            key,
            code="efa-cdk:zone-name-form",
            value=zone,
            why="not an Availability Zone name (a zone is its region's name and a letter)",
            fix="pass a zone such as us-east-1c (aws ec2 describe-availability-zones --region <region>)",
        )


def check_zone_of_subnet(zone: str | None, subnet_zone: str | None, *, used_unknown: bool) -> None:
    """`availability_zone` given with an existing subnet: the subnet decides the zone, so the value must
    be the subnet's. Where the subnet's zone is not known at synth (an imported subnet), it is accepted
    when the construct uses it (`used_unknown`, e.g. to check a reservation's zone), else refused as
    ignored."""
    if zone is None:
        return
    check_availability_zone(zone)
    if subnet_zone == zone or (subnet_zone is None and used_unknown):
        return
    raise EfaConfigError(
        "availability_zone",
        code="efa-cdk:zone-not-the-subnets",
        value=zone,
        why=(
            f"the subnet given is in {subnet_zone}, and an existing network's zone is its subnet's"
            if subnet_zone
            else "an existing subnet decides the zone, so this value would be ignored"
        ),
        fix="leave availability_zone out, or pass a subnet in that zone",
    )


#: An address SNS can deliver to: one @, something before it, a dotted domain after it, no spaces.
EMAIL_PATTERN = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s.]+$")


def check_email(address: str, key: str = "alarm_email") -> None:
    """Refuse what is not an email address: SNS would take the subscription and never deliver a mail."""
    if not EMAIL_PATTERN.match(address):
        raise EfaConfigError(
            key,
            code="efa-cdk:email-form",
            value=address,
            why="not an email address, so the alarms' subscription would never deliver",
            fix="pass an address such as ops@example.com (it must confirm the subscription)",
        )


def parse_ssh_source(source: str) -> str:
    """An SSH source, normalized: an IPv4/IPv6 CIDR (host bits zero) or a prefix list id (``pl-...``).

    Raises:
        EfaConfigError: the string is neither.
    """
    text = source.strip()
    if PREFIX_LIST_PATTERN.match(text):
        return text
    try:
        return str(ipaddress.ip_network(text, strict=True))
    except ValueError as exc:
        raise EfaConfigError(
            "ssh_peers",
            code="efa-cdk:ssh-source-form",
            value=source,
            why=f"not a CIDR block or prefix list id ({exc})",
            fix="give a network such as 203.0.113.0/24 (host bits zero) or a prefix list id pl-0123abcd",
        ) from None
