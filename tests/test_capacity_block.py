"""Before a Capacity Block ends (efa_constructs/cdk/capacity_block.py; issue 43): EC2's warning reaches the
alarm topic and the nodes.

Expected values from AWS's pages: the event's source ``aws.ec2``, its detail types (EC2 user guide,
"Monitor Capacity Blocks using EventBridge": "Capacity Block Expiration Warning" on the global page,
"Capacity Block Reservation Expiration Warning" on the regional copies) and ``detail.end-date``;
EventBridge's Run Command target (``RunCommandParameters``, the input as the document's parameters); SNS's
rule that a service publishing to an encrypted topic may use its key. The role is evaluated with AWS's
evaluation logic (tests/iam_eval.py), not grepped; stock cfn-lint and cdk-nag check the ready stack.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import assertions

from efa_constructs.cdk.capacity_block import END_DATE_PATTERN
from stacks.cluster_stack import EfaClusterStack
from stacks.params import ClusterParams
from tests.helpers import Node, lint, new_app, pcs_image
from tests.iam_eval import Request, allowed, resolve, role_statements

BLOCK = "cr-0123456789abcdef0"


def _stack(**context: str) -> Any:
    params = ClusterParams.from_context(
        {"availability_zone": "us-east-1a", "capacity_block": BLOCK, "capacity_instances": "2", **context},
        default_instance_type="p5.48xlarge",
    )
    return EfaClusterStack(new_app(), "Block", params=params)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return assertions.Template.from_stack(_stack()).to_json()  # type: ignore[no-any-return]


def _of(template: dict[str, Any], kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [(k, v) for k, v in template["Resources"].items() if v["Type"] == kind]


def test_the_rule_matches_ec2s_warning_for_this_block_only(template: dict[str, Any]) -> None:
    ((_, rule),) = _of(template, "AWS::Events::Rule")
    assert rule["Properties"]["EventPattern"] == {
        "source": ["aws.ec2"],
        "detail-type": ["Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning"],
        "detail": {"capacity-reservation-id": [BLOCK]},
    }


def test_the_nodes_are_told_through_run_command_with_the_events_end_date(template: dict[str, Any]) -> None:
    ((_, rule),) = _of(template, "AWS::Events::Rule")
    (command,) = [t for t in rule["Properties"]["Targets"] if "RunCommandParameters" in t]
    (target,) = command["RunCommandParameters"]["RunCommandTargets"]
    assert target["Key"] == "tag:efa-cdk:cluster"  # the tag every node of the cluster carries
    transform = command["InputTransformer"]
    assert list(transform["InputPathsMap"].values()) == ["$.detail.end-date"]
    (name,) = transform["InputPathsMap"]
    # EventBridge puts a string into a placeholder outside quotes as a JSON string (CDK's from_object)
    assert json.loads(transform["InputTemplate"].replace(f"<{name}>", '"2026-11-26T12:00:00.000Z"')) == {
        "endDate": ["2026-11-26T12:00:00.000Z"]
    }
    (content,) = [
        d["Properties"]["Content"]
        for _, d in _of(template, "AWS::SSM::Document")
        if "capacity-block" in json.dumps(d)
    ]
    assert content["parameters"]["endDate"]["allowedPattern"] == END_DATE_PATTERN
    assert "run-steps.sh capacity-block-ending" in content["mainSteps"][0]["inputs"]["runCommand"][0]


@pytest.mark.parametrize(
    ("value", "ok"),
    [("2026-11-26T12:00:00.000Z", True), ("2026-11-26T12:00:00Z", True), ("2026-11-26T12:00:00+00:00", True),
     # AWS shows no format for detail.end-date (issue 53 item 5): any a date -d reads gets through
     ("2026-11-26 12:00:00 UTC", True), ("Thu, 26 Nov 2026 12:00:00 +0000", True), ("2026-11-26", True),
     ("'; rm -rf / #", False), ("$(reboot)", False), ("`reboot`", False), ("x" * 65, False)],
)  # fmt: skip
def test_the_documents_parameter_takes_an_end_time_and_nothing_else(value: str, ok: bool) -> None:
    """SSM checks the parameter against allowedPattern before the command runs: nothing that could end the
    command's quoting reaches the shell line; the node reads the rest with date -d (below)."""
    import re

    assert bool(re.match(END_DATE_PATTERN, value)) is ok


