"""The AWS PCS ready stack: an :class:`EfaPcsCluster` (managed Slurm) with its ids as outputs."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from efa_constructs.cdk import EfaMachineImage, EfaPcsCluster, OsFamily
from efa_constructs.core.options import SHARED_DIR

from .base import ReadyStackBase
from .existing import (
    existing_network,
    image_id_parameter,
)
from .params import PCS, PcsParams, ready

#: Ready PCS stacks and the compute instance type of each.
READY_PCS = ready(PCS)


class EfaPcsClusterStack(ReadyStackBase):
    """An :class:`EfaPcsCluster`; without ``-c ami_id`` it asks for an ``ImageId`` at deploy (PCS
    publishes no parameter for an image with its agent, Slurm, EFA and the Neuron driver).

    Args:
        params: validated parameters (see :class:`PcsParams`).
    """

    DESCRIBES = "AWS PCS Slurm cluster with EFA nodes ({instance_type})"

    def __init__(self, scope: Construct, id_: str, *, params: PcsParams, **kwargs: Any) -> None:
        super().__init__(scope, id_, params=params, **kwargs)
        vpc: ec2.IVpc | None = None
        subnet: ec2.ISubnet | None = None
        if params.vpc_id and params.subnet_id and params.availability_zone:
            vpc, subnet, _ = existing_network(
                self,
                vpc_id=params.vpc_id,
                availability_zone=params.availability_zone,
                subnet_id=params.subnet_id,
                public_subnet_id=None,
            )
        ami_id = params.ami_id or self._image_parameter(params)
        self.pcs = EfaPcsCluster(
            self,
            "Pcs",
            machine_image=EfaMachineImage.from_ami_id(ami_id, os_family=OsFamily.parse(params.ami_family)),
            min_count=params.min_count,
            max_count=params.max_count,
            vpc=vpc,
            subnet=subnet,
            availability_zone=self.zone(chosen_at_deploy=vpc is None),
            slurm_version=params.slurm_version,
            size=params.pcs_size,
            login_instance_type=ec2.InstanceType(params.login_instance_type)
            if params.login_instance_type
            else None,
            **self.storage_options(),
            **self.node_options(),
        )
        self._outputs()

    def _image_parameter(self, params: PcsParams) -> str:
        """An ImageId parameter `cdk deploy` asks for: AWS publishes no PCS image parameter."""
        return image_id_parameter(
            self,
            params.instance_type,
            description=f"An AMI for AWS PCS nodes ({params.instance_type} and the login node): the PCS "
            f"agent, PCS's Slurm {params.slurm_version}, the EFA software and the accelerator's drivers "
            "(aws-hpc-recipes recipes/pcs/hpc_ready_ami; for Trainium, a Neuron DLAMI with them added: "
            "docs/pcs.md)",
            why="on AWS PCS needs an image with the PCS agent and PCS's Slurm, for which AWS publishes no "
            "parameter",
        )

    def _outputs(self) -> None:
        """The cluster's id, login nodes, queue and file system (and a Capacity Block's id), as outputs."""
        self.capacity_block_output()
        CfnOutput(
            self,
            "ClusterId",
            value=self.pcs.cluster_id,
            description="aws pcs get-cluster --cluster-identifier",
        )
        if self.pcs.login_nodes is not None:
            CfnOutput(
                self,
                "LoginNodeGroupId",
                value=self.pcs.login_nodes.attr_id,
                description="the login nodes: aws ec2 describe-instances --filters "
                "Name=tag:aws:pcs:compute-node-group-id,Values=<this>, "
                "then aws ssm start-session --target <id>",
            )
        CfnOutput(self, "QueueName", value=str(self.pcs.queue.name), description="sbatch -p <this>")
        CfnOutput(
            self,
            "SharedFileSystemId",
            value=self.pcs.storage.file_system.file_system_id,
            description=f"EFS mounted at {SHARED_DIR} on every node (retained when the stack is deleted)",
        )
