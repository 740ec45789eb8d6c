"""Issue 58 point 8: one reader of access. What aws-cdk-lib writes for a grant to anyone, a public function
URL, an attached AWS-managed policy, and the policies written by hand that the review missed, each found as
a widening with its reason; the expected reasons are IAM's grammar (a wildcard anywhere in an action; a
resource's wildcard before the name it scopes), EC2's (a range is all addresses its prefix covers:
``0.0.0.0/1`` with ``128.0.0.0/1`` is the world) and Lambda's (AuthType NONE: anyone with the URL).
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import CfnParameter, NestedStack, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from efa_constructs.tools.security_diff import Statement, wide_action, wide_resource
from efa_constructs.tools.template_diff import DiffReport, diff_templates
from tests.helpers import new_app


def _synth(build: Any) -> dict[str, Any]:
    stack = Stack(new_app(), "S")
    build(stack)
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def _function(stack: Stack) -> lambda_.Function:
    return lambda_.Function(
        stack,
        "Fn",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.h",
        code=lambda_.Code.from_inline("x"),
    )


def _widened(build: Any) -> list[str]:
    return diff_templates({"Resources": {}}, _synth(build)).security.widenings()


def _admin(stack: Stack) -> None:
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name("AdministratorAccess"))


def _invoke_anyone(stack: Stack) -> None:
    _function(stack).grant_invoke(iam.AnyPrincipal())


def _public_url(stack: Stack) -> None:
    _function(stack).add_function_url(auth_type=lambda_.FunctionUrlAuthType.NONE)


def _pull_anyone(stack: Stack) -> None:
    ecr.Repository(stack, "Images").grant_pull(iam.AnyPrincipal())


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (_admin, "a managed policy attached (arn:${AWS::Partition}:iam::aws:policy/AdministratorAccess)"),
        (_invoke_anyone, "a principal outside the account (*)"),
        (_public_url, "a principal outside the account (*)"),
        (_pull_anyone, "a principal outside the account (AWS: *)"),
    ],
    ids=["managed-policy", "grant-invoke-anyone", "function-url-none", "ecr-pull-anyone"],
)
def test_what_aws_cdk_lib_writes_for_anyone_is_a_widening(build: Any, reason: str) -> None:
    found = _widened(build)
    assert any(reason in w for w in found), found


def test_a_function_url_with_iam_auth_is_no_public_url() -> None:
    found = _widened(lambda s: _function(s).add_function_url(auth_type=lambda_.FunctionUrlAuthType.AWS_IAM))
    assert not any("(*)" in w for w in found), found


STAR = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


@pytest.mark.parametrize(
    "resource",
    [
        {
            "Type": "AWS::IAM::RolePolicy",
            "Properties": {"RoleName": "r", "PolicyName": "p", "PolicyDocument": STAR},
        },
        {
            "Type": "AWS::IAM::UserPolicy",
            "Properties": {"UserName": "u", "PolicyName": "p", "PolicyDocument": STAR},
        },
        {
            "Type": "AWS::IAM::GroupPolicy",
            "Properties": {"GroupName": "g", "PolicyName": "p", "PolicyDocument": STAR},
        },
        {"Type": "AWS::IAM::User", "Properties": {"Policies": [{"PolicyName": "p", "PolicyDocument": STAR}]}},
        {
            "Type": "AWS::IAM::Group",
            "Properties": {"Policies": [{"PolicyName": "p", "PolicyDocument": STAR}]},
        },
        {"Type": "AWS::SNS::TopicInlinePolicy", "Properties": {"TopicArn": "arn:t", "PolicyDocument": STAR}},
        {"Type": "AWS::SQS::QueueInlinePolicy", "Properties": {"Queue": "q", "PolicyDocument": STAR}},
    ],
    ids=lambda r: r["Type"],
)
def test_every_policy_a_template_writes_is_read(resource: dict[str, Any]) -> None:
    d = diff_templates({"Resources": {}}, {"Resources": {"P": resource}})
    why = d.security.widenings()
    assert any("a wildcard action (*)" in w for w in why) and any("every resource (*)" in w for w in why), why


def _ingress(*cidrs: str, parameter_default: str | None = None) -> dict[str, Any]:
    rules = {
        f"R{i}": {
            "Type": "AWS::EC2::SecurityGroupIngress",
            "Properties": {
                "GroupId": {"Ref": "G"},
                "IpProtocol": "tcp",
                "FromPort": 22,
                "ToPort": 22,
                "CidrIp": c,
            },
        }
        for i, c in enumerate(cidrs)
    }
    template: dict[str, Any] = {
        "Resources": {"G": {"Type": "AWS::EC2::SecurityGroup", "Properties": {}}, **rules}
    }
    if parameter_default is not None:
        template["Parameters"] = {"Allowed": {"Type": "String", "Default": parameter_default}}
        template["Resources"]["R9"] = {
            "Type": "AWS::EC2::SecurityGroupIngress",
            "Properties": {
                "GroupId": {"Ref": "G"},
                "IpProtocol": "tcp",
                "FromPort": 22,
                "ToPort": 22,
                "CidrIp": {"Ref": "Allowed"},
            },
        }
    return template


def test_the_world_split_in_two_or_given_as_a_parameters_default_is_the_world() -> None:
    split = diff_templates(_ingress(), _ingress("0.0.0.0/1", "128.0.0.0/1")).security.widenings()
    assert any("ingress from the world, split in ranges (0.0.0.0/1, 128.0.0.0/1, 22)" in w for w in split), (
        split
    )
    assert any("ingress from a /1 range (0.0.0.0/1, 22)" in w for w in split), split
    half = diff_templates(_ingress("0.0.0.0/1"), _ingress("0.0.0.0/1", "10.0.0.0/8")).security.widenings()
    assert half == []  # a /8 is no wide range, and the two do not cover the world
    given = diff_templates(_ingress(), _ingress(parameter_default="0.0.0.0/0")).security.widenings()
    assert any(
        "ingress from the world (${Allowed}, 22) [the default of parameter Allowed]" in w for w in given
    ), given


@pytest.mark.parametrize(
    ("action", "wide"),
    [("iam:Pass*", True), ("s3:Get?bject", True), ("*", True), ("ec2:*", True), ("s3:GetObject", False)],
)
def test_a_wildcard_anywhere_in_an_action_widens(action: str, wide: bool) -> None:
    assert wide_action(action) is wide
    reasons = Statement("P", "Allow", (action,), ("arn:aws:s3:::results/x",), "", "").widens()
    assert any("a wildcard action" in w for w in reasons) is wide


@pytest.mark.parametrize(
    ("resource", "wide"),
    [
        ("arn:aws:s3:::*/*", True),  # every object of every bucket
        ("arn:aws:s3:::results/*", False),  # the objects of one bucket
        ("${Bucket.Arn}/*", False),  # the same, for a bucket of the template
        ("arn:${AWS::Partition}:s3:::*", True),
        ("arn:aws:iam::*:role/x", True),  # any account
        ("arn:aws:ec2:us-east-1:111122223333:instance/*", True),  # every instance
        ("arn:aws:logs:us-east-1:111122223333:log-group:/aws/x:*", False),  # the streams of one group
    ],
)
def test_a_wildcard_in_what_a_resource_names_widens(resource: str, wide: bool) -> None:
    assert wide_resource(resource) is wide


def test_a_trust_to_an_account_given_by_a_parameter_is_outside_the_account() -> None:
    def trust(stack: Stack) -> None:
        account = CfnParameter(stack, "Partner", type="String")
        iam.Role(stack, "Role", assumed_by=iam.AccountPrincipal(account.value_as_string))

    found = _widened(trust)
    assert any(
        "a principal outside the account" in w and "parameter Partner, given at deploy" in w for w in found
    )


def test_a_widening_inside_a_nested_stack_is_found_and_an_unread_one_said() -> None:
    """A nested stack's template read into its parent (revisions.flatten, from the assembly aws-cdk-lib
    writes); a nested stack whose template is not there is named in the headline."""
    import json
    import tempfile
    from pathlib import Path

    from efa_constructs.tools.revisions import flatten

    def build(widen: bool) -> tuple[dict[str, Any], Path]:
        import aws_cdk as cdk

        out = Path(tempfile.mkdtemp())
        app = cdk.App(outdir=str(out))
        stack = Stack(app, "Parent")
        inner = NestedStack(stack, "Inner")
        group = ec2.SecurityGroup(inner, "G", vpc=ec2.Vpc(inner, "Vpc", max_azs=1, nat_gateways=0))
        if widen:
            group.add_ingress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(22))
        app.synth()
        return json.loads((out / "Parent.template.json").read_text()), out

    (old, old_out), (new, new_out) = build(False), build(True)
    d = diff_templates(flatten(old, old_out)[0], flatten(new, new_out)[0])
    assert any(
        w.startswith("{sg: InnerNestedStack") and "ingress from the world" in w
        for w in d.security.widenings()
    )
    unread = diff_templates(old, new)
    unread.unread_nested = flatten(new, Path(tempfile.mkdtemp()))[1]
    assert (
        unread.unread_nested
        and "nested stacks of `S` not read" in DiffReport("b", "h", {"S": unread}).markdown()
    )
