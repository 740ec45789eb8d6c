"""Instantiation: every ready stack is created by CloudFormation in moto (in-process, no network).

What this proves: the template instantiates (every reference resolves, every resource moto models
is created), the launch template stores exactly the synthesized interfaces, and the nodes launch.
What it does NOT prove (moto's gaps, see README): EFA behaviour, placement, egress rules, IAM.

moto needs rewrites of a COPY of the template: see tests/moto_compat.py, which names each.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from stacks.cluster_stack import READY_CLUSTERS
from tests.helpers import efa_launch_template, ready_cluster_template, without_pcs
from tests.moto_compat import moto_compatible

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse")


@pytest.fixture(scope="module")
def aws() -> Iterator[dict[str, Any]]:
    """One moto session for the module (its backends load once: seconds), with fake credentials."""
    env = {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    saved = {k: os.environ.get(k) for k in [*env, "AWS_PROFILE"]}
    os.environ.update(env)
    os.environ.pop("AWS_PROFILE", None)
    try:
        with mock_aws():
            clients = {
                s: boto3.client(s, region_name="us-east-1")
                for s in ("ec2", "ssm", "cloudformation", "autoscaling")
            }
            # one of moto's AMIs, looked up once (the call lists 1,300 images: about a second)
            yield {
                **clients,
                "ami": clients["ec2"].describe_images(Owners=["amazon"])["Images"][0]["ImageId"],
            }
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def create(aws: dict[str, Any], name: str, template: dict[str, Any]) -> dict[str, str]:
    """Create the stack in moto; its physical resource ids by logical id."""
    cfn = aws["cloudformation"]
    body = moto_compatible(template, aws["ami"], aws["ssm"])
    asked = {"AvailabilityZone": "us-east-1a", "ImageId": aws["ami"]}  # what `cdk deploy` would ask for
    values = [
        {"ParameterKey": k, "ParameterValue": asked[k]}
        for k, p in body.get("Parameters", {}).items()
        if "Default" not in p
    ]
    cfn.create_stack(
        StackName=name, TemplateBody=json.dumps(body), Parameters=values, Capabilities=["CAPABILITY_IAM"]
    )
    stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    return {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cfn.list_stack_resources(StackName=name)["StackResourceSummaries"]
    }


@pytest.mark.parametrize("name", list(READY_CLUSTERS))
def test_ready_stack_instantiates_in_moto(templates: dict[str, Any], aws: dict[str, Any], name: str) -> None:
    synthesized = templates[name]
    ec2 = aws["ec2"]
    physical = create(aws, name, synthesized)

    # The launch template holds exactly the synthesized interfaces, with real ids filled in.
    (lt_id,) = [r for r, v in synthesized["Resources"].items() if v["Type"] == "AWS::EC2::LaunchTemplate"]
    version = ec2.describe_launch_template_versions(LaunchTemplateId=physical[lt_id])
    stored = version["LaunchTemplateVersions"][0]["LaunchTemplateData"]["NetworkInterfaces"]
    expected = synthesized["Resources"][lt_id]["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
    assert [(n["NetworkCardIndex"], n["DeviceIndex"], n.get("InterfaceType")) for n in stored] == [
        (n["NetworkCardIndex"], n["DeviceIndex"], n.get("InterfaceType")) for n in expected
    ]
    (sg_id,) = [r for r, v in synthesized["Resources"].items() if v["Type"] == "AWS::EC2::SecurityGroup"]
    (subnet_id,) = {n["SubnetId"]["Ref"] for n in expected}
    assert {g for n in stored for g in n["Groups"]} == {physical[sg_id]}
    assert {n["SubnetId"] for n in stored} == {physical[subnet_id]}

    # Nodes launched; the EFA group allows all traffic from itself.
    nodes = [r for r, v in synthesized["Resources"].items() if v["Type"] == "AWS::EC2::Instance"]
    reservations = ec2.describe_instances(InstanceIds=[physical[n] for n in nodes])["Reservations"]
    assert sum(len(r["Instances"]) for r in reservations) == 2
    (group,) = ec2.describe_security_groups(GroupIds=[physical[sg_id]])["SecurityGroups"]
    assert any(
        p["IpProtocol"] == "-1" and p["UserIdGroupPairs"][0]["GroupId"] == physical[sg_id]
        for p in group["IpPermissions"]
        if p.get("UserIdGroupPairs")
    )


def test_auto_scaling_node_group_instantiates_in_moto(aws: dict[str, Any]) -> None:
    """The ASG mode: moto creates the group from the EFA launch template and launches its nodes."""
    synthesized = ready_cluster_template("Asg", {"node_group": "asg", "node_count": "3"}, "p5.48xlarge")
    physical = create(aws, "Asg", synthesized)
    (group_id,) = [
        r for r, v in synthesized["Resources"].items() if v["Type"] == "AWS::AutoScaling::AutoScalingGroup"
    ]
    (group,) = aws["autoscaling"].describe_auto_scaling_groups(AutoScalingGroupNames=[physical[group_id]])[
        "AutoScalingGroups"
    ]
    assert (group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == (3, 3, 3)
    assert len(group["Instances"]) == 3
    tags = {t["Key"]: t["PropagateAtLaunch"] for t in group["Tags"]}
    assert tags["efa-cdk:cluster"] and tags["efa-cdk:logical-id"]


def test_pcs_stack_instantiates_in_moto_without_its_pcs_resources(
    templates: dict[str, Any], aws: dict[str, Any]
) -> None:
    """moto models no AWS::PCS::* resource (moto 5.2.5 has no PCS backend): the rest of Trn1PcsCluster
    (network, EFA group, placement group, EFS, role and instance profile, both launch templates) is
    created, the PCS cluster, node groups and queue and the outputs naming them are left out."""
    synthesized, pcs = without_pcs(templates["Trn1PcsCluster"])
    assert len(pcs) == 4  # cluster, login and compute node groups, queue
    assert not any(p in json.dumps(synthesized) for p in pcs)
    physical = create(aws, "Trn1PcsCluster", synthesized)
    version = aws["ec2"].describe_launch_template_versions(
        LaunchTemplateId=physical[efa_launch_template(synthesized)]
    )
    stored = version["LaunchTemplateVersions"][0]["LaunchTemplateData"]["NetworkInterfaces"]
    assert len([n for n in stored if n.get("InterfaceType") == "efa"]) == 8  # trn1.32xlarge, PCS's layout
    (profile,) = [k for k, v in synthesized["Resources"].items() if v["Type"] == "AWS::IAM::InstanceProfile"]
    iam = boto3.client("iam", region_name="us-east-1")
    assert (
        iam.get_instance_profile(InstanceProfileName=physical[profile])["InstanceProfile"]["Path"]
        == "/aws-pcs/"
    )


def test_a_cluster_with_lustre_over_efa_instantiates_in_moto(aws: dict[str, Any]) -> None:
    """-c fsx_lustre_capacity_gib=19200 -c fsx_lustre_efa=true: the file system's group and the rules
    between it and the nodes' EFA group (all traffic, both ways) are created, and the nodes launch after
    it. moto 5.2.5 models no AWS::FSx::FileSystem in CloudFormation (its FSx backend has no CloudFormation
    handler): the file system is left out (tests/moto_compat.py), its properties are checked by cfn-lint and
    tests/test_lustre.py."""
    synthesized = ready_cluster_template(
        "Lustre", {"fsx_lustre_capacity_gib": "19200", "fsx_lustre_efa": "true"}
    )
    physical = create(aws, "Lustre", synthesized)
    groups = {
        r: physical[r] for r, v in synthesized["Resources"].items() if v["Type"] == "AWS::EC2::SecurityGroup"
    }
    (fs_group,) = [g for r, g in groups.items() if r.startswith("LustreLustreSecurityGroup")]
    (efa_group,) = [g for r, g in groups.items() if not r.startswith("LustreLustreSecurityGroup")]
    (group,) = aws["ec2"].describe_security_groups(GroupIds=[fs_group])["SecurityGroups"]
    admitted = {
        pair["GroupId"]
        for p in group["IpPermissions"]
        if p["IpProtocol"] == "-1"
        for pair in p["UserIdGroupPairs"]
    }
    assert admitted == {fs_group, efa_group}
    nodes = [r for r, v in synthesized["Resources"].items() if v["Type"] == "AWS::EC2::Instance"]
    assert len(aws["ec2"].describe_instances(InstanceIds=[physical[n] for n in nodes])["Reservations"]) == 2
