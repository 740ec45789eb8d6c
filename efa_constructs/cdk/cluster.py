"""`EfaCluster`: N EFA nodes in one subnet and one cluster placement group, verified on boot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jsii
from aws_cdk import (
    Annotations,
    Aws,
    CfnCreationPolicy,
    CfnOutput,
    CfnResource,
    CfnResourceSignal,
    Duration,
    Tags,
    Token,
)
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct
from typing_extensions import Unpack

from ..core.benchmarks import Benchmark
from ..core.catalogue import AcceleratorKind
from ..core.checks import ClusterRequest, check_cluster, replacement_without_spare
from ..core.containers import ContainerRun
from ..core.errors import EfaConfigError
from ..core.node_plan import PlannedNodes
from ..core.options import DEFAULT_NODE_COUNT, InternetEgress, NodeGroup, PublicIp
from ..core.software import EfaUserData
from ._node_base import EfaNodeBase
from ._node_base import known as _known
from ._shared import allow_device_fault_tag, cluster_tag, path_in_stack
from .acknowledgements import acknowledge
from .arguments import checked
from .capacity_block import EfaCapacityBlockEnd
from .limits import check_limits
from .lustre import EfaLustreFileSystem
from .machine_image import EfaMachineImage
from .monitoring import EfaClusterMonitoring
from .network import known_cidr
from .node import EfaAutoScalingGroup, EfaNode
from .node_software import BenchmarkReport, NodeSoftware, NodeSoftwareInstallation
from .options import NodeTemplateOptions, plan_of
from .orchestrator_images import image_for
from .storage import lustre_use

__all__ = ["EfaCluster", "NodeGroup", "PublicIp"]
_EFA_SOFTWARE = NodeSoftware.efa()


def _minutes(interval: Duration | None) -> int | None:
    """A duration in whole minutes (None stays None)."""
    return None if interval is None else int(interval.to_minutes())


@jsii.implements(ec2.IConnectable, iam.IGrantable)
class EfaCluster(PlannedNodes, Construct):
    """Nodes wired for EFA: security group, placement group, launch template, instances, software.

    Node ``i`` is the construct ``Node{i}`` (an :class:`EfaNode`): raising ``node_count`` adds
    nodes, lowering it removes the highest-numbered ones, and no existing node, group or template
    is replaced (nothing in a launch template depends on the node count: nodes find each other at
    boot). With ``node_group=asg`` the nodes are one :class:`EfaAutoScalingGroup` (``NodeGroup``).

    The cluster is ``IConnectable`` (its EFA security group) and ``IGrantable`` (the nodes' role):
    ``bucket.grant_read(cluster)``, ``db.connections.allow_default_port_from(cluster)``.
    Every check of the request (:mod:`efa_constructs.core.checks`) runs before any child is created.

    With node software (the default) every node installs and checks EFA, and the stack's
    creation waits for each node's signal: ``cdk deploy`` fails with the node's reason when EFA
    does not work. Then the leader (node 0) runs the benchmarks and reports them to the
    :attr:`benchmark_results` attribute.

    Node options (:class:`NodeTemplateOptions`, each documented there): ``instance_type``, ``capacity``,
    ``placement_group``, ``nic_layout``, ``root_volume_gib``, ``role`` (here by default: Session Manager
    access plus what the node software needs).

    Args:
        vpc: the VPC.
        node_count: number of nodes. Default: 2.
        subnet: the one subnet for every node's EFA interfaces. Default: the VPC's first private
            subnet (EFA traffic stays inside one subnet).
        machine_image: AMI choice. Default: by accelerator (see :class:`EfaMachineImage`).
        key_pair: an EC2 key pair for your own SSH login. Default: none (Session Manager).
        ssh_peers: sources allowed to reach TCP 22. Default: none.
        internet_egress: egress beyond the cluster. Default: ``InternetEgress.WEB``.
        use_placement_group: False launches without any placement group (e.g. inside a capacity
            reservation that brings its own). Default: True.
        node_software: what the nodes run at boot (:class:`NodeSoftware`): ``NodeSoftware.efa(...)``,
            ``NodeSoftware.custom(user_data)`` (your own, instead of efa-cdk's) or ``NodeSoftware.none()``.
            Default: ``NodeSoftware.efa()``: install/verify EFA, passwordless SSH, hostfile, benchmarks.
        public_ip: nodes that get an Elastic IP. Default: ``PublicIp.NONE``.
        public_subnet: where the Elastic IP interfaces go (same AZ as ``subnet``). Default: the
            VPC's first public subnet.
        node_group: ``NodeGroup.EXPLICIT`` (one instance resource per node) or ``NodeGroup.ASG``
            (one fixed-size Auto Scaling group; the template size does not depend on node_count).
            Default: explicit. Switching mode replaces every node.
        monitoring: the CloudWatch agent with EFA metrics, a health timer on every node, a dashboard,
            alarms and on-demand benchmarks (:class:`EfaClusterMonitoring`, ``Monitoring``); needs the
            node software. Default: on with the node software.
        alarm_email: an address subscribed to the alarms. Default: none (subscribe to the topic).
        sweep_interval: how often the leader's health timer runs the fabric sweep (which node or link is
            slow; docs/operate.md), at least 5 minutes; needs the monitoring. It uses the fabric while it
            runs: hours suit a cluster that trains. Default: none (at formation and on demand only).
        container: run this image on every node, with every EFA device, SSH inside for mpirun, and
            EFA checked inside it (:class:`ContainerRun`); needs the node software. Default: none.
        node_replacements: explicit nodes to replace, as node index -> label (``{1: "2026-11-24"}``):
            the label is part of the node's logical id, so setting or changing it launches a new
            instance (and Elastic IP interface) for that node and deletes the old one on the next
            deploy. CloudFormation never recreates an instance deleted outside it, so this is how a
            lost or broken node comes back. Keep the labels for the life of the stack: removing one
            replaces the node again. Default: none.
        lustre: an FSx for Lustre file system every node mounts (:class:`EfaLustreFileSystem`, at its
            ``mount_dir``), over EFA when it serves EFA: the node software configures LNet over the EFA
            interfaces AWS's client setup uses for the type, and a node whose Lustre traffic does not ride
            EFA fails its boot with the reason. Needs the node software; with EFA the file system is in the
            nodes' Availability Zone, and their EFA connections fit its 1,024. Default: none.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc: ec2.IVpc,
        node_count: int = DEFAULT_NODE_COUNT,
        subnet: ec2.ISubnet | None = None,
        machine_image: EfaMachineImage | None = None,
        key_pair: ec2.IKeyPair | None = None,
        ssh_peers: Sequence[ec2.IPeer] = (),
        internet_egress: InternetEgress = InternetEgress.WEB,
        use_placement_group: bool = True,
        node_software: NodeSoftware = _EFA_SOFTWARE,
        public_ip: PublicIp = PublicIp.NONE,
        public_subnet: ec2.ISubnet | None = None,
        node_group: NodeGroup = NodeGroup.EXPLICIT,
        monitoring: bool | None = None,
        alarm_email: str | None = None,
        sweep_interval: Duration | None = None,
        container: ContainerRun | None = None,
        node_replacements: Mapping[int, str] | None = None,
        lustre: EfaLustreFileSystem | None = None,
        **node: Unpack[NodeTemplateOptions],
    ) -> None:
        """Create the cluster; the arguments are described in the class docstring.

        In three phases, each reading only what the one before set: resolve what was asked once (the
        node's plan, the subnets, the software) and refuse what cannot work, before any child exists;
        then the pieces every node shares (the node base: security group, placement group, launch
        template); then the nodes and what watches them (node software, monitoring, limits)."""
        super().__init__(scope, id_)
        # 1. resolved once, checked once
        self.plan = plan_of(node)
        placement_group = node.get("placement_group")
        self.node_group, self.public_ip, self.container = node_group, public_ip, container
        self.node_software: EfaUserData | None = node_software.config
        self._vpc = vpc
        self.subnet = subnet or self._default_subnet(vpc)
        eip_subnet = public_subnet or (vpc.public_subnets[0] if vpc.public_subnets else None)
        self._replacements = dict(node_replacements or {})
        sweep_minutes = _minutes(sweep_interval)
        #: The FSx for Lustre file system the nodes mount, or None.
        self.lustre = lustre
        self._check(node_count, eip_subnet, internet_egress, node_software, placement_group,
                    use_placement_group, monitoring, sweep_minutes)  # fmt: skip
        self.machine_image = image_for(self, "EfaCluster", self.instance_type, machine_image)
        self._warn(vpc, node_count, ssh_peers, key_pair)
        # 2. what every node shares
        subnets = {"subnet": self.subnet, "public_subnet": eip_subnet}
        base = EfaNodeBase(self, self.plan, orchestrator="EfaCluster", vpc=vpc, subnets=subnets,
                           count=node_count, count_name="node_count",
                           lustre=lustre_use(lustre, node_software=self.node_software is not None),
                           placement_group=placement_group, use_placement_group=use_placement_group,
                           ssh_peers=ssh_peers, internet_egress=internet_egress)  # fmt: skip
        self.security_group, self.placement_group = base.security_group, base.placement_group
        self.node_user_data = node_software.user_data or ec2.UserData.for_linux()
        self.launch_template = base.launch_template(
            "LaunchTemplate",
            machine_image=self.machine_image,
            role=node.get("role"),
            user_data=self.node_user_data,
            subnet=self.subnet if node_group is NodeGroup.EXPLICIT else None,  # else the ASG sets it
            key_pair=key_pair,
        )
        self.role = self.launch_template.role
        #: The cluster's path within its stack, "/" as "-" ("Cluster", "Training-Cluster", ...).
        self.path_in_stack = path_in_stack(self)
        self.cluster_tag = cluster_tag(self)
        #: Where the cluster's SSM parameters live (node count, last replacement).
        self.parameter_path = f"/efa-cdk/{self.cluster_tag}"
        Tags.of(self).add("efa-cdk:cluster", self.cluster_tag)  # the nodes find each other by it
        # 3. the nodes, and what watches them
        self.auto_scaling_group = self._group(id_, node_count) if node_group is NodeGroup.ASG else None
        self.nodes = [] if self.auto_scaling_group else self._explicit_nodes(id_, node_count, eip_subnet)
        # The nodes fetch their software at boot: launch them once their subnet's route out (NAT) exists.
        for launched in self._launched:
            launched.node.add_dependency(self.subnet.internet_connectivity_established)
        self._admit_lustre()
        on = self.node_software is not None if monitoring is None else monitoring
        self.monitoring = self._monitoring(alarm_email, sweep_minutes) if on else None
        benchmarks = self.node_software.benchmarks_for(self.instance_type) if self.node_software else ()
        self.benchmark_report = self._benchmark_report(benchmarks)
        self.software = self._add_node_software(node_count, benchmarks) if self.node_software else None
        #: In a Capacity Block: EC2's warning before the block ends, to the alarm topic and the nodes.
        self.capacity_block_end = EfaCapacityBlockEnd.of(
            self, self.plan.capacity, self.cluster_tag, monitoring=self.monitoring,
            nodes=self.node_software is not None,
        )  # fmt: skip
        acknowledge(self, "AwsSolutions-EC29")
        check_limits(self)

    def _check(
        self,
        node_count: int,
        eip_subnet: ec2.ISubnet | None,
        internet_egress: InternetEgress,
        node_software: NodeSoftware,
        placement_group: ec2.IPlacementGroup | None,
        use_placement_group: bool,
        monitoring: bool | None,
        sweep_minutes: int | None,
    ) -> None:
        """Every refusal, before any child exists: the subnets belong to the VPC, explicit nodes are
        counted at synth, and the request passes :func:`check_cluster` (the core's one list of checks)."""
        if self.node_group is NodeGroup.EXPLICIT and Token.is_unresolved(node_count):
            raise EfaConfigError(
                "node_count",
                code="efa-cdk:node-count-token-explicit",
                value="a token (e.g. a CloudFormation parameter)",
                why="explicit nodes are one resource each, so their number must be known at synth",
                fix="pass a number, or node_group=NodeGroup.ASG, whose size may be one",
                context_fix="-c node_group=asg",
            )
        request = ClusterRequest(
            instance_type=self.instance_type,
            layout=self.layout,
            node_count=_known(node_count),
            node_group=self.node_group,
            public_ip=self.public_ip,
            internet_egress=internet_egress,
            node_software=node_software.config is not None,
            placement_group=None if placement_group is None else placement_group.placement_group_name,
            use_placement_group=use_placement_group,
            capacity=self.capacity,
            availability_zone=_known(self.subnet.availability_zone),
            public_subnet=eip_subnet is not None,
            public_subnet_availability_zone=_known(eip_subnet.availability_zone) if eip_subnet else None,
            monitoring=monitoring,
            sweep_minutes=sweep_minutes,
            container=self.container is not None,
            node_replacements=tuple(self._replacements.items()),
        )
        check_cluster(request)
        warning = replacement_without_spare(request)
        if warning:
            Annotations.of(self).add_warning_v2("efa-cdk:replacement-without-spare-capacity", warning)

    def _admit_lustre(self) -> None:
        """The file system opened to the nodes, and created before them: they mount it at boot."""
        if self.lustre is None:
            return
        after = self.lustre.add_clients(self.security_group)
        for launched in self._launched:
            launched.node.add_dependency(*after)

    def _warn(
        self, vpc: ec2.IVpc, node_count: int, ssh_peers: Sequence[ec2.IPeer], key_pair: ec2.IKeyPair | None
    ) -> None:
        """What works but is likely not what was meant: warned, not refused."""
        if self.node_software is not None:
            self._warn_if_isolated(vpc)
        self._warn_if_public_without_address(vpc, node_count)
        if self.container is not None:
            self._warn_if_gaudi_without_runtime()
        if ssh_peers and key_pair is None:
            self._warn_ssh_without_key_pair(ssh_peers)

    def _warn_ssh_without_key_pair(self, ssh_peers: Sequence[ec2.IPeer]) -> None:
        Annotations.of(self).add_warning_v2(
            "efa-cdk:ssh-without-key-pair",
            f"TCP 22 is open to {', '.join(p.unique_id for p in ssh_peers)} but no key_pair is given: "
            "your own SSH login needs one (key_pair=ec2.KeyPair.from_key_pair_name(...)); without it only "
            "the cluster's own key, kept in SSM, logs in. Pass no ssh_peers to keep port 22 closed and use "
            "Session Manager.",
        )

    def _monitoring(self, alarm_email: str | None, sweep_minutes: int | None) -> EfaClusterMonitoring:
        """Metrics, dashboard, alarms and on-demand benchmarks (``Monitoring``), in the cluster's own
        CloudWatch namespace ``EfaCdk/<stack>/<path in stack>``."""
        group = self.auto_scaling_group.auto_scaling_group if self.auto_scaling_group else None
        if self.node_software is not None:  # the health check mends the devices, and tags the node with it
            allow_device_fault_tag(self, self.role, self.cluster_tag)
        return EfaClusterMonitoring(
            self,
            "Monitoring",
            namespace=f"EfaCdk/{self.cluster_tag}",
            cluster_name=self.cluster_tag,
            accelerator=self.instance_type.accelerator.kind,
            role=self.role,
            auto_scaling_group=group,
            alarm_email=alarm_email,
            parameter_path=self.parameter_path,
            sweep_minutes=sweep_minutes,
        )

    def _subnet_is_one_of(self, subnets: Sequence[ec2.ISubnet]) -> bool:
        return any(s.node.path == self.subnet.node.path for s in subnets)

    def _warn_if_isolated(self, vpc: ec2.IVpc) -> None:
        if self._subnet_is_one_of(vpc.isolated_subnets):
            Annotations.of(self).add_warning_v2(
                "efa-cdk:isolated-subnet",
                "The nodes' subnet has no route out: the node software needs VPC endpoints for S3, SSM, "
                "EC2 and CloudFormation, and an image with EFA preinstalled (the installer is downloaded).",
            )

    def _warn_if_public_without_address(self, vpc: ec2.IVpc, node_count: int) -> None:
        """A public subnet routes out through the internet gateway, which carries only traffic from a
        public address, and EC2 gives none to an instance with several network interfaces."""
        if not self._subnet_is_one_of(vpc.public_subnets):
            return
        with_address = 0 if self.node_group is NodeGroup.ASG else self.public_ip.count(node_count)
        interfaces = len(self.layout.interfaces)
        if with_address < node_count and interfaces > 1:
            Annotations.of(self).add_warning_v2(
                "efa-cdk:public-subnet-without-public-address",
                f"{node_count - with_address} of {node_count} nodes in the public subnet "
                f"{self.subnet.node.path} get no public address ({interfaces} network interfaces: EC2 "
                "assigns none, and their subnet's route out is the internet gateway), so they cannot reach "
                "S3, SSM or the EFA installer: put them in a private subnet with NAT (subnet=), or give them "
                "Elastic IPs (public_ip=PublicIp.ALL).",
            )

    def _warn_if_gaudi_without_runtime(self) -> None:
        it = self.instance_type  # (default_for refuses types without a default image: Gaudi has one)
        if it.accelerator.kind is not AcceleratorKind.GAUDI:
            return
        if self.machine_image.parameter_name == EfaMachineImage.default_for(it).parameter_name:
            Annotations.of(self).add_warning_v2(
                "efa-cdk:gaudi-image",
                f"A container on {it.name} with the default image (Amazon Linux 2023, no Intel Gaudi "
                "driver or habana container runtime): the container step will stop the deploy with that "
                "reason. AWS publishes no current image for first-gen Gaudi (the Intel Gaudi Support "
                "Matrix lists it up to 1.21.0): pass an image with the Intel Gaudi software installed, "
                "machine_image=EfaMachineImage.from_ami_id(...).",
            )

    def _group(self, id_: str, node_count: int) -> EfaAutoScalingGroup:
        """The Auto Scaling node group (``NodeGroup``): with the node software, every node signals it."""
        software = self.node_software
        return EfaAutoScalingGroup(
            self,
            "NodeGroup",
            vpc=self._vpc,
            launch_template=self.launch_template,
            subnet=self.subnet,
            node_count=node_count,
            name=f"{id_}-node",
            signal_timeout=Duration.minutes(software.signal_timeout_minutes) if software else None,
        )

    def _explicit_nodes(self, id_: str, node_count: int, eip_subnet: ec2.ISubnet | None) -> list[EfaNode]:
        """Explicit nodes Node0..NodeN-1, the first ``public_ip.count(N)`` with an Elastic IP."""
        return [
            EfaNode(
                self,
                f"Node{i}",
                index=i,
                launch_template=self.launch_template,
                name=f"{id_}-node{i}",
                public_subnet=eip_subnet if i < self.public_ip.count(node_count) else None,
                security_group=self.security_group,
                replacement=self._replacements.get(i, ""),
            )
            for i in range(node_count)
        ]

    @property
    def connections(self) -> ec2.Connections:
        """The EFA security group's connections (``ec2.IConnectable``)."""
        return self.security_group.connections

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The nodes' role (``iam.IGrantable``): what you grant it, every node can do."""
        return self.role

    @property
    def ssh_key(self) -> ec2.KeyPair | None:
        """The cluster's SSH key pair (private key in SSM), or None without node software."""
        return self.software.ssh_key if self.software else None

    @property
    def benchmark_results(self) -> str | None:
        """The leader's benchmark report (a token), or None when no benchmarks run."""
        return self.benchmark_report.results if self.benchmark_report else None

    @property
    def _launched(self) -> list[CfnResource]:
        """The resources that launch nodes: the instances, or the Auto Scaling group."""
        if self.auto_scaling_group is not None:
            return [self.auto_scaling_group.auto_scaling_group]
        return [n.instance for n in self.nodes]

    def _benchmark_report(self, benchmarks: Sequence[Benchmark]) -> BenchmarkReport | None:
        """Where the leader reports its benchmarks (``Benchmarks``), when the node software runs any."""
        software = self.node_software
        if software is None or not benchmarks:
            return None
        return BenchmarkReport(
            self, "Benchmarks", nodes=self._launched, timeout_minutes=software.benchmark_timeout_minutes
        )

    def _add_node_software(
        self, node_count: int, benchmarks: Sequence[Benchmark]
    ) -> NodeSoftwareInstallation:
        """The software installation (``Software``) and the nodes' creation policies."""
        software = self.node_software
        assert software is not None
        installation = NodeSoftwareInstallation(
            self,
            "Software",
            software=software,
            settings={
                **software.settings(self.instance_type, self.layout, self.machine_image.login_user),
                "EFA_CDK_STACK": Aws.STACK_NAME,
                "EFA_CDK_REGION": Aws.REGION,
                "EFA_CDK_CLUSTER": self.cluster_tag,
                **({"EFA_CDK_VPC_CIDR": cidr} if (cidr := known_cidr(self._vpc)) else {}),
                **(self.monitoring.settings if self.monitoring else {}),
                **(self.container.settings(self.instance_type) if self.container else {}),
                **(self.lustre.client_settings(self.instance_type) if self.lustre else {}),
            },
            role=self.role,
            user_data=self.node_user_data,
            node_count=node_count,
            parameter_path=self.parameter_path,
            benchmarks=benchmarks,
            benchmark_url=self.benchmark_report.url if self.benchmark_report else None,
        )
        timeout = f"PT{software.signal_timeout_minutes}M"
        for node in self.nodes:
            node.instance.cfn_options.creation_policy = CfnCreationPolicy(
                resource_signal=CfnResourceSignal(count=1, timeout=timeout)
            )
        return installation

    @staticmethod
    def _default_subnet(vpc: ec2.IVpc) -> ec2.ISubnet:
        subnets = vpc.private_subnets or vpc.isolated_subnets
        if not subnets:
            raise EfaConfigError(
                "subnet",
                code="efa-cdk:vpc-without-private-subnet",
                value=None,
                why="the VPC has no private subnet to put the nodes in",
                fix="pass subnet= explicitly (one subnet: EFA traffic stays in one AZ)",
            )
        return subnets[0]

    def benchmark_output(self, scope: Construct, id_: str = "BenchmarkResults") -> CfnOutput | None:
        """A stack output with the leader's benchmark results (None when no benchmarks run).

        Its value is the wait condition's data: ``{"benchmarks": "<JSON list of results>"}``.
        """
        return self.benchmark_report.add_output(scope, id_) if self.benchmark_report else None

    @property
    def private_ips(self) -> list[str]:
        """Each node's primary private IP (tokens, in node order)."""
        return [n.private_ip for n in self.nodes]

    @property
    def public_ips(self) -> list[str | None]:
        """Each node's Elastic IP (tokens), or None for nodes without one, in node order."""
        return [n.public_address.public_ip if n.public_address else None for n in self.nodes]
