"""`EfaParallelCluster`: everything a ParallelCluster EFA cluster needs around it, plus its config.

Network (public subnet for the head node, private subnet with NAT for compute, one AZ), the EFA
security group and cluster placement group shared with the standalone clusters, retained shared
storage, a key pair, the node bootstrap (EFA environment, the /etc/hosts fix, Slurm job
templates), and the ParallelCluster YAML that refers to all of them. Optionally the cluster
itself, through ParallelCluster's published CloudFormation custom-resource provider.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import jsii
from aws_cdk import Aws, CfnOutput, CfnStack, CustomResource, RemovalPolicy, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct
from typing_extensions import Unpack

from ..core.benchmarks import collectives
from ..core.capacity import Capacity, CapacityKind
from ..core.catalogue import InstanceType, check_ec2_type
from ..core.errors import EfaConfigError
from ..core.options import DEFAULT_MAX_COUNT, DEFAULT_MIN_COUNT, SHARED_DIR, check_zone_of_subnet
from ..core.pcluster import (
    DEFAULT_HEAD_NODE_TYPE,
    PCLUSTER_VERSION,
    ComputeResource,
    ParallelClusterConfig,
    SharedStorage,
    SlurmQueue,
)
from ..core.pcluster_rules import PCLUSTER_MANAGED_TOPOLOGY_PREFIXES
from ..core.settings import NodeEnv
from ..core.software import (
    NEURON_REPO_KEY_ID,
    NEURON_SDK_PACKAGES,
    PCLUSTER_HEAD_START_STEPS,
    EfaUserData,
    accelerator_settings,
    bootstrap_script,
    pcluster_compute_steps,
    pcluster_head_steps,
)
from ._node_base import EfaNodeBase
from ._shared import NodeScripts, cluster_tag, session_manager_statement
from .acknowledgements import acknowledge
from .arguments import checked
from .capacity_block import EfaCapacityBlockEnd
from .lustre import EfaLustreFileSystem, lustre_client_settings
from .machine_image import EfaMachineImage
from .network import EfaNetwork, known_cidr
from .options import NodeTemplateOptions, ParallelClusterOptions, plan_of, storage_of
from .orchestrator_images import image_for
from .storage import EfaSharedStorage, admitted, lustre_for_rules, lustre_in_use

#: The file name of the rendered bootstrap in the assets (ParallelCluster's OnNodeConfigured).
PCLUSTER_BOOTSTRAP = "pcluster-bootstrap.sh"


@jsii.implements(ec2.IConnectable)
class EfaParallelCluster(Construct):
    """The infrastructure and configuration of a ParallelCluster Slurm cluster with an EFA queue.

    It takes the same types as :class:`EfaCluster` for the same concepts (key pair, SSH peers,
    capacity, an existing VPC), and is ``IConnectable`` through its EFA security group.

    Node options (:class:`NodeOptions`, each documented there): ``instance_type`` (the compute queue's),
    ``capacity`` (not a reservation group: ParallelCluster's queues take one reservation),
    ``placement_group``.

    Storage options (:class:`StorageOptions`, each documented there): ``efs_throughput_mibps``,
    ``fsx_lustre_capacity_gib``, ``fsx_lustre_throughput``, ``fsx_lustre_efa`` (ParallelCluster 3.16
    configures no Lustre client over EFA itself: every compute node sets LNet up over EFA at OnNodeStart,
    before ParallelCluster mounts the file system, the ``lustre-lnet`` step, and proves at OnNodeConfigured
    that its Lustre traffic rides EFA, the ``lustre-client`` step), ``fsx_lustre_gds``,
    ``storage_removal_policy``.

    Args:
        min_count: static compute nodes. Default: 0.
        max_count: static + dynamic compute nodes. Default: 2.
        vpc: an existing VPC. Default: an :class:`EfaNetwork` is created (``Network``).
        head_node_subnet: with ``vpc``: the head node's public subnet.
        compute_subnet: with ``vpc``: the compute nodes' private subnet (with a route out).
        availability_zone: the AZ of a created network (pick one that offers the type).
            Default: the region's first.
        head_node_instance_type: the head node's type. Default: ``ec2.InstanceType("c5.2xlarge")``.
        machine_image: the nodes' image, one of ParallelCluster's own:
            ``EfaMachineImage.parallel_cluster(image_os)`` (its Image.Os). Default: ubuntu2204's.
        image_os: deprecated (0.2.0), the same as
            ``machine_image=EfaMachineImage.parallel_cluster(image_os)``.
        queue_name: the Slurm partition. Default: ``compute``.
        key_pair: an EC2 key pair for SSH to the head node. Default: one is created
            (ed25519; private key in SSM Parameter Store ``/ec2/keypair/<id>``).
        ssh_peers: at most one source allowed to SSH to the head node (ParallelCluster's
            ``AllowedIps`` takes one CIDR or prefix list). Default: the VPC's own CIDR only (reach
            the head node with Session Manager); ParallelCluster opens SSH to 0.0.0.0/0 when
            ``AllowedIps`` is missing, so it is always written.
        lustre: an FSx for Lustre file system made elsewhere: an :class:`EfaLustreFileSystem` of this app, or
            one that exists (``EfaLustreFileSystem.from_file_system_attributes``), in ParallelCluster's
            ``SharedStorage`` by its id at its ``mount_dir``; the cluster's group is admitted to it, and with
            EFA the compute nodes move to EFA as with ``fsx_lustre_efa``. Not with
            ``fsx_lustre_capacity_gib``. Default: none.
        create_cluster: also create the cluster with ParallelCluster's custom resource.
            Default: False (deploy the YAML output with ``pcluster create-cluster``).

    In a Capacity Block, EC2's warning before the block ends reaches the head node
    (``capacity_block_end``: ``efa_constructs.cdk.capacity_block.EfaCapacityBlockEnd``, by the
    ``efa-cdk:cluster`` tag the configuration puts on every instance), which drains the queue's nodes in
    Slurm with the end time as the reason and writes the end
    time to ``/shared/.efa-cdk/capacity-block-ending``.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        min_count: int = DEFAULT_MIN_COUNT,
        max_count: int = DEFAULT_MAX_COUNT,
        vpc: ec2.IVpc | None = None,
        head_node_subnet: ec2.ISubnet | None = None,
        compute_subnet: ec2.ISubnet | None = None,
        availability_zone: str | None = None,
        head_node_instance_type: ec2.InstanceType | None = None,
        machine_image: EfaMachineImage | None = None,
        image_os: str | None = None,
        queue_name: str = "compute",
        key_pair: ec2.IKeyPair | None = None,
        ssh_peers: Sequence[ec2.IPeer] = (),
        lustre: EfaLustreFileSystem | None = None,
        create_cluster: bool = False,
        **node: Unpack[ParallelClusterOptions],
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        storage = storage_of(node)
        # ParallelCluster lays out the compute nodes' interfaces itself: the plan's type and capacity are used
        self.plan = plan_of(cast(NodeTemplateOptions, node))  # none of the template's options given
        it = self.plan.instance_type
        #: The nodes' image (ParallelCluster's own, by its Image.Os).
        self.machine_image = image_for(self, "EfaParallelCluster", it, machine_image, image_os=image_os)
        head_type = (head_node_instance_type or ec2.InstanceType(DEFAULT_HEAD_NODE_TYPE)).to_string()
        check_ec2_type(head_type, "head_node_instance_type")
        capacity = self.plan.capacity
        _check_inputs(vpc, head_node_subnet, compute_subnet, ssh_peers)
        mounted = lustre_for_rules(lustre, storage)
        self.network, vpc, head_node_subnet, compute_subnet = self._network(
            vpc, head_node_subnet, compute_subnet, availability_zone
        )
        self.vpc = vpc
        # One group for head and compute (EFA's all traffic to itself; Slurm, NFS). The placement group as
        # EfaCluster's (core.capacity): new On-Demand; with a reservation its own group or none
        # (ParallelCluster's PlacementGroupCapacityReservationValidator); never with a Capacity Block.
        base = EfaNodeBase(self, self.plan, orchestrator="EfaParallelCluster", vpc=vpc,
                           subnets={"compute_subnet": compute_subnet, "head_node_subnet": head_node_subnet},
                           count=max_count, count_name="max_count", min_count=min_count, min_name="min_count",
                           availability_zone=availability_zone, lustre=mounted,
                           placement_group=node.get("placement_group"))  # fmt: skip
        self.security_group, self.placement_group = base.security_group, base.placement_group
        _check_capacity(capacity)  # after the node rules: a group of another region is refused as by all
        #: The Lustre file system given as ``lustre`` (admitted here), or None.
        self.lustre = lustre
        self._lustre_after = admitted(lustre, self.security_group)
        self.storage = EfaSharedStorage(
            self, "Storage", vpc=vpc, subnet=compute_subnet, clients=self.security_group, **storage
        )
        #: The head node's key pair: yours, or one the construct created (``created_key_pair``).
        self.key_pair: ec2.IKeyPair = key_pair or ec2.KeyPair(self, "KeyPair", type=ec2.KeyPairType.ED25519)

        #: The value of the ``efa-cdk:cluster`` tag on the cluster's instances (with a Capacity Block: the
        #: warning's Run Command finds the head node by it).
        self.cluster_tag = cluster_tag(self)
        self._add_bootstrap(it, queue_name)
        self.config = self._render_config(
            instance_type=it.name,
            min_count=min_count,
            max_count=max_count,
            capacity=capacity,
            image_os=self.machine_image.launcher_image,
            head_node_instance_type=head_type,
            head_node_subnet=head_node_subnet,
            compute_subnet=compute_subnet,
            queue_name=queue_name,
            ssh_peers=ssh_peers,
        )
        self.config_yaml = self.config.to_yaml()
        #: In a Capacity Block: EC2's warning before the block ends, run on the head node (below).
        end = EfaCapacityBlockEnd.of(self, capacity, self.cluster_tag)
        self.capacity_block_end: EfaCapacityBlockEnd | None = end
        self.cluster: CustomResource | None = self._create_cluster() if create_cluster else None

    def _network(
        self,
        vpc: ec2.IVpc | None,
        head_node_subnet: ec2.ISubnet | None,
        compute_subnet: ec2.ISubnet | None,
        availability_zone: str | None,
    ) -> tuple[EfaNetwork | None, ec2.IVpc, ec2.ISubnet, ec2.ISubnet]:
        """A new :class:`EfaNetwork` (``Network``) and its subnets, or the VPC and subnets given (checked
        by ``_check_inputs``), where the compute subnet decides the zone."""
        if vpc is None:
            network = EfaNetwork(self, "Network", availability_zone=availability_zone)
            return network, network.vpc, network.public_subnet, network.private_subnet
        assert head_node_subnet is not None and compute_subnet is not None  # _check_inputs
        subnet_zone = compute_subnet.availability_zone
        zone = None if Token.is_unresolved(subnet_zone) else subnet_zone
        check_zone_of_subnet(availability_zone, zone, used_unknown=False)
        _check_head_node_zone(head_node_subnet, zone)
        return None, vpc, head_node_subnet, compute_subnet

    def _topology_policy(self) -> iam.ManagedPolicy:
        """What the head node's slurm-topology.sh reads: the compute nodes' instances and their EC2
        instance topology (read-only Describe actions; neither takes a resource)."""
        policy = iam.ManagedPolicy(
            self,
            "HeadNodeTopology",
            description="efa-cdk: Slurm topology from EC2 instance topology (head node)",
            statements=[
                iam.PolicyStatement(
                    actions=["ec2:DescribeInstances", "ec2:DescribeInstanceTopology"], resources=["*"]
                )
            ],
        )
        acknowledge(policy, "AwsSolutions-IAM5[Resource::*]")
        return policy

    def _render_config(
        self,
        *,
        instance_type: str,
        min_count: int,
        max_count: int,
        capacity: Capacity,
        image_os: str,
        head_node_instance_type: str,
        head_node_subnet: ec2.ISubnet,
        compute_subnet: ec2.ISubnet,
        queue_name: str,
        ssh_peers: Sequence[ec2.IPeer],
    ) -> ParallelClusterConfig:
        """The ParallelCluster configuration that refers to everything this construct created."""
        compute = ComputeResource(
            name=instance_type.replace(".", "-")[:25],
            instance_types=(instance_type,),
            catalogue=(self.plan.instance_type,),
            min_count=_as_written(min_count),
            max_count=_as_written(max_count),
            capacity_reservation_id=capacity.target,
        )
        storage = [SharedStorage("shared", SHARED_DIR, "Efs", self.storage.file_system.file_system_id)]
        used = lustre_in_use(self.lustre, self.storage)
        if used is not None:
            file_system, _, mount_dir = used
            storage.append(SharedStorage("lustre", mount_dir, "FsxLustre", file_system.file_system_id))
        queue = self._queue(queue_name, compute_subnet, compute, capacity)
        # Slurm's topology/tree, unless ParallelCluster sets up its own plugin for the type (UltraServers).
        # Its first topology.conf is written at OnNodeStart, before ParallelCluster starts slurmctld.
        tree = not instance_type.startswith(PCLUSTER_MANAGED_TOPOLOGY_PREFIXES)
        block = capacity.kind is CapacityKind.CAPACITY_BLOCK
        return ParallelClusterConfig(
            region=Aws.REGION,
            image_os=image_os,
            head_node_instance_type=head_node_instance_type,
            head_node_subnet_id=head_node_subnet.subnet_id,
            key_name=self.key_pair.key_pair_name,
            ssh_cidr=ssh_peers[0].unique_id if ssh_peers else self._vpc_cidr(),
            queues=(queue,),
            shared_storage=tuple(storage),
            head_node_security_group_ids=(self.security_group.security_group_id,),
            head_node_on_node_start=self._entry_url if tree else None,
            head_node_on_node_start_args=(
                *self._bootstrap_args(",".join(PCLUSTER_HEAD_START_STEPS)),
                f"EFA_CDK_SLURM_NODES={' '.join(queue.slurm_nodes)}",
            )
            if tree
            else (),
            head_node_on_node_configured=self._entry_url,
            head_node_on_node_configured_args=self._bootstrap_args(
                ",".join(pcluster_head_steps(topology_tree=tree))
            ),
            head_node_s3_read=self._read,
            head_node_policies=self._head_node_policies(tree, block),
            topology_tree=tree,
            tags=(("efa-cdk:cluster", self.cluster_tag),) if block else (),
        )

    def _head_node_policies(self, tree: bool, block: bool) -> tuple[str, ...]:
        """The topology's reads; in a Capacity Block, the SSM agent's (the warning's Run Command reaches
        the head node through it: ParallelCluster 3.16 gives its roles no SSM policy of its own)."""
        out: tuple[str, ...] = (self._topology_policy().managed_policy_arn,) if tree else ()
        if block:
            agent = iam.ManagedPolicy(
                self,
                "HeadNodeRunCommand",
                statements=[session_manager_statement()],
                description="efa-cdk: the head node's SSM agent (the Capacity Block warning's Run Command)",
            )
            acknowledge(agent, "AwsSolutions-IAM5[Resource::*]")  # the agent's actions take no resource
            out += (agent.managed_policy_arn,)
        return out

    def _vpc_cidr(self) -> str:
        """The VPC's CIDR, the default AllowedIps; refused when CDK does not know it (an imported VPC)."""
        cidr = known_cidr(self.vpc)
        if cidr is None:
            raise EfaConfigError(
                "ssh_peers",
                code="efa-cdk:pcluster-ssh-cidr-unknown",
                value=[],
                why="the existing VPC's CIDR is not known at synth, and ParallelCluster opens SSH to "
                "0.0.0.0/0 when AllowedIps is missing",
                fix="pass one SSH source (ssh_peers: the VPC's CIDR, or your address/32)",
                context_fix="-c ssh_peers=<the VPC's CIDR, or your address>/32",
            )
        return cidr

    def _add_bootstrap(self, it: InstanceType, queue_name: str) -> None:
        """The efa-cdk node files (``NodeScripts``, a zip) and the shared bootstrap rendered for
        ParallelCluster's OnNodeConfigured (``Bootstrap``); values known only at deploy are its Args.
        ParallelCluster attaches the compute nodes' EFAs itself: no EFA count is set, and the guard in
        the job templates checks an endpoint on every EFA the node has."""
        staged = EfaUserData().stage()
        settings: NodeEnv = {
            "EFA_CDK_RDMA_READ": "1" if it.rdma_read else "0",
            "EFA_CDK_SLOTS": str(it.mpi_slots),
            "EFA_CDK_COLLECTIVES": collectives(it),
            "EFA_CDK_QUEUES": queue_name,
            "EFA_CDK_SHARED_DIR": SHARED_DIR,
            "EFA_CDK_NEURON_PACKAGES": " ".join(NEURON_SDK_PACKAGES),
            "EFA_CDK_NEURON_KEY_ID": NEURON_REPO_KEY_ID,
            **accelerator_settings(it),  # the compute nodes' devices step: what it checks; mends by Slurm
            "EFA_CDK_NODE_GROUP": "parallelcluster",
        }
        (staged / PCLUSTER_BOOTSTRAP).write_text(bootstrap_script(settings))
        scripts = NodeScripts(self, "NodeScripts", staged)
        entry = NodeScripts(self, "Bootstrap", staged / PCLUSTER_BOOTSTRAP)
        self._scripts_url, self._entry_url = scripts.url, entry.url
        self._read = (scripts.location, entry.location)

    def _queue(
        self, name: str, subnet: ec2.ISubnet, compute: ComputeResource, capacity: Capacity
    ) -> SlurmQueue:
        """The EFA queue: its nodes' steps at OnNodeConfigured, and with a file system over EFA LNet set up at
        OnNodeStart, before ParallelCluster mounts it (the lustre-lnet step)."""
        lustre_args = self._lustre_client_args()
        steps = (
            *pcluster_compute_steps(self.plan.instance_type),
            *(("lustre-client",) if lustre_args else ()),
        )
        return SlurmQueue(
            name=name,
            subnet_ids=(subnet.subnet_id,),
            compute_resources=(compute,),
            placement_group=self.placement_group.placement_group_name if self.placement_group else None,
            use_placement_group=self.placement_group is not None,
            security_group_ids=(self.security_group.security_group_id,),
            on_node_configured=self._entry_url,
            on_node_configured_args=(*self._bootstrap_args(",".join(steps)), *lustre_args),
            on_node_start=self._entry_url if lustre_args else None,
            on_node_start_args=(*self._bootstrap_args("lustre-lnet"), *lustre_args) if lustre_args else (),
            s3_read=self._read,
            capacity_type="CAPACITY_BLOCK" if capacity.kind is CapacityKind.CAPACITY_BLOCK else "ONDEMAND",
        )

    def _lustre_client_args(self) -> tuple[str, ...]:
        """With an EFA-enabled file system, the compute nodes' settings for the ``lustre-client`` step (values
        known at deploy: its Args); else none."""
        used = lustre_in_use(self.lustre, self.storage)
        if used is None or not used[1].efa:
            return ()
        file_system, spec, mount_dir = used
        settings = lustre_client_settings(file_system, spec, self.plan.instance_type, mount_dir)
        return tuple(f"{name}={value}" for name, value in settings.items())

    def _bootstrap_args(self, steps: str) -> tuple[str, ...]:
        return (
            f"EFA_CDK_REGION={Aws.REGION}",
            f"EFA_CDK_SCRIPTS_URL={self._scripts_url}",
            f"EFA_CDK_STEPS={steps}",
        )

    def config_output(self, scope: Construct, id_: str = "ParallelClusterConfig") -> CfnOutput:
        """A stack output with the validated ParallelCluster configuration (YAML): what ``pcluster
        create-cluster --cluster-configuration`` takes, saved as a file."""
        return CfnOutput(
            scope,
            id_,
            value=self.config_yaml,
            description="pcluster create-cluster --cluster-configuration <this, saved as cluster.yaml>",
        )

    @property
    def created_key_pair(self) -> ec2.KeyPair | None:
        """The key pair the construct created (its private key is in SSM), or None when it is yours."""
        return self.key_pair if isinstance(self.key_pair, ec2.KeyPair) else None

    @property
    def connections(self) -> ec2.Connections:
        """The EFA security group of the head and compute nodes (``ec2.IConnectable``)."""
        return self.security_group.connections

    def _create_cluster(self) -> CustomResource:
        """ParallelCluster's custom-resource provider (a nested stack) and the cluster resource."""
        provider = CfnStack(
            self,
            "PclusterProvider",
            template_url=f"https://{Aws.REGION}-aws-parallelcluster.s3.{Aws.REGION}.{Aws.URL_SUFFIX}"
            f"/parallelcluster/{PCLUSTER_VERSION}/templates/custom_resource/cluster.yaml",
        )
        name = f"c-{Stack.of(self).stack_name}"[:60]
        if name == Stack.of(self).stack_name:
            raise EfaConfigError(
                "create_cluster",
                code="efa-cdk:pcluster-name-is-stack-name",
                value=name,
                why="the cluster name must differ from the stack name",
                fix="rename",
            )
        cluster = CustomResource(
            self,
            "Cluster",
            resource_type="Custom::PclusterCluster",
            service_token=provider.get_att("Outputs.ServiceToken").to_string(),
            properties={"ClusterName": name, "ClusterConfiguration": self.config.to_dict()},
            removal_policy=RemovalPolicy.DESTROY,  # the file systems it mounts are retained on their own
        )
        cluster.node.add_dependency(self.storage.file_system.mount_targets_available)  # mounted at boot
        for made in self._lustre_after:  # a Lustre file system given, and the rules to reach it: mounted too
            cluster.node.add_dependency(made)
        return cluster

    @property
    def head_node_ip(self) -> str | None:
        """The head node's public IP (a token) when the construct created the cluster, else None."""
        return self.cluster.get_att_string("headNode.publicIpAddress") if self.cluster else None


def _as_written(count: int) -> int | str:
    """A count as the configuration writes it: a number, or (known at deploy) its reference, which
    CloudFormation writes into the configuration's text."""
    return Token.as_string(count) if Token.is_unresolved(count) else count


def _check_head_node_zone(head_node_subnet: ec2.ISubnet, compute_zone: str | None) -> None:
    """The shared EFS has its one mount target in the compute subnet's zone; ParallelCluster mounts an
    existing file system on the head node through a mount target in the head node's zone, and stops the
    cluster's creation without one. Refused when both zones are known and differ."""
    head_zone = head_node_subnet.availability_zone
    if compute_zone is None or Token.is_unresolved(head_zone) or head_zone == compute_zone:
        return
    raise EfaConfigError(
        "head_node_subnet",
        code="efa-cdk:pcluster-head-node-zone",
        value=head_node_subnet,
        why=f"it is in {head_zone}, and the shared EFS has its one mount target in {compute_zone} (the "
        "compute subnet's zone): the head node could not mount /shared",
        fix=f"pass a public subnet in {compute_zone}",
    )


def _check_inputs(
    vpc: ec2.IVpc | None,
    head_node_subnet: ec2.ISubnet | None,
    compute_subnet: ec2.ISubnet | None,
    ssh_peers: Sequence[ec2.IPeer],
) -> None:
    """Refuse what ParallelCluster or this construct cannot do with the network."""
    if (vpc is None) != (head_node_subnet is None) or (vpc is None) != (compute_subnet is None):
        raise EfaConfigError(
            "vpc",
            code="efa-cdk:pcluster-vpc-without-subnets",
            value=None if vpc is None else vpc.node.path,
            why="an existing VPC needs both head_node_subnet (public) and compute_subnet (private, with a "
            "route out); without a VPC, both are created",
            fix="pass all three of vpc, head_node_subnet and compute_subnet, or none",
        )
    if len(ssh_peers) > 1:
        raise EfaConfigError(
            "ssh_peers",
            code="efa-cdk:pcluster-one-ssh-source",
            value=[p.unique_id for p in ssh_peers],
            why="ParallelCluster's HeadNode.Ssh.AllowedIps takes one CIDR or prefix list",
            fix="pass a single source, e.g. 203.0.113.0/24",
        )


def _check_capacity(capacity: Capacity) -> None:
    """ParallelCluster's capacity: one reservation per compute resource."""
    if capacity.kind is CapacityKind.RESERVATION_GROUP:
        raise EfaConfigError(
            "capacity",
            code="efa-cdk:pcluster-reservation-group",
            value=capacity.target,
            why="ParallelCluster targets one reservation per compute resource, not a group",
            fix="pass Capacity.reservation(cr-...) or Capacity.capacity_block(cr-...)",
        )
