"""The options of an EFA node, declared once for every construct that launches one.

:class:`EfaCluster`, :class:`EfaParallelCluster`, :class:`EfaPcsCluster` and :class:`EfaNodegroup` take
:class:`NodeOptions` as keywords (``**node: Unpack[NodeOptions]``); the three that build the nodes' launch
template, and :class:`EfaLaunchTemplate` itself, take :class:`NodeTemplateOptions`, which extends it. Each
option is documented here once, with its default; a construct's own docstring documents its own arguments
and where its default differs. Type checkers check the keywords at the call site (PEP 692), and
``@checked`` checks them at run time with the library's one-line error, as it checks the constructs' own.

The shared file systems an orchestrator makes are declared the same way, once: :class:`StorageOptions`,
taken by :class:`EfaSharedStorage` and, with the node options, by :class:`EfaPcsCluster`
(:class:`PcsClusterOptions`) and :class:`EfaParallelCluster` (:class:`ParallelClusterOptions`).

aws-cdk-lib's shape: ``NodegroupOptions`` declared once, extended by ``NodegroupProps``
(``aws-eks-v2/lib/managed-nodegroup.ts``).
"""

# No `from __future__ import annotations` here: a TypedDict reads `Required[...]` from evaluated
# annotations, and string ones would make every key optional at run time (`__required_keys__`).
from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from typing_extensions import Required, TypedDict

from ..core.capacity import Capacity
from ..core.catalogue import InstanceType
from ..core.catalogue import instance_type as lookup
from ..core.layout import Layout
from ..core.node_plan import NodePlan

__all__ = [
    "NodeOptions",
    "NodeTemplateOptions",
    "ParallelClusterOptions",
    "PcsClusterOptions",
    "StorageOptions",
    "node_type",
    "plan_of",
    "storage_of",
]


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


class StorageOptions(TypedDict, total=False):
    """The shared file systems a construct makes: EFS for /shared (always) and, when a size is given, FSx
    for Lustre for /fsx. Both encrypted and retained when the stack is deleted. Taken by
    :class:`EfaSharedStorage`, :class:`EfaPcsCluster` and :class:`EfaParallelCluster`; a file system made
    elsewhere is passed as ``lustre=`` (:class:`EfaLustreFileSystem`) instead, on every orchestrator."""

    efs_throughput_mibps: int | None
    """EFS provisioned throughput in MiB/s, 1-10240. Provisioned throughput is billed every hour whether used
    or not, and the file system is retained after the stack is deleted: synthesis warns when it is set.
    Default: none, Elastic throughput (billed by use)."""
    fsx_lustre_capacity_gib: int | None
    """The size of an FSx for Lustre file system (PERSISTENT_2, SSD) mounted at /fsx: 1200 or a multiple of
    2400; with EFA a multiple of the tier's step (``core.lustre.EFA_STEP_GIB``: 19200 at 250 MB/s/TiB).
    Not with ``lustre``. Default: none is made."""
    fsx_lustre_throughput: int
    """Its throughput tier, MB/s per TiB: 125, 250, 500 or 1000. Default: 250."""
    fsx_lustre_efa: bool
    """It serves EFA (``EfaEnabled``; Lustre 2.15, a metadata configuration, and a security group open to
    itself and the clients for all traffic, as FSx requires), and the EFA nodes reach it over EFA (the node
    software's ``lustre-client`` step: LNet over the interfaces AWS's client setup uses for the type, and the
    proof that Lustre rides EFA; a node where it does not fails). Set at creation only: switching it replaces
    the file system (``template-diff`` says so). Default: False."""
    fsx_lustre_gds: bool
    """Its EFA clients use GPUDirect Storage (P5, P5e, P5en, P6-B200, P6e-GB200; needs ``fsx_lustre_efa``):
    the ``lustre-client`` step loads the GDS driver and checks it with ``gdscheck``. Default: False."""
    storage_removal_policy: RemovalPolicy
    """What deleting the stack does to the file systems. Default: ``RemovalPolicy.RETAIN`` (data outlives
    the cluster; ``DESTROY`` opts out)."""


class PcsClusterOptions(NodeTemplateOptions, StorageOptions, total=False):
    """:class:`EfaPcsCluster`'s keywords beyond its own: the node's (:class:`NodeTemplateOptions`) and the
    storage's (:class:`StorageOptions`)."""


class ParallelClusterOptions(NodeOptions, StorageOptions, total=False):
    """:class:`EfaParallelCluster`'s keywords beyond its own: the node's (:class:`NodeOptions`) and the
    storage's (:class:`StorageOptions`)."""


def storage_of(options: Any) -> StorageOptions:
    """The storage options among a construct's keywords (:class:`StorageOptions`' keys)."""
    return {k: v for k, v in options.items() if k in StorageOptions.__annotations__}  # type: ignore[return-value]


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
