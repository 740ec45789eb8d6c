"""The options of an EFA node, declared once for every construct that launches one.

:class:`EfaCluster`, :class:`EfaParallelCluster`, :class:`EfaPcsCluster` and :class:`EfaNodegroup` take
:class:`NodeOptions` as keywords (``**node: Unpack[NodeOptions]``); the three that build the nodes' launch
template, and :class:`EfaLaunchTemplate` itself, take :class:`NodeTemplateOptions`, which extends it. Each
option is documented here once, with its default; a construct's own docstring documents its own arguments
and where its default differs. Type checkers check the keywords at the call site (PEP 692), and
``@checked`` checks them at run time with the library's one-line error, as it checks the constructs' own.

aws-cdk-lib's shape: ``NodegroupOptions`` declared once, extended by ``NodegroupProps``
(``aws-eks-v2/lib/managed-nodegroup.ts``).
"""

# No `from __future__ import annotations` here: a TypedDict reads `Required[...]` from evaluated
# annotations, and string ones would make every key optional at run time (`__required_keys__`).
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from typing_extensions import Required, TypedDict

from ..core.capacity import Capacity
from ..core.catalogue import InstanceType
from ..core.catalogue import instance_type as lookup
from ..core.layout import Layout
from ..core.node_plan import NodePlan

__all__ = ["NodeOptions", "NodeTemplateOptions", "node_type", "plan_of"]


class NodeOptions(TypedDict, total=False):
    """What every orchestrator's EFA nodes take: the type, how the capacity is bought, the placement."""

    instance_type: Required[ec2.InstanceType | InstanceType]
    """An EFA-capable instance type, e.g. ``ec2.InstanceType("trn1.32xlarge")``, or the catalogue's record of
    one (``efa_constructs.instance_type("trn1.32xlarge")``, which the ready stacks pass: the catalogue is then
    read once). Required."""
    capacity: Capacity | None
    """A Capacity Reservation, reservation group or Capacity Block to launch into (:class:`Capacity`),
    for at least as many nodes as the construct may launch, of the nodes' type, in their zone (checked at
    synth where known). Default: On-Demand."""
    placement_group: ec2.IPlacementGroup | None
    """An existing placement group (e.g. the one a Capacity Reservation was made in); refused with a
    Capacity Block, which EC2 places. Default: a new cluster placement group On-Demand, none in a
    reservation or Capacity Block (:class:`EfaLaunchTemplate`: none in the template)."""


class NodeTemplateOptions(NodeOptions, total=False):
    """:class:`NodeOptions` and what the nodes' launch template is built from (:class:`EfaCluster`,
    :class:`EfaPcsCluster`, :class:`EfaNodegroup` and :class:`EfaLaunchTemplate`; ParallelCluster writes its
    compute nodes' template itself)."""

    nic_layout: Layout
    """The interfaces (:class:`Layout`), e.g. ``Layout.legacy(efa_count=4)``. Default:
    ``Layout.recommended()``: an ENA primary and ``efa-only`` on every EFA card, as many EFAs as the type's
    dedicated EFA cards (:class:`EfaPcsCluster`: ``Layout.legacy()``, the layout every PCS source shows)."""
    root_volume_gib: int
    """The encrypted gp3 root volume's size, at least the image's snapshot. Default: 200 (room for a DLAMI
    and checkpoints)."""
    role: iam.IRole | None
    """The nodes' instance role (the construct's ``grant_principal``). Default: one with what the
    construct's nodes need (each construct says what)."""


def node_type(node: NodeOptions) -> InstanceType:
    """The catalogue's record of the nodes' type: the one given, or looked up by the name given."""
    given = node["instance_type"]
    return given if isinstance(given, InstanceType) else lookup(given.to_string())


def plan_of(
    node: NodeTemplateOptions,
    *,
    default_layout: Layout | None = None,
    bridged_containers: bool = False,
    instance_metadata_tags: bool = True,
) -> NodePlan:
    """The node's plan from its options, the defaults applied here (and in :meth:`NodePlan.resolve`):
    `default_layout` where the construct's differs from ``Layout.recommended()``."""
    return NodePlan.resolve(
        node_type(node),
        nic_layout=node.get("nic_layout", default_layout),
        capacity=node.get("capacity"),
        root_volume_gib=node.get("root_volume_gib"),
        bridged_containers=bridged_containers,
        instance_metadata_tags=instance_metadata_tags,
    )
