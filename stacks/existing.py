"""Resources the context names by id (an existing VPC and subnets, key pair, placement group),
imported the same way by every ready stack (imports add nothing to the template), and the
deploy-time parameters a ready stack asks for when the context leaves a choice to the user."""

from __future__ import annotations

from aws_cdk import Annotations, CfnParameter, Stack
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


def availability_zone_parameter(scope: Construct, instance_type: str) -> str:
    """A CloudFormation parameter ``AvailabilityZone`` with no default: synthesis stays offline and
    `cdk deploy` stops before creating anything until a zone is chosen (so a cluster never lands in
    a zone nobody picked, where the type may not be offered). Returns its value (a token)."""
    find = (
        "aws ec2 describe-instance-type-offerings --location-type availability-zone "
        f"--filters Name=instance-type,Values={instance_type} --query 'InstanceTypeOfferings[].Location'"
    )
    param = CfnParameter(
        scope,
        "AvailabilityZone",
        type="AWS::EC2::AvailabilityZone::Name",
        description=f"The cluster's one Availability Zone; zones offering {instance_type}: {find}",
    )
    Annotations.of(scope).add_warning_v2(
        "efa-cdk:availability-zone",
        f"No availability_zone: `cdk deploy` will stop until you choose one that offers {instance_type} "
        f"(find them: {find}). Then: cdk deploy {Stack.of(scope).stack_name} --parameters "
        f"AvailabilityZone=<zone>, or -c {Stack.of(scope).stack_name}:availability_zone=<zone>.",
    )
    return param.value_as_string


def image_id_parameter(
    scope: Construct,
    instance_type: str,
    *,
    description: str | None = None,
    why: str = "has no default image (see EfaMachineImage.default_for)",
) -> str:
    """A CloudFormation parameter ``ImageId`` with no default, for nodes no AWS image we can name runs
    (p3dn; AWS PCS nodes): `cdk deploy` stops until the user names an image. Returns its value (a token)."""
    param = CfnParameter(
        scope,
        "ImageId",
        type="AWS::EC2::Image::Id",
        description=description
        or f"An AMI for {instance_type} with NVIDIA's proprietary driver (no current AWS DLAMI "
        "supports it); its OS is given by -c ami_os (default ubuntu)",
    )
    Annotations.of(scope).add_warning_v2(
        "efa-cdk:image-parameter",
        f"{instance_type} {why}: `cdk deploy` will stop until you name one: --parameters ImageId=ami-..., or "
        f"-c {Stack.of(scope).stack_name}:ami_id=ami-... (with ami_os=ubuntu|al2023).",
    )
    return param.value_as_string
