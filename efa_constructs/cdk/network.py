"""`EfaNetwork`: a VPC for an EFA cluster, one AZ, public subnet + private subnet with NAT."""

from __future__ import annotations

import ipaddress

from aws_cdk import Annotations, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from ..core.errors import EfaConfigError
from ..core.options import check_availability_zone
from .acknowledgements import explain_cdk_lambda_lint
from .arguments import checked


def known_cidr(vpc: ec2.IVpc) -> str | None:
    """The VPC's IPv4 CIDR (a token), or None when CDK does not know it (an imported VPC)."""
    try:
        return vpc.vpc_cidr_block
    except RuntimeError:  # jsii: "vpcCidrBlock was not supplied when creating this VPC"
        return None


class EfaNetwork(Construct):
    """A VPC laid out for EFA: everything in ONE Availability Zone.

    EFA traffic does not cross AZs, so the cluster gets one public subnet (NAT gateway, head or
    bastion nodes, Elastic IPs) and one private subnet with egress through the NAT (compute nodes)
    in the same zone. VPC flow logs go to CloudWatch Logs.

    Args:
        availability_zone: the zone, e.g. ``us-east-1c`` (pick one where your instance type is
            offered). Default: the region's first zone.
        cidr: the VPC's IPv4 block. Default: ``10.0.0.0/16``.
        private_subnet_mask: prefix length of the private subnet; it must hold every IP the
            nodes use (one per node in the recommended layout). Default: 18 (16,379 addresses).
        flow_log_retention: how long flow logs are kept. Default: one year.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        availability_zone: str | None = None,
        cidr: str = "10.0.0.0/16",
        private_subnet_mask: int = 18,
        flow_log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
    ) -> None:
        """Create the network; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        if availability_zone is not None and not Token.is_unresolved(availability_zone):
            check_availability_zone(availability_zone)
        _check_cidr(cidr, private_subnet_mask)
        region = Stack.of(self).region
        if availability_zone and not Token.is_unresolved(region) and not availability_zone.startswith(region):
            raise EfaConfigError(
                "availability_zone",
                code="efa-cdk:zone-outside-region",
                value=availability_zone,
                why=f"the stack deploys to {region}, and a VPC's zones are in its region",
                fix=f"pick a zone of {region} (aws ec2 describe-availability-zones --region {region}), "
                "or deploy the stack to the zone's region",
            )
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            availability_zones=[availability_zone] if availability_zone else None,
            max_azs=None if availability_zone else 1,
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24
                ),  # 256
                ec2.SubnetConfiguration(
                    name="Private",
                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                    cidr_mask=private_subnet_mask,
                ),
            ],
        )
        self._explain_cdk_provider_lint()
        if availability_zone and not Token.is_unresolved(availability_zone):
            self._explain_pinned_zone(availability_zone)
        if availability_zone is None:  # said, not silent: the zone decides which types can launch
            Annotations.of(self).add_warning_v2(
                "efa-cdk:first-zone",
                "No availability_zone: the network, and every node in it, goes to the region's first "
                "Availability Zone, whichever types it offers. Pass availability_zone= a zone that offers "
                "your instance type (aws ec2 describe-instance-type-offerings --location-type "
                "availability-zone --filters Name=instance-type,Values=<type>).",
            )
        log_group = logs.LogGroup(self, "FlowLogs", retention=flow_log_retention)
        self.vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(log_group))
        self.public_subnet: ec2.ISubnet = self.vpc.public_subnets[0]
        self.private_subnet: ec2.ISubnet = self.vpc.private_subnets[0]
        self.availability_zone = self.private_subnet.availability_zone

    def _explain_pinned_zone(self, zone: str) -> None:
        """Stock cfn-lint warns (W3010) of a literal zone on a subnet. Here it is the user's choice, on
        purpose: an EFA cluster lives in one zone (EFA traffic does not cross zones), the one that offers
        its type. Suppressed on those subnets only, with the reason, so a user's own cfn-lint run stays
        clean; a zone left to a CloudFormation parameter is no literal and needs nothing."""
        for subnet in (*self.vpc.public_subnets, *self.vpc.private_subnets):
            cfn = subnet.node.default_child
            assert isinstance(cfn, ec2.CfnSubnet)
            cfn.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3010"]}})
            cfn.add_metadata("efa-cdk:cfn-lint-W3010", f"{zone} is the zone asked for: EFA stays in one zone")

    def _explain_cdk_provider_lint(self) -> None:
        """CDK's own restrict-default-security-group provider (feature flag
        ``@aws-cdk/aws-ec2:restrictDefaultSecurityGroup``): see :func:`explain_cdk_lambda_lint`."""
        provider = Stack.of(self).node.try_find_child("Custom::VpcRestrictDefaultSGCustomResourceProvider")
        explain_cdk_lambda_lint(
            provider.node.try_find_child("Handler") if provider else None,
            "CDK's restrict-default-SG provider",
        )


#: The public subnet's size: a /24.
PUBLIC_SUBNET_SIZE = 256


def _check_cidr(cidr: str, private_subnet_mask: int) -> None:
    """The VPC's block: an IPv4 network VPC accepts (/16 to /28: VPC user guide, "VPC CIDR blocks") with
    room for the private subnet of `private_subnet_mask` and the public one."""
    if Token.is_unresolved(cidr):
        return
    try:
        network = ipaddress.IPv4Network(cidr, strict=True)
    except ValueError as exc:
        raise EfaConfigError(
            "cidr",
            code="efa-cdk:vpc-cidr-form",
            value=cidr,
            why=f"not an IPv4 network ({exc})",
            fix="pass e.g. 10.0.0.0/16",
        ) from None
    if not 16 <= network.prefixlen <= 28:
        raise EfaConfigError(
            "cidr",
            code="efa-cdk:vpc-cidr-size",
            value=cidr,
            why="a VPC's block is /16 to /28",
            fix="pass e.g. 10.0.0.0/16",
        )
    # The public /24 comes first, then the private subnet at the next address aligned to its size.
    private = 2 ** (32 - private_subnet_mask) if 16 <= private_subnet_mask <= 28 else 0
    if not private or -(-PUBLIC_SUBNET_SIZE // private) * private + private > network.num_addresses:
        raise EfaConfigError(
            "private_subnet_mask",
            code="efa-cdk:private-subnet-mask-fit",
            value=private_subnet_mask,
            why=f"a private /{private_subnet_mask} does not fit in {cidr} after the public /24 "
            "(a subnet is /16 to /28)",
            fix="pass a larger cidr or a longer mask (the defaults: 10.0.0.0/16 and 18)",
        )
