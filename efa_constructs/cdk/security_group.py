"""`EfaSecurityGroup`: the security group every EFA interface of a cluster must share."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Annotations, Token
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from ..core.options import InternetEgress, parse_ssh_source
from .arguments import checked


def ssh_peer(source: str) -> ec2.IPeer:
    """An SSH source from a string: an IPv4/IPv6 CIDR or a managed prefix list id (``pl-...``).

    Raises:
        EfaConfigError: the string is neither (see :func:`parse_ssh_source`).
    """
    if Token.is_unresolved(source):
        return ec2.Peer.ipv4(source)
    text = parse_ssh_source(source)
    if text.startswith("pl-"):
        return ec2.Peer.prefix_list(text)
    return ec2.Peer.ipv6(text) if ":" in text else ec2.Peer.ipv4(text)


def keep_default_egress_closed(group: ec2.SecurityGroup) -> None:
    """Keep CDK's "no traffic" placeholder on a group whose egress rules are all separate resources.

    CDK drops the placeholder once an egress rule to another security group exists (those are
    written as their own resources); a group with no inline egress rule keeps EC2's default
    allow-all egress. The placeholder, written back, removes that default.
    """
    cfn = group.node.default_child
    assert isinstance(cfn, ec2.CfnSecurityGroup)
    cfn.add_property_override(
        "SecurityGroupEgress",
        [
            {
                "CidrIp": "255.255.255.255/32",
                "Description": "Disallow all traffic",
                "IpProtocol": "icmp",
                "FromPort": 252,
                "ToPort": 86,
            }
        ],
    )


class EfaSecurityGroup(ec2.SecurityGroup):
    """A security group for EFA interfaces.

    EFA needs ALL traffic allowed inbound from the group itself AND outbound to the group
    itself; an all-traffic egress to 0.0.0.0/0 does not cover EFA (it is not IP), and a missing
    self-egress rule shows up as NCCL "Unresponsive receiver" errors. Both self rules are written
    explicitly (``allow_all_outbound`` would silently drop added egress rules).

    Args:
        vpc: the VPC of the cluster.
        ssh_peers: sources allowed to reach TCP 22. Default: none (use SSM Session Manager).
        internet_egress: what nodes may reach beyond the cluster. Default: ``InternetEgress.WEB``
            (TCP 80/443 anywhere, enough for package installs, S3 and Session Manager).
        description: the group's description. Default: says what the group is for.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc: ec2.IVpc,
        ssh_peers: Sequence[ec2.IPeer] = (),
        internet_egress: InternetEgress = InternetEgress.WEB,
        description: str = "EFA cluster: all traffic to and from itself (required by EFA)",
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_, vpc=vpc, description=description, allow_all_outbound=False)
        egress = InternetEgress.parse(internet_egress)
        self.add_ingress_rule(self, ec2.Port.all_traffic(), "EFA: all traffic from the cluster itself")
        self.add_egress_rule(self, ec2.Port.all_traffic(), "EFA: all traffic to the cluster itself")
        if egress is InternetEgress.WEB:
            self.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS: packages, S3, SSM")
            self.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "HTTP: OS package mirrors")
        elif egress is InternetEgress.ALL:
            # CDK refuses an all-traffic rule unless allow_all_outbound=True, which would silently
            # drop the self egress rule above: write it as its own resource.
            ec2.CfnSecurityGroupEgress(
                self,
                "AllOutbound",
                group_id=self.security_group_id,
                ip_protocol="-1",
                cidr_ip="0.0.0.0/0",
                description="All outbound traffic",
            )
        else:
            keep_default_egress_closed(self)
        for peer in ssh_peers:
            if peer.unique_id in ("0.0.0.0/0", "::/0"):
                Annotations.of(self).add_warning_v2(
                    "efa-cdk:world-ssh", f"SSH is open to the whole internet ({peer.unique_id}) as asked"
                )
            self.add_ingress_rule(peer, ec2.Port.tcp(22), "SSH")
