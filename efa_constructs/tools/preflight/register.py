"""The register of checks (:data:`RULES`): each check once, in the order preflight runs them, as cdk-nag
registers each rule in its pack; docs/deploy.md's table is :func:`rules_table`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from .checks import Preflight
from .model import ACCOUNT, FILE_SYSTEM, NODE_GROUP, QUALIFIER, Check, LustreAsk, NodeGroup


@dataclass(frozen=True)
class Rule:
    """One preflight check, registered once in :data:`RULES` (as cdk-nag registers each rule in its pack):
    its id (the name its lines carry), what it checks, what it runs for, the method that runs it (None
    when the rule does not apply to the group), what it asks AWS and when it fails (docs/deploy.md's
    table is :func:`rules_table`)."""

    id: str
    title: str
    applies_to: str
    check: Callable[..., Check | None]
    asks: str
    fails: str


#: Every check preflight runs, in the order it runs them (``efa-cdk preflight --list-checks``).
RULES = (
    Rule(
        "credentials",
        "the credentials work; the account and region they check",
        ACCOUNT,
        Preflight.identity,
        asks="sts:GetCallerIdentity",
        fails="no credentials, expired, no region",
    ),
    Rule(
        "bootstrap",
        "the CDK bootstrap stack is there and new enough for the templates",
        QUALIFIER,
        Preflight.bootstrap,
        asks=(
            "ssm:GetParameter `/cdk-bootstrap/<qualifier>/version` (the qualifier the templates were "
            "synthesized with; `hnb659fds` by default)"
        ),
        fails="not bootstrapped, or older than the templates' rule",
    ),
    Rule(
        "offered",
        "the subnet's zone offers the instance type",
        NODE_GROUP,
        Preflight.offered,
        asks="ec2:DescribeInstanceTypeOfferings",
        fails=(
            "the type is not offered in the zone (names the zones that offer it); WARN when the zone is "
            "chosen at deploy"
        ),
    ),
    Rule(
        "efa",
        "the type supports EFA with the interfaces and network cards the template asks",
        NODE_GROUP,
        Preflight.efa,
        asks="ec2:DescribeInstanceTypes",
        fails=(
            "EC2 says the type has no EFA, or fewer EFA interfaces or cards than the template asks (the "
            "offline catalogue drifted)"
        ),
    ),
    Rule(
        "quota",
        "the On-Demand vCPU quota of the type's class holds the nodes beside what runs",
        NODE_GROUP,
        Preflight.quota,
        asks="servicequotas:ListServiceQuotas, ec2:DescribeInstances",
        fails="the class's vCPU quota is below what runs plus the cluster (prints the increase request)",
    ),
    Rule(
        "capacity",
        "the reservation or Capacity Block is active, of the type, in the zone, with room",
        NODE_GROUP,
        Preflight.capacity,
        asks="ec2:DescribeCapacityReservations",
        fails=(
            "a reservation or Capacity Block of another type or zone, expired or cancelled, or with fewer "
            "instances than nodes; WARN while a block is scheduled"
        ),
    ),
    Rule(
        "placement",
        "where EC2 will place the reservation's instances, before launch",
        NODE_GROUP,
        Preflight.placement,
        asks="ec2:DescribeCapacityReservationTopology",
        fails=(
            "(information: the network nodes EC2 will place a reservation's instances under, before launch;"
            " WARN where the type or region reports none, or on any answer but a refusal of the call)"
        ),
    ),
    Rule(
        "key pair",
        "the named key pair exists",
        NODE_GROUP,
        Preflight.key_pair,
        asks="ec2:DescribeKeyPairs",
        fails="`-c key_pair` names none",
    ),
    Rule(
        "image",
        "the image is available and current, of the type's architecture, within the root volume",
        NODE_GROUP,
        Preflight.image,
        asks="ssm:GetParameter, ec2:DescribeImages",
        fails=(
            "the image or its SSM parameter does not exist, the image is not `available` (deregistered, "
            "failed), is of another architecture, or its root snapshot is larger than the root volume; WARN "
            "when it is deprecated"
        ),
    ),
    Rule(
        "elastic ips",
        "the Elastic IP quota holds the addresses the nodes get",
        NODE_GROUP,
        Preflight.elastic_ips,
        asks="servicequotas:ListServiceQuotas, ec2:DescribeAddresses",
        fails="the addresses in use plus the stack's are above the quota",
    ),
    Rule(
        "subnet",
        "an existing subnet has a free address for every interface",
        NODE_GROUP,
        Preflight.subnet,
        asks="ec2:DescribeSubnets",
        fails="an existing subnet has fewer free addresses than the nodes' interfaces take",
    ),
    Rule(
        "route out",
        "an existing subnet routes out to a NAT or internet gateway",
        NODE_GROUP,
        Preflight.route_out,
        asks="ec2:DescribeRouteTables",
        fails=(
            "(WARN) an existing subnet has no default route, a blackhole one (its target deleted), or one "
            "to a VPC peering connection (no edge-to-edge routing): the nodes then need VPC endpoints and "
            "an image with EFA. A route to an instance (a NAT instance) passes, with a note that it must "
            "forward"
        ),
    ),
    Rule(
        "lustre",
        "the region's FSx for Lustre (PERSISTENT_2) quotas hold the file system beside the ones there",
        FILE_SYSTEM,
        Preflight.lustre,
        asks="servicequotas:ListServiceQuotas (fsx), fsx:DescribeFileSystems",
        fails=(
            "the PERSISTENT_2 storage in the region plus the file system's is above its quota, or one more "
            "file system is (prints the increase request); its size against the EFA steps is refused at synth"
        ),
    ),
)


def rules_table() -> str:
    """docs/deploy.md's table of the checks (Markdown), from :data:`RULES`."""
    rows = ["| check | what it asks AWS | fails when |", "| --- | --- | --- |"]
    return "\n".join(rows + [f"| {r.id} | {r.asks} | {r.fails} |" for r in RULES])


