"""The ready stacks' parameters, from CDK context (``cdk synth -c key=value`` or cdk.json).

One table, :data:`FIELDS`, drives everything: which keys each stack reads, how each value is parsed
(:mod:`stacks.parsers`), the misspelt, unread and renamed keys (:mod:`stacks.context_keys`) and
docs/context.md's table (``python -m stacks.params`` prints it; a test compares). This module only turns
strings into values and checks how keys combine; whether a value works for the cluster (node count,
layout, capacity, ...) is decided once, by the core and the constructs. Pure Python: no CDK.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from efa_constructs.core import (
    Benchmark,
    Capacity,
    EfaConfigError,
    InstanceType,
    InternetEgress,
    LayoutMode,
    NodeGroup,
    PublicIp,
    instance_type,
)
from efa_constructs.core.checks import AMI_ID_PATTERN, REFRESH_LABEL_PATTERN, has_default_image
from efa_constructs.core.lustre import DEFAULT_THROUGHPUT
from efa_constructs.core.options import (
    AZ_PATTERN,
    DEFAULT_MAX_COUNT,
    DEFAULT_MIN_COUNT,
    DEFAULT_NODE_COUNT,
    DEFAULT_ROOT_VOLUME_GIB,
)
from efa_constructs.core.pcluster import DEFAULT_HEAD_NODE_TYPE
from efa_constructs.core.pcs import DEFAULT_SLURM_VERSION, PcsClusterSize

from .parsers import Parser, any_text, at_least_one, boolean, choice, replacements, ssh_sources, text, whole

#: The kinds of ready stack (standalone clusters, ParallelCluster, AWS PCS); a field says which read it.
CLUSTER, PCLUSTER, PCS = KINDS = ("cluster", "pcluster", "pcs")
BOTH = frozenset({CLUSTER, PCLUSTER})
ALL = frozenset(KINDS)
#: How docs/context.md's table and the refusals name each kind.
KIND_NAMES = {CLUSTER: "clusters", PCLUSTER: "ParallelCluster", PCS: "PCS"}
READER_NAMES = {CLUSTER: "cluster", PCLUSTER: "ParallelCluster", PCS: "PCS"}


@dataclass(frozen=True)
class ReadyStack:
    """One ready stack of the app: its name, its kind (which parameters it reads, which stack class
    builds it) and the instance type it launches unless ``instance_type`` is given."""

    name: str
    kind: str
    default_type: str


#: Every ready stack, once: the app builds these, in this order; `cdk ls` lists them.
READY_STACKS = (
    ReadyStack("Trn1EfaCluster", CLUSTER, "trn1.32xlarge"),
    ReadyStack("Trn1nEfaCluster", CLUSTER, "trn1n.32xlarge"),
    ReadyStack("P4dEfaCluster", CLUSTER, "p4d.24xlarge"),
    ReadyStack("P5EfaCluster", CLUSTER, "p5.48xlarge"),
    ReadyStack("P3dnEfaCluster", CLUSTER, "p3dn.24xlarge"),
    ReadyStack("Dl1EfaCluster", CLUSTER, "dl1.24xlarge"),
    ReadyStack("Trn1ParallelCluster", PCLUSTER, "trn1.32xlarge"),
    ReadyStack("Trn1PcsCluster", PCS, "trn1.32xlarge"),
)


def ready(kind: str) -> dict[str, str]:
    """The ready stacks of one kind: name -> default instance type."""
    return {r.name: r.default_type for r in READY_STACKS if r.kind == kind}


@dataclass(frozen=True)
class Field:
    """One context key: what it means, how it is parsed, which stacks read it."""

    key: str
    help: str
    parse: Parser
    default: str = ""  # shown in docs/context.md; the value when the key is unset is the dataclass's
    stacks: frozenset[str] = field(default=BOTH)


FIELDS: tuple[Field, ...] = (
    Field("instance_type", "EC2 instance type of the nodes (must support EFA)", any_text, "per stack", ALL),
    Field("availability_zone", "AZ for the cluster subnet, e.g. us-east-1c; also sets the stack's region",
          text(AZ_PATTERN.pattern, "an Availability Zone name", "us-east-1c"),
          "none: `cdk deploy` asks for the AvailabilityZone parameter", ALL),
    Field("key_pair", "name of an existing EC2 key pair for SSH", text(r"^[\x20-\x7e]{1,255}$",
          "an EC2 key pair name", "my-key"), "cluster: none (Session Manager); pcluster: one is created"),
    Field("ssh_peers", "comma-separated CIDRs or prefix-list ids allowed to SSH (ParallelCluster: one)",
          ssh_sources, "none"),
    Field("capacity_reservation", "Capacity Reservation id (cr-...) or reservation resource-group ARN",
          any_text, "none (On-Demand)", ALL),
    Field("capacity_block", "Capacity Block for ML reservation id (cr-...) to launch into", any_text, "none",
          ALL),
    Field("capacity_instances", "instances the reservation or block holds (checked against the node count)",
          at_least_one, "unknown", ALL),
    Field("node_count", "number of nodes", whole, str(DEFAULT_NODE_COUNT), frozenset({CLUSTER})),
    Field("nic_layout", "recommended | max-bandwidth | legacy", choice(LayoutMode.parse), "recommended",
          frozenset({CLUSTER})),
    Field("efa_count", "EFA interfaces per node", whole, "the type's maximum", frozenset({CLUSTER})),
    Field("internet_egress", "web | all | none: what nodes may reach outside the cluster",
          choice(InternetEgress.parse), "web", frozenset({CLUSTER})),
    Field("vpc_id", "use this existing VPC (needs subnet_id and availability_zone)",
          text(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?$", "a VPC id", "vpc-0123456789abcdef0"), "a new VPC", ALL),
    Field("subnet_id", "existing subnet for the (compute) nodes, with a route out (with vpc_id)",
          text(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$", "a subnet id", "subnet-0123456789abcdef0"), "none",
          ALL),
    Field("public_subnet_id", "existing public subnet: Elastic IP interfaces (with public_ip), or the "
          "ParallelCluster head node (needed with vpc_id there)",
          text(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$", "a subnet id", "subnet-0123456789abcdef0"), "none"),
    Field("root_volume_gib", "encrypted gp3 root volume size in GiB", whole, str(DEFAULT_ROOT_VOLUME_GIB),
          frozenset({CLUSTER})),
    Field("public_ip", "none | leader | all: Elastic IP on card 0 / device 0 of those nodes",
          choice(PublicIp.parse), "none", frozenset({CLUSTER})),
    Field("benchmarks", "auto | none | comma-separated nccl-tests, nccom-test, fi_pingpong, hccl_demo",
          choice(lambda raw: Benchmark.parse_list(str(raw))), "auto", frozenset({CLUSTER})),
    Field("strict_benchmarks", "true | false: a benchmark problem fails the stack (EFA faults always do)",
          boolean, "false: reported in BenchmarkResults", frozenset({CLUSTER})),
    Field("node_software", "true | false: EFA install and check, SSH, hostfile, benchmarks at boot", boolean,
          "true", frozenset({CLUSTER})),
    Field("monitoring", "true | false: CloudWatch agent with EFA metrics, health timer, dashboard, alarms",
          boolean, "true (with the node software)", frozenset({CLUSTER})),
    Field("sweep_minutes", "the leader's health timer runs the fabric sweep this often (it uses the fabric "
          "while it runs)", whole, "none: at formation and on demand (efa-cdk sweep)", frozenset({CLUSTER})),
    Field("dcgm_diag_level", "NVIDIA GPUs: DCGM's diagnostic at boot at this level, 1 (seconds) to 4; a "
          "failed test fails the node (the image needs DCGM); 3 and 4 wait 60 and 120 minutes for each "
          "node's signal", whole, "none: GPU count and Xid events only", frozenset({CLUSTER})),
    Field("alarm_email", "an address subscribed to the cluster's alarms (it must confirm)",
          text(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", "an email address", "ops@example.com"), "none",
          frozenset({CLUSTER})),
    Field("container_image", "run this image on every node: every EFA, SSH inside for mpirun, EFA checked "
          "inside", any_text, "none", frozenset({CLUSTER})),
    Field("container_ssh_port", "the SSH port inside the containers", whole, "3022", frozenset({CLUSTER})),
    Field("node_group", "explicit (an instance resource per node) | asg (one Auto Scaling group)",
          choice(NodeGroup.parse), "explicit", frozenset({CLUSTER})),
    Field("node_replacements", "explicit nodes to replace, INDEX:LABEL,... (a new label launches a new "
          "instance; keep it in cdk.json: removing it replaces the node again)", replacements, "none",
          frozenset({CLUSTER})),
    Field("placement_group", "existing placement group to launch into (e.g. the reservation's)",
          text(r"^[\x21-\x7e]{1,255}$", "a placement group name", "my-group"),
          "On-Demand: a new one; reservation: none", ALL),
    Field("ami_id", "this AMI instead of the default image (needed for p3dn: no current AWS image; PCS: "
          "an image with the PCS agent, PCS's Slurm, EFA and the drivers)",
          text(AMI_ID_PATTERN, "an AMI id", "ami-0123456789abcdef0"),
          "the accelerator's image, read once at create; p3dn and PCS: the ImageId parameter",
          frozenset({CLUSTER, PCS})),
    Field("ami_os", "ubuntu | al2023: the OS of ami_id (login user, root device)", any_text,
          "ubuntu (PCS: al2023)", frozenset({CLUSTER, PCS})),
    Field("ami_refresh", "any label (a date); change it to read the default image's parameter again "
          "(replaces the nodes)", text(REFRESH_LABEL_PATTERN, "a label of letters, digits, . _ -",
          "2026-11-22"), "none: the image read at first create is kept", frozenset({CLUSTER})),
    Field("min_count", "static compute nodes (PCS: kept running)", whole, str(DEFAULT_MIN_COUNT),
          frozenset({PCLUSTER, PCS})),
    Field("max_count", "static + dynamic compute nodes", whole, str(DEFAULT_MAX_COUNT),
          frozenset({PCLUSTER, PCS})),
    Field("head_node_instance_type", "head node type",
          text(r"^[a-z0-9-]+\.[a-z0-9-]+$", "an instance type name", "c5.2xlarge"), DEFAULT_HEAD_NODE_TYPE,
          frozenset({PCLUSTER})),
    Field("image_os", "Image.Os, e.g. ubuntu2204, alinux2023", any_text, "ubuntu2204", frozenset({PCLUSTER})),
    Field("efs_throughput_mibps", "EFS provisioned throughput in MiB/s (billed whether used or not)", whole,
          "none: Elastic throughput, billed by use",
          frozenset({PCLUSTER, PCS})),
    Field("fsx_lustre_capacity_gib", "an FSx for Lustre file system of this size, mounted at /fsx (1200 or "
          "n x 2400; with EFA n x the tier's step: 19200 at 250)", whole, "none", ALL),
    Field("fsx_lustre_efa", "true: the file system serves EFA and the nodes reach it over EFA (set at "
          "creation: switching it replaces the file system)", boolean, "false",
          ALL),
    Field("fsx_lustre_throughput", "its throughput tier in MB/s per TiB: 125, 250, 500 or 1000", whole, "250",
          ALL),
    Field("fsx_lustre_gds", "true: the nodes use GPUDirect Storage with it (P5, P5e, P5en, P6-B200, "
          "P6e-GB200; needs fsx_lustre_efa)", boolean, "false", ALL),
    Field("create_cluster", "true = create the cluster from the stack", boolean, "false",
          frozenset({PCLUSTER})),
    Field("slurm_version", "the Slurm version AWS PCS runs (23.11, 24.05, 24.11, 25.05, 25.11)", any_text,
          DEFAULT_SLURM_VERSION, frozenset({PCS})),
    Field("pcs_size", "SMALL | MEDIUM | LARGE: instances PCS manages (32, 512, 2048); a change replaces the "
          "cluster", choice(PcsClusterSize.parse), "SMALL", frozenset({PCS})),
    Field("login_instance_type", "the PCS login node's type",
          text(r"^[a-z0-9-]+\.[a-z0-9-]+$", "an instance type name", "c7i.xlarge"),
          "c7i.xlarge (c7g.xlarge for Arm)", frozenset({PCS})),
)  # fmt: skip
BY_KEY = {f.key: f for f in FIELDS}


def parse_fields(ctx: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The set keys a stack of this kind reads, parsed; a misspelt key is refused."""
    check_keys(ctx)
    out = {}
    for f in FIELDS:
        raw = ctx.get(f.key)
        if kind not in f.stacks or raw is None:
            continue
        if isinstance(raw, str) and not raw.strip():
            raise EfaConfigError(
                f.key,
                code="efa-cdk:context-empty",
                value=raw,
                why="empty (an unset shell variable in -c key=$VAR?)",
                fix=f"give a value, or leave -c {f.key} out for its default ({f.default})",
            )
        out[f.key] = f.parse(f.key, raw)
    return out


