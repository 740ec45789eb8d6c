"""`EfaParallelCluster`: everything a ParallelCluster EFA cluster needs around it, plus its config.

Network (public subnet for the head node, private subnet with NAT for compute, one AZ), the EFA
security group and cluster placement group shared with the standalone clusters, retained shared
storage, a key pair, the node bootstrap (EFA environment, the /etc/hosts fix, Slurm job
templates), and the ParallelCluster YAML that refers to all of them. Optionally the cluster
itself, through ParallelCluster's published CloudFormation custom-resource provider.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, CfnStack, CustomResource, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from .catalogue import instance_type as lookup
from .errors import EfaConfigError
from .network import EfaNetwork
from .node_software import EfaUserData
from .pcluster import (
    PCLUSTER_VERSION,
    ComputeResource,
    ParallelClusterConfig,
    SharedStorage,
    SlurmQueue,
)
from .security_group import EfaSecurityGroup, ssh_peer
from .storage import EfaSharedStorage

SHARED_DIR = "/shared"
LUSTRE_DIR = "/fsx"


class EfaParallelCluster(Construct):
    """The infrastructure and configuration of a ParallelCluster Slurm cluster with an EFA queue.

    Args:
        instance_type: the compute queue's EFA instance type.
        min_count: static compute nodes. max_count: static + dynamic compute nodes.
        availability_zone: the one AZ (pick one that offers the type). Default: the region's first.
        head_node_instance_type: the head node's type. Default: c5.2xlarge.
        image_os: ParallelCluster's Image.Os. Default: ubuntu2204.
        queue_name: the Slurm partition. Default: ``compute``.
        key_pair_name: an existing key pair for SSH to the head node. Default: one is created
            (ed25519; private key in SSM Parameter Store ``/ec2/keypair/<id>``).
        ssh_cidr: CIDR allowed to SSH to the head node. Default: none (Session Manager).
        efs_throughput_mibps: EFS provisioned throughput. Default: 1024.
        fsx_lustre_capacity_gib: also create FSx for Lustre of this size. Default: none.
        storage_removal_policy: Default: RETAIN (file systems outlive the stack).
        capacity_reservation_id: a Capacity Reservation / Capacity Block for the compute nodes.
        capacity_block: True when ``capacity_reservation_id`` is a Capacity Block.
        create_cluster: also create the cluster with ParallelCluster's custom resource.
            Default: False (deploy the YAML output with ``pcluster create-cluster``).
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        instance_type: str,
        min_count: int = 0,
        max_count: int = 2,
        availability_zone: str | None = None,
        head_node_instance_type: str = "c5.2xlarge",
        image_os: str = "ubuntu2204",
        queue_name: str = "compute",
        key_pair_name: str | None = None,
        ssh_cidr: str | None = None,
        efs_throughput_mibps: int = 1024,
        fsx_lustre_capacity_gib: int | None = None,
        storage_removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        capacity_reservation_id: str | None = None,
        capacity_block: bool = False,
        create_cluster: bool = False,
    ) -> None:
        super().__init__(scope, id_)
        it = lookup(instance_type)
        if ssh_cidr is not None:
            ssh_peer(ssh_cidr)  # validates
        self.network = EfaNetwork(self, "Network", availability_zone=availability_zone)
        vpc = self.network.vpc
        # One group for head and compute: EFA needs all traffic to and from itself, and the head
        # node talks to the compute nodes (Slurm, NFS) through it as well.
        self.security_group = EfaSecurityGroup(self, "SecurityGroup", vpc=vpc)
        self.placement_group = None
        if not capacity_block:
            self.placement_group = ec2.PlacementGroup(
                self, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER
            )
        self.storage = EfaSharedStorage(
            self,
            "Storage",
            vpc=vpc,
            subnet=self.network.private_subnet,
            clients=self.security_group,
            efs_throughput_mibps=efs_throughput_mibps,
            fsx_lustre_capacity_gib=fsx_lustre_capacity_gib,
            removal_policy=storage_removal_policy,
        )
        #: The key pair the stack created, or None when ``key_pair_name`` names yours.
        self.key_pair: ec2.KeyPair | None = None
        if key_pair_name is None:
            self.key_pair = ec2.KeyPair(self, "KeyPair", type=ec2.KeyPairType.ED25519)
            key_pair_name = self.key_pair.key_pair_name

        # Bootstrap: the efa-cdk scripts (zip) and the ParallelCluster entry script (a file).
        staged = EfaUserData().stage()
        scripts = s3_assets.Asset(self, "NodeScripts", path=str(staged))
        entry = s3_assets.Asset(self, "Bootstrap", path=str(staged / "pcluster-bootstrap.sh"))
        read = ((scripts.s3_bucket_name, scripts.s3_object_key), (entry.s3_bucket_name, entry.s3_object_key))
        rdma = "1" if it.rdma_read else "0"

        def bootstrap_args(steps: str) -> tuple[str, ...]:
            return (Aws.REGION, scripts.s3_object_url, rdma, str(it.mpi_slots), steps, queue_name)

        compute = ComputeResource(
            name=instance_type.replace(".", "-")[:25],
            instance_types=(instance_type,),
            min_count=min_count,
            max_count=max_count,
            capacity_reservation_id=capacity_reservation_id,
        )
        storage = [SharedStorage("shared", SHARED_DIR, "Efs", self.storage.file_system.file_system_id)]
        if self.storage.lustre is not None:
            storage.append(
                SharedStorage("lustre", LUSTRE_DIR, "FsxLustre", self.storage.lustre.file_system_id)
            )
        self.config = ParallelClusterConfig(
            region=Aws.REGION,
            image_os=image_os,
            head_node_instance_type=head_node_instance_type,
            head_node_subnet_id=self.network.public_subnet.subnet_id,
            key_name=key_pair_name,
            ssh_cidr=ssh_cidr,
            queues=(
                SlurmQueue(
                    name=queue_name,
                    subnet_ids=(self.network.private_subnet.subnet_id,),
                    compute_resources=(compute,),
                    placement_group=self.placement_group.placement_group_name
                    if self.placement_group
                    else None,
                    security_group_ids=(self.security_group.security_group_id,),
                    on_node_configured=entry.s3_object_url,
                    on_node_configured_args=bootstrap_args("efa-env,pcluster-hosts"),
                    s3_read=read,
                    capacity_type="CAPACITY_BLOCK" if capacity_block else "ONDEMAND",
                ),
            ),
            shared_storage=tuple(storage),
            head_node_security_group_ids=(self.security_group.security_group_id,),
            head_node_on_node_configured=entry.s3_object_url,
            head_node_on_node_configured_args=bootstrap_args("efa-env,slurm-jobs"),
            head_node_s3_read=read,
        )
        self.config_yaml = self.config.to_yaml()
        self.cluster: CustomResource | None = None
        if create_cluster:
            self.cluster = self._create_cluster()

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
        CfnOutput(self, "HeadNodeIp", value=cluster.get_att_string("headNode.publicIpAddress"))
        return cluster
