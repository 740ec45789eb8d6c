"""The ParallelCluster ready stack: network, EFA group, placement group, retained storage, key
pair and the validated ParallelCluster configuration as an output (optionally the cluster itself)."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from efa_constructs.cdk import EfaMachineImage, EfaParallelCluster, ssh_peer
from efa_constructs.core.options import SHARED_DIR

from .base import ReadyStackBase
from .existing import (
    existing_key_pair,
    existing_network,
)
from .params import PCLUSTER, PclusterParams, ready

#: Ready ParallelCluster stacks and the compute instance type of each (of the one table).
READY_PCLUSTERS = ready(PCLUSTER)


class EfaParallelClusterStack(ReadyStackBase):
    """An :class:`EfaParallelCluster` with its configuration in the outputs.

    Args:
        params: validated parameters (see :class:`PclusterParams`).
    """

    DESCRIBES = "ParallelCluster network, storage, config ({instance_type})"

    def __init__(self, scope: Construct, id_: str, *, params: PclusterParams, **kwargs: Any) -> None:
        super().__init__(scope, id_, params=params, **kwargs)
        vpc: ec2.IVpc | None = None
        compute_subnet: ec2.ISubnet | None = None
        head_subnet: ec2.ISubnet | None = None
        if params.vpc_id and params.subnet_id and params.public_subnet_id and params.availability_zone:
            vpc, compute_subnet, head_subnet = existing_network(
                self,
                vpc_id=params.vpc_id,
                availability_zone=params.availability_zone,
                subnet_id=params.subnet_id,
                public_subnet_id=params.public_subnet_id,
            )
        self.pcluster = EfaParallelCluster(
            self,
            "ParallelCluster",
            vpc=vpc,
            head_node_subnet=head_subnet,
            compute_subnet=compute_subnet,
            min_count=params.min_count,
            max_count=params.max_count,
            availability_zone=self.zone(chosen_at_deploy=vpc is None),
            head_node_instance_type=ec2.InstanceType(params.head_node_instance_type),
            machine_image=EfaMachineImage.parallel_cluster(params.image_os),
            key_pair=existing_key_pair(self, params.key_pair),
            ssh_peers=[ssh_peer(c) for c in params.ssh_peers],
            **self.storage_options(),
            **self.node_options(),
            create_cluster=params.create_cluster,
        )
        self._outputs()

    def _outputs(self) -> None:
        """The configuration to deploy, the head node's address and key, the file system, as outputs."""
        self.pcluster.config_output(self)
        self.capacity_block_output()
        if self.pcluster.head_node_ip is not None:
            CfnOutput(
                self, "HeadNodeIp", value=self.pcluster.head_node_ip, description="pcluster ssh, or ssh to it"
            )
        key = self.pcluster.created_key_pair
        if key is not None:
            CfnOutput(
                self,
                "KeyPairParameter",
                value=f"/ec2/keypair/{key.key_pair_id}",
                description="SSM parameter with the head node's private SSH key (aws ssm get-parameter "
                "--with-decryption --name <this>)",
            )
        CfnOutput(
            self,
            "SharedFileSystemId",
            value=self.pcluster.storage.file_system.file_system_id,
            description=f"EFS mounted at {SHARED_DIR} (retained when the stack is deleted); job templates in "
            f"{SHARED_DIR}/jobs",
        )
