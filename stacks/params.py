"""The ready stacks' parameters, from CDK context (``cdk synth -c key=value`` or cdk.json).

Each context key is declared once, as a field of the parameters' dataclass that holds its value
(:func:`key`: what it means, how a value is parsed by :mod:`stacks.parsers`, its one default); a key read by
several kinds of stack is a field of a base they share. :data:`FIELDS` is read from the dataclasses and drives
the rest: which keys each stack reads, the misspelt, unread and renamed keys (:mod:`stacks.context_keys`) and
docs/context.md's table (``python -m stacks.params`` prints it; a test compares). This module only turns
strings into values; how keys combine is :mod:`stacks.combinations`; whether a value works for the cluster
(node count, layout, capacity, ...) is decided once, by the core and the constructs. Pure Python: no CDK.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

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

from .combinations import (
    capacity_of,
    check_existing_vpc,
    check_given_with,
    check_public_subnet,
)
from .parsers import Parser, any_text, at_least_one, boolean, choice, replacements, ssh_sources, text, whole

#: The kinds of ready stack (standalone clusters, ParallelCluster, AWS PCS); a field says which read it.
CLUSTER, PCLUSTER, PCS = KINDS = ("cluster", "pcluster", "pcs")
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
    """One context key, as the parameters' dataclasses declare it (:func:`key`): what it means, how it is
    parsed, its default in words, which kinds of stack read it."""

    key: str
    help: str
    parse: Parser
    default: str
    stacks: frozenset[str]


_REQUIRED: Any = dataclasses.MISSING


def key(help: str, parse: Parser, default: Any = None, shown: str = "") -> Any:
    """A context key, declared once where its value lives: a field of a parameters dataclass with what it
    means, how a ``-c`` value is parsed, its default value and, where the value does not say it, the default
    in words (``shown``, for docs/context.md and the refusals)."""
    if default is _REQUIRED:
        return field(metadata={"help": help, "parse": parse, "shown": shown})
    return field(default=default, metadata={"help": help, "parse": parse, "shown": shown})


def _shown(f: dataclasses.Field[Any]) -> str:
    """A key's default in words: its ``shown`` text, else its value as ``-c`` writes it."""
    value = f.default
    if f.metadata["shown"]:
        return str(f.metadata["shown"])
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value.value if isinstance(value, enum.Enum) else value)


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


def region_of(availability_zone: str | None) -> str | None:
    """The region an AZ name belongs to, or None."""
    match = AZ_PATTERN.match(availability_zone or "")
    return match.group("region") if match else None