def test_eventbridge_may_run_the_document_on_the_clusters_nodes_only(template: dict[str, Any]) -> None:
    ((role_id, _),) = [
        (k, v) for k, v in _of(template, "AWS::IAM::Role")
        if "events.amazonaws.com" in json.dumps(v["Properties"]["AssumeRolePolicyDocument"])
    ]  # fmt: skip
    statements = role_statements(template, role_id)
    ((doc_id, _),) = [d for d in _of(template, "AWS::SSM::Document") if "capacity-block" in json.dumps(d[1])]
    document = f"arn:aws:ssm:us-east-1:123456789012:document/ref:{doc_id}"
    node = "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"
    cluster = {"aws:ResourceTag/efa-cdk:cluster": _cluster_tag(statements)}
    assert allowed(Request(role_id, "ssm:SendCommand", document), statements, [])
    assert allowed(Request(role_id, "ssm:SendCommand", node, cluster), statements, [])
    other = {"aws:ResourceTag/efa-cdk:cluster": "another-stack/Cluster"}
    assert not allowed(Request(role_id, "ssm:SendCommand", node, other), statements, [])
    assert not allowed(Request(role_id, "ssm:SendCommand", node), statements, [])  # untagged
    assert not allowed(Request(role_id, "ssm:SendCommand", f"{document}x"), statements, [])


def _cluster_tag(statements: list[dict[str, Any]]) -> str:
    (value,) = [
        s["Condition"]["StringEquals"]["aws:ResourceTag/efa-cdk:cluster"]
        for s in statements
        if "Condition" in s
    ]
    return str(value)


def test_the_alarm_topic_gets_the_warning_and_eventbridge_may_use_its_key(template: dict[str, Any]) -> None:
    ((_, rule),) = _of(template, "AWS::Events::Rule")
    (topic_target,) = [t for t in rule["Properties"]["Targets"] if "RunCommandParameters" not in t]
    ((topic_id, _),) = _of(template, "AWS::SNS::Topic")
    assert topic_target["Arn"] == {"Ref": topic_id}
    assert "<detail-end-date>" in json.dumps(topic_target["InputTransformer"]["InputTemplate"])
    ((_, key),) = _of(template, "AWS::KMS::Key")
    services = set()
    for s in key["Properties"]["KeyPolicy"]["Statement"]:
        named = s.get("Principal", {}).get("Service", [])
        services |= set(named if isinstance(named, list) else [named])
    assert services == {"cloudwatch.amazonaws.com", "events.amazonaws.com"}
    ((_, policy),) = _of(template, "AWS::SNS::TopicPolicy")
    assert "events.amazonaws.com" in json.dumps(policy)


def test_an_on_demand_cluster_has_no_rule() -> None:
    t = assertions.Template.from_stack(
        EfaClusterStack(
            new_app(), "OnDemand", params=ClusterParams.from_context({}, default_instance_type="p5.48xlarge")
        )
    ).to_json()
    assert not _of(t, "AWS::Events::Rule")


def test_the_block_stack_is_stock_cfn_lint_and_cdk_nag_clean(template: dict[str, Any]) -> None:
    assert lint(template, stock=True) == []
    from tests.test_security import nag

    nag({"P5EfaCluster:capacity_block": BLOCK, "P5EfaCluster:capacity_instances": "2",
         "P5EfaCluster:availability_zone": "us-east-1a"})  # fmt: skip


