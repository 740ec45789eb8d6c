"""The base every ready stack extends: what the three kinds of ready stack do the same way."""

from __future__ import annotations

from typing import Any, Protocol

from aws_cdk import CfnOutput, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from efa_constructs.cdk import NodeOptions, StorageOptions
from efa_constructs.cdk.options import storage_of
from efa_constructs.core import Capacity, CapacityKind, InstanceType

from .existing import availability_zone_parameter, existing_placement_group


class Params(Protocol):
    """What the base reads of a ready stack's parameters (:mod:`stacks.params`)."""

    @property
    def instance_type(self) -> str: ...

    @property
    def availability_zone(self) -> str | None: ...

    @property
    def region(self) -> str | None: ...

    @property
    def capacity(self) -> Capacity: ...

    @property
    def placement_group(self) -> str | None: ...

    @property
    def catalogue_entry(self) -> InstanceType | None: ...


class ReadyStackBase(Stack):
    """A ready stack: deployed to the region of the zone its context names (else environment-agnostic),
    its parameters kept as ``params``.

    Args:
        params: the stack's validated parameters (:mod:`stacks.params`).
    """

    #: What the stack makes, for its description (``{name}`` and the params' fields are filled in).
    DESCRIBES = ""

    def __init__(self, scope: Construct, id_: str, *, params: Params, **kwargs: Any) -> None:
        if params.region and "env" not in kwargs:
            kwargs["env"] = Environment(region=params.region)
        super().__init__(scope, id_, **kwargs)
        self.params = params

    @classmethod
    def describe(cls, name: str, params: Params) -> str:
        """The stack's CloudFormation description."""
        return f"efa-cdk {name}: " + cls.DESCRIBES.format(**vars(params))

    def zone(self, *, chosen_at_deploy: bool = True) -> str | None:
        """The nodes' zone: the one the context names, else (`chosen_at_deploy`) an ``AvailabilityZone``
        parameter `cdk deploy` asks for, else None (an existing subnet decides)."""
        if self.params.availability_zone or not chosen_at_deploy:
            return self.params.availability_zone
        return availability_zone_parameter(self, self.params.instance_type)

    def node_options(self) -> NodeOptions:
        """The node options every orchestrator takes (:class:`~efa_constructs.cdk.NodeOptions`), read from
        the context in one place: the type (the catalogue's record when the parameters looked it up), the
        capacity, and an existing placement group by name."""
        p = self.params
        return NodeOptions(
            instance_type=p.catalogue_entry or ec2.InstanceType(p.instance_type),
            capacity=p.capacity,
            placement_group=existing_placement_group(self, p.placement_group),
        )

    def storage_options(self) -> StorageOptions:
        """The storage options of the stacks that make storage (:class:`~efa_constructs.cdk.StorageOptions`):
        the context keys of the same names (docs/context.md)."""
        return storage_of(vars(self.params))

    def capacity_block_output(self) -> None:
        """In a Capacity Block, its id as the ``CapacityBlockId`` output: ``efa-cdk status`` asks EC2 when
        it ends."""
        if self.params.capacity.kind is CapacityKind.CAPACITY_BLOCK:
            CfnOutput(
                self,
                "CapacityBlockId",
                value=str(self.params.capacity.target),
                description="The Capacity Block the nodes run in (efa-cdk status shows when it ends)",
            )