#: Plain context keys (no ``@``, no ``:``) that CDK itself writes: ``cdk acknowledge`` keeps the
#: notices a user acknowledged in cdk.context.json (AWS CDK CLI reference, "cdk acknowledge").
CDK_PLAIN_KEYS = frozenset({"acknowledged-issue-numbers"})


def _is_cdk_key(name: str) -> bool:
    """CDK's own keys: feature flags (``@aws-cdk/...``), the CLI's ``aws:cdk:...`` settings,
    ``aws-cdk-private:...`` (set by aws-cdk-lib), and lookups cached in cdk.context.json
    (``availability-zones:account=...:region=...``)."""
    return name.startswith(("@", "aws:", "aws-cdk")) or "=" in name or name in CDK_PLAIN_KEYS


def _unknown(key: str, choices: Sequence[str], why: str, prefix: str = "") -> EfaConfigError:
    close = difflib.get_close_matches(key.replace("-", "_").lower(), choices, n=1, cutoff=0.6)
    return EfaConfigError(
        "context",
        code="efa-cdk:context-key-unknown",
        value=prefix + key,
        why=why,
        fix=f"write {prefix}{close[0]}" if close else f"use one of {', '.join(choices)}",
    )


def check_keys(ctx: Mapping[str, Any]) -> None:
    """Refuse a plain key the app does not read: it would be silently ignored."""
    for name in ctx:
        if name not in BY_KEY and not _is_cdk_key(name):
            raise _unknown(name, list(BY_KEY), "not a context key this app reads (it would be ignored)")