def test_the_node_step_keeps_the_end_time_and_tells_every_user(tmp_path: Path) -> None:
    node = Node(tmp_path)
    wall = node.stub_dir / "bin" / "wall"
    wall.write_text('#!/bin/sh\nprintf "%s\\n" "$*" >>"$STUB_DIR/wall"\n')
    wall.chmod(0o755)
    r = node.run("capacity-block-ending", EFA_CDK_BLOCK_END="2026-11-26T12:00:00.000Z")
    assert r.returncode == 0, r.log
    assert (
        node.read("var/lib/efa-cdk/capacity-block-ending") == "2026-11-26T12:00:00Z\n"
    )  # as date -d reads it
    said = (node.stub_dir / "wall").read_text()
    assert "ends at 2026-11-26T12:00:00Z" in said and "Checkpoint now" in said
    for other in ("Thu, 26 Nov 2026 13:00:00 +0100", "2026-11-26 12:00:00 UTC"):  # other forms, one time
        assert node.run("capacity-block-ending", EFA_CDK_BLOCK_END=other).returncode == 0
        assert node.read("var/lib/efa-cdk/capacity-block-ending") == "2026-11-26T12:00:00Z\n"
    bad = node.run("capacity-block-ending", EFA_CDK_BLOCK_END="$(reboot)")
    assert bad.returncode == 1 and "not an end time" in bad.log
    nonsense = node.run("capacity-block-ending", EFA_CDK_BLOCK_END="next blue moon")
    assert nonsense.returncode == 1 and "not an end time date can read" in nonsense.log


def test_the_stack_names_its_block_and_status_shows_when_it_ends(template: dict[str, Any]) -> None:
    """The ready stack's CapacityBlockId output; `efa-cdk status` asks EC2 for the block's end
    (DescribeCapacityReservations, answered through botocore's Stubber: its shapes checked)."""
    from datetime import datetime, timezone

    import boto3
    from botocore.stub import Stubber

    from efa_constructs.tools import status

    assert template["Outputs"]["CapacityBlockId"]["Value"] == BLOCK
    ec2 = boto3.session.Session(
        region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="k"
    ).client("ec2")
    stub = Stubber(ec2)
    end = datetime(2026, 11, 26, 11, 30, tzinfo=timezone.utc)
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [
        {"CapacityReservationId": BLOCK, "State": "active", "EndDate": end}]},
        {"CapacityReservationIds": [BLOCK]})  # fmt: skip
    stub.activate()
    block = status._capacity_block(ec2, BLOCK)
    assert block == {"id": BLOCK, "state": "active", "ends": "2026-11-26 11:30 UTC"}
    base = {
        "stack": "S",
        "status": "CREATE_COMPLETE",
        "nodes": [],
        "benchmarks": [],
        "alarms": [],
        "changes": [],
    }
    shown = status.render({**base, "capacity_block": block})
    assert f"capacity block {BLOCK}: active, ends 2026-11-26 11:30 UTC" in shown
    assert status._capacity_block(ec2, None) is None  # a stack without a block: no call, no line


# --- ParallelCluster: the head node is told, and Slurm drains the block's nodes -------------------------


def _run_command_tag(template: dict[str, Any]) -> Any:
    """The value of the efa-cdk:cluster tag the block's rule runs the step on (this block's warning only)."""
    ((_, rule),) = _of(template, "AWS::Events::Rule")
    assert rule["Properties"]["EventPattern"]["detail"] == {"capacity-reservation-id": [BLOCK]}
    (command,) = [t for t in rule["Properties"]["Targets"] if "RunCommandParameters" in t]
    (target,) = command["RunCommandParameters"]["RunCommandTargets"]
    assert target["Key"] == "tag:efa-cdk:cluster"
    (value,) = target["Values"]
    return value


@pytest.fixture(scope="module")
def pc_block() -> dict[str, Any]:
    from tests.test_pcluster import synth

    return synth(capacity_block=BLOCK, availability_zone="us-east-1a", min_count="2", max_count="2")


