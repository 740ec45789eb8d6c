"""Resources the context names by id (an existing VPC and subnets, key pair, placement group),
imported the same way by every ready stack. Imports add nothing to the template."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct


def existing_network(
    scope: Construct, *, vpc_id: str, availability_zone: str, subnet_id: str, public_subnet_id: str | None
) -> tuple[ec2.IVpc, ec2.ISubnet, ec2.ISubnet | None]:
    """The VPC, the nodes' subnet and (if named) the public subnet, all in `availability_zone`."""
    vpc = ec2.Vpc.from_vpc_attributes(scope, "Vpc", vpc_id=vpc_id, availability_zones=[availability_zone])
    subnet = ec2.Subnet.from_subnet_attributes(
        scope, "Subnet", subnet_id=subnet_id, availability_zone=availability_zone
    )
    public = None
    if public_subnet_id:
        public = ec2.Subnet.from_subnet_attributes(
            scope, "PublicSubnet", subnet_id=public_subnet_id, availability_zone=availability_zone
        )
    return vpc, subnet, public


def existing_key_pair(scope: Construct, name: str | None) -> ec2.IKeyPair | None:
    """The named key pair, or None."""
    return ec2.KeyPair.from_key_pair_name(scope, "KeyPair", name) if name else None


def existing_placement_group(scope: Construct, name: str | None) -> ec2.IPlacementGroup | None:
    """The named placement group, or None."""
    return ec2.PlacementGroup.from_placement_group_name(scope, "PlacementGroup", name) if name else None
