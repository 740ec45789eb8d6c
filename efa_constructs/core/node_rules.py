"""The rules every orchestrator's EFA nodes obey, each written once, in one register run by the node base.

:class:`EfaCluster`, :class:`EfaPcsCluster`, :class:`EfaParallelCluster` and :class:`EfaNodegroup` describe
their nodes as one :class:`NodeRequest` and the node base (``cdk/_node_base.EfaNodeBase``) runs
:data:`NODE_RULES` over it, so a rule about the node cannot be obeyed by one orchestrator and skipped by
another. Each orchestrator keeps only the rules of its own inputs (PCS's sizes and Slurm versions, EKS's AMI
types, ParallelCluster's head node...), next to them.

A value that is a CDK token (a CloudFormation parameter) reads as ``None`` here, "known at deploy": it is
checked by CloudFormation or EC2 then, never compared and never printed (aws-cdk-lib's ``withResolved``).

Each rule is a row (:class:`NodeRule`): its id, what it checks, the orchestrators it binds, the function, and
an example that breaks it, from which ``tests/test_contract.py`` puts the rule to every orchestrator in its
scope. Pure Python, no CDK.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .capacity import Capacity
from .catalogue import InstanceType
from .errors import EfaConfigError
from .lustre import LustreSpec, check_mount
from .options import DEFAULT_ROOT_VOLUME_GIB

#: The orchestrators that build EFA nodes on the node base, by class name.
ORCHESTRATORS = ("EfaCluster", "EfaPcsCluster", "EfaParallelCluster", "EfaNodegroup")
#: Those that take the nodes' launch template options (``NodeTemplateOptions``: the root volume, the
#: layout, the role); ParallelCluster writes its compute nodes' template itself.
TEMPLATE_ORCHESTRATORS = ("EfaCluster", "EfaPcsCluster", "EfaNodegroup")

#: gp3 sizes (EBS user guide, "Amazon EBS volume types"); DLAMIs need more than 8 GiB.
ROOT_VOLUME_GIB = (8, 16384)


@dataclass(frozen=True)
class SubnetFact:
    """One subnet the nodes use: the orchestrator's `keyword` for it, its construct `path`, the path of the
    VPC it was made under in this app (`owner`; None: imported, not known at synth) and of the VPC the nodes
    are in (`vpc`; None: imported)."""

    keyword: str
    path: str
    owner: str | None
    vpc: str | None


@dataclass(frozen=True)
class LustreUse:
    """The FSx for Lustre file system the nodes mount: what it is (`spec`), its zone (None: known at deploy),
    and whether the nodes run the node software that mounts it."""

    spec: LustreSpec
    zone: str | None
    node_software: bool = True


@dataclass(frozen=True)
class NodeRequest:
    """What one orchestrator asks of its EFA nodes, as plain values (None: known at deploy).

    Attributes:
        orchestrator: its class name (one of :data:`ORCHESTRATORS`).
        instance_type, capacity, root_volume_gib: the node's plan.
        count: the most nodes it launches; `count_name` its keyword for it.
        min_count: the nodes it keeps running (0: none; the count itself where the orchestrator has no
            such option, `min_name` None).
        zone: the nodes' Availability Zone. region: the stack's.
        subnets: the subnets the nodes use. lustre: the file system they mount, or None.
    """

    orchestrator: str
    instance_type: InstanceType
    count: int | None
    count_name: str
    capacity: Capacity = dataclasses.field(default_factory=Capacity.on_demand)
    root_volume_gib: int | None = DEFAULT_ROOT_VOLUME_GIB
    min_count: int | None = 0
    min_name: str | None = None
    zone: str | None = None
    region: str | None = None
    subnets: tuple[SubnetFact, ...] = ()
    lustre: LustreUse | None = None


class _AtDeploy:
    """A value a refusal cannot show: a CDK token, known at deploy."""

    def __repr__(self) -> str:
        return "(known at deploy)"


#: How a refusal shows a value known only at deploy (a token's encoding is never printed).
AT_DEPLOY = _AtDeploy()


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refused_count(lo: int | None, hi: int | None) -> str | None:
    """Which count is wrong ("min" or "max"; crossed counts: "max"), None when both are right or unknown."""
    if lo is not None and (not _whole(lo) or lo < 0):
        return "min"
    if hi is not None and (not _whole(hi) or hi < 1 or (lo is not None and lo > hi)):
        return "max"
    return None


def check_counts(r: NodeRequest) -> None:
    """Nodes are counted in whole numbers: at least one at most, none below zero kept running, and no more
    kept running than at most. A count known at deploy is checked there (the service refuses it)."""
    lo, hi = r.min_count, r.count
    wrong = _refused_count(lo, hi)
    if wrong is None:
        return
    value: object = hi
    if r.min_name is None:
        what, why = r.count_name, f"{r.orchestrator} needs at least one node"
        fix = "a whole number >= 1 (2 or more to use EFA between nodes)"
    else:
        what, value = (r.min_name, lo) if wrong == "min" else (r.count_name, hi)
        low, high = (AT_DEPLOY if v is None else v for v in (lo, hi))
        why = (
            f"{r.orchestrator} needs 0 <= {r.min_name} <= {r.count_name} and {r.count_name} >= 1 "
            f"({r.min_name} is {low}, {r.count_name} {high})"
        )
        fix = f"the most nodes (>= 1), and {r.min_name} to those kept running (0 to {r.count_name})"
    raise EfaConfigError(
        what, code="efa-cdk:node-counts", value=value, why=why, fix=f"set {r.count_name} to {fix}"
    )


def check_capacity_fits(r: NodeRequest) -> None:
    """A targeted reservation or Capacity Block launches only its type, in its zone, up to its count (EC2
    user guide, "Capacity Reservations": instance matching)."""
    r.capacity.check(
        instance_type=r.instance_type.name,
        availability_zone=r.zone,
        node_count=r.count if r.count is not None else 0,
        count_name=r.count_name,
    )


def check_region(r: NodeRequest) -> None:
    """The nodes' zone, the capacity's declared zone and a reservation group's ARN are in the stack's region
    (an Availability Zone's name starts with its region's: us-east-1a, us-east-1-bos-1a)."""
    if r.region is None:
        return
    for what, zone in (("availability_zone", r.zone), ("capacity", r.capacity.availability_zone)):
        if zone and not zone.startswith((r.region, "dummy")):  # dummy1a: CDK's stand-in before a lookup
            raise EfaConfigError(
                what,
                code="efa-cdk:zone-outside-region",
                value=zone,
                why=f"the stack deploys to {r.region}, and this zone is not in it",
                fix=f"use a zone of {r.region}, or deploy the stack to the zone's region (env=...)",
            )
    target = r.capacity.target or ""
    group_region = target.split(":")[3] if target.startswith("arn:") else r.region
    if group_region != r.region:
        raise EfaConfigError(
            "capacity_reservation",
            code="efa-cdk:reservation-group-other-region",
            value=target,
            why=f"the reservation group is in {group_region}, the stack deploys to {r.region}",
            fix=f"use a reservation group of {r.region}, or deploy the stack to {group_region}",
        )


def check_root_volume(r: NodeRequest) -> None:
    """The root volume is a gp3 size that holds an image."""
    check_root_volume_gib(r.root_volume_gib)


def check_root_volume_gib(size: int | None) -> None:
    """:func:`check_root_volume` for one value (``EfaLaunchTemplate`` runs it on its own too)."""
    lo, hi = ROOT_VOLUME_GIB
    if size is not None and (not _whole(size) or not lo <= size <= hi):
        raise EfaConfigError(
            "root_volume_gib",
            code="efa-cdk:root-volume-range",
            value=size,
            why=f"a gp3 volume is 1-{hi} GiB and DLAMIs need more than {lo} GiB",
            fix=f"choose a size between {lo} and {hi} (default 200)",
        )


def check_subnets(r: NodeRequest) -> None:
    """An instance's interfaces and its security groups are in one VPC (EC2 refuses the launch). A subnet
    or VPC imported into the app: its VPC is not known at synth."""
    for s in r.subnets:
        if s.owner is not None and s.vpc is not None and s.owner != s.vpc:
            raise EfaConfigError(
                s.keyword,
                code="efa-cdk:subnet-of-another-vpc",
                value=s.path,
                why=f"it belongs to the VPC {s.owner}, the cluster is in {s.vpc}; an instance's interfaces "
                "and its security group must be in one VPC",
                fix=f"pass a subnet of {s.vpc} (vpc.private_subnets[0]), or that subnet's VPC as vpc=",
            )


def check_lustre_clients(r: NodeRequest) -> None:
    """The nodes as the file system's clients: the node software mounts it; over EFA, FSx serves clients in
    its zone only, of the types it names, up to its EFA connections (FSx for Lustre user guide,
    efa-file-systems and configure-efa-clients; :meth:`LustreSpec.check_clients`)."""
    if r.lustre is None:
        return
    check_mount(
        r.lustre.spec,
        node_software=r.lustre.node_software,
        client_zone=r.zone,
        file_system_zone=r.lustre.zone,
    )
    r.lustre.spec.check_clients(r.instance_type, r.count if r.count is not None else 0)


@dataclass(frozen=True)
class NodeRule:
    """One rule of the register.

    Attributes:
        id: its stable id (``efa-cdk:...``); `ids` every id its function raises, `id` among them.
        title: what it checks, in a line.
        check: the function, over a :class:`NodeRequest`.
        example: fields of a :class:`NodeRequest` that break it (an instance type by name), with which the
            contract suite puts it to every orchestrator in `scope`.
        scope: the orchestrators it binds (those that take its inputs).
        former: the id an orchestrator's refusal had before the register, which it keeps.
    """

    id: str
    title: str
    check: Callable[[NodeRequest], None]
    example: Mapping[str, object]
    ids: tuple[str, ...] = ()
    scope: tuple[str, ...] = ORCHESTRATORS
    former: Mapping[str, str] = dataclasses.field(default_factory=dict)


_RESERVATION = "cr-0123456789abcdef0"

#: The node pack: every rule about the node, in the order they run (the first refusal is the one reported).
NODE_RULES: tuple[NodeRule, ...] = (
    NodeRule(
        "efa-cdk:node-counts",
        "whole counts: at least one node at most, 0 <= kept running <= at most",
        check_counts,
        {"count": 0},
        former={
            "EfaCluster": "efa-cdk:node-count-zero",
            "EfaPcsCluster": "efa-cdk:pcs-counts",
            "EfaParallelCluster": "efa-cdk:pcluster-counts",
            "EfaNodegroup": "efa-cdk:eks-sizes",
        },
    ),
    NodeRule(
        "efa-cdk:subnet-of-another-vpc",
        "the nodes' subnets are of the nodes' VPC",
        check_subnets,
        {"subnets": "of another VPC"},
    ),
    NodeRule(
        "efa-cdk:zone-outside-region",
        "the nodes' zone, the capacity's zone and a reservation group are in the stack's region",
        check_region,
        {
            "region": "us-east-1",
            "capacity": Capacity.reservation(_RESERVATION, availability_zone="eu-west-1a"),
        },
        ids=("efa-cdk:zone-outside-region", "efa-cdk:reservation-group-other-region"),
    ),
    NodeRule(
        "efa-cdk:capacity-other-instance-type",
        "a reservation or Capacity Block holds the nodes' type, in their zone, for every node",
        check_capacity_fits,
        {"capacity": Capacity.reservation(_RESERVATION, instance_type="p5.48xlarge")},
        ids=(
            "efa-cdk:capacity-other-instance-type",
            "efa-cdk:capacity-other-zone",
            "efa-cdk:capacity-too-small",
        ),
    ),
    NodeRule(
        "efa-cdk:root-volume-range",
        "the root volume is a gp3 size that holds an image",
        check_root_volume,
        {"root_volume_gib": 4},
        scope=TEMPLATE_ORCHESTRATORS,
    ),
    NodeRule(
        "efa-cdk:fsx-efa-client-type",
        "FSx for Lustre serves the nodes: node software, its zone, client types and EFA connections",
        check_lustre_clients,
        {"instance_type": "trn2.48xlarge", "lustre": "over EFA"},
        ids=(
            "efa-cdk:fsx-efa-client-type",
            "efa-cdk:fsx-gds-client-type",
            "efa-cdk:fsx-efa-connections",
            "efa-cdk:fsx-efa-zone",
            "efa-cdk:lustre-needs-node-software",
        ),
    ),
)


def node_rule(id_: str) -> NodeRule:
    """The register's rule of that id."""
    return next(rule for rule in NODE_RULES if rule.id == id_)