_ZONE = text(AZ_PATTERN.pattern, "an Availability Zone name", "us-east-1c")
_SUBNET = text(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$", "a subnet id", "subnet-0123456789abcdef0")
_TYPE_NAME = r"^[a-z0-9-]+\.[a-z0-9-]+$"


@dataclass(frozen=True, kw_only=True)
class _EveryStack:
    """The keys every kind of ready stack reads."""

    instance_type: str = key(
        "EC2 instance type of the nodes (must support EFA)", any_text, _REQUIRED, "per stack"
    )
    availability_zone: str | None = key(
        "AZ for the cluster subnet, e.g. us-east-1c; also sets the stack's region",
        _ZONE,
        shown="none: `cdk deploy` asks for the AvailabilityZone parameter",
    )
    capacity_reservation: str | None = key(
        "Capacity Reservation id (cr-...) or reservation resource-group ARN",
        any_text,
        shown="none (On-Demand)",
    )
    capacity_block: str | None = key("Capacity Block for ML reservation id (cr-...) to launch into", any_text)
    capacity_instances: int | None = key(
        "instances the reservation or block holds (checked against the node count)",
        at_least_one,
        shown="unknown",
    )
    vpc_id: str | None = key(
        "use this existing VPC (needs subnet_id and availability_zone)",
        text(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?$", "a VPC id", "vpc-0123456789abcdef0"),
        shown="a new VPC",
    )
    subnet_id: str | None = key(
        "existing subnet for the (compute) nodes, with a route out (with vpc_id)", _SUBNET
    )
    placement_group: str | None = key(
        "existing placement group to launch into (e.g. the reservation's)",
        text(r"^[\x21-\x7e]{1,255}$", "a placement group name", "my-group"),
        shown="On-Demand: a new one; reservation: none",
    )
    fsx_lustre_capacity_gib: int | None = key(
        "an FSx for Lustre file system of this size, mounted at /fsx (1200 or n x 2400; with EFA n x the "
        "tier's step: 19200 at 250)",
        whole,
    )
    fsx_lustre_efa: bool = key(
        "true: the file system serves EFA and the nodes reach it over EFA (set at creation: switching it "
        "replaces the file system)",
        boolean,
        False,
    )
    fsx_lustre_throughput: int = key(
        "its throughput tier in MB/s per TiB: 125, 250, 500 or 1000", whole, DEFAULT_THROUGHPUT
    )
    fsx_lustre_gds: bool = key(
        "true: the nodes use GPUDirect Storage with it (P5, P5e, P5en, P6-B200, P6e-GB200; needs "
        "fsx_lustre_efa)",
        boolean,
        False,
    )
    #: The instance type's catalogue record when looked up here (not a context key); else None.
    catalogue_entry: InstanceType | None = field(default=None, compare=False, repr=False)

    @property
    def region(self) -> str | None:
        """The region the AZ belongs to, or None (environment-agnostic stack)."""
        return region_of(self.availability_zone)

    def __post_init__(self) -> None:
        self.capacity  # noqa: B018  (the capacity keys refused together while the context is read)

    @functools.cached_property
    def capacity(self) -> Capacity:
        """The capacity keys as one :class:`Capacity` (the cluster checks it against itself), made once."""
        return capacity_of(
            self.capacity_reservation, self.capacity_block, self.capacity_instances, self.availability_zone
        )


@dataclass(frozen=True, kw_only=True)
class _WithLogin:
    """The keys of the stacks with a login path of their own (clusters, ParallelCluster)."""

    key_pair: str | None = key(
        "name of an existing EC2 key pair for SSH",
        text(r"^[\x20-\x7e]{1,255}$", "an EC2 key pair name", "my-key"),
        shown="cluster: none (Session Manager); pcluster: one is created",
    )
    ssh_peers: tuple[str, ...] = key(
        "comma-separated CIDRs or prefix-list ids allowed to SSH (ParallelCluster: one)", ssh_sources, ()
    )
    public_subnet_id: str | None = key(
        "existing public subnet: Elastic IP interfaces (with public_ip), or the ParallelCluster head node "
        "(needed with vpc_id there)",
        _SUBNET,
    )


@dataclass(frozen=True, kw_only=True)
class _WithImageId:
    """The keys of the stacks that launch an AMI by its id (clusters, PCS)."""

    ami_id: str | None = key(
        "this AMI instead of the default image (needed for p3dn: no current AWS image; PCS: an image with "
        "the PCS agent, PCS's Slurm, EFA and the drivers)",
        text(AMI_ID_PATTERN, "an AMI id", "ami-0123456789abcdef0"),
        shown="the accelerator's image, read once at create; p3dn and PCS: the ImageId parameter",
    )
    ami_os: str | None = key(
        "ubuntu | al2023: the OS of ami_id (login user, root device)", any_text, shown="ubuntu (PCS: al2023)"
    )
    #: The OS of ami_id when ami_os is not given (clusters: Ubuntu, as the DLAMIs; PCS: Amazon Linux 2023, as
    #: AWS's PCS sample AMIs), as ``shown`` above says.
    DEFAULT_AMI_OS: ClassVar[str] = "ubuntu"

    @property
    def ami_family(self) -> str:
        """The OS family of ami_id: ami_os, else the stack kind's default."""
        return self.ami_os or self.DEFAULT_AMI_OS


@dataclass(frozen=True, kw_only=True)
class _Scaled:
    """The keys of the stacks whose compute nodes scale (ParallelCluster, PCS), with EFS they make."""

    min_count: int = key("static compute nodes (PCS: kept running)", whole, DEFAULT_MIN_COUNT)
    max_count: int = key("static + dynamic compute nodes", whole, DEFAULT_MAX_COUNT)
    efs_throughput_mibps: int | None = key(
        "EFS provisioned throughput in MiB/s (billed whether used or not)",
        whole,
        shown="none: Elastic throughput, billed by use",
    )


@dataclass(frozen=True, kw_only=True)
class ClusterParams(_WithImageId, _WithLogin, _EveryStack):
    """Parameters of a ready cluster stack (names as the context keys)."""

    node_count: int = key("number of nodes", whole, DEFAULT_NODE_COUNT)
    nic_layout: LayoutMode = key(
        "recommended | max-bandwidth | legacy", choice(LayoutMode.parse), LayoutMode.RECOMMENDED
    )
    efa_count: int | None = key("EFA interfaces per node", whole, shown="the type's maximum")
    internet_egress: InternetEgress = key(
        "web | all | none: what nodes may reach outside the cluster",
        choice(InternetEgress.parse),
        InternetEgress.WEB,
    )
    root_volume_gib: int = key("encrypted gp3 root volume size in GiB", whole, DEFAULT_ROOT_VOLUME_GIB)
    public_ip: PublicIp = key(
        "none | leader | all: Elastic IP on card 0 / device 0 of those nodes",
        choice(PublicIp.parse),
        PublicIp.NONE,
    )
    benchmarks: tuple[Benchmark, ...] | None = key(
        "auto | none | comma-separated nccl-tests, nccom-test, fi_pingpong, hccl_demo",
        choice(lambda raw: Benchmark.parse_list(str(raw))),
        shown="auto",
    )
    strict_benchmarks: bool = key(
        "true | false: a benchmark problem fails the stack (EFA faults always do)",
        boolean,
        False,
        "false: reported in BenchmarkResults",
    )
    node_software: bool = key(
        "true | false: EFA install and check, SSH, hostfile, benchmarks at boot", boolean, True
    )
    monitoring: bool | None = key(
        "true | false: CloudWatch agent with EFA metrics, health timer, dashboard, alarms",
        boolean,
        shown="true (with the node software)",
    )
    sweep_minutes: int | None = key(
        "the leader's health timer runs the fabric sweep this often (it uses the fabric while it runs)",
        whole,
        shown="none: at formation and on demand (efa-cdk sweep)",
    )
    dcgm_diag_level: int | None = key(
        "NVIDIA GPUs: DCGM's diagnostic at boot at this level, 1 (seconds) to 4; a failed test fails the "
        "node (the image needs DCGM); 3 and 4 wait 60 and 120 minutes for each node's signal",
        whole,
        shown="none: GPU count and Xid events only",
    )
    alarm_email: str | None = key(
        "an address subscribed to the cluster's alarms (it must confirm)",
        text(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", "an email address", "ops@example.com"),
    )
    container_image: str | None = key(
        "run this image on every node: every EFA, SSH inside for mpirun, EFA checked inside", any_text
    )
    container_ssh_port: int = key("the SSH port inside the containers", whole, 3022)
    node_group: NodeGroup = key(
        "explicit (an instance resource per node) | asg (one Auto Scaling group)",
        choice(NodeGroup.parse),
        NodeGroup.EXPLICIT,
    )
    node_replacements: tuple[tuple[int, str], ...] = key(
        "explicit nodes to replace, INDEX:LABEL,... (a new label launches a new instance; keep it in "
        "cdk.json: removing it replaces the node again)",
        replacements,
        (),
    )
    ami_refresh: str = key(
        "any label (a date); change it to read the default image's parameter again (replaces the nodes)",
        text(REFRESH_LABEL_PATTERN, "a label of letters, digits, . _ -", "2026-11-22"),
        "",
        "none: the image read at first create is kept",
    )

    @staticmethod
    def from_context(ctx: Mapping[str, Any], *, default_instance_type: str) -> ClusterParams:
        """Parse context values (strings from ``-c``, or typed values from cdk.json)."""
        v = parse_fields(ctx, CLUSTER)
        check_public_subnet(v, check_existing_vpc(v, ("subnet_id", "availability_zone")))
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
        return ClusterParams(**{"instance_type": default_instance_type, **v, "catalogue_entry": entry})


@dataclass(frozen=True, kw_only=True)
class PclusterParams(_Scaled, _WithLogin, _EveryStack):
    """Parameters of the ParallelCluster ready stack (names as the context keys)."""

    head_node_instance_type: str = key(
        "head node type", text(_TYPE_NAME, "an instance type name", "c5.2xlarge"), DEFAULT_HEAD_NODE_TYPE
    )
    image_os: str = key("Image.Os, e.g. ubuntu2204, alinux2023", any_text, "ubuntu2204")
    create_cluster: bool = key("true = create the cluster from the stack", boolean, False)

    @staticmethod
    def from_context(ctx: Mapping[str, Any], *, default_instance_type: str) -> PclusterParams:
        """Parse context values; the construct and the ParallelCluster model check the rest."""
        v = parse_fields(ctx, PCLUSTER)
        check_existing_vpc(v, ("subnet_id", "public_subnet_id", "availability_zone"))
        return PclusterParams(**{"instance_type": default_instance_type, **v})


@dataclass(frozen=True, kw_only=True)
class PcsParams(_Scaled, _WithImageId, _EveryStack):
    """Parameters of the AWS PCS ready stack (names as the context keys)."""

    DEFAULT_AMI_OS: ClassVar[str] = "al2023"

    slurm_version: str = key(
        "the Slurm version AWS PCS runs (23.11, 24.05, 24.11, 25.05, 25.11)", any_text, DEFAULT_SLURM_VERSION
    )
    pcs_size: PcsClusterSize = key(
        "SMALL | MEDIUM | LARGE: instances PCS manages (32, 512, 2048); a change replaces the cluster",
        choice(PcsClusterSize.parse),
        PcsClusterSize.SMALL,
    )
    login_instance_type: str | None = key(
        "the PCS login node's type",
        text(_TYPE_NAME, "an instance type name", "c7i.xlarge"),
        shown="c7i.xlarge (c7g.xlarge for Arm)",
    )

    @staticmethod
    def from_context(ctx: Mapping[str, Any], *, default_instance_type: str) -> PcsParams:
        """Parse context values; the construct checks what PCS accepts."""
        v = parse_fields(ctx, PCS)
        check_existing_vpc(v, ("subnet_id", "availability_zone"))
        check_given_with(v, "ami_os", "ami_id", "it describes ami_id", example="ami-...")
        return PcsParams(**{"instance_type": default_instance_type, **v})


#: The parameters each kind of ready stack reads from its context.
PARAMS: dict[str, type[ClusterParams] | type[PclusterParams] | type[PcsParams]] = {
    CLUSTER: ClusterParams,
    PCLUSTER: PclusterParams,
    PCS: PcsParams,
}


def _fields() -> tuple[Field, ...]:
    """Every context key, once, from the dataclasses that declare them: a key read by several kinds is one
    field of a base they share."""
    declared: dict[str, Field] = {}
    for kind, params in PARAMS.items():
        for f in dataclasses.fields(params):
            if "help" not in f.metadata:
                continue  # not a context key (the catalogue's record)
            row = declared.get(f.name) or Field(
                f.name, f.metadata["help"], f.metadata["parse"], _shown(f), frozenset()
            )
            declared[f.name] = dataclasses.replace(row, stacks=row.stacks | {kind})
    return tuple(declared.values())


#: Every context key the app reads, once; docs/context.md's table and the key checks read it.
FIELDS = _fields()
BY_KEY = {f.key: f for f in FIELDS}


def context_table() -> str:
    """docs/context.md's context table (Markdown), from :data:`FIELDS`."""

    def names(stacks: frozenset[str]) -> str:
        return "all" if stacks == ALL else ", ".join(KIND_NAMES[k] for k in KINDS if k in stacks)

    rows = ["| key | stacks | meaning | default |", "| --- | --- | --- | --- |"]
    rows += [f"| `{f.key}` | {names(f.stacks)} | {f.help} | {f.default} |" for f in FIELDS]
    return "\n".join(rows)


if __name__ == "__main__":
    print(context_table())
