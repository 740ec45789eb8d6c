"""`efa-cdk status` and `efa-cdk sweep` against an emulated account (issue 35); preflight's tests are
tests/test_preflight_<room>.py, one per room of efa_constructs/tools/preflight, and share tests/account.py.

moto's server stands in for the account wherever moto models the API (STS, SSM, EC2, CloudFormation,
Auto Scaling, CloudWatch); where moto has no backend, botocore's Stubber answers against botocore's own
service model."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from efa_constructs.tools import preflight, status
from efa_constructs.tools.preflight import NodeGroup, Preflight
from tests.account import (
    REGION,
    _ami,
    _assembly,
    _StubbedSession,
    synth,
)

#: cdk_free: nothing here reaches aws-cdk-lib (tests/conftest.py checks), so the floor run leaves these out;
#: moto warns of what its CloudFormation skips
pytestmark = [pytest.mark.cdk_free, pytest.mark.filterwarnings("ignore:Tried to parse")]


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_status_shows_the_nodes_alarms_and_benchmarks_of_a_stack_created_in_the_emulator(
    account: dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    from tests.moto_compat import moto_compatible

    session = account["session"]
    out = synth(tmp_path, availability_zone="us-east-1c", ami_id=_ami(session), ami_os="ubuntu")
    template = json.loads((out / "Trn1EfaCluster.template.json").read_text())
    cfn = session.client("cloudformation", region_name=REGION)
    body = moto_compatible(template, _ami(session), session.client("ssm", region_name=REGION))
    # moto launches an instance from no launch template field: give it the template's type and subnet
    lts = {k: v for k, v in body["Resources"].items() if v["Type"] == "AWS::EC2::LaunchTemplate"}
    for r in body["Resources"].values():
        if r["Type"] == "AWS::EC2::Instance":
            data = lts[r["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]]["Properties"][
                "LaunchTemplateData"
            ]
            r["Properties"]["InstanceType"] = data["InstanceType"]
            r["Properties"]["SubnetId"] = data["NetworkInterfaces"][0]["SubnetId"]
    cfn.create_stack(
        StackName="Trn1EfaCluster", TemplateBody=json.dumps(body), Capabilities=["CAPABILITY_IAM"]
    )
    resources = cfn.list_stack_resources(StackName="Trn1EfaCluster")["StackResourceSummaries"]
    nodes = sorted(r["PhysicalResourceId"] for r in resources if r["ResourceType"] == "AWS::EC2::Instance")
    cw = session.client("cloudwatch", region_name=REGION)
    # moto's CloudFormation creates no alarms: made here as CloudFormation names them (<stack>-<id>-<suffix>)
    for name, metric in (("UnhealthyNodes", "EfaUnhealthyNodes"), ("HeldBack", "EfaReplacementsHeldBack")):
        cw.put_metric_alarm(
            AlarmName=f"Trn1EfaCluster-ClusterMonitoring{name}-ABC123",
            Namespace="EfaCdk/Trn1EfaCluster/Cluster",
            MetricName=metric,
            Statistic="Maximum",
            Period=300,
            EvaluationPeriods=1,
            Threshold=0,
            ComparisonOperator="GreaterThanThreshold",
        )
    cw.set_alarm_state(
        AlarmName="Trn1EfaCluster-ClusterMonitoringUnhealthyNodes-ABC123",
        StateValue="ALARM",
        StateReason="a node failed its EFA check",
    )
    cw.put_metric_data(
        Namespace="EfaCdk/Trn1EfaCluster/Cluster",
        MetricData=[
            {
                "MetricName": "EfaHealthy",
                "Dimensions": [{"Name": "InstanceId", "Value": nodes[0]}],
                "Value": 1,
            }
        ],
    )
    assert status.main("Trn1EfaCluster", None, True) == 0
    s = json.loads(capsys.readouterr().out)
    assert sorted(n["id"] for n in s["nodes"]) == nodes and len(nodes) == 2
    assert all(
        (n["state"], n["zone"], n["type"]) == ("running", "us-east-1c", "trn1.32xlarge") for n in s["nodes"]
    )
    by_id = {n["id"]: n for n in s["nodes"]}
    assert by_id[nodes[0]]["last_health_check"].startswith("healthy at ")
    assert by_id[nodes[1]]["last_health_check"] is None
    states = {a["metric"]: a["state"] for a in s["alarms"]}
    assert states == {"EfaUnhealthyNodes": "ALARM", "EfaReplacementsHeldBack": "OK"}  # moto starts OK
    assert status.main("Trn1EfaCluster", None, False) == 0
    text = capsys.readouterr().out
    assert (
        text.startswith("Trn1EfaCluster: CREATE_COMPLETE\nnodes (2):")
        and "EFA verified: yes (signalled)" in text
    )
    assert "ALARM             Trn1EfaCluster-ClusterMonitoringUnhealthyNodes-ABC123" in text
    assert s["benchmarks_of"] == "the stack's creation"
    # issue 41 item 2: a later generation's leader keeps its results in the results parameter (as
    # node/boot/benchmarks.sh writes it); status shows those, naming the generation and when
    (results,) = [
        r["PhysicalResourceId"] for r in resources if r["PhysicalResourceId"].endswith("/benchmark-results")
    ]
    kept = {"generation": "0e2e0000000000b2", "at": "2026-11-25T10:00:00Z", "status": "SUCCESS",
            "data": [{"benchmark": "fi_pingpong", "ok": True, "peak_gbytes_s": 12.5}]}  # fmt: skip
    session.client("ssm", region_name=REGION).put_parameter(
        Name=results, Value=json.dumps(kept), Overwrite=True, Tier="Intelligent-Tiering"
    )
    assert status.main("Trn1EfaCluster", None, True) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["benchmarks_of"] == {"generation": "0e2e0000000000b2", "at": "2026-11-25T10:00:00Z"}
    assert [b["benchmark"] for b in s["benchmarks"]] == ["fi_pingpong"]
    assert s["benchmarks"][0]["line_rate_fraction"] == round(12.5 * 8 / 800, 3)
    assert status.main("Trn1EfaCluster", None, False) == 0
    assert "benchmarks (generation 0e2e0000000000b2, 2026-11-25T10:00:00Z):" in capsys.readouterr().out


def test_status_of_a_stack_that_does_not_exist_is_one_line(account: dict[str, Any], capsys: Any) -> None:
    assert status.main("NoSuchStack", None, False) == 4
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cloudformation:DescribeStacks" in err and "NoSuchStack" in err


@pytest.mark.parametrize(
    ("outputs", "fraction"),
    [
        # the stack's machine-readable output (issue 42: status reads values, not prose), over the text
        ({"EfaLineRateGbps": "800", "Layout": "trn1.32xlarge legacy: 8 EFA/node, 1 Gbps EFA line rate"}, 0.8),
        # a stack made before the output existed: its Layout text
        ({"Layout": "trn1.32xlarge recommended: 8 EFA/node, 1 IP/node, 800 Gbps EFA line rate"}, 0.8),
        ({}, None),
    ],
)  # fmt: skip
def test_benchmarks_are_read_against_the_line_rate(outputs: dict[str, str], fraction: float | None) -> None:
    results = [{"benchmark": "nccom-test", "ok": True, "peak_gbytes_s": 80.0}]
    (row,) = status._benchmarks(
        {"BenchmarkResults": json.dumps({"benchmarks": json.dumps(results)}), **outputs}
    )
    assert row.get("line_rate_fraction") == fraction  # 80 GB/s = 640 Gbps of 800


@pytest.mark.parametrize(
    ("answer", "status", "says"),
    [
        ({"CapacityReservations": [{"CapacityReservationId": "cr-0123456789abcdef0",
                                    "NetworkNodes": ["nn-spine", "nn-block", "nn-leaf"]}]},
         "PASS", "places its instances under nn-spine > nn-block > nn-leaf"),
        # a reservation EC2 has not placed yet answers with no network nodes
        ({"CapacityReservations": [{"CapacityReservationId": "cr-0123456789abcdef0", "NetworkNodes": []}]},
         "WARN", "EC2 reports no network nodes for cr-0123456789abcdef0 yet"),
        ("UnsupportedOperation", "WARN", "no topology for cr-0123456789abcdef0 (UnsupportedOperation)"),
        # a region without the API, or any other answer: information missing, a WARN (issue 41 item 3)
        ("InvalidAction", "WARN", "no topology for cr-0123456789abcdef0 (InvalidAction)"),
        ("RequestLimitExceeded", "WARN", "(RequestLimitExceeded)"),
        # a refusal of the call is the permission to add
        ("UnauthorizedOperation", "FAIL", "ec2:DescribeCapacityReservationTopology was denied"),
    ],
)  # fmt: skip
def test_a_reservation_s_placement_is_shown_before_launch(
    account: dict[str, Any], answer: Any, status: str, says: str
) -> None:
    """DescribeCapacityReservationTopology (moto has no backend: botocore's Stubber, its shapes checked)."""
    ec2 = account["session"].client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    if isinstance(answer, str):
        stub.add_client_error("describe_capacity_reservation_topology", service_error_code=answer)
    else:
        stub.add_response("describe_capacity_reservation_topology", answer,
                          {"CapacityReservationIds": ["cr-0123456789abcdef0"]})  # fmt: skip
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients["ec2"] = ec2
    group = NodeGroup("S", "Cluster", "p5.48xlarge", 2, reservation_id="cr-0123456789abcdef0")
    check = pf.guard("placement", lambda: pf.placement(group))  # as register.run calls each check
    assert check is not None and check.status == status and says in check.line(), check


def test_status_shows_the_nodes_parallelcluster_launched(account: dict[str, Any], capsys: Any) -> None:
    """ParallelCluster launches its nodes itself and tags them with the cluster's name."""
    session = account["session"]
    cfn = session.client("cloudformation", region_name=REGION)
    parameter = {"Type": "String", "Value": "x", "Name": "/pc/config"}
    body = {"Resources": {"Config": {"Type": "AWS::SSM::Parameter", "Properties": parameter}}}
    cfn.create_stack(StackName="Trn1ParallelCluster", TemplateBody=json.dumps(body))
    ec2 = session.client("ec2", region_name=REGION)
    tags = [{"Key": "parallelcluster:cluster-name", "Value": "trn1"}]
    made = ec2.run_instances(
        ImageId=_ami(session),
        MinCount=1,
        MaxCount=1,
        InstanceType="trn1.32xlarge",
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )["Instances"][0]
    assert status.main("Trn1ParallelCluster", None, True, "trn1") == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert node["id"] == made["InstanceId"] and node["efa_verified"] == "(launched by the service)"
    assert node["device_fault"] is None
    # issue 59: the node's own tag (node/boot/mend.sh writes it) is its device fault, as EC2 returns it
    said = "reset pending: GPU 2 (00000000:00:08.0): row remapping pending (remapped_rows.pending Yes)"
    ec2.create_tags(Resources=[made["InstanceId"]], Tags=[{"Key": "efa-cdk:device-fault", "Value": said}])
    assert status.main("Trn1ParallelCluster", None, False, "trn1") == 0
    assert f"    device fault: {said}" in capsys.readouterr().out


def test_status_shows_the_nodes_pcs_launched(account: dict[str, Any], capsys: Any, monkeypatch: Any) -> None:
    """PCS tags the instances of a compute node group with its id (docs/pcs.md finds the login node so).
    moto's CloudFormation models no AWS::PCS::* resource: the stack's answers come from botocore's Stubber
    (in DescribeStacks' and ListStackResources' own shapes), the instances from moto."""
    session = account["session"]
    group = "pcs_0123456789"
    ec2 = session.client("ec2", region_name=REGION)
    made = ec2.run_instances(
        ImageId=_ami(session),
        MinCount=1,
        MaxCount=1,
        InstanceType="trn1.32xlarge",
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "aws:pcs:compute-node-group-id", "Value": group}]}
        ],
    )["Instances"][0]
    cfn = session.client("cloudformation", region_name=REGION)
    stub = Stubber(cfn)
    now = datetime.now(timezone.utc)
    stub.add_response(
        "describe_stacks",
        {"Stacks": [{"StackName": "Trn1PcsCluster", "CreationTime": now, "StackStatus": "CREATE_COMPLETE"}]},
        {"StackName": "Trn1PcsCluster"},
    )
    arn = f"arn:aws:pcs:{REGION}:123456789012:cluster/pcs_c1/computenodegroup/{group}"
    resource = {
        "LogicalResourceId": "PcsComputeNodes",
        "PhysicalResourceId": arn,
        "ResourceType": "AWS::PCS::ComputeNodeGroup",
        "LastUpdatedTimestamp": now,
        "ResourceStatus": "CREATE_COMPLETE",
    }
    stub.add_response(
        "list_stack_resources", {"StackResourceSummaries": [resource]}, {"StackName": "Trn1PcsCluster"}
    )
    stub.activate()
    real = session.client
    monkeypatch.setattr(session, "client", lambda s, **kw: cfn if s == "cloudformation" else real(s, **kw))
    monkeypatch.setattr(boto3.session, "Session", lambda **kw: session)
    assert status.main("Trn1PcsCluster", None, True) == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert node["id"] == made["InstanceId"] and node["efa_verified"] == "(launched by the service)"