def check_existing_vpc(v: Mapping[str, Any], needs: Sequence[str]) -> str | None:
    """An existing VPC comes with the keys that place the nodes in it (no AWS lookups at synth)."""
    vpc_id = v.get("vpc_id")
    missing = [k for k in needs if v.get(k) is None]
    if (vpc_id is not None and missing) or (vpc_id is None and v.get("subnet_id") is not None):
        raise EfaConfigError(
            "vpc_id",
            code="efa-cdk:existing-vpc-incomplete",
            value=vpc_id,
            why=f"an existing VPC needs all of vpc_id, {', '.join(needs)} (no AWS lookups at synth)",
            fix="pass -c vpc_id=... " + " ".join(f"-c {k}=..." for k in needs) + ", or none of them",
        )
    return None if vpc_id is None else str(vpc_id)


def check_given_with(v: Mapping[str, Any], key: str, other: str, why: str, example: str = "...") -> None:
    """`key` means something only with `other`: refused alone, instead of silently ignored."""
    if key in v and other not in v:
        raise EfaConfigError(
            key,
            code="efa-cdk:context-given-without",
            value=v[key],
            why=f"{why}, and no {other} is given",
            fix=f"pass -c {other}={example} with it, or drop {key}",
        )


def pop_capacity(v: dict[str, Any]) -> Capacity:
    """The capacity keys, taken out of `v`, as one :class:`Capacity` (the cluster checks it against
    itself); what is left of `v` are the params' other fields."""
    reservation, block, instances = (
        v.pop("capacity_reservation", None),
        v.pop("capacity_block", None),
        v.pop("capacity_instances", None),
    )
    if reservation is not None and block is not None:
        raise EfaConfigError(
            "capacity_block",
            code="efa-cdk:capacity-block-and-reservation",
            value=block,
            why="a launch targets one reservation: capacity_reservation is set too",
            fix="pass only one of capacity_reservation and capacity_block",
        )
    if (reservation is not None or block is not None) and v.get("availability_zone") is None:
        raise EfaConfigError(
            "availability_zone",
            code="efa-cdk:capacity-without-zone",
            value=None,
            why="a reservation lives in one Availability Zone and the nodes' subnet must be in it",
            fix="pass -c availability_zone=<the reservation's AZ> (aws ec2 describe-capacity-reservations)",
        )
    if instances is not None and reservation is None and block is None:
        raise EfaConfigError(
            "capacity_instances",
            code="efa-cdk:capacity-instances-without-reservation",
            value=instances,
            why="it describes a reservation, and none is given",
            fix="pass capacity_reservation=cr-... or capacity_block=cr-... with it",
        )
    if block is not None:
        return Capacity.capacity_block(block, instance_count=instances)
    if reservation is not None and reservation.startswith("arn:"):
        return Capacity.reservation_group(reservation)
    if reservation is not None:
        return Capacity.reservation(reservation, instance_count=instances)
    return Capacity.on_demand()


