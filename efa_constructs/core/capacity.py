"""Where the nodes' capacity comes from: On-Demand, a Capacity Reservation, or a Capacity Block for ML.

Pure Python: :class:`Capacity` knows the launch-template fields it needs and checks itself against
the cluster (type, AZ, count) with what the user declared about the reservation (no AWS lookups at
synth). Placement rules this library follows:

* On-Demand: the cluster gets its own cluster placement group (the default everywhere).
* A Capacity Reservation (by id, or a reservation group): no placement group is created. A
  reservation made in a cluster placement group only serves launches into THAT group, so pass it
  (``placement_group=``); a reservation made without one is used without one.
* A Capacity Block for ML: market type ``capacity-block`` plus the reservation id. EC2 places a
  Capacity Block's instances itself, so no placement group is created or accepted.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from .errors import EfaConfigError
from .options import check_availability_zone

_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")
_GROUP_ARN = re.compile(r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]+$")


class CapacityKind(enum.Enum):
    """The purchasing option behind the nodes."""

    ON_DEMAND = "on-demand"
    RESERVATION = "reservation"  # On-Demand Capacity Reservation, by id
    RESERVATION_GROUP = "reservation-group"  # a Capacity Reservation resource group, by ARN
    CAPACITY_BLOCK = "capacity-block"  # Capacity Block for ML, by reservation id


def _type_name(instance_type: object) -> str | None:
    """The instance type a reservation is declared for, by its name: a string as given, aws-cdk-lib's
    ``ec2.InstanceType`` (what the constructs' own ``instance_type`` takes) by its ``to_string()``."""
    to_string = getattr(instance_type, "to_string", None)
    return str(to_string()) if callable(to_string) else instance_type  # type: ignore[return-value]


@dataclass(frozen=True)
class Capacity:
    """The capacity the nodes launch into, with what you know about it.

    Build with :meth:`on_demand`, :meth:`reservation`, :meth:`reservation_group` or
    :meth:`capacity_block`. ``instance_type``, ``availability_zone`` and ``instance_count`` are
    what you declare about the reservation (from the console or ``describe-capacity-reservations``);
    given, they are checked against the cluster at synth.
    """

    kind: CapacityKind = CapacityKind.ON_DEMAND
    target: str | None = None
    instance_type: str | None = None
    availability_zone: str | None = None
    instance_count: int | None = None

    @staticmethod
    def on_demand() -> Capacity:
        """Plain On-Demand capacity (default)."""
        return Capacity()

    @staticmethod
    def reservation(
        reservation_id: str,
        *,
        instance_type: str | None = None,
        availability_zone: str | None = None,
        instance_count: int | None = None,
    ) -> Capacity:
        """A targeted On-Demand Capacity Reservation (``cr-...``); launches fail rather than spill over."""
        _check_id(reservation_id, "capacity_reservation")
        _check_declared(availability_zone, instance_count)
        return Capacity(
            CapacityKind.RESERVATION,
            reservation_id,
            _type_name(instance_type),
            availability_zone,
            instance_count,
        )

    @staticmethod
    def reservation_group(group_arn: str) -> Capacity:
        """Any matching reservation in a Capacity Reservation resource group (ARN)."""
        if not _GROUP_ARN.match(group_arn):
            raise EfaConfigError(
                "capacity_reservation",
                code="efa-cdk:capacity-group-arn",
                value=group_arn,
                why="not a resource-group ARN",
                fix="pass arn:aws:resource-groups:<region>:<account>:group/<name>",
            )
        return Capacity(CapacityKind.RESERVATION_GROUP, group_arn)

    @staticmethod
    def capacity_block(
        reservation_id: str,
        *,
        instance_type: str | None = None,
        availability_zone: str | None = None,
        instance_count: int | None = None,
    ) -> Capacity:
        """A Capacity Block for ML, by its reservation id (``cr-...``)."""
        _check_id(reservation_id, "capacity_block")
        _check_declared(availability_zone, instance_count)
        return Capacity(
            CapacityKind.CAPACITY_BLOCK,
            reservation_id,
            _type_name(instance_type),
            availability_zone,
            instance_count,
        )

    @property
    def creates_placement_group(self) -> bool:
        """True when the cluster should make its own cluster placement group (On-Demand only)."""
        return self.kind is CapacityKind.ON_DEMAND

    @property
    def accepts_placement_group(self) -> bool:
        """False for Capacity Blocks: EC2 places their instances."""
        return self.kind is not CapacityKind.CAPACITY_BLOCK

    def launch_template_data(self) -> dict[str, Any]:
        """The ``LaunchTemplateData`` fields for this capacity (empty for On-Demand)."""
        if self.kind is CapacityKind.ON_DEMAND:
            return {}
        key = (
            "CapacityReservationResourceGroupArn"
            if self.kind is CapacityKind.RESERVATION_GROUP
            else "CapacityReservationId"
        )
        data: dict[str, Any] = {
            "CapacityReservationSpecification": {"CapacityReservationTarget": {key: self.target}}
        }
        if self.kind is CapacityKind.CAPACITY_BLOCK:
            data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        return data

    def check(
        self,
        *,
        instance_type: str,
        availability_zone: str | None,
        node_count: int,
        count_name: str = "node_count",
    ) -> None:
        """Refuse a cluster that cannot launch into this capacity (`count_name`: the orchestrator's own
        keyword for the most nodes it launches, named in the refusal)."""
        what = "capacity_block" if self.kind is CapacityKind.CAPACITY_BLOCK else "capacity_reservation"
        if self.instance_type is not None and self.instance_type != instance_type:
            raise EfaConfigError(
                what,
                code="efa-cdk:capacity-other-instance-type",
                value=self.target,
                why=f"it reserves {self.instance_type}, the cluster launches {instance_type}",
                fix=f"set instance_type={self.instance_type} or target a reservation of {instance_type}",
            )
        if self.availability_zone and availability_zone and self.availability_zone != availability_zone:
            raise EfaConfigError(
                what,
                code="efa-cdk:capacity-other-zone",
                value=self.target,
                why=f"it is in {self.availability_zone}, the nodes' subnet is in {availability_zone}",
                fix=f"put the nodes' subnet in {self.availability_zone} (availability_zone=...)",
            )
        if self.instance_count is not None and node_count > self.instance_count:
            raise EfaConfigError(
                count_name,
                code="efa-cdk:capacity-too-small",
                value=node_count,
                why=f"{self.target} holds {self.instance_count} instances; the rest could not launch",
                fix=f"use {count_name} <= {self.instance_count}",
            )


def _check_id(value: str, what: str) -> None:
    if not _RESERVATION_ID.match(value):
        raise EfaConfigError(
            what,
            code="efa-cdk:capacity-reservation-id",
            value=value,
            why="not a Capacity Reservation id",
            fix="pass cr- followed by 17 hex digits",
        )


def _check_declared(availability_zone: str | None, instance_count: int | None) -> None:
    """What a user declares of a reservation: a zone's name, and at least one instance."""
    if availability_zone is not None:
        check_availability_zone(availability_zone)
    if instance_count is not None and (isinstance(instance_count, bool) or instance_count < 1):
        raise EfaConfigError(
            "instance_count",
            code="efa-cdk:capacity-instance-count",
            value=instance_count,
            why="a reservation or Capacity Block holds at least one instance",
            fix="pass the number it holds (aws ec2 describe-capacity-reservations), or leave it unset",
        )