def test_status_shows_a_failed_node_a_gone_node_eks_nodes_and_never_prints_what_nodes_wrote_raw() -> None:
    """A node whose create failed has no physical id (was a KeyError); a node EC2 no longer lists is
    named, not the end of the report (an instance-id filter, not InstanceIds); an EKS node group's nodes
    are found by the eks:nodegroup-name tag; terminal escapes in node-written results are not printed;
    a malformed result is a note."""

    when = datetime(2026, 11, 25, tzinfo=timezone.utc)
    s = _StubbedSession()
    cfn, cw, ec2, ssm = (s.stubs[k] for k in ("cloudformation", "cloudwatch", "ec2", "ssm"))
    cfn.add_response("describe_stacks", {"Stacks": [{"StackName": "S", "CreationTime": when,
                     "StackStatus": "UPDATE_COMPLETE", "Outputs": []}]}, {"StackName": "S"})  # fmt: skip
    row = {"LastUpdatedTimestamp": when, "ResourceStatus": "CREATE_COMPLETE"}
    cfn.add_response("list_stack_resources", {"StackResourceSummaries": [
        {**row, "LogicalResourceId": "ClusterNode0", "ResourceType": "AWS::EC2::Instance",
         "PhysicalResourceId": "i-0aaaaaaaaaaaaaaa0"},
        {**row, "LogicalResourceId": "ClusterNode1", "ResourceType": "AWS::EC2::Instance",
         "ResourceStatus": "CREATE_FAILED", "ResourceStatusReason": "insufficient capacity"},
        {**row, "LogicalResourceId": "ClusterNode2", "ResourceType": "AWS::EC2::Instance",
         "PhysicalResourceId": "i-0ccccccccccccccc0"},
        {**row, "LogicalResourceId": "Nodes", "ResourceType": "AWS::EKS::Nodegroup",
         "PhysicalResourceId": "training/efa-nodes"},
        {**row, "LogicalResourceId": "Results", "ResourceType": "AWS::SSM::Parameter",
         "PhysicalResourceId": "/efa-cdk/S/Cluster/benchmark-results"},
    ]}, {"StackName": "S"})  # fmt: skip

    def instance(iid: str, ip: str) -> dict[str, Any]:
        return {"InstanceId": iid, "InstanceType": "p5.48xlarge", "State": {"Name": "running", "Code": 16},
                "Placement": {"AvailabilityZone": "us-east-1a"}, "PrivateIpAddress": ip}  # fmt: skip

    eks_node, node0 = instance("i-0eeeeeeeeeeeeeee0", "10.0.0.9"), instance("i-0aaaaaaaaaaaaaaa0", "10.0.0.5")
    ec2.add_response("describe_instances", {"Reservations": [{"Instances": [eks_node]}]},
                     {"Filters": [{"Name": "tag:eks:nodegroup-name", "Values": ["efa-nodes"]}]})  # fmt: skip
    ec2.add_response("describe_instances", {"Reservations": [{"Instances": [node0]}]},
                     {"Filters": [{"Name": "instance-id",
                                   "Values": ["i-0aaaaaaaaaaaaaaa0", "i-0ccccccccccccccc0"]}]})  # fmt: skip
    cw.add_response("describe_alarms", {"MetricAlarms": []}, {"AlarmNamePrefix": "S-"})
    for _ in range(2):
        cw.add_response("get_metric_statistics", {"Datapoints": []})
    kept = {"generation": "g\x1b]0;owned\x07", "at": "now\x1b[2J", "status": "SUCCESS",
            "data": ["not a row", {"benchmark": "nccl-tests", "ok": False, "reason": "bad\x1b[31m red",
                                   "peak_gbytes_s": "fast"}]}  # fmt: skip
    ssm.add_response("get_parameter", {"Parameter": {"Name": "/efa-cdk/S/Cluster/benchmark-results",
                     "Value": json.dumps(kept), "Type": "String"}},
                     {"Name": "/efa-cdk/S/Cluster/benchmark-results"})  # fmt: skip
    for stub in s.stubs.values():
        stub.activate()
    found = status.cluster_status(s, "S")
    for stub in s.stubs.values():
        stub.assert_no_pending_responses()
    assert [n["id"] for n in found["nodes"]] == ["i-0aaaaaaaaaaaaaaa0", "i-0eeeeeeeeeeeeeee0"]
    assert found["missing_nodes"] == [
        "ClusterNode1: CREATE_FAILED insufficient capacity",
        "i-0ccccccccccccccc0: EC2 no longer lists it",
    ]
    assert found["benchmarks"][0] == {"benchmark": "?", "ok": False, "note": "unreadable result: not a row"}
    assert found["benchmarks"][1]["note"] == "unreadable peak: fast"
    text = status.render(found)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), repr(text)
    assert "not running: ClusterNode1: CREATE_FAILED insufficient capacity" in text
    assert "FAILED (bad?[31m red)" in text