def region_of(availability_zone: str | None) -> str | None:
    """The region an AZ name belongs to, or None."""
    match = AZ_PATTERN.match(availability_zone or "")
    return match.group("region") if match else None


@dataclass(frozen=True)
class ClusterParams:
    """Parameters of a ready cluster stack (names as the context keys)."""

    instance_type: str
    node_count: int = DEFAULT_NODE_COUNT
    nic_layout: LayoutMode = LayoutMode.RECOMMENDED
    efa_count: int | None = None
    availability_zone: str | None = None
    key_pair: str | None = None
    ssh_peers: tuple[str, ...] = ()
    internet_egress: InternetEgress = InternetEgress.WEB
    vpc_id: str | None = None
    subnet_id: str | None = None
    root_volume_gib: int = DEFAULT_ROOT_VOLUME_GIB
    public_ip: PublicIp = PublicIp.NONE
    public_subnet_id: str | None = None
    benchmarks: tuple[Benchmark, ...] | None = None
    strict_benchmarks: bool = False
    node_group: NodeGroup = NodeGroup.EXPLICIT
    node_software: bool = True
    capacity: Capacity = field(default_factory=Capacity.on_demand)
    placement_group: str | None = None
    ami_id: str | None = None
    ami_os: str = "ubuntu"
    ami_refresh: str = ""
    monitoring: bool | None = None
    sweep_minutes: int | None = None
    dcgm_diag_level: int | None = None
    alarm_email: str | None = None
    container_image: str | None = None
    container_ssh_port: int = 3022
    node_replacements: tuple[tuple[int, str], ...] = ()
    fsx_lustre_capacity_gib: int | None = None
    fsx_lustre_efa: bool = False
    fsx_lustre_gds: bool = False
    fsx_lustre_throughput: int = DEFAULT_THROUGHPUT
    #: The instance type's catalogue record, read once by :meth:`from_context` (not a context key).
    catalogue_entry: InstanceType | None = field(default=None, compare=False, repr=False)

    @property
    def region(self) -> str | None:
        """The region the AZ belongs to, or None (environment-agnostic stack)."""
        return region_of(self.availability_zone)

    @staticmethod
    def from_context(ctx: Mapping[str, Any], *, default_instance_type: str) -> ClusterParams:
        """Parse context values (strings from ``-c``, or typed values from cdk.json)."""
        v = parse_fields(ctx, CLUSTER)
        vpc_id = check_existing_vpc(v, ("subnet_id", "availability_zone"))
        public_ip = v.get("public_ip", PublicIp.NONE)
        if vpc_id is not None and public_ip is not PublicIp.NONE and "public_subnet_id" not in v:
            raise EfaConfigError(
                "public_subnet_id",
                code="efa-cdk:existing-vpc-public-subnet-missing",
                value=None,
                why=f"public_ip={public_ip.value} in an existing VPC needs its public subnet "
                "(no lookups at synth)",
                fix="pass -c public_subnet_id=subnet-... (a subnet routed to an internet gateway, same AZ)",
            )
        check_given_with(v, "container_ssh_port", "container_image", "it is the port inside the containers")
        # The stack's one catalogue lookup: the cluster gets the type by name and resolves its own node.
        entry = instance_type(str(v.get("instance_type", default_instance_type)))
        if has_default_image(entry):  # no default image (p3dn): ami_os describes the ImageId asked for
            check_given_with(v, "ami_os", "ami_id", "it describes ami_id", example="ami-...")
        if "ami_refresh" in v and "ami_id" in v:
            raise EfaConfigError(
                "ami_refresh",
                code="efa-cdk:ami-refresh-and-ami-id",
                value=v["ami_refresh"],
                why="it re-reads the default image's parameter, and ami_id replaces that image",
                fix="pass one of ami_id and ami_refresh",
            )
        capacity = pop_capacity(v)
        return ClusterParams(
            **{"instance_type": default_instance_type, **v, "capacity": capacity, "catalogue_entry": entry}
        )


