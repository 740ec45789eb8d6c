"""`EfaCluster`: N EFA nodes in one subnet and one cluster placement group."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Tags, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from .acknowledgements import acknowledge
from .catalogue import InstanceType
from .errors import EfaConfigError
from .launch_template import EfaLaunchTemplate
from .layout import LayoutMode, NicLayout
from .machine_image import EfaMachineImage
from .security_group import EfaSecurityGroup, InternetEgress

MAX_EXPLICIT_NODES = 64


class EfaCluster(Construct):
    """Nodes wired for EFA: security group, placement group, launch template and instances.

    Node ``i`` has the construct id ``Node{i}``: raising ``node_count`` adds nodes, lowering it
    removes the highest-numbered ones, and no existing node, group or template is replaced
    (nothing in the template depends on the node count).

    Args:
        vpc: the VPC.
        instance_type: an EFA-capable instance type name.
        node_count: number of nodes. Default: 2.
        subnet: the one subnet for every node and interface. Default: the VPC's first private
            subnet (EFA traffic stays inside one subnet's AZ).
        nic_layout: layout mode or ready layout. Default: ``LayoutMode.RECOMMENDED``.
        efa_count: EFAs per node. Default: the type's maximum over its dedicated EFA cards.
        machine_image: AMI choice. Default: by accelerator (see :class:`EfaMachineImage`).
        key_pair: EC2 key pair for SSH. Default: none (Session Manager).
        ssh_peers: sources allowed to reach TCP 22. Default: none.
        internet_egress: egress beyond the cluster. Default: ``InternetEgress.WEB``.
        placement_group: a placement group to use. Default: a cluster placement group is created.
        use_placement_group: False launches without any placement group (e.g. inside a capacity
            reservation that brings its own). Default: True.
        root_volume_gib: encrypted gp3 root volume size. Default: 200.
        user_data: user data for every node. Default: empty.
        role: instance role. Default: Session Manager access only.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc: ec2.IVpc,
        instance_type: str,
        node_count: int = 2,
        subnet: ec2.ISubnet | None = None,
        nic_layout: LayoutMode | str | NicLayout = LayoutMode.RECOMMENDED,
        efa_count: int | None = None,
        machine_image: EfaMachineImage | None = None,
        key_pair: ec2.IKeyPair | None = None,
        ssh_peers: Sequence[ec2.IPeer] = (),
        internet_egress: InternetEgress | str = InternetEgress.WEB,
        placement_group: ec2.IPlacementGroup | None = None,
        use_placement_group: bool = True,
        root_volume_gib: int = 200,
        user_data: ec2.UserData | None = None,
        role: iam.IRole | None = None,
    ) -> None:
        super().__init__(scope, id_)
        if not Token.is_unresolved(node_count) and (
            isinstance(node_count, bool) or not isinstance(node_count, int) or not node_count >= 1
        ):
            raise EfaConfigError(
                "node_count",
                value=node_count,
                why="a cluster needs at least one node",
                fix="set node_count to a whole number >= 1 (2 or more to use EFA between nodes)",
            )
        if node_count > MAX_EXPLICIT_NODES:
            raise EfaConfigError(
                "node_count",
                value=node_count,
                why=f"explicit nodes cost several CloudFormation resources each; more than "
                f"{MAX_EXPLICIT_NODES} approach the 500-resource limit of one template",
                fix=f"use at most {MAX_EXPLICIT_NODES} nodes per cluster",
            )
        if placement_group is not None and not use_placement_group:
            raise EfaConfigError(
                "placement_group",
                value=placement_group.placement_group_name,
                why="a placement group was given together with use_placement_group=False",
                fix="drop one of the two",
            )
        self.subnet = subnet or self._default_subnet(vpc)
        self.security_group = EfaSecurityGroup(
            self, "SecurityGroup", vpc=vpc, ssh_peers=ssh_peers, internet_egress=internet_egress
        )
        if use_placement_group and placement_group is None:
            placement_group = ec2.PlacementGroup(
                self, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER
            )
        self.placement_group = placement_group
        self.launch_template = EfaLaunchTemplate(
            self,
            "LaunchTemplate",
            instance_type=instance_type,
            security_groups=[self.security_group],
            nic_layout=nic_layout,
            efa_count=efa_count,
            subnet=self.subnet,
            machine_image=machine_image,
            key_pair=key_pair,
            role=role,
            user_data=user_data,
            root_volume_gib=root_volume_gib,
            placement_group=placement_group,
        )
        self.instance_type: InstanceType = self.launch_template.instance_type
        self.layout: NicLayout = self.launch_template.layout
        self.role = self.launch_template.role
        self.grant_principal = self.role
        self.connections = self.security_group.connections
        self.nodes: list[ec2.CfnInstance] = []
        for i in range(node_count):
            node = ec2.CfnInstance(
                self,
                f"Node{i}",
                monitoring=True,
                launch_template=ec2.CfnInstance.LaunchTemplateSpecificationProperty(
                    launch_template_id=self.launch_template.launch_template_id,
                    version=self.launch_template.latest_version_number,
                ),
            )
            Tags.of(node).add("Name", f"{id_}-node{i}")
            self.nodes.append(node)
        Tags.of(self).add("efa-cdk:cluster", id_)
        acknowledge(self, "AwsSolutions-EC29")

    @staticmethod
    def _default_subnet(vpc: ec2.IVpc) -> ec2.ISubnet:
        subnets = vpc.private_subnets or vpc.isolated_subnets
        if not subnets:
            raise EfaConfigError(
                "subnet",
                value=None,
                why="the VPC has no private subnet to put the nodes in",
                fix="pass subnet= explicitly (one subnet: EFA traffic stays in one AZ)",
            )
        return subnets[0]

    @property
    def private_ips(self) -> list[str]:
        """Each node's primary private IP (tokens, in node order)."""
        return [n.attr_private_ip for n in self.nodes]