@pytest.mark.parametrize("order", ["newest first", "newest last", "newest between"])
def test_a_nodes_health_is_its_newest_datapoint_whatever_order_cloudwatch_answers(order: str) -> None:
    """Issue 41 item 18 (the latest of several): GetMetricStatistics' datapoints come in no set order
    (CloudWatch API reference); a node healthy at 10:00 and 10:05 but failing at 10:10 is UNHEALTHY."""
    points = [
        (datetime(2026, 11, 25, 10, m, tzinfo=timezone.utc), v) for m, v in ((0, 1.0), (5, 1.0), (10, 0.0))
    ]
    newest = points.pop()
    points.insert({"newest first": 0, "newest last": 2, "newest between": 1}[order], newest)
    s = _StubbedSession()
    s.stubs["cloudwatch"].add_response("get_metric_statistics", {"Datapoints": [
        {"Timestamp": t, "Minimum": v, "Unit": "Count"} for t, v in points]})  # fmt: skip
    s.stubs["cloudwatch"].activate()
    node = {"InstanceId": "i-0aaaaaaaaaaaaaaa0", "State": {"Name": "running", "Code": 16}}
    row = status._node_row(s.clients["cloudwatch"], node, "EfaCdk/S/Cluster", {})
    assert row["last_health_check"] == "UNHEALTHY at 10:10 UTC"


