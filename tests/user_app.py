"""Someone else's CDK app that uses efa-cdk as a library, the way the docs show it.

Its own VPC and buckets, aws-cdk-lib's own AutoScalingGroup and EKS clusters (both EKS modules), and
efa-cdk's constructs composed into them through CDK's interfaces (``IGrantable``, ``IConnectable``,
``ILaunchTemplate``). Two tests use it:

* tests/test_public_api.py runs ``mypy --strict`` over it (every name typed, a misspelt argument
  caught), in the project's environment and again on the lowest supported aws-cdk-lib;
* tests/packaging_check.py synthesizes it from the built wheel, in a fresh venv with an aws-cdk-lib the
  project does not pin.

    python tests/user_app.py OUTDIR     # writes OUTDIR/UserApp.template.json
"""

from __future__ import annotations

import sys

import aws_cdk as cdk
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks as eks_v1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3

from efa_constructs import (
    Capacity,
    EfaCluster,
    EfaLaunchTemplate,
    EfaLustreFileSystem,
    EfaMachineImage,
    EfaNodegroup,
    EfaPcsCluster,
    EfaSecurityGroup,
    Layout,
    OsFamily,
    PcsClusterSize,
)


def build(app: cdk.App) -> cdk.Stack:
    """The user's stack: a VPC of their own and everything efa-cdk adds to it."""
    stack = cdk.Stack(app, "UserApp")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    private = vpc.private_subnets[0]

    # A whole cluster in the app's own VPC, composed with aws-cdk-lib's grants and connections.
    cluster = EfaCluster(
        stack, "Training", vpc=vpc, instance_type=ec2.InstanceType("p4d.24xlarge"), node_count=2
    )
    s3.Bucket(stack, "TrainingData", enforce_ssl=True).grant_read(cluster)
    db = ec2.SecurityGroup(stack, "Database", vpc=vpc, allow_all_outbound=False)
    db.connections.allow_from(cluster, ec2.Port.tcp(5432), "training nodes to Postgres")

    # The launch template alone, under aws-cdk-lib's own Auto Scaling group (an ec2.ILaunchTemplate).
    sg = EfaSecurityGroup(stack, "Sg", vpc=vpc)
    lt = EfaLaunchTemplate(
        stack,
        "Lt",
        instance_type=ec2.InstanceType("p4d.24xlarge"),
        security_groups=[sg],
        nic_layout=Layout.recommended(),
    )
    s3.Bucket(stack, "Checkpoints", enforce_ssl=True).grant_read_write(lt)
    autoscaling.AutoScalingGroup(
        stack,
        "Asg",
        vpc=vpc,
        vpc_subnets=ec2.SubnetSelection(subnets=[private]),
        launch_template=lt,
        min_capacity=0,
        max_capacity=2,
    )

    # EKS managed node groups on a cluster of either EKS module.
    v2 = eks.Cluster(
        stack,
        "Eks",
        version=eks.KubernetesVersion.V1_35,
        vpc=vpc,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
        default_capacity=0,
    )
    EfaNodegroup(
        stack,
        "Trainers",
        cluster=v2,
        instance_type=ec2.InstanceType("trn1.32xlarge"),
        subnet=private,
        max_size=4,
        device_plugin=False,  # a cluster without a kubectl provider: install the plugins yourself
    )
    v1 = eks_v1.Cluster.from_cluster_attributes(
        stack,
        "Existing",
        cluster_name="existing",
        vpc=vpc,
        cluster_security_group_id="sg-0123456789abcdef0",
        kubectl_role_arn="arn:aws:iam::123456789012:role/existing-kubectl",
    )
    EfaNodegroup(
        stack,
        "Gpus",
        cluster=v1,
        instance_type=ec2.InstanceType("p5.48xlarge"),
        subnet=private,
        capacity=Capacity.capacity_block("cr-0123456789abcdef0"),
    )

    # An AWS PCS cluster in the same VPC, mounting an FSx for Lustre file system the team made before.
    datasets = EfaLustreFileSystem.from_file_system_attributes(
        stack,
        "Datasets",
        file_system_id="fs-0123456789abcdef0",
        dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        mount_name="abcdefgh",
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "DatasetsSg", "sg-0fedcba9876543210"),
        availability_zone=private.availability_zone,
        capacity_gib=19200,
        efa=True,
    )
    # An image of the user's with the PCS agent, PCS's Slurm, EFA and the drivers.
    pcs_image = EfaMachineImage.from_ami_id("ami-0123456789abcdef0", os_family=OsFamily.AMAZON_LINUX_2023)
    EfaPcsCluster(
        stack,
        "Pcs",
        instance_type=ec2.InstanceType("trn1.32xlarge"),
        machine_image=pcs_image,
        vpc=vpc,
        subnet=private,
        size=PcsClusterSize.SMALL,
        max_count=4,
        lustre=datasets,
    )
    return stack


if __name__ == "__main__":
    app = cdk.App(outdir=sys.argv[1] if len(sys.argv) > 1 else "cdk.out")
    build(app)
    app.synth()