def rules_text() -> str:
    """The registered checks, one per line (``--list-checks``)."""
    return "\n".join(f"{r.id:<12} {r.applies_to:<20} {r.title}" for r in RULES)


def run(
    preflight: Preflight,
    groups: list[NodeGroup],
    bootstrap: Mapping[str, int],
    file_systems: Sequence[LustreAsk] = (),
) -> list[Check]:
    """Every check of :data:`RULES`, in order, against `preflight`'s account: `bootstrap` is the version each
    bootstrap parameter must hold (one per qualifier); `file_systems`, the FSx for Lustre file systems the
    stacks make."""
    found: list[Check | None] = []
    for rule in RULES:
        if rule.applies_to == ACCOUNT:
            found.append(preflight.guard(rule.id, lambda r=rule: r.check(preflight)))  # type: ignore[misc]
        elif rule.applies_to == QUALIFIER:
            found += [
                preflight.guard(rule.id, lambda r=rule, p=p, v=v: r.check(preflight, v, p))  # type: ignore[misc]
                for p, v in bootstrap.items()
            ]
    found += _each(
        preflight, NODE_GROUP, [(f"{g.stack}/{g.name} ({g.count} x {g.instance_type})", g) for g in groups]
    )
    found += _each(
        preflight,
        FILE_SYSTEM,
        [(f"{f.stack}/{f.name} ({f.capacity_gib} GiB{', EFA' if f.efa else ''})", f) for f in file_systems],
    )
    return [c for c in found if c is not None]


def _each(preflight: Preflight, kind: str, items: list[tuple[str, Any]]) -> list[Check | None]:
    """Every rule of `kind` for each (where, item), each line named ``<rule> [<where>]``."""
    found: list[Check | None] = []
    for where, item in items:
        for rule in (r for r in RULES if r.applies_to == kind):
            preflight.progress(f"checking {rule.id} of {where}")
            check = partial(rule.check, preflight, item)
            found.append(preflight.guard(f"{rule.id} [{where}]", check))
    return found