def test_status_asks_the_region_the_stack_deploys_to_before_the_configurations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--region first; then the region the assembly's stack was synthesized for (where it deployed); only
    then the AWS configuration's (it was asked first, so a eu-west-1 stack was looked for in us-east-1)."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    out = _assembly(tmp_path, "eu-west-1")
    assert preflight.session_for(None, out, ["S"]).region_name == "eu-west-1"
    assert preflight.session_for("ap-south-1", out, ["S"]).region_name == "ap-south-1"
    (tmp_path / "agnostic").mkdir()
    agnostic = _assembly(tmp_path / "agnostic", "unknown-region")
    assert preflight.session_for(None, agnostic, ["S"]).region_name == "us-east-1"


def test_status_shows_the_fabric_sweeps_verdict() -> None:
    """The sweep's result (efa_constructs/node/sweep.py ``result``) in the benchmarks: its median when
    nothing is named, the named node and its figure when one is."""
    from efa_constructs.node import sweep

    healthy = sweep.result(
        {"median_gbps": 96.5, "slow_nodes": {}, "slow_links": {}, "rounds": 3, "seconds": 40}
    )
    slow = sweep.result(
        {"median_gbps": 96.5, "slow_nodes": {"10.0.64.5": 9.1}, "slow_links": {}, "rounds": 4, "seconds": 52}
    )
    base = {"stack": "S", "status": "CREATE_COMPLETE", "nodes": [], "alarms": [], "changes": []}
    text = status.render({**base, "benchmarks": status._benchmarks({}, {"data": [healthy]})})
    assert "  fabric-sweep: median pair 96.5 Gbps, no slow node or link" in text
    text = status.render({**base, "benchmarks": status._benchmarks({}, {"data": [slow]})})
    assert "  fabric-sweep: FAILED (slow node 10.0.64.5: 9.1 Gbps (the cluster's median 96.5 Gbps))" in text


