"""`EfaCluster`: N EFA nodes in one subnet and one cluster placement group, verified on boot."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence

from aws_cdk import (
    Annotations,
    Aws,
    CfnAutoScalingReplacingUpdate,
    CfnCreationPolicy,
    CfnOutput,
    CfnResource,
    CfnResourceAutoScalingCreationPolicy,
    CfnResourceSignal,
    CfnUpdatePolicy,
    CfnWaitCondition,
    CfnWaitConditionHandle,
    Stack,
    Tags,
    Token,
)
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from .acknowledgements import acknowledge
from .capacity import Capacity
from .catalogue import InstanceType
from .catalogue import instance_type as lookup
from .errors import EfaConfigError, parse_choice
from .launch_template import EfaLaunchTemplate
from .layout import LayoutMode, NicLayout
from .limits import check_limits
from .machine_image import EfaMachineImage
from .node_software import EfaUserData
from .security_group import EfaSecurityGroup, InternetEgress

#: Explicit nodes cost one resource each (six with an Elastic IP); CloudFormation allows 500 per
#: template, and the rest of a cluster stack needs room too. Larger clusters use node_group=asg.
MAX_EXPLICIT_NODES = 400


class NodeGroup(enum.Enum):
    """How the nodes are declared."""

    #: One AWS::EC2::Instance per node (Node0..NodeN-1): per-node outputs and Elastic IPs; the
    #: template grows with the node count. For small clusters.
    EXPLICIT = "explicit"
    #: One fixed-size Auto Scaling group from the same launch template: the template does not grow
    #: with the node count. For large clusters.
    ASG = "asg"

    @classmethod
    def parse(cls, value: str | NodeGroup) -> NodeGroup:
        """The member for a string such as ``"asg"``."""
        return parse_choice(cls, value, what="node_group", why="not a node-group mode")


class PublicIp(enum.Enum):
    """Which nodes get an Elastic IP on their card-0 / DeviceIndex-0 interface."""

    NONE = "none"  # reach the nodes with SSM Session Manager (default)
    LEADER = "leader"  # node 0 only, e.g. as the SSH entry point
    ALL = "all"

    @classmethod
    def parse(cls, value: str | PublicIp) -> PublicIp:
        """The member for a string such as ``"leader"``."""
        return parse_choice(cls, value, what="public_ip", why="not a public IP choice")


class EfaCluster(Construct):
    """Nodes wired for EFA: security group, placement group, launch template, instances, software.

    Node ``i`` has the construct id ``Node{i}``: raising ``node_count`` adds nodes, lowering it
    removes the highest-numbered ones, and no existing node, group or template is replaced
    (nothing in a launch template depends on the node count: nodes find each other at boot).

    With node software (the default) every node installs and checks EFA, and the stack's
    creation waits for each node's signal: ``cdk deploy`` fails with the node's reason when EFA
    does not work. Then the leader (node 0) runs the benchmarks and reports them to the
    :attr:`benchmark_results` attribute.

    Args:
        vpc: the VPC.
        instance_type: an EFA-capable instance type name.
        node_count: number of nodes. Default: 2.
        subnet: the one subnet for every node's EFA interfaces. Default: the VPC's first private
            subnet (EFA traffic stays inside one subnet).
        nic_layout: layout mode or ready layout. Default: ``LayoutMode.RECOMMENDED``.
        efa_count: EFAs per node. Default: the type's maximum over its dedicated EFA cards.
        machine_image: AMI choice. Default: by accelerator (see :class:`EfaMachineImage`).
        key_pair: an EC2 key pair for your own SSH login. Default: none (Session Manager).
        ssh_peers: sources allowed to reach TCP 22. Default: none.
        internet_egress: egress beyond the cluster. Default: ``InternetEgress.WEB``.
        placement_group: a placement group to use. Default: a cluster placement group is created.
        use_placement_group: False launches without any placement group (e.g. inside a capacity
            reservation that brings its own). Default: True.
        root_volume_gib: encrypted gp3 root volume size. Default: 200.
        node_software: the node software (:class:`EfaUserData`), or False for none. Default:
            ``EfaUserData()``: install/verify EFA, passwordless SSH, hostfile, benchmarks.
        user_data: your own user data instead of the node software (needs ``node_software=False``).
            Default: the node software's.
        role: instance role. Default: Session Manager access plus what the node software needs.
        public_ip: nodes that get an Elastic IP. Default: ``PublicIp.NONE``.
        public_subnet: where the Elastic IP interfaces go (same AZ as ``subnet``). Default: the
            VPC's first public subnet.
        node_group: ``NodeGroup.EXPLICIT`` (one instance resource per node) or ``NodeGroup.ASG``
            (one fixed-size Auto Scaling group; the template size does not depend on node_count).
            Default: explicit. Switching mode replaces every node.
        capacity: a Capacity Reservation, reservation group or Capacity Block to launch into
            (:class:`Capacity`). Default: On-Demand with a new cluster placement group.
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
        node_software: EfaUserData | bool = True,
        user_data: ec2.UserData | None = None,
        role: iam.IRole | None = None,
        public_ip: PublicIp | str = PublicIp.NONE,
        public_subnet: ec2.ISubnet | None = None,
        node_group: NodeGroup | str = NodeGroup.EXPLICIT,
        capacity: Capacity | None = None,
    ) -> None:
        super().__init__(scope, id_)
        self.node_group = NodeGroup.parse(node_group)
        _check_node_count(node_count, self.node_group)
        self.capacity = capacity or Capacity.on_demand()
        if placement_group is not None and not self.capacity.accepts_placement_group:
            raise EfaConfigError(
                "placement_group",
                value=placement_group.placement_group_name,
                why="a Capacity Block's instances are placed by EC2; a placement group cannot be applied",
                fix="drop placement_group when launching into a Capacity Block",
            )
        if placement_group is not None and not use_placement_group:
            raise EfaConfigError(
                "placement_group",
                value=placement_group.placement_group_name,
                why="a placement group was given together with use_placement_group=False",
                fix="drop one of the two",
            )
        software = EfaUserData() if node_software is True else node_software or None
        if software is not None and user_data is not None:
            raise EfaConfigError(
                "user_data",
                value="ec2.UserData",
                why="user data replaces the node software, which is on",
                fix="add your commands as a step (EfaUserData().add_commands(...)), "
                "or pass node_software=False",
            )
        egress = InternetEgress.parse(internet_egress)
        if software is not None and egress is InternetEgress.NONE:
            raise EfaConfigError(
                "internet_egress",
                value=egress.value,
                why="the node software calls AWS APIs over HTTPS (S3, SSM, EC2, CloudFormation) and the "
                "nodes could reach none of them",
                fix="use internet_egress=web (the default), or turn the node software off "
                "(node_software=False, -c node_software=false)",
            )
        self.public_ip = PublicIp.parse(public_ip)
        self.subnet = subnet or self._default_subnet(vpc)
        if software is not None and any(s.node.path == self.subnet.node.path for s in vpc.isolated_subnets):
            Annotations.of(self).add_warning_v2(
                "efa-cdk:isolated-subnet",
                "The nodes' subnet has no route out: the node software needs VPC endpoints for S3, SSM, "
                "EC2 and CloudFormation, and an image with EFA preinstalled (the installer is downloaded).",
            )
        self.instance_type: InstanceType = lookup(instance_type)
        self.machine_image = machine_image or EfaMachineImage.default_for(self.instance_type)
        self.security_group = EfaSecurityGroup(
            self, "SecurityGroup", vpc=vpc, ssh_peers=ssh_peers, internet_egress=egress
        )
        self.capacity.check(
            instance_type=instance_type,
            availability_zone=None
            if Token.is_unresolved(self.subnet.availability_zone)
            else self.subnet.availability_zone,
            node_count=node_count,
        )
        if use_placement_group and placement_group is None and self.capacity.creates_placement_group:
            placement_group = ec2.PlacementGroup(
                self, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER
            )
        self.placement_group = placement_group
        self.node_user_data = user_data or ec2.UserData.for_linux()

        def launch_template(
            lt_id: str, lt_role: iam.IRole | None, eni: str | None = None
        ) -> EfaLaunchTemplate:
            return EfaLaunchTemplate(
                self,
                lt_id,
                instance_type=instance_type,
                security_groups=[self.security_group],
                nic_layout=nic_layout,
                efa_count=efa_count,
                subnet=self.subnet if self.node_group is NodeGroup.EXPLICIT else None,  # an ASG sets it
                machine_image=self.machine_image,
                key_pair=key_pair,
                role=lt_role,
                user_data=self.node_user_data,
                root_volume_gib=root_volume_gib,
                placement_group=placement_group,
                primary_network_interface_id=eni,
                capacity=self.capacity,
            )

        self.launch_template = launch_template("LaunchTemplate", role)
        self.layout: NicLayout = self.launch_template.layout
        self.role = self.launch_template.role
        self.grant_principal = self.role
        self.connections = self.security_group.connections
        #: The cluster's path within its stack, "/" as "-" ("Cluster", "Training-Cluster", ...).
        self.path_in_stack = re.sub(
            r"[^A-Za-z0-9_.-]+", "-", self.node.path[len(Stack.of(self).node.path) + 1 :]
        )
        self.cluster_tag = f"{Aws.STACK_NAME}/{self.path_in_stack}"
        Tags.of(self).add("efa-cdk:cluster", self.cluster_tag)

        eip_nodes = {PublicIp.NONE: 0, PublicIp.LEADER: 1, PublicIp.ALL: node_count}[self.public_ip]
        if eip_nodes:
            self._public_subnet = self._check_public_ip(vpc, public_subnet)
        self.nodes: list[ec2.CfnInstance] = []
        self.elastic_ips: list[ec2.CfnEIP | None] = []
        self.auto_scaling_group: autoscaling.CfnAutoScalingGroup | None = None
        if self.node_group is NodeGroup.ASG:
            self.auto_scaling_group = self._node_group(id_, node_count)
        for i in range(node_count if self.node_group is NodeGroup.EXPLICIT else 0):
            template = self.launch_template
            eip: ec2.CfnEIP | None = None
            if i < eip_nodes:
                eni = ec2.CfnNetworkInterface(
                    self,
                    f"Node{i}PublicInterface",
                    subnet_id=self._public_subnet.subnet_id,
                    group_set=[self.security_group.security_group_id],
                    description=f"{id_} node {i}: card 0 / device 0, with an Elastic IP",
                )
                eip = ec2.CfnEIP(self, f"Node{i}Eip", domain="vpc")
                ec2.CfnEIPAssociation(
                    self,
                    f"Node{i}EipAssociation",
                    allocation_id=eip.attr_allocation_id,
                    network_interface_id=eni.ref,
                )
                template = launch_template(f"Node{i}LaunchTemplate", self.role, eni.ref)
            node = ec2.CfnInstance(
                self,
                f"Node{i}",
                monitoring=True,
                launch_template=ec2.CfnInstance.LaunchTemplateSpecificationProperty(
                    launch_template_id=template.launch_template_id,
                    version=template.latest_version_number,
                ),
            )
            Tags.of(node).add("Name", f"{id_}-node{i}")
            Tags.of(node).add("efa-cdk:node-index", str(i))
            Tags.of(node).add("efa-cdk:logical-id", Stack.of(self).resolve(node.logical_id))
            self.nodes.append(node)
            self.elastic_ips.append(eip)

        self.node_software = software
        self.benchmark_results: str | None = None
        if software is not None:
            self._add_node_software(software, node_count)
        acknowledge(self, "AwsSolutions-EC29")
        check_limits(self)

    @property
    def _launched(self) -> list[CfnResource]:
        """The resources that launch nodes: the instances, or the Auto Scaling group."""
        return [self.auto_scaling_group] if self.auto_scaling_group else list(self.nodes)

    def _node_group(self, id_: str, node_count: int) -> autoscaling.CfnAutoScalingGroup:
        """A fixed-size Auto Scaling group: min = max = desired = node_count, one subnet.

        A launch-template change replaces the whole group (AutoScalingReplacingUpdate), like
        explicit nodes; a node-count change resizes it in place.
        """
        size = str(node_count)
        asg = autoscaling.CfnAutoScalingGroup(
            self,
            "Nodes",
            min_size=size,
            max_size=size,
            desired_capacity=size,
            vpc_zone_identifier=[self.subnet.subnet_id],
            launch_template=autoscaling.CfnAutoScalingGroup.LaunchTemplateSpecificationProperty(
                launch_template_id=self.launch_template.launch_template_id,
                version=self.launch_template.latest_version_number,
            ),
        )
        asg.cfn_options.update_policy = CfnUpdatePolicy(
            auto_scaling_replacing_update=CfnAutoScalingReplacingUpdate(will_replace=True)
        )
        acknowledge(asg, "AwsSolutions-AS3")
        Tags.of(asg).add("Name", f"{id_}-node")
        Tags.of(asg).add("efa-cdk:logical-id", Stack.of(self).resolve(asg.logical_id))
        return asg

    def _add_node_software(self, software: EfaUserData, node_count: int) -> None:
        """Key pair, node-count parameter, script asset, permissions, signals and user data."""
        stack = Stack.of(self)
        benchmarks = software.benchmarks_for(self.instance_type)
        ssh_key = ec2.KeyPair(self, "SshKey", type=ec2.KeyPairType.ED25519)
        count = ssm.StringParameter(
            self,
            "NodeCount",
            parameter_name=f"/efa-cdk/{Aws.STACK_NAME}/{self.path_in_stack}/node-count",
            simple_name=False,
            string_value=str(node_count),
            description=f"Number of nodes in EFA cluster {self.node.path} (read by the nodes at boot)",
        )
        scripts = s3_assets.Asset(self, "NodeScripts", path=str(software.stage()))
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="EfaNodeSoftware",
                actions=["ssm:GetParameter"],
                resources=[
                    stack.format_arn(
                        service="ssm",
                        resource="parameter",
                        resource_name=f"ec2/keypair/{ssh_key.key_pair_id}",
                    ),
                    count.parameter_arn,
                ],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[scripts.bucket.arn_for_objects(scripts.s3_object_key)]
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["cloudformation:SignalResource"], resources=[Aws.STACK_ID])
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ec2:DescribeInstances"], resources=["*"])
        )
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]")
        settings = {
            **software.settings(self.instance_type, self.layout, self.machine_image.login_user),
            "EFA_CDK_STACK": Aws.STACK_NAME,
            "EFA_CDK_REGION": Aws.REGION,
            "EFA_CDK_CLUSTER": self.cluster_tag,
            "EFA_CDK_KEY_PAIR_ID": ssh_key.key_pair_id,
            "EFA_CDK_NODE_COUNT_PARAMETER": count.parameter_name,
        }
        if benchmarks:
            handle = CfnWaitConditionHandle(self, "BenchmarkHandle")
            condition = CfnWaitCondition(
                self,
                "Benchmarks",
                handle=handle.ref,
                count=1,
                timeout=str(software.benchmark_timeout_minutes * 60),
            )
            for node in self._launched:
                condition.node.add_dependency(node)
            settings["EFA_CDK_BENCHMARK_URL"] = handle.ref
            self.benchmark_results = Token.as_string(condition.attr_data)
        script = software.render(settings, scripts_s3_url=scripts.s3_object_url, benchmarks=benchmarks)
        self.node_user_data.add_commands(script.split("\n", 1)[1])  # for_linux() writes the #! line
        timeout = f"PT{software.signal_timeout_minutes}M"
        for node in self.nodes:
            node.cfn_options.creation_policy = CfnCreationPolicy(
                resource_signal=CfnResourceSignal(count=1, timeout=timeout)
            )
        if self.auto_scaling_group is not None:  # every instance signals the group
            self.auto_scaling_group.cfn_options.creation_policy = CfnCreationPolicy(
                resource_signal=CfnResourceSignal(count=node_count, timeout=timeout),
                auto_scaling_creation_policy=CfnResourceAutoScalingCreationPolicy(
                    min_successful_instances_percent=100
                ),
            )
        self.ssh_key = ssh_key
        self.node_count_parameter = count

    def _check_public_ip(self, vpc: ec2.IVpc, public_subnet: ec2.ISubnet | None) -> ec2.ISubnet:
        if self.node_group is not NodeGroup.EXPLICIT:
            raise EfaConfigError(
                "public_ip",
                value=self.public_ip.value,
                why="an Elastic IP goes on a pre-created interface per node, which needs explicit nodes",
                fix="use node_group=explicit for public nodes, or reach an ASG's nodes with Session Manager",
            )
        if self.layout.primary.is_efa:
            raise EfaConfigError(
                "public_ip",
                value=self.public_ip.value,
                why=f"the {self.layout.mode.value if self.layout.mode else 'custom'} layout puts an EFA on "
                "card 0 / DeviceIndex 0; an Elastic IP needs that interface in a public subnet, and EFA "
                "traffic cannot cross subnets",
                fix="use nic_layout=recommended (the default) or max-bandwidth (ENA primary interface)",
            )
        subnet = public_subnet or (vpc.public_subnets[0] if vpc.public_subnets else None)
        if subnet is None:
            raise EfaConfigError(
                "public_subnet",
                value=None,
                why=f"public_ip={self.public_ip.value} needs a public subnet (route to an internet gateway) "
                "and the VPC has none",
                fix="pass public_subnet= (in the same AZ as the nodes' subnet)",
            )
        same_az = subnet.availability_zone, self.subnet.availability_zone
        if not any(Token.is_unresolved(az) for az in same_az) and same_az[0] != same_az[1]:
            raise EfaConfigError(
                "public_subnet",
                value=same_az[0],
                why=f"the nodes are in {same_az[1]}; an instance's interfaces must all be in its AZ",
                fix=f"pass a public subnet in {same_az[1]}",
            )
        return subnet

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

    def benchmark_output(self, scope: Construct, id_: str = "BenchmarkResults") -> CfnOutput | None:
        """A stack output with the leader's benchmark results (None when no benchmarks run).

        Its value is the wait condition's data: ``{"benchmarks": "<JSON list of results>"}``.
        """
        if self.benchmark_results is None:
            return None
        output = CfnOutput(
            scope,
            id_,
            value=self.benchmark_results,
            description="Leader's cross-node benchmarks (JSON; /var/lib/efa-cdk/benchmarks.json on node 0)",
        )
        acknowledge(Stack.of(scope), "CloudFormation-Validate::F6101")
        return output

    @property
    def private_ips(self) -> list[str]:
        """Each node's primary private IP (tokens, in node order)."""
        return [n.attr_private_ip for n in self.nodes]

    @property
    def public_ips(self) -> list[str | None]:
        """Each node's Elastic IP (tokens), or None for nodes without one, in node order."""
        return [eip.attr_public_ip if eip else None for eip in self.elastic_ips]


def _check_node_count(node_count: int, group: NodeGroup) -> None:
    if not Token.is_unresolved(node_count) and (
        isinstance(node_count, bool) or not isinstance(node_count, int) or not node_count >= 1
    ):
        raise EfaConfigError(
            "node_count",
            value=node_count,
            why="a cluster needs at least one node",
            fix="set node_count to a whole number >= 1 (2 or more to use EFA between nodes)",
        )
    if group is NodeGroup.EXPLICIT and node_count > MAX_EXPLICIT_NODES:
        raise EfaConfigError(
            "node_count",
            value=node_count,
            why=f"explicit nodes cost at least one CloudFormation resource each; more than "
            f"{MAX_EXPLICIT_NODES} approach the 500-resource limit of one template",
            fix="use node_group=asg (one Auto Scaling group: the template does not grow with node_count)",
        )
