"""Cluster parameters from CDK context (``cdk synth -c key=value`` or cdk.json), validated.

Pure Python: every value is checked here, before any construct is built, with a message that
names the key, the value, why it is wrong and the fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from efa_constructs.capacity import Capacity
from efa_constructs.catalogue import instance_type as lookup
from efa_constructs.cluster import NodeGroup, PublicIp
from efa_constructs.errors import EfaConfigError
from efa_constructs.layout import LayoutMode, plan_layout
from efa_constructs.node_software import Benchmark, check_benchmarks
from efa_constructs.security_group import InternetEgress, ssh_peer

#: Every context key a ready stack reads, with its meaning (README's table is built from this).
CONTEXT_KEYS: dict[str, str] = {
    "instance_type": "EC2 instance type of the nodes (must support EFA)",
    "node_count": "number of nodes (>= 1)",
    "nic_layout": "recommended | max-bandwidth | legacy",
    "efa_count": "EFA interfaces per node (default: the type's maximum)",
    "availability_zone": "AZ for the cluster subnet, e.g. us-east-1c; also sets the stack's region",
    "key_pair": "name of an existing EC2 key pair for SSH (default: none; use Session Manager)",
    "ssh_cidr": "comma-separated CIDRs or prefix-list ids allowed to SSH (default: none)",
    "internet_egress": "web | all | none: what nodes may reach outside the cluster (default: web)",
    "vpc_id": "use this existing VPC instead of creating one (needs subnet_id and availability_zone)",
    "subnet_id": "existing subnet for the nodes (with vpc_id)",
    "root_volume_gib": "encrypted gp3 root volume size in GiB (default: 200)",
    "public_ip": "none | leader | all: Elastic IP on card 0 / device 0 of those nodes (default: none)",
    "public_subnet_id": "existing public subnet for the Elastic IP interfaces (with vpc_id and public_ip)",
    "benchmarks": "auto | none | comma-separated nccl-tests, nccom-test, fi_pingpong (default: auto)",
    "node_software": "true | false: EFA install and check, SSH, hostfile, benchmarks at boot (default: true)",
    "node_group": "explicit (an instance resource per node) | asg (one Auto Scaling group: large clusters)",
    "capacity_reservation": "Capacity Reservation id (cr-...) or reservation resource-group ARN",
    "capacity_block": "Capacity Block for ML reservation id (cr-...) to launch into",
    "capacity_instances": "instances the reservation or block holds (checked against node_count)",
    "placement_group": "existing placement group to launch into (e.g. the reservation's); default: a new one",
}

#: Keys only the ParallelCluster stack reads (it also reads instance_type, availability_zone,
#: key_pair, ssh_cidr, capacity_reservation and capacity_block above).
PCLUSTER_KEYS: dict[str, str] = {
    "min_count": "ParallelCluster: static compute nodes (default: 0)",
    "max_count": "ParallelCluster: static + dynamic compute nodes (default: 2)",
    "head_node_instance_type": "ParallelCluster: head node type (default: c5.2xlarge)",
    "image_os": "ParallelCluster: Image.Os, e.g. ubuntu2204, alinux2023 (default: ubuntu2204)",
    "efs_throughput_mibps": "ParallelCluster: EFS provisioned throughput in MiB/s (default: 1024)",
    "fsx_lustre_gib": "ParallelCluster: also an FSx for Lustre file system of this size (default: none)",
    "create_cluster": "ParallelCluster: true = create the cluster from the stack (default: false)",
}

_AZ = re.compile(r"^(?P<region>[a-z]{2}(-gov)?-[a-z]+-\d+)[a-z]$")
_VPC = re.compile(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?$")
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$")
_KEY = re.compile(r"^[\x20-\x7e]{1,255}$")
ON_DEMAND = Capacity.on_demand()
_PLACEMENT = re.compile(r"^[\x21-\x7e]{1,255}$")


def _capacity(get: Any, az: str | None) -> Capacity:
    """The capacity context keys as a :class:`Capacity` (checked against the cluster later)."""
    reservation, block = get("capacity_reservation"), get("capacity_block")
    if reservation is not None and block is not None:
        raise EfaConfigError(
            "capacity_block",
            value=block,
            why="a launch targets one reservation: capacity_reservation is set too",
            fix="pass only one of capacity_reservation and capacity_block",
        )
    if (reservation is not None or block is not None) and az is None:
        raise EfaConfigError(
            "availability_zone",
            value=None,
            why="a reservation lives in one Availability Zone and the nodes' subnet must be in it",
            fix="pass -c availability_zone=<the reservation's AZ> (aws ec2 describe-capacity-reservations)",
        )
    count = get("capacity_instances")
    instances = None if count is None else _int("capacity_instances", count, 1, 100_000)
    if count is not None and reservation is None and block is None:
        raise EfaConfigError(
            "capacity_instances",
            value=count,
            why="it describes a reservation, and none is given",
            fix="pass capacity_reservation=cr-... or capacity_block=cr-... with it",
        )
    if block is not None:
        return Capacity.capacity_block(str(block), instance_count=instances)
    if reservation is not None and str(reservation).startswith("arn:"):
        return Capacity.reservation_group(str(reservation))
    if reservation is not None:
        return Capacity.reservation(str(reservation), instance_count=instances)
    return Capacity.on_demand()


def check_keys(ctx: Mapping[str, Any]) -> None:
    """Refuse a key close to one the app reads but not one of them: a typo would be ignored."""
    known = {**CONTEXT_KEYS, **PCLUSTER_KEYS}
    for name in ctx:
        close = difflib.get_close_matches(name.replace("-", "_").lower(), known, n=1, cutoff=0.75)
        if name not in known and close:
            raise EfaConfigError(
                "context",
                value=name,
                why="not a context key this app reads (a typo would be ignored)",
                fix=f"write {close[0]} (keys: {', '.join(known)})",
            )


def _bool(key: str, raw: Any) -> bool:
    value = str(raw).lower()
    if value not in ("true", "false"):
        raise EfaConfigError(key, value=raw, why="not true or false", fix=f"pass -c {key}=true or false")
    return value == "true"


def _int(key: str, raw: Any, lo: int, hi: int) -> int:
    if isinstance(raw, bool) or not (
        isinstance(raw, int) or (isinstance(raw, str) and raw.strip().isdigit())
    ):
        raise EfaConfigError(key, value=raw, why="not a whole number", fix=f"pass -c {key}=<{lo}..{hi}>")
    value = int(raw)
    if not lo <= value <= hi:
        raise EfaConfigError(
            key, value=raw, why=f"out of range {lo}..{hi}", fix=f"pass -c {key}=<{lo}..{hi}>"
        )
    return value


@dataclass(frozen=True)
class ClusterParams:
    """Validated parameters of a ready cluster stack."""

    instance_type: str
    node_count: int = 2
    nic_layout: LayoutMode = LayoutMode.RECOMMENDED
    efa_count: int | None = None
    availability_zone: str | None = None
    key_pair: str | None = None
    ssh_cidrs: tuple[str, ...] = ()
    internet_egress: InternetEgress = InternetEgress.WEB
    vpc_id: str | None = None
    subnet_id: str | None = None
    root_volume_gib: int = 200
    public_ip: PublicIp = PublicIp.NONE
    public_subnet_id: str | None = None
    benchmarks: tuple[Benchmark, ...] | None = None
    node_group: NodeGroup = NodeGroup.EXPLICIT
    node_software: bool = True
    capacity: Capacity = ON_DEMAND
    placement_group: str | None = None

    @property
    def region(self) -> str | None:
        """The region the AZ belongs to, or None (environment-agnostic stack)."""
        if self.availability_zone is None:
            return None
        match = _AZ.match(self.availability_zone)
        return match.group("region") if match else None

    @staticmethod
    def from_context(ctx: Mapping[str, Any], *, default_instance_type: str) -> ClusterParams:
        """Parse and validate context values (strings from ``-c``, or typed values from cdk.json)."""

        def get(key: str, default: Any = None) -> Any:
            value = ctx.get(key)
            return default if value is None or value == "" else value

        itype = str(get("instance_type", default_instance_type))
        lookup(itype)  # unknown / non-EFA types fail here, naming close matches
        layout = LayoutMode.parse(get("nic_layout", LayoutMode.RECOMMENDED.value))
        efa_count = _int("efa_count", get("efa_count"), 1, 64) if get("efa_count") is not None else None
        plan_layout(itype, layout, efa_count=efa_count)  # impossible layouts fail at synth, not deploy
        az = get("availability_zone")
        if az is not None and not _AZ.match(str(az)):
            raise EfaConfigError(
                "availability_zone",
                value=az,
                why="not an Availability Zone name",
                fix="pass a zone name such as us-east-1c (see `aws ec2 describe-availability-zones`)",
            )
        key = get("key_pair")
        if key is not None and not _KEY.match(str(key)):
            raise EfaConfigError(
                "key_pair",
                value=key,
                why="not a valid EC2 key pair name",
                fix="pass the name of an existing key pair (printable ASCII, 1-255 characters)",
            )
        cidrs = tuple(c.strip() for c in str(get("ssh_cidr") or "").split(",") if c.strip())
        for cidr in cidrs:
            ssh_peer(cidr)
        vpc_id, subnet_id = get("vpc_id"), get("subnet_id")
        if vpc_id is not None and not _VPC.match(str(vpc_id)):
            raise EfaConfigError(
                "vpc_id", value=vpc_id, why="not a VPC id", fix="pass vpc-<8 or 17 hex digits>"
            )
        if subnet_id is not None and not _SUBNET.match(str(subnet_id)):
            raise EfaConfigError(
                "subnet_id", value=subnet_id, why="not a subnet id", fix="pass subnet-<8 or 17 hex digits>"
            )
        if (vpc_id is None) != (subnet_id is None) or (vpc_id is not None and az is None):
            raise EfaConfigError(
                "vpc_id",
                value=vpc_id,
                why="an existing VPC needs all of vpc_id, subnet_id and availability_zone "
                "(no AWS lookups at synth)",
                fix="pass -c vpc_id=... -c subnet_id=... -c availability_zone=<the subnet's AZ>, "
                "or none of them",
            )
        public_ip = PublicIp.parse(get("public_ip", PublicIp.NONE.value))
        public_subnet_id = get("public_subnet_id")
        if public_subnet_id is not None and not _SUBNET.match(str(public_subnet_id)):
            raise EfaConfigError(
                "public_subnet_id",
                value=public_subnet_id,
                why="not a subnet id",
                fix="pass subnet-<8 or 17 hex digits>",
            )
        if vpc_id is not None and public_ip is not PublicIp.NONE and public_subnet_id is None:
            raise EfaConfigError(
                "public_subnet_id",
                value=None,
                why=f"public_ip={public_ip.value} in an existing VPC needs its public subnet "
                "(no lookups at synth)",
                fix="pass -c public_subnet_id=subnet-... (a subnet routed to an internet gateway, same AZ)",
            )
        node_group = NodeGroup.parse(get("node_group", NodeGroup.EXPLICIT.value))
        capacity = _capacity(get, None if az is None else str(az))
        placement = get("placement_group")
        if placement is not None and not _PLACEMENT.match(str(placement)):
            raise EfaConfigError(
                "placement_group",
                value=placement,
                why="not a placement group name",
                fix="pass the name of an existing cluster placement group (1-255 printable characters)",
            )
        benchmarks = Benchmark.parse_list(str(get("benchmarks", "auto")))
        software = _bool("node_software", get("node_software", "true"))
        if benchmarks:
            check_benchmarks(lookup(itype), benchmarks)
        check_keys(ctx)
        return ClusterParams(
            instance_type=itype,
            node_count=_int("node_count", get("node_count", 2), 1, 100_000),
            nic_layout=layout,
            efa_count=efa_count,
            availability_zone=None if az is None else str(az),
            key_pair=None if key is None else str(key),
            ssh_cidrs=cidrs,
            internet_egress=InternetEgress.parse(get("internet_egress", InternetEgress.WEB.value)),
            vpc_id=None if vpc_id is None else str(vpc_id),
            subnet_id=None if subnet_id is None else str(subnet_id),
            root_volume_gib=_int("root_volume_gib", get("root_volume_gib", 200), 8, 16384),
            public_ip=public_ip,
            public_subnet_id=None if public_subnet_id is None else str(public_subnet_id),
            benchmarks=benchmarks,
            node_group=node_group,
            node_software=software,
            capacity=capacity,
            placement_group=None if placement is None else str(placement),
        )


@dataclass(frozen=True)
class PclusterParams:
    """Validated parameters of the ParallelCluster ready stack."""

    instance_type: str
    min_count: int = 0
    max_count: int = 2
    availability_zone: str | None = None
    head_node_instance_type: str = "c5.2xlarge"
    image_os: str = "ubuntu2204"
    key_pair: str | None = None
    ssh_cidr: str | None = None
    efs_throughput_mibps: int = 1024
    fsx_lustre_gib: int | None = None
    capacity_reservation: str | None = None
    capacity_block: bool = False
    create_cluster: bool = False

    @property
    def region(self) -> str | None:
        """The region the AZ belongs to, or None."""
        match = _AZ.match(self.availability_zone or "")
        return match.group("region") if match else None

    @staticmethod
    def from_context(ctx: Mapping[str, Any], *, default_instance_type: str) -> PclusterParams:
        """Parse and validate; the ParallelCluster model checks the rest when the stack builds it."""

        def get(key: str, default: Any = None) -> Any:
            value = ctx.get(key)
            return default if value is None or value == "" else value

        base = ClusterParams.from_context(
            {k: v for k, v in ctx.items() if k not in PCLUSTER_KEYS},
            default_instance_type=default_instance_type,
        )
        if base.capacity.kind.value == "reservation-group":
            raise EfaConfigError(
                "capacity_reservation",
                value=base.capacity.target,
                why="ParallelCluster targets one reservation per compute resource, not a group",
                fix="pass the reservation id (cr-...)",
            )
        if len(base.ssh_cidrs) > 1 or any(c.startswith("pl-") for c in base.ssh_cidrs):
            raise EfaConfigError(
                "ssh_cidr",
                value=",".join(base.ssh_cidrs),
                why="ParallelCluster's HeadNode.Ssh.AllowedIps takes one CIDR",
                fix="pass a single CIDR, e.g. 203.0.113.0/24",
            )
        head = str(get("head_node_instance_type", "c5.2xlarge"))
        if not re.fullmatch(r"[a-z0-9-]+\.[a-z0-9-]+", head):
            raise EfaConfigError(
                "head_node_instance_type", value=head, why="not an instance type name", fix="e.g. c5.2xlarge"
            )
        fsx = get("fsx_lustre_gib")
        return PclusterParams(
            instance_type=base.instance_type,
            min_count=_int("min_count", get("min_count", 0), 0, 10_000),
            max_count=_int("max_count", get("max_count", 2), 1, 10_000),
            availability_zone=base.availability_zone,
            head_node_instance_type=head,
            image_os=str(get("image_os", "ubuntu2204")),
            key_pair=base.key_pair,
            ssh_cidr=base.ssh_cidrs[0] if base.ssh_cidrs else None,
            efs_throughput_mibps=_int("efs_throughput_mibps", get("efs_throughput_mibps", 1024), 1, 10240),
            fsx_lustre_gib=None if fsx is None else _int("fsx_lustre_gib", fsx, 1200, 1_000_000),
            capacity_reservation=base.capacity.target,
            capacity_block=base.capacity.kind.value == "capacity-block",
            create_cluster=_bool("create_cluster", get("create_cluster", "false")),
        )