@dataclass(frozen=True)
class PclusterParams:
    """Parameters of the ParallelCluster ready stack (names as the context keys)."""

    instance_type: str
    min_count: int = DEFAULT_MIN_COUNT
    max_count: int = DEFAULT_MAX_COUNT
    availability_zone: str | None = None
    head_node_instance_type: str = DEFAULT_HEAD_NODE_TYPE
    image_os: str = "ubuntu2204"
    key_pair: str | None = None
    ssh_peers: tuple[str, ...] = ()
    efs_throughput_mibps: int | None = None
    fsx_lustre_capacity_gib: int | None = None
    fsx_lustre_efa: bool = False
    fsx_lustre_gds: bool = False
    fsx_lustre_throughput: int = DEFAULT_THROUGHPUT
    capacity: Capacity = field(default_factory=Capacity.on_demand)
    placement_group: str | None = None
    vpc_id: str | None = None
    subnet_id: str | None = None
    public_subnet_id: str | None = None
    create_cluster: bool = False

    #: The instance type's catalogue record when looked up here (not a context key); else None.
    catalogue_entry: InstanceType | None = field(default=None, compare=False, repr=False)

    @property
    def region(self) -> str | None:
        """The region the AZ belongs to, or None."""
        return region_of(self.availability_zone)

    @staticmethod
    def from_context(ctx: Mapping[str, Any], *, default_instance_type: str) -> PclusterParams:
        """Parse context values; the construct and the ParallelCluster model check the rest."""
        v = parse_fields(ctx, PCLUSTER)
        check_existing_vpc(v, ("subnet_id", "public_subnet_id", "availability_zone"))
        capacity = pop_capacity(v)
        return PclusterParams(**{"instance_type": default_instance_type, **v, "capacity": capacity})


