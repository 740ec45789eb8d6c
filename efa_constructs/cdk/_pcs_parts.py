"""The parts of an AWS PCS cluster that are PCS's rules rather than the cluster's wiring: the node group's
name, the role PCS takes, the login node's launch template, and what the nodes' Slurm notice needs in a
Capacity Block.
"""

from __future__ import annotations

import hashlib

from aws_cdk import Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_pcs as pcs
from constructs import Construct

from ..core.capacity import Capacity, CapacityKind
from ..core.errors import EfaConfigError
from ..core.node_plan import NodePlan
from ..core.options import (
    SHARED_DIR,
)
from ..core.settings import NodeEnv

#: The IAM path that lets PCS accept a role and instance profile whatever their names.
PCS_IAM_PATH = "/aws-pcs/"


#: The login node type per architecture (aws-hpc-recipes recipes/pcs/getting_started: c7i / c7g .xlarge).
DEFAULT_LOGIN_TYPES = {"x86_64": "c7i.xlarge", "arm64": "c7g.xlarge"}


#: Where PCS's Slurm is on a node, one folder per version: slurm-<version> (AWS's PCS image recipe installs it
#: there: aws-samples/aws-hpc-recipes recipes/pcs/hpc_ready_ami/assets/scripts/install-pcs-slurm.sh).
PCS_SLURM_ROOT = "/opt/aws/pcs/scheduler"


def node_group_name(base: str, instance_type: str) -> str:
    """A node group's name: `base` and 6 hex digits of its instance type, at most 25 characters (PCS's
    limit, as for queues). InstanceConfigs and Name are both create-only (CloudFormation's
    AWS::PCS::ComputeNodeGroup schema), and CloudFormation creates the new group before it deletes the
    old one, in the same cluster: a fixed name would collide on a type change; this one changes with it."""
    digest = hashlib.sha256(instance_type.encode()).hexdigest()[:6]
    return f"{base[: 25 - 7]}-{digest}"


def check_pcs_role(role: iam.IRole) -> None:
    """PCS accepts a role whose name starts with AWSPCS or whose path is /aws-pcs/; a role made in
    this app is checked (an imported role's path is not known at synth)."""
    cfn = role.node.default_child
    if not isinstance(cfn, iam.CfnRole):
        return
    name = cfn.role_name
    if cfn.path == PCS_IAM_PATH or (
        name is not None and not Token.is_unresolved(name) and name.startswith("AWSPCS")
    ):
        return
    raise EfaConfigError(
        "role",
        code="efa-cdk:pcs-role-path",
        value=role.node.path,
        why="AWS PCS accepts an instance profile only when its role's name starts with AWSPCS or its path is "
        "/aws-pcs/",
        fix="create the role with path='/aws-pcs/' (or role_name='AWSPCS...'), or leave role unset",
    )


def _block_settings(capacity: Capacity, queue_name: str, slurm_version: str) -> NodeEnv:
    """In a Capacity Block, what the nodes' Slurm notice needs: the queue, the shared directory and PCS's
    Slurm for the cluster's version; else nothing."""
    if capacity.kind is not CapacityKind.CAPACITY_BLOCK:
        return {}
    slurm = f"{PCS_SLURM_ROOT}/slurm-{slurm_version}/bin"
    return {"EFA_CDK_QUEUES": queue_name, "EFA_CDK_SHARED_DIR": SHARED_DIR, "EFA_CDK_SLURM_BIN": slurm}


def login_template(
    scope: Construct, group: ec2.ISecurityGroup, plan: NodePlan, user_data: ec2.UserData, root_device: str
) -> ec2.LaunchTemplate:
    """The login nodes' plain launch template (``LoginTemplate``): IMDSv2 with the nodes' hop limit, an
    encrypted gp3 root volume of the nodes' size."""
    return ec2.LaunchTemplate(
        scope,
        "LoginTemplate",
        security_group=group,
        require_imdsv2=True,
        # 1, as the compute template: an image registered IMDSv2-only would default to 2 (EC2 user
        # guide, "Configure the instance metadata options"), letting a bridged container reach the role
        http_put_response_hop_limit=plan.hop_limit,
        user_data=user_data,
        block_devices=[
            ec2.BlockDevice(
                device_name=root_device,
                volume=ec2.BlockDeviceVolume.ebs(
                    plan.root_volume_gib,
                    volume_type=ec2.EbsDeviceVolumeType.GP3,
                    encrypted=True,
                    delete_on_termination=True,
                ),
            )
        ],
    )


def slurm_queue(
    scope: Construct, cluster: pcs.CfnCluster, name: str, nodes: pcs.CfnComputeNodeGroup
) -> pcs.CfnQueue:
    """The Slurm queue (``Queue``) of the compute node group."""
    group = pcs.CfnQueue.ComputeNodeGroupConfigurationProperty(compute_node_group_id=nodes.attr_id)
    return pcs.CfnQueue(
        scope, "Queue", cluster_id=cluster.attr_id, name=name, compute_node_group_configurations=[group]
    )
