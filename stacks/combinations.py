"""How the ready stacks' context keys combine: keys that mean something only together, and the capacity keys
made into one :class:`~efa_constructs.core.Capacity`. Whether a value works for the cluster is decided by the
core and the constructs. Pure Python: no CDK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from efa_constructs.core import Capacity, EfaConfigError, PublicIp


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


def check_public_subnet(v: Mapping[str, Any], vpc_id: str | None) -> None:
    """Elastic IPs in an existing VPC come with its public subnet (no lookups at synth)."""
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


def capacity_of(
    reservation: str | None, block: str | None, instances: int | None, availability_zone: str | None
) -> Capacity:
    """The capacity keys as one :class:`Capacity` (the cluster checks it against itself); the keys that
    contradict each other, or need the zone, refused."""
    if reservation is not None and block is not None:
        raise EfaConfigError(
            "capacity_block",
            code="efa-cdk:capacity-block-and-reservation",
            value=block,
            why="a launch targets one reservation: capacity_reservation is set too",
            fix="pass only one of capacity_reservation and capacity_block",
        )
    if (reservation is not None or block is not None) and availability_zone is None:
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