def run_node_rules(request: NodeRequest, rules: tuple[NodeRule, ...] = NODE_RULES) -> None:
    """Run every rule that binds the request's orchestrator; raise the first refusal, under the id that
    orchestrator has always given it (:attr:`NodeRule.former`)."""
    for rule in rules:
        if request.orchestrator not in rule.scope:
            continue
        try:
            rule.check(request)
        except EfaConfigError as err:
            former = rule.former.get(request.orchestrator)
            if former is not None and err.code == rule.id:
                err.code = former
            raise


def rules_table() -> str:
    """docs' table of the register: id, what it checks, the orchestrators it binds."""
    rows = ["| id | what it checks | orchestrators |", "| --- | --- | --- |"]
    for rule in NODE_RULES:
        ids = ", ".join(f"`{i}`" for i in (rule.ids or (rule.id,)))
        kept = "; ".join(f"{o}: `{i}`" for o, i in rule.former.items())
        who = "all four" if rule.scope == ORCHESTRATORS else ", ".join(rule.scope)
        rows.append(
            f"| {ids}{f' (raised as {kept}, their ids before the register)' if kept else ''} | "
            f"{rule.title} | {who} |"
        )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # docs/rules.md's table: python -m efa_constructs.core.node_rules
    print(rules_table(), end="")