def _config_text(t: dict[str, Any]) -> str:
    return json.dumps(t["Outputs"]["ParallelClusterConfig"]["Value"])


def test_a_parallelcluster_block_runs_the_warning_on_the_instances_tagged_as_its_own(
    pc_block: dict[str, Any],
) -> None:
    """The rule as EfaCluster's (this block only), Run Command by the efa-cdk:cluster tag, and the
    configuration's Tags put that tag on every instance ParallelCluster makes (ParallelCluster 3.16's
    cluster_stack: the head node carries the configuration's Tags beside its own)."""
    value = _run_command_tag(pc_block)
    text = "".join(
        p if isinstance(p, str) else json.dumps(p)
        for p in pc_block["Outputs"]["ParallelClusterConfig"]["Value"]["Fn::Join"][1]
    )
    assert "Tags:\n- Key: efa-cdk:cluster\n  Value: " in text
    assert value == {"Fn::Join": ["", [{"Ref": "AWS::StackName"}, "/ParallelCluster"]]}
    assert pc_block["Outputs"]["CapacityBlockId"]["Value"] == BLOCK


def test_the_head_nodes_agent_may_take_run_command_and_nothing_more(pc_block: dict[str, Any]) -> None:
    """ParallelCluster gives its nodes' roles no SSM policy (3.16: CloudWatch's, when logs are on): the head
    node gets the Session Manager agent's statement as a managed policy, listed in AdditionalIamPolicies.
    Evaluated, not grepped: the agent's calls allowed, sending commands or reading parameters not."""
    ((policy_id, policy),) = [
        (k, v) for k, v in _of(pc_block, "AWS::IAM::ManagedPolicy") if "SSM agent" in json.dumps(v)
    ]
    assert f'"Ref": "{policy_id}"' in _config_text(pc_block)  # AdditionalIamPolicies: - Policy: <arn>
    statements = [resolve(s) for s in policy["Properties"]["PolicyDocument"]["Statement"]]
    head = "HeadNodeRole"
    for action in ("ssm:UpdateInstanceInformation", "ec2messages:GetMessages", "ec2messages:SendReply"):
        assert allowed(Request(head, action, "*"), statements, []), action
    for action in ("ssm:SendCommand", "ssm:GetParameter", "ec2:DescribeInstances"):
        assert not allowed(Request(head, action, "*"), statements, []), action


def test_a_parallelcluster_block_is_stock_cfn_lint_and_cdk_nag_clean(pc_block: dict[str, Any]) -> None:
    assert lint(pc_block, stock=True) == []
    from tests.test_security import nag

    nag({"Trn1ParallelCluster:capacity_block": BLOCK, "Trn1ParallelCluster:availability_zone": "us-east-1a",
         "Trn1ParallelCluster:min_count": "2", "Trn1ParallelCluster:max_count": "2"})  # fmt: skip


def test_an_on_demand_parallelcluster_has_no_rule_tag_or_agent_policy() -> None:
    from tests.test_pcluster import synth

    t = synth(availability_zone="us-east-1a")
    assert not _of(t, "AWS::Events::Rule")
    assert "efa-cdk:cluster" not in _config_text(t) and "CapacityBlockId" not in t["Outputs"]
    assert not [v for _, v in _of(t, "AWS::IAM::ManagedPolicy") if "SSM agent" in json.dumps(v)]


# --- AWS PCS: every EFA node is told, and drains the queue with PCS's own Slurm --------------------------


