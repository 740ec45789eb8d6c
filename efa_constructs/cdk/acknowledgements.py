"""Every cdk-nag (AwsSolutions) finding this library acknowledges, with the reason, in one place.

Acknowledgements are recorded on the constructs themselves (``Validations.of(...).acknowledge``),
so a user who runs cdk-nag over their own app sees the same reasons; without cdk-nag they do
nothing. Everything else cdk-nag reports on our constructs is fixed, not acknowledged.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from constructs import IConstruct

#: rule id -> why the finding is accepted (a security reviewer should be able to judge each).
REASONS: dict[str, str] = {
    "AwsSolutions-EC29": (
        "EFA nodes are replaceable members of a stack: termination protection would make `cdk destroy` "
        "and lowering node_count fail. Nothing on a node's root volume is meant to outlive it; data "
        "belongs on retained shared storage."
    ),
    "AwsSolutions-IAM5": (
        "The Session Manager agent actions (ssm:UpdateInstanceInformation, ssmmessages:*Channel, "
        "ec2messages:*) do not support resource-level permissions, so AWS documents Resource '*' for them; "
        "the policy grants only these actions instead of the broader AmazonSSMManagedInstanceCore. "
        "The node software's ec2:DescribeInstances and ec2:DescribeInstanceTopology (finding the cluster's "
        "nodes and their network position for the MPI hostfile) are read-only Describe actions that support "
        "no resource-level permissions either; cloudwatch:PutMetricData takes no resource and is limited "
        "to the cluster's own namespace by the cloudwatch:namespace condition. autoscaling:SetInstanceHealth "
        "names the cluster's node group by name: the group id in its ARN is not known to CloudFormation. "
        "(An AWS PCS node's pcs:RegisterComputeNodeGroupInstance names its cluster's ARN.) In a Capacity "
        "Block, EventBridge's ssm:SendCommand names the warning's document and the instances tagged with "
        "the cluster (an aws:ResourceTag condition): Run Command finds them by that tag."
    ),
    "AwsSolutions-IAM4": (
        "aws-cdk-lib's AwsCustomResource Lambda (the one-time image lookup and the Elastic IP nodes' "
        "primary-interface lookup) logs through the AWS managed AWSLambdaBasicExecutionRole, which grants "
        "only CloudWatch Logs writes; its own calls are in separate least-privilege statements. An EKS node "
        "role carries the three AWS managed policies the EKS user guide requires of it "
        "(AmazonEKSWorkerNodePolicy, AmazonEC2ContainerRegistryPullOnly, AmazonEKS_CNI_Policy), which AWS "
        "keeps in step with what the kubelet and the VPC CNI call."
    ),
    "AwsSolutions-L1": (
        "aws-cdk-lib's AwsCustomResource Lambda: its runtime is chosen by aws-cdk-lib (the newest Node.js "
        "runtime it knows in every region) and moves with aws-cdk-lib upgrades, not with this library."
    ),
    "AwsSolutions-AS3": (
        "The node group is fixed-size (min = max = desired) and driven by CloudFormation: its launches are "
        "reported by the CreationPolicy signals and the stack events, and replacements of unhealthy nodes "
        "are in the group's activity history. Scaling-event notifications need a topic and subscribers "
        "only the user can choose; add them to the group when wanted."
    ),
    "CloudFormation-Validate::F6101": (
        "An output of AWS::CloudFormation::WaitCondition's Data attribute is the pattern the CloudFormation "
        "user guide documents (Using wait conditions: WaitConditionData output); the registry schema types "
        "the attribute as an object, but the service returns the signals' data as a JSON string."
    ),
}


def acknowledge(scope: IConstruct, *findings: str) -> None:
    """Acknowledge findings on `scope` (and its children) with the reasons above.

    A finding is a cdk-nag rule id, optionally with its finding suffix (``AwsSolutions-IAM5[Resource::*]``),
    or another validation plugin's full id (``CloudFormation-Validate::F6101``).
    """
    Validations.of(scope).acknowledge(
        *(
            Acknowledgment(id=f if "::" in f else f"AwsSolutions::{f}", reason=REASONS[f.split("[", 1)[0]])
            for f in findings
        )
    )


def nag_resource(scope: IConstruct, value: str) -> str:
    """A policy resource as cdk-nag names it in a finding: resolved in `scope`'s stack, each Ref as
    ``<Name>`` and each GetAtt as ``<Id.Attribute>``, literal where the stack knows the value (a stack
    with an account and region writes ``aws`` and ``us-east-1``, not ``<AWS::Partition>``)."""

    def render(v: Any) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, dict) and "Fn::Join" in v:
            separator, parts = v["Fn::Join"]
            return str(separator).join(render(p) for p in parts)
        if isinstance(v, dict) and "Ref" in v:
            return f"<{v['Ref']}>"
        if isinstance(v, dict) and "Fn::GetAtt" in v:
            return "<" + ".".join(v["Fn::GetAtt"]) + ">"
        raise ValueError(f"no cdk-nag rendering for {v!r}")

    return render(Stack.of(scope).resolve(value))


def explain_cdk_lambda_lint(function: IConstruct | None, what: str) -> None:
    """Stock cfn-lint warns (W3005) that a Lambda function aws-cdk-lib generates lists its role in
    DependsOn next to a GetAtt of it. Harmless and not ours to change: suppressed on that one
    resource (`function`, the L1 or a construct whose default child it is), with the reason, so a
    user's own cfn-lint run stays clean."""
    if function is not None and not isinstance(function, CfnResource):
        function = function.node.default_child or function.node.try_find_child("Handler")
    if isinstance(function, CfnResource):
        function.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
        function.add_metadata("efa-cdk:cfn-lint-W3005", f"{what}: redundant DependsOn on its role")