def test_sweep_runs_the_document_on_the_stacks_instances_waits_and_shows_what_it_named() -> None:
    """`efa-cdk sweep` (Stubber, against botocore's models of CloudFormation and SSM): the stack's
    BenchmarkDocument sent by the stack-name tag, the invocations waited for until every one is done, and
    the leader's newest results read as status reads them; without the document, one line saying what to
    run instead."""
    from efa_constructs.tools import sweep

    when = datetime(2026, 11, 26, tzinfo=timezone.utc)
    s = _StubbedSession()
    cfn, ssm = s.stubs["cloudformation"], s.stubs["ssm"]
    outputs = [{"OutputKey": "BenchmarkDocument", "OutputValue": "S-ClusterMonitoringBenchmarkDocument-1"}]
    cfn.add_response("describe_stacks", {"Stacks": [{"StackName": "S", "CreationTime": when,
                     "StackStatus": "CREATE_COMPLETE", "Outputs": outputs}]}, {"StackName": "S"})  # fmt: skip
    targets = [{"Key": "tag:aws:cloudformation:stack-name", "Values": ["S"]}]
    command = "0e2e0000-0000-4000-8000-000000000001"
    ssm.add_response("send_command", {"Command": {"CommandId": command}}, {
        "DocumentName": "S-ClusterMonitoringBenchmarkDocument-1", "Targets": targets,
        "Comment": "efa-cdk sweep S"})  # fmt: skip
    for states in (("InProgress", "Success"), ("Success", "Success")):
        ssm.add_response("list_command_invocations", {"CommandInvocations": [
            {"InstanceId": "i-0aaaaaaaaaaaaaaa0", "Status": states[0]},
            {"InstanceId": "i-0bbbbbbbbbbbbbbb0", "Status": states[1]}]}, {"CommandId": command})  # fmt: skip
    cfn.add_response("list_stack_resources", {"StackResourceSummaries": [
        {"LogicalResourceId": "Results", "ResourceType": "AWS::SSM::Parameter", "LastUpdatedTimestamp": when,
         "ResourceStatus": "CREATE_COMPLETE", "PhysicalResourceId": "/efa-cdk/S/Cluster/benchmark-results"}]},
        {"StackName": "S"})  # fmt: skip
    named = {"benchmark": "fabric-sweep", "ok": False, "median_gbps": 96.5, "slow_nodes": {"10.0.64.5": 9.1},
             "reason": "slow node 10.0.64.5: 9.1 Gbps (the cluster's median 96.5 Gbps)"}  # fmt: skip
    kept = {"generation": "g", "at": "2026-11-26T06:00:00Z", "status": "SUCCESS", "data": [named]}
    ssm.add_response("get_parameter", {"Parameter": {"Name": "/efa-cdk/S/Cluster/benchmark-results",
                     "Value": json.dumps(kept), "Type": "String"}},
                     {"Name": "/efa-cdk/S/Cluster/benchmark-results"})  # fmt: skip
    for stub in s.stubs.values():
        stub.activate()
    waited: list[float] = []
    found = sweep.sweep(s, "S", pause=waited.append)
    for stub in s.stubs.values():
        stub.assert_no_pending_responses()
    both = ["i-0aaaaaaaaaaaaaaa0", "i-0bbbbbbbbbbbbbbb0"]
    assert waited == [10] and found["invocations"] == dict.fromkeys(both, "Success")
    assert found["sweep"]["slow_nodes"] == {"10.0.64.5": 9.1}
    assert status.render_benchmark(found["sweep"]).startswith(
        "fabric-sweep: FAILED (slow node 10.0.64.5: 9.1 Gbps"
    )
    bare = _StubbedSession()
    bare_stack = {"StackName": "S", "CreationTime": when, "StackStatus": "CREATE_COMPLETE", "Outputs": []}
    bare.stubs["cloudformation"].add_response("describe_stacks", {"Stacks": [bare_stack]}, {"StackName": "S"})
    bare.stubs["cloudformation"].activate()
    with pytest.raises(
        preflight.PreflightError, match=r"S has no BenchmarkDocument output .*/fabric-sweep\.sh on its leader"
    ):
        sweep.sweep(bare, "S")