@pytest.fixture(scope="module")
def pcs_block() -> dict[str, Any]:
    from aws_cdk import Stack
    from aws_cdk import aws_ec2 as ec2

    from efa_constructs import Capacity, EfaPcsCluster

    stack = Stack(new_app(), "PcsBlock")
    block = Capacity.capacity_block(BLOCK, instance_count=2)
    EfaPcsCluster(
        stack, "Pcs", instance_type=ec2.InstanceType("p5.48xlarge"), machine_image=pcs_image(),
        availability_zone="us-east-1a", max_count=2, capacity=block,
    )  # fmt: skip
    return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def test_a_pcs_block_tags_its_nodes_through_the_launch_template_and_runs_the_warning_on_them(
    pcs_block: dict[str, Any],
) -> None:
    """PCS launches from a template derived from ours; AWS's PCS recipes tag their nodes through the
    launch template's TagSpecifications (aws-samples/aws-hpc-recipes recipes/pcs/getting_started/assets/
    pcs-lt-basic.yaml). The rule runs the step on the instances with that tag; the EFA nodes' settings
    carry the queue, PCS's Slurm for the cluster's version, and the shared directory."""
    value = _run_command_tag(pcs_block)
    assert value == {"Fn::Join": ["", [{"Ref": "AWS::StackName"}, "/Pcs"]]}
    efa = [t for _, t in _of(pcs_block, "AWS::EC2::LaunchTemplate")
           if "NetworkInterfaces" in t["Properties"]["LaunchTemplateData"]]  # fmt: skip
    (template,) = efa
    specs = {
        s["ResourceType"]: s["Tags"]
        for s in template["Properties"]["LaunchTemplateData"]["TagSpecifications"]
    }
    assert {"Key": "efa-cdk:cluster", "Value": value} in specs["instance"]
    user_data = json.dumps(template["Properties"]["LaunchTemplateData"]["UserData"])
    for setting in ("EFA_CDK_QUEUES='compute'", "EFA_CDK_SHARED_DIR='/shared'",
                    "EFA_CDK_SLURM_BIN='/opt/aws/pcs/scheduler/slurm-25.11/bin'"):  # fmt: skip
        assert setting in user_data, setting
    assert lint(pcs_block, stock=True) == []


def test_an_on_demand_pcs_cluster_has_no_rule_and_no_block_settings() -> None:
    from aws_cdk import Stack

    from tests.test_pcs import _pcs

    t = assertions.Template.from_stack(Stack.of(_pcs())).to_json()
    assert not _of(t, "AWS::Events::Rule")
    assert "EFA_CDK_SLURM_BIN" not in json.dumps(t)


def test_the_node_step_drains_the_queue_with_the_slurm_it_is_given(tmp_path: Path) -> None:
    """EFA_CDK_SLURM_BIN (PCS's /opt/aws/pcs/scheduler/slurm-<version>/bin): the step lists the queue's
    nodes with that sinfo and drains them with that scontrol (stand-ins here; the one-machine
    ParallelCluster runs the same lines against real Slurm)."""
    from tests.helpers import BASH, executable

    pcs_slurm = "/opt/aws/pcs/scheduler/slurm-25.11/bin"
    node = Node(tmp_path, EFA_CDK_QUEUES="compute", EFA_CDK_SLURM_BIN=pcs_slurm, EFA_CDK_SHARED_DIR="/shared")
    slurm = node.root / "opt/aws/pcs/scheduler/slurm-25.11/bin"
    executable(
        slurm / "sinfo",
        f'#!{BASH}\necho "sinfo $*" >>"$STUB_DIR/slurm.log"\nprintf "compute-1\\ncompute-2\\n"\n',
    )
    executable(slurm / "scontrol", f'#!{BASH}\necho "scontrol $*" >>"$STUB_DIR/slurm.log"\n')
    (node.root / "shared").mkdir()
    r = node.run("capacity-block-ending", EFA_CDK_BLOCK_END="2026-11-26T12:00:00.000Z")
    assert r.returncode == 0, r.log
    said = (node.stub_dir / "slurm.log").read_text().splitlines()
    assert said == [
        "sinfo -h -N -p compute -o %N",
        "scontrol update NodeName=compute-1,compute-2 State=DRAIN Reason=efa-cdk: Capacity Block ends at "
        "2026-11-26T12:00:00Z",
    ]
    assert node.read("shared/.efa-cdk/capacity-block-ending") == "2026-11-26T12:00:00Z\n"