@dataclass(frozen=True)
class PcsParams:
    """Parameters of the AWS PCS ready stack (names as the context keys)."""

    instance_type: str
    min_count: int = DEFAULT_MIN_COUNT
    max_count: int = DEFAULT_MAX_COUNT
    availability_zone: str | None = None
    ami_id: str | None = None
    ami_os: str = "al2023"
    slurm_version: str = DEFAULT_SLURM_VERSION
    pcs_size: PcsClusterSize = PcsClusterSize.SMALL
    login_instance_type: str | None = None
    efs_throughput_mibps: int | None = None
    fsx_lustre_capacity_gib: int | None = None
    fsx_lustre_efa: bool = False
    fsx_lustre_gds: bool = False
    fsx_lustre_throughput: int = DEFAULT_THROUGHPUT
    capacity: Capacity = field(default_factory=Capacity.on_demand)
    placement_group: str | None = None
    vpc_id: str | None = None
    subnet_id: str | None = None

    #: The instance type's catalogue record when looked up here (not a context key); else None.
    catalogue_entry: InstanceType | None = field(default=None, compare=False, repr=False)

    @property
    def region(self) -> str | None:
        """The region the AZ belongs to, or None."""
        return region_of(self.availability_zone)

    @staticmethod
    def from_context(ctx: Mapping[str, Any], *, default_instance_type: str) -> PcsParams:
        """Parse context values; the construct checks what PCS accepts."""
        v = parse_fields(ctx, PCS)
        check_existing_vpc(v, ("subnet_id", "availability_zone"))
        check_given_with(v, "ami_os", "ami_id", "it describes ami_id", example="ami-...")
        capacity = pop_capacity(v)
        return PcsParams(**{"instance_type": default_instance_type, **v, "capacity": capacity})


#: The parameters each kind of ready stack reads from its context.
PARAMS: dict[str, type[ClusterParams] | type[PclusterParams] | type[PcsParams]] = {
    CLUSTER: ClusterParams,
    PCLUSTER: PclusterParams,
    PCS: PcsParams,
}


def context_table() -> str:
    """docs/context.md's context table (Markdown), from :data:`FIELDS`."""

    def names(stacks: frozenset[str]) -> str:
        return "all" if stacks == ALL else ", ".join(KIND_NAMES[k] for k in KINDS if k in stacks)

    rows = ["| key | stacks | meaning | default |", "| --- | --- | --- | --- |"]
    rows += [f"| `{f.key}` | {names(f.stacks)} | {f.help} | {f.default} |" for f in FIELDS]
    return "\n".join(rows)


if __name__ == "__main__":
    print(context_table())
