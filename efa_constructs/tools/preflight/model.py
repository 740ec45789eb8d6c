"""What preflight reads and says: a node group, a file system, a check's line, and the names of the quotas and
the calls (:data:`PERMISSIONS`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Every call preflight makes and the IAM action it needs (an AccessDenied names it).
PERMISSIONS = {
    "sts:GetCallerIdentity": "credentials and account",
    "ssm:GetParameter": "the CDK bootstrap version, the default image's parameter",
    "ec2:DescribeInstanceTypeOfferings": "the zones that offer a type",
    "ec2:DescribeInstanceTypes": "EFA support, interfaces and network cards of a type; vCPUs",
    "ec2:DescribeInstances": "the vCPUs already running in a quota's family",
    "servicequotas:ListServiceQuotas": "the On-Demand vCPU quota of a family, the Elastic IP quota, FSx for "
    "Lustre's quotas",
    "ec2:DescribeCapacityReservations": "a reservation's state, zone, type, free count; unused ones (quota)",
    "ec2:DescribeKeyPairs": "a named key pair",
    "ec2:DescribeImages": "an image: exists, architecture, root snapshot size",
    "ec2:DescribeAddresses": "the Elastic IPs already allocated",
    "ec2:DescribeSubnets": "an existing subnet's zone and free addresses",
    "ec2:DescribeRouteTables": "an existing subnet's route out",
    "ec2:DescribeCapacityReservationTopology": "where a reservation's instances go, before launch",
    "fsx:DescribeFileSystems": "the FSx for Lustre storage already in the region",
}


#: The On-Demand vCPU quota (Service Quotas, service ec2) of an instance class, by the family's leading
#: letters, longest first (EC2 user guide, "On-Demand Instance quotas": one quota per class, in vCPUs;
#: u7i/u7in count against High Memory, L-43DA4232, and gr6 against G and VT, L-DB2E81BA, as issue 41
#: read there). A family whose letters match no class gets no quota (preflight says so), never Standard.
QUOTA_CLASSES = (
    ("trn", "Running On-Demand Trn instances"),
    ("inf", "Running On-Demand Inf instances"),
    ("dl", "Running On-Demand DL instances"),
    ("hpc", "Running On-Demand HPC instances"),
    ("gr", "Running On-Demand G and VT instances"),
    ("vt", "Running On-Demand G and VT instances"),
    ("p", "Running On-Demand P instances"),
    ("g", "Running On-Demand G and VT instances"),
    ("x", "Running On-Demand X instances"),
    ("f", "Running On-Demand F instances"),
    ("u", "Running On-Demand High Memory instances"),
)


#: The classes the Standard quota names: its families start with one of these letters (im4gn is I).
STANDARD_LETTERS = "acdhimrtz"


STANDARD_QUOTA = "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"


EIP_QUOTA = "EC2-VPC Elastic IPs"


#: The SSM parameter of the CDK bootstrap's version, for the default qualifier (CDK's bootstrap template).
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"


class PreflightError(Exception):
    """Preflight cannot run at all (no templates, no credentials, no network): one line."""


@dataclass(frozen=True)
class Check:
    """One check's verdict: PASS, WARN or FAIL, what it found, and the fix."""

    name: str
    status: str
    found: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.status:<4} {self.name}: {self.found}" + (f". Fix: {self.fix}" if self.fix else "")


@dataclass
class NodeGroup:
    """What one group of EFA nodes in a template asks of the account."""

    stack: str
    name: str  # the logical id that launches them
    instance_type: str
    count: int
    efa_interfaces: int = 0
    network_cards: int = 0
    zone: str | None = None
    subnet_id: str | None = None  # an existing subnet's id
    reservation_id: str | None = None
    capacity_block: bool = False
    key_name: str | None = None
    image_id: str | None = None
    image_parameter: str | None = None
    root_gib: int | None = None
    elastic_ips: int = 0
    interfaces_with_ip: int = 1
    subnet_from: str | None = None  # where the subnet comes from when the template cannot say (an import)
    interfaces: int = 1  # network interfaces each node launches with
    public_address: bool = (
        False  # the first interface asks for a public IPv4 address (AssociatePublicIpAddress)
    )


def quota_name(instance_type: str) -> str | None:
    """The On-Demand vCPU quota of the type's class: the longest class prefix of the family's leading
    letters (trn1n -> trn, p5en -> p, hpc7g -> hpc, gr6 -> gr, u7in -> u), else Standard for the
    Standard letters (im4gn -> i); None for a class this table does not know."""
    found = re.match(r"[a-z]+", instance_type.split(".")[0])
    letters = found.group(0) if found else ""
    for prefix, name in QUOTA_CLASSES:
        if letters.startswith(prefix):
            return name
    return STANDARD_QUOTA if letters[:1] and letters[0] in STANDARD_LETTERS else None


#: A route's target fields (EC2 API reference, Route), in the order one is named.
ROUTE_TARGETS = (
    "NatGatewayId", "GatewayId", "TransitGatewayId", "InstanceId", "NetworkInterfaceId",
    "VpcPeeringConnectionId", "CarrierGatewayId", "LocalGatewayId", "CoreNetworkArn",
)  # fmt: skip


def _past(when: str) -> bool:
    """An EC2 timestamp (ISO 8601, e.g. 2025-07-01T00:00:00.000Z) is before now."""
    from datetime import datetime, timezone

    try:
        return datetime.fromisoformat(when.replace("Z", "+00:00")) < datetime.now(timezone.utc)
    except ValueError:
        return False


@dataclass(frozen=True)
class LustreAsk:
    """An FSx for Lustre (PERSISTENT_2) file system a template makes."""

    stack: str
    name: str  # its logical id
    capacity_gib: int
    efa: bool = False


#: FSx's quotas for PERSISTENT_2 Lustre, by the names Service Quotas lists for the service code fsx (its
#: default list records them as L-8F1B9C74, 100,800 GiB, and L-FD6F2F22); looked up by name, so a renamed
#: quota is a WARN naming it, not a wrong answer.
LUSTRE_STORAGE_QUOTA = "Lustre Persistent_2 storage capacity"


LUSTRE_COUNT_QUOTA = "Lustre Persistent_2 file systems"


#: What a rule is run for: once per account and region, once per bootstrap qualifier the stacks use,
#: once per node group of the stacks, or once per FSx file system they make.
ACCOUNT, QUALIFIER, NODE_GROUP, FILE_SYSTEM = (
    "account",
    "bootstrap qualifier",
    "node group",
    "FSx file system",
)
