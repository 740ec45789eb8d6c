"""One EFA node, resolved once: what every orchestrator asks of a node, as an immutable plan.

The EC2 cluster, ParallelCluster, AWS PCS and EKS paths all launch the same kind of node: an EFA
instance type with one interface layout, a root volume, a way to buy capacity, an instance-metadata
hop limit and (or not) its tags in the metadata. :meth:`NodePlan.resolve` reads the catalogue once,
lays the interfaces out once and checks what can be checked without CDK; the constructs build from
the plan and never resolve those values again.
"""

from __future__ import annotations

from dataclasses import dataclass

from .capacity import Capacity
from .catalogue import InstanceType
from .catalogue import instance_type as lookup
from .layout import Layout, NicLayout
from .options import DEFAULT_ROOT_VOLUME_GIB


@dataclass(frozen=True)
class NodePlan:
    """An EFA node's resolved settings (build one with :meth:`resolve`).

    Attributes:
        instance_type: the catalogue record of the type (cards, EFA limits, accelerator, architecture).
        layout: the node's network interfaces.
        capacity: On-Demand, a Capacity Reservation (or group) or a Capacity Block.
        root_volume_gib: the encrypted gp3 root volume's size (a number, or a CDK token).
        bridged_containers: IMDS hop limit 2 (containers on a bridge network reach the metadata) or 1.
        instance_metadata_tags: the instance's tags readable from its metadata (efa-cdk's node software
            reads them; EKS's tag keys hold ``/``, which fails a launch with them on).
    """

    instance_type: InstanceType
    layout: NicLayout
    capacity: Capacity
    root_volume_gib: int = DEFAULT_ROOT_VOLUME_GIB
    bridged_containers: bool = False
    instance_metadata_tags: bool = True

    @staticmethod
    def resolve(
        instance_type: str | InstanceType,
        *,
        nic_layout: Layout | None = None,
        capacity: Capacity | None = None,
        root_volume_gib: int | None = None,
        bridged_containers: bool = False,
        instance_metadata_tags: bool = True,
    ) -> NodePlan:
        """The plan for one node: the type looked up (when given by name), the layout laid out for it.

        Args:
            instance_type: a name (``"trn1.32xlarge"``) or a catalogue record.
            nic_layout: Default: ``Layout.recommended()``.
            capacity: Default: On-Demand.
            root_volume_gib: Default: 200 (``DEFAULT_ROOT_VOLUME_GIB``).
            bridged_containers, instance_metadata_tags: as the attributes.

        Raises:
            EfaConfigError: the type is unknown or not EFA-capable, or the layout cannot be built on it.
        """
        it = lookup(instance_type) if isinstance(instance_type, str) else instance_type
        return NodePlan(
            instance_type=it,
            layout=(nic_layout or Layout.recommended()).resolve(it),
            capacity=capacity or Capacity.on_demand(),
            root_volume_gib=DEFAULT_ROOT_VOLUME_GIB if root_volume_gib is None else root_volume_gib,
            bridged_containers=bridged_containers,
            instance_metadata_tags=instance_metadata_tags,
        )

    @property
    def hop_limit(self) -> int:
        """IMDS's PUT response hop limit: 1 reaches the node and host-networked containers; a container
        on a bridge network is one hop further."""
        return 2 if self.bridged_containers else 1


class PlannedNodes:
    """What was built from a :class:`NodePlan` shows the plan's type, layout and capacity as its own
    attributes, read from the plan (a mixin of :class:`EfaCluster` and :class:`EfaLaunchTemplate`)."""

    plan: NodePlan

    @property
    def instance_type(self) -> InstanceType:
        """The nodes' instance type, as the catalogue knows it (the plan's)."""
        return self.plan.instance_type

    @property
    def layout(self) -> NicLayout:
        """Every node's network interfaces (the plan's)."""
        return self.plan.layout

    @property
    def capacity(self) -> Capacity:
        """Where the nodes launch: On-Demand, a reservation or a Capacity Block (the plan's)."""
        return self.plan.capacity