def test_the_pcs_ready_stack_names_its_block_for_status() -> None:
    """-c capacity_block on Trn1PcsCluster: the CapacityBlockId output `efa-cdk status` reads; the rule."""
    import app as app_module

    given = {"capacity_block": BLOCK, "capacity_instances": "2", "availability_zone": "us-east-1a",
             "ami_id": "ami-0123456789abcdef0"}  # fmt: skip
    context = {f"Trn1PcsCluster:{k}": v for k, v in given.items()}
    t = app_module.build(new_app(context)).synth().get_stack_by_name("Trn1PcsCluster").template
    assert t["Outputs"]["CapacityBlockId"]["Value"] == BLOCK
    assert _run_command_tag(t) == {"Fn::Join": ["", [{"Ref": "AWS::StackName"}, "/Pcs"]]}


@pytest.mark.parametrize(
    "planted", ["a link to root's file", "a directory of a user's", "a link as the directory"]
)
def test_the_end_time_in_the_shared_directory_never_follows_a_users_link(
    tmp_path: Path, planted: str
) -> None:
    """Issue 53 item 12: /shared is every user's (mode 1777 on PCS). A link a user plants where root writes
    (or a .efa-cdk of their own) must not make root overwrite the file it points to (/etc/shadow)."""
    import os

    node = Node(tmp_path, EFA_CDK_SHARED_DIR="/shared")
    shared = node.root / "shared"
    shared.mkdir(mode=0o1777)
    secret = node.root / "etc-shadow"
    secret.write_text("root:hash\n")
    dot = shared / ".efa-cdk"
    if planted == "a link as the directory":
        elsewhere = node.root / "elsewhere"
        elsewhere.mkdir()
        dot.symlink_to(elsewhere)
    else:
        dot.mkdir(mode=0o777 if planted == "a directory of a user's" else 0o755)
        os.chmod(dot, 0o777 if planted == "a directory of a user's" else 0o755)
        for name in ("capacity-block-ending", "capacity-block-ending.tmp"):
            (dot / name).symlink_to(secret)
    r = node.run("capacity-block-ending", EFA_CDK_BLOCK_END="2026-11-26T12:00:00.000Z")
    assert r.returncode == 0, r.log
    assert secret.read_text() == "root:hash\n"  # never written through
    if planted == "a link to root's file":  # root's own directory: the link is replaced, not followed
        assert not (dot / "capacity-block-ending").is_symlink()
        assert (dot / "capacity-block-ending").read_text() == "2026-11-26T12:00:00Z\n"
    else:
        assert "not a directory only root may write to" in r.log
    assert node.read("var/lib/efa-cdk/capacity-block-ending") == "2026-11-26T12:00:00Z\n"  # the node's own


def test_a_warning_that_does_not_reach_its_targets_raises_an_alarm(template: dict[str, Any]) -> None:
    """Issue 53 item 5: a Run Command the document refused (or any failed delivery) went unseen. The rule's
    FailedInvocations (AWS/Events, by RuleName: EventBridge's CloudWatch metrics) above 0 alarms, to the
    cluster's alarm topic."""
    alarms = [
        a["Properties"] for a in template["Resources"].values()
        if a["Type"] == "AWS::CloudWatch::Alarm" and a["Properties"].get("MetricName") == "FailedInvocations"
    ]  # fmt: skip
    (alarm,) = alarms
    assert alarm["Namespace"] == "AWS/Events" and alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    (dimension,) = alarm["Dimensions"]
    rule = next(k for k, r in template["Resources"].items() if r["Type"] == "AWS::Events::Rule")
    assert dimension == {"Name": "RuleName", "Value": {"Ref": rule}}
    assert alarm["AlarmActions"], "the alarm tells the cluster's topic"
