"""What the orchestrators share, below them: the placement rule, the Session Manager
and node-scripts statements. Private to the package (each orchestrator imports from here; none from
another orchestrator)."""

from __future__ import annotations

import re
from pathlib import Path

from aws_cdk import Aws, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from ..core.capacity import Capacity
from ..core.checks import check_placement_for_capacity
from ..core.monitoring import DEVICE_FAULT_TAG
from .acknowledgements import acknowledge, nag_resource


def path_in_stack(scope: Construct) -> str:
    """A construct's path within its stack, "/" as "-" ("Cluster", "Training-Cluster", ...)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", scope.node.path[len(Stack.of(scope).node.path) + 1 :])


def cluster_tag(scope: Construct) -> str:
    """The ``efa-cdk:cluster`` tag's value for a cluster: its stack's name and its path in the stack, unique
    in an account and region (the nodes find each other by it; Run Command finds them by it)."""
    return f"{Aws.STACK_NAME}/{path_in_stack(scope)}"


def cluster_placement_group(
    scope: Construct, given: ec2.IPlacementGroup | None, capacity: Capacity
) -> ec2.IPlacementGroup | None:
    """The placement group EFA nodes launch in: `given` (refused with a Capacity Block, which EC2
    places), else a new cluster placement group (``PlacementGroup``) On-Demand, else none (a
    reservation decides placement). The rule EfaCluster, EfaParallelCluster, EfaPcsCluster and
    EfaNodegroup share (core.capacity)."""
    check_placement_for_capacity(None if given is None else given.placement_group_name, capacity)
    if given is None and capacity.creates_placement_group:
        return ec2.PlacementGroup(scope, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER)
    return given


def session_manager_statement() -> iam.PolicyStatement:
    """Exactly what the SSM agent needs for Session Manager, nothing more: narrower than the
    AWS-managed AmazonSSMManagedInstanceCore (which also grants parameter, document and association
    reads). Its resource is ``*``: acknowledge AwsSolutions-IAM5 on the role that gets it."""
    return iam.PolicyStatement(
        sid="SessionManagerAgent",
        actions=[
            "ssm:UpdateInstanceInformation",
            "ssmmessages:CreateControlChannel",
            "ssmmessages:CreateDataChannel",
            "ssmmessages:OpenControlChannel",
            "ssmmessages:OpenDataChannel",
            "ec2messages:AcknowledgeMessage",
            "ec2messages:DeleteMessage",
            "ec2messages:FailMessage",
            "ec2messages:GetEndpoint",
            "ec2messages:GetMessages",
            "ec2messages:SendReply",
        ],
        resources=["*"],
    )


def allow_device_fault_tag(scope: Construct, role: iam.IRole, tag_value: str) -> iam.Policy:
    """A policy (``DeviceFaultTag``) on the nodes' role: ``ec2:CreateTags`` and ``ec2:DeleteTags`` of the one
    key :data:`DEVICE_FAULT_TAG` (``aws:TagKeys``: every key of the request is it; a request without keys,
    which DeleteTags reads as all of them, has none and is refused by the ``Null`` test), on instances of
    this cluster only (``efa-cdk:cluster`` = `tag_value`)."""
    arn = Stack.of(scope).format_arn(service="ec2", resource="instance", resource_name="*")
    policy = iam.Policy(
        scope,
        "DeviceFaultTag",
        roles=[role],
        statements=[
            iam.PolicyStatement(
                actions=["ec2:CreateTags", "ec2:DeleteTags"],
                resources=[arn],
                conditions={
                    "StringEquals": {"aws:ResourceTag/efa-cdk:cluster": tag_value},
                    "ForAllValues:StringEquals": {"aws:TagKeys": [DEVICE_FAULT_TAG]},
                    "Null": {"aws:TagKeys": "false"},
                },
            )
        ],
    )
    acknowledge(policy, f"AwsSolutions-IAM5[Resource::{nag_resource(scope, arn)}]")
    return policy


def session_manager_role(scope: Construct, id_: str, description: str) -> iam.Role:
    """An EC2 role that can do exactly what the SSM agent needs for Session Manager
    (:func:`session_manager_statement`)."""
    role = iam.Role(scope, id_, assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"), description=description)
    role.add_to_principal_policy(session_manager_statement())
    acknowledge(role, "AwsSolutions-IAM5[Resource::*]")
    return role


class NodeScripts:
    """The node scripts of one orchestrator's nodes (a staged folder, zipped, or one file) as an S3 asset,
    and the one read its nodes need: that object, not its bucket (``Asset.grant_read`` grants more: the
    bucket's objects and ``s3:List*``). Every orchestrator ships its scripts through this."""

    def __init__(self, scope: Construct, id_: str, staged: Path) -> None:
        self.asset = s3_assets.Asset(scope, id_, path=str(staged))

    @property
    def url(self) -> str:
        """The ``s3://`` URL of the object (a token)."""
        return self.asset.s3_object_url

    @property
    def location(self) -> tuple[str, str]:
        """(bucket name, object key): what ParallelCluster's ``S3Access`` grants."""
        return self.asset.s3_bucket_name, self.asset.s3_object_key

    def grant_read(self, role: iam.IRole) -> None:
        """Let `role` read the object, and nothing else of the bucket."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[self.asset.bucket.arn_for_objects(self.asset.s3_object_key)],
            )
        )


def shell_part(script: str) -> ec2.UserData:
    """A shell part of a multi-part user data running `script` (``for_linux()`` writes its ``#!`` line in
    place of the script's own)."""
    shell = ec2.UserData.for_linux()
    shell.add_commands(script.split("\n", 1)[1])
    return shell