def test_status_never_lets_node_written_text_forge_a_line_or_end_in_a_traceback() -> None:
    """Issue 53 item 15: what nodes write (benchmark reasons, the last replacement) may hold a newline (a
    forged line of its own), bidirectional or zero-width characters (a line that reads otherwise than it is),
    an epoch past the calendar, a digit of another script, or a share that is no number: each is shown as
    text, on its own line, and status never ends in a traceback."""
    forged = {
        "benchmark": "nccl-tests",
        "ok": False,
        "reason": "slow\nnccl-tests: 400 GB/s peak, 100% of the EFA line rate\u202e\u200b",
    }
    line = status.render_benchmark(forged)
    assert "\n" not in line and "\u202e" not in line and "\u200b" not in line
    share = status.render_benchmark({"benchmark": "lustre", "ok": True, "nodes": 2, "efa_share": "most"})
    assert "unreadable share" in share
    # issue 60 item 8: a storage result whose slowest write is no object, a share that is no number, a result
    # that is no object, a BenchmarkResults whose data is no text: each one line, no traceback
    for odd in (["10.0.1.10", 3], "10.0.1.10", 7):
        said = status.render_benchmark({"benchmark": "lustre", "ok": True, "nodes": 2, "slowest_write": odd})
        assert f"slowest write: unreadable, {odd}" in said, said
    said = status.render_benchmark({"benchmark": "nccl-tests", "ok": True, "line_rate_fraction": "all"})
    assert "an unreadable share of the EFA line rate (all)" in said
    assert status.render_benchmark(["not", "a", "result"]).startswith("an unreadable benchmark result")  # type: ignore[arg-type]
    (unread,) = status._benchmarks({"BenchmarkResults": '{"all": 5}'})
    assert unread["note"].startswith("unreadable BenchmarkResults")
    assert status._when("99999999999999999999 ops") == "99999999999999999999 ops"  # past the calendar
    assert status._when("\u00b2 ops") == "\u00b2 ops"  # '²'.isdigit() is True, int('²') is not a number
    assert status._when("1764000000 ops").endswith("UTC by ops")
    report = status.render({
        "stack": "S", "status": "UPDATE_COMPLETE\nforged: line", "nodes": [], "benchmarks": [forged],
        "alarms": [], "changes": ["replaced\u2028node 3"],
    })  # fmt: skip
    assert not any(line.startswith(("forged", "nccl-tests: 400", "node 3")) for line in report.splitlines())
