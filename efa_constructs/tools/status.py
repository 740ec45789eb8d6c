"""`efa-cdk status STACK`: one view of a deployed cluster from the account.

Each node (id, state, zone, whether it verified EFA: its creation signal, or its group's health; its
last health check, the ``EfaHealthy`` metric), the benchmark results against the type's line rate (the
``BenchmarkResults`` and ``Layout`` outputs), the alarms' states, and what changed since the deploy (the
group's last replacement, held-back replacements). For ParallelCluster and PCS stacks, what the account
shows of their nodes (instances by the tags those services put on them: PCS's compute node group id,
and with ``--pcluster-name`` the name given to ``pcluster create-cluster``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from ..core.monitoring import DEVICE_FAULT_TAG
from .aws import aws_client
from .exits import CANNOT_RUN_KIND, Exit, emit, fail
from .preflight import PreflightError, session_for
from .preflight.aws_errors import _aws_call, _Denied

T = TypeVar("T")

#: Every call status makes and the IAM action it needs.
PERMISSIONS = {
    "cloudformation:DescribeStacks": "the stack's state and outputs",
    "cloudformation:ListStackResources": "its nodes, groups, alarms and parameters",
    "ec2:DescribeInstances": "each node's state, zone and address",
    "autoscaling:DescribeAutoScalingGroups": "an Auto Scaling group's nodes and their health",
    "cloudwatch:DescribeAlarms": "the alarms' states",
    "cloudwatch:GetMetricStatistics": "each node's last health check (EfaHealthy)",
    "ssm:GetParameter": "the group's last replacement, the newest generation's benchmark results",
    "ec2:DescribeCapacityReservations": "a Capacity Block's state and end (CapacityBlockId output)",
}
#: The tag AWS PCS puts on the instances of a compute node group (the one docs/pcs.md finds the login node
#: by); ParallelCluster's nodes are found by their cluster's name (``--pcluster-name``).
SERVICE_TAGS = {
    "AWS::PCS::ComputeNodeGroup": "aws:pcs:compute-node-group-id",
    # EKS tags a managed node group's instances with its name (EKS user guide, "Managed node groups":
    # eks:cluster-name and eks:nodegroup-name); the resource's physical id is <cluster>/<node group>.
    "AWS::EKS::Nodegroup": "eks:nodegroup-name",
}
#: EC2 takes at most 200 values in one filter (EC2 API reference, Filter).
FILTER_VALUES = 200
#: Control characters (C0 but newline and tab, DEL, C1): never printed from node- or account-written text.
#: What a node may write that a terminal would obey or a reader would misread: control characters (a newline
#: forges a whole line), Unicode's bidirectional controls (they reorder what is shown) and its invisible ones
#: (zero-width spaces and joiners, line and paragraph separators, the byte-order mark). Shown as "?".
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def _pages(client: Any, op: str, key: str, **kw: Any) -> list[Any]:
    return [item for page in client.get_paginator(op).paginate(**kw) for item in page[key]]


def _instances(ec2: Any, **kw: Any) -> list[dict[str, Any]]:
    return [i for res in _pages(ec2, "describe_instances", "Reservations", **kw) for i in res["Instances"]]


def _verified(session: Any, by_type: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Instance id -> how its EFA check is known: an explicit node's signal (its resource's status), a
    group member's health."""
    verified: dict[str, str] = {}
    for r in by_type.get("AWS::EC2::Instance", []):
        if not r.get("PhysicalResourceId"):  # never launched (a failed create): no instance to show
            continue
        ok = r["ResourceStatus"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE")
        verified[r["PhysicalResourceId"]] = "yes (signalled)" if ok else f"no ({r['ResourceStatus']})"
    groups = [
        r["PhysicalResourceId"]
        for r in by_type.get("AWS::AutoScaling::AutoScalingGroup", [])
        if r.get("PhysicalResourceId")
    ]
    if groups:
        asg = aws_client(session, "autoscaling")
        for g in _aws_call(
            "nodes",
            "autoscaling:DescribeAutoScalingGroups",
            lambda: asg.describe_auto_scaling_groups(AutoScalingGroupNames=groups),
        )["AutoScalingGroups"]:
            for i in g["Instances"]:
                verified[i["InstanceId"]] = f"group health {i['HealthStatus']}"
    return verified


def _instances_of(
    ec2: Any, verified: dict[str, str], by_type: dict[str, list[dict[str, Any]]], pcluster_name: str | None
) -> list[dict[str, Any]]:
    """The stack's instances: by id (explicit nodes, group members), by the services' tags (PCS, EKS
    node groups), by ParallelCluster's cluster-name tag."""
    filters = [
        {"Name": f"tag:{tag}", "Values": [r["PhysicalResourceId"].rsplit("/", 1)[-1]]}  # an ARN's id
        for kind, tag in SERVICE_TAGS.items()
        for r in by_type.get(kind, [])
        if r.get("PhysicalResourceId")
    ]
    if pcluster_name:
        filters.append({"Name": "tag:parallelcluster:cluster-name", "Values": [pcluster_name]})
    # By an instance-id filter, not InstanceIds: an id EC2 no longer knows (a node terminated long ago)
    # is left out instead of failing the whole call (InvalidInstanceID.NotFound).
    ids = sorted(verified)
    filters += [
        {"Name": "instance-id", "Values": ids[i : i + FILTER_VALUES]}
        for i in range(0, len(ids), FILTER_VALUES)
    ]
    found: list[dict[str, Any]] = []
    for f in filters:
        found += _aws_call("nodes", "ec2:DescribeInstances", partial(_instances, ec2, Filters=[f]))
    return found


def _alarms(
    cw: Any, by_type: dict[str, list[dict[str, Any]]], stack: str
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The stack's alarms and their states (CloudFormation names them "<stack>-<logical id>-<suffix>"
    when the template does not): by their physical ids, else by that prefix."""
    named = [r["PhysicalResourceId"] for r in by_type.get("AWS::CloudWatch::Alarm", [])]
    asked = partial(_pages, cw, "describe_alarms", "MetricAlarms")
    found_alarms = _aws_call(
        "alarms",
        "cloudwatch:DescribeAlarms",
        partial(asked, AlarmNames=named) if named else partial(asked, AlarmNamePrefix=f"{stack}-"),
    )
    states = [
        {"name": a["AlarmName"], "state": a["StateValue"], "metric": a.get("MetricName", "")}
        for a in found_alarms
    ]
    return found_alarms, states


def _node_row(cw: Any, i: dict[str, Any], namespace: str, verified: dict[str, str]) -> dict[str, Any]:
    """One node: its instance's facts, how its EFA check is known, its last health check (the hour's)."""
    iid = i["InstanceId"]
    health = _aws_call(
        "nodes",
        "cloudwatch:GetMetricStatistics",
        partial(
            cw.get_metric_statistics,
            Namespace=namespace,
            MetricName="EfaHealthy",
            Dimensions=[{"Name": "InstanceId", "Value": iid}],
            StartTime=datetime.now(timezone.utc) - timedelta(hours=1),
            EndTime=datetime.now(timezone.utc) + timedelta(minutes=5),  # the newest point included
            Period=300,
            Statistics=["Minimum"],
        ),
    )["Datapoints"]
    last = max(health, key=lambda d: d["Timestamp"]) if health else None
    return {
        "id": iid,
        "type": i.get("InstanceType"),
        "state": i["State"]["Name"],
        "zone": i.get("Placement", {}).get("AvailabilityZone"),
        "ip": i.get("PrivateIpAddress"),
        "efa_verified": verified.get(iid, "(launched by the service)"),
        "last_health_check": None
        if last is None
        else f"{'healthy' if last['Minimum'] >= 1 else 'UNHEALTHY'} at {last['Timestamp']:%H:%M} UTC",
        # what the node's device checks found and the mend taken or pending (node/boot/mend.sh): its words
        "device_fault": next((t["Value"] for t in i.get("Tags", []) if t["Key"] == DEVICE_FAULT_TAG), None),
    }


def _changes(
    session: Any, by_type: dict[str, list[dict[str, Any]]], alarm_states: list[dict[str, str]]
) -> list[str]:
    """What the cluster changed on its own: the group's last replacement, replacements held back."""
    changes = []
    ssm = aws_client(session, "ssm")
    for r in by_type.get("AWS::SSM::Parameter", []):
        if r["PhysicalResourceId"].endswith("/last-replacement"):
            asked = partial(ssm.get_parameter, Name=r["PhysicalResourceId"])
            value = _aws_call("changes", "ssm:GetParameter", asked)["Parameter"]["Value"]
            changes.append(
                "no replacement yet" if value == "none" else f"last replacement claimed: {_when(value)}"
            )
    held = [a for a in alarm_states if a["metric"] == "EfaReplacementsHeldBack" and a["state"] == "ALARM"]
    if held:
        changes.append("replacements held back by the one-per-window limit (see the alarm)")
    return changes


def described_stack(cfn: Any, stack: str) -> dict[str, Any]:
    """The stack as DescribeStacks answers it."""
    found = _aws_call("stack", "cloudformation:DescribeStacks", lambda: cfn.describe_stacks(StackName=stack))
    return dict(found["Stacks"][0])


def stack_outputs(info: dict[str, Any]) -> dict[str, str]:
    """A described stack's outputs, by key."""
    return {o["OutputKey"]: o.get("OutputValue", "") for o in info.get("Outputs", [])}


def resources_by_type(cfn: Any, stack: str) -> dict[str, list[dict[str, Any]]]:
    """The stack's resources (ListStackResources, every page), by resource type."""
    resources = _aws_call(
        "stack",
        "cloudformation:ListStackResources",
        lambda: _pages(cfn, "list_stack_resources", "StackResourceSummaries", StackName=stack),
    )
    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in resources:
        by_type.setdefault(r["ResourceType"], []).append(r)
    return by_type


def cluster_status(session: Any, stack: str, pcluster_name: str | None = None) -> dict[str, Any]:
    """The cluster `stack` as the account shows it (a JSON-able dict). `pcluster_name`: the name given to
    ``pcluster create-cluster`` for a ParallelCluster stack, whose nodes ParallelCluster launches and
    tags ``parallelcluster:cluster-name``."""
    cfn = aws_client(session, "cloudformation")
    cw = aws_client(session, "cloudwatch")
    info = described_stack(cfn, stack)
    outputs = stack_outputs(info)
    by_type = resources_by_type(cfn, stack)
    verified = _verified(session, by_type)
    ec2 = aws_client(session, "ec2")
    found = _instances_of(ec2, verified, by_type, pcluster_name)
    not_launched = [
        " ".join(
            [f"{r['LogicalResourceId']}: {r.get('ResourceStatus', '?')}", r.get("ResourceStatusReason", "")]
        )
        for r in by_type.get("AWS::EC2::Instance", [])
        if not r.get("PhysicalResourceId")
    ]
    seen = {i["InstanceId"] for i in found}
    gone = [f"{iid}: EC2 no longer lists it" for iid in sorted(verified) if iid not in seen]
    found_alarms, alarm_states = _alarms(cw, by_type, stack)
    namespace = next(
        (a["Namespace"] for a in found_alarms if a.get("MetricName") in ("EfaUnhealthyNodes", "EfaHealthy")),
        _namespace(by_type.get("AWS::CloudWatch::Dashboard", []), stack),
    )
    nodes = [
        _node_row(cw, i, namespace, verified)
        for i in sorted(found, key=lambda i: i.get("PrivateIpAddress", ""))
    ]
    changes = _changes(session, by_type, alarm_states)
    return {
        "stack": stack,
        "status": info["StackStatus"],
        "nodes": nodes,
        "missing_nodes": not_launched + gone,
        "benchmarks": _benchmarks(outputs, newest := _newest_results(session, by_type)),
        "benchmarks_of": {k: newest[k] for k in ("generation", "at")} if newest else "the stack's creation",
        "alarms": alarm_states,
        "changes": changes,
        "capacity_block": _capacity_block(ec2, outputs.get("CapacityBlockId")),
    }


def _capacity_block(ec2: Any, block: str | None) -> dict[str, str] | None:
    """The stack's Capacity Block (its CapacityBlockId output): its state and when it ends."""
    if not block:
        return None
    found = _aws_call(
        "capacity block",
        "ec2:DescribeCapacityReservations",
        lambda: ec2.describe_capacity_reservations(CapacityReservationIds=[block]),
    )["CapacityReservations"]
    if not found:
        return {"id": block, "state": "not found", "ends": "unknown"}
    end = found[0].get("EndDate")
    return {
        "id": block,
        "state": str(found[0].get("State", "?")),
        "ends": f"{end:%Y-%m-%d %H:%M} UTC" if end else "unknown",
    }


def _namespace(resources: list[dict[str, Any]], stack: str) -> str:
    """The cluster's metrics namespace (EfaCdk/<stack>/<cluster>, EfaClusterMonitoring's)."""
    for r in resources:
        if r["ResourceType"] == "AWS::CloudWatch::Dashboard":
            return f"EfaCdk/{stack}/{r['LogicalResourceId'].split('Monitoring')[0] or 'Cluster'}"
    return f"EfaCdk/{stack}/Cluster"


def _when(value: str) -> str:
    """The last replacement's "<epoch> <who>" as a date, or the text as it is when it is not one (a node
    wrote it: an epoch past the calendar or digits of another script are shown, not read)."""
    epoch, _, who = value.partition(" ")
    if not (epoch.isascii() and epoch.isdigit()):
        return value
    try:
        return f"{datetime.fromtimestamp(int(epoch), timezone.utc):%Y-%m-%d %H:%M} UTC by {who}"
    except (OverflowError, OSError, ValueError):
        return value


def _newest_results(session: Any, by_type: dict[str, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """The newest generation's benchmark results, as its leader kept them in the cluster's
    ``.../benchmark-results`` parameter (node/boot/benchmarks.sh); None before any were kept."""
    names = [
        r["PhysicalResourceId"]
        for r in by_type.get("AWS::SSM::Parameter", [])
        if r.get("PhysicalResourceId", "").endswith("/benchmark-results")
    ]
    if not names:
        return None
    ssm = aws_client(session, "ssm")
    raw = _aws_call(
        "benchmarks", "ssm:GetParameter", lambda: ssm.get_parameter(Name=names[0])["Parameter"]["Value"]
    )
    if raw == "none":
        return None
    try:
        kept = json.loads(raw)
        return {"generation": str(kept["generation"]), "at": str(kept["at"]), "data": list(kept["data"])}
    except (ValueError, KeyError, TypeError):
        return {
            "generation": "unknown",
            "at": "unknown",
            "data": [
                {"benchmark": "all", "ok": False, "note": f"unreadable benchmark results in {names[0]}"}
            ],
        }


def _benchmarks(outputs: dict[str, str], newest: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The leader's benchmark results, each peak against the Layout output's EFA line rate: the newest
    generation's (`newest`), else the stack's creation's (the BenchmarkResults output)."""
    raw = outputs.get("BenchmarkResults")
    if newest is not None:
        results = newest["data"]
    elif not raw:
        return []
    else:
        try:
            data = json.loads(raw)
            results = json.loads(next(iter(data.values()))) if isinstance(data, dict) else data
        except (ValueError, StopIteration, TypeError):
            return [{"benchmark": "all", "ok": False, "note": f"unreadable BenchmarkResults: {raw[:80]}"}]
    line_rate = _line_rate(outputs)
    out = []
    for r in results if isinstance(results, list) else [results]:
        if not isinstance(r, dict):
            out.append({"benchmark": "?", "ok": False, "note": f"unreadable result: {str(r)[:80]}"})
            continue
        row = dict(r)
        peak = r.get("peak_gbytes_s")
        try:
            gbytes = None if peak is None else float(peak)
        except (TypeError, ValueError):
            gbytes, row["note"] = None, f"unreadable peak: {str(peak)[:40]}"
        if line_rate and gbytes is not None:
            row["line_rate_fraction"] = round(gbytes * 8 / line_rate, 3)
        out.append(row)
    return out


def _line_rate(outputs: dict[str, str]) -> float | None:
    """The nodes' EFA line rate (Gbps): the stack's EfaLineRateGbps output; a stack made before it
    had one says it in its Layout output's text."""
    try:
        return float(outputs["EfaLineRateGbps"])
    except (KeyError, ValueError):
        rate = re.search(r"([\d.]+) Gbps EFA line rate", outputs.get("Layout", ""))
        return float(rate.group(1)) if rate else None


def _storage_figure(b: dict[str, Any]) -> str:
    """The storage benchmark's line: the aggregates, the slowest node, the share of Lustre on EFA."""
    slowest = b.get("slowest_write") or {}
    text = f"write {b.get('write_gbytes_s')} GB/s, read {b.get('read_gbytes_s')} GB/s"
    text += f" from {b.get('nodes', '?')} nodes"
    if isinstance(slowest, dict) and slowest:
        text += f" (slowest write: {slowest.get('node')} at {slowest.get('gbytes_s')} GB/s)"
    elif slowest:  # what a node wrote is data: any shape is shown, none ends status in a traceback
        text += f" (slowest write: unreadable, {str(slowest)[:40]})"
    if "efa_share" in b:
        try:
            text += f", {float(b['efa_share']):.0%} of Lustre's messages over EFA"
        except (TypeError, ValueError):
            text += f", an unreadable share of Lustre's messages over EFA ({str(b['efa_share'])[:40]})"
    return text


def render_benchmark(b: dict[str, Any]) -> str:
    """One benchmark result as a line: its figure, or why it failed (the fabric sweep: what it named)."""
    if not isinstance(b, dict):
        return _CONTROL.sub("?", f"an unreadable benchmark result: {str(b)[:80]}")
    figure = (
        f"FAILED ({b.get('reason') or b.get('note', '')})"
        if not b.get("ok")
        else f"median pair {b.get('median_gbps')} Gbps, no slow node or link"
        if b.get("benchmark") == "fabric-sweep"
        else _storage_figure(b)
        if b.get("benchmark") == "lustre"
        else f"{b.get('peak_gbytes_s')} GB/s peak"
    )
    share = ""
    if "line_rate_fraction" in b:
        try:
            share = f", {float(b['line_rate_fraction']):.0%} of the EFA line rate"
        except (TypeError, ValueError):
            share = f", an unreadable share of the EFA line rate ({str(b['line_rate_fraction'])[:40]})"
    return _CONTROL.sub("?", f"{b.get('benchmark')}: {figure}{share}")


def render(s: dict[str, Any]) -> str:
    lines = [f"{s['stack']}: {s['status']}", f"nodes ({len(s['nodes'])}):"]
    lines += [f"  not running: {m}" for m in s.get("missing_nodes", [])]
    for n in s["nodes"]:
        lines.append(
            f"  {n['id']}  {n['type']}  {n['state']:<8} {n['zone']}  {n['ip']}  EFA verified: "
            f"{n['efa_verified']}  last health check: {n['last_health_check'] or 'none in the last hour'}"
        )
        if n.get("device_fault"):
            lines.append(f"    device fault: {n['device_fault']}")
    of = s.get("benchmarks_of")
    when = f" (generation {of['generation']}, {of['at']})" if isinstance(of, dict) else ""
    lines.append(f"benchmarks{when}:" if s["benchmarks"] else "benchmarks: none reported")
    lines += [f"  {render_benchmark(b)}" for b in s["benchmarks"]]
    lines.append("alarms:" if s["alarms"] else "alarms: none")
    lines += [f"  {a['state']:<17} {a['name']}" for a in s["alarms"]]
    lines += ["since the deploy:", *[f"  {c}" for c in s["changes"] or ["nothing recorded"]]]
    block = s.get("capacity_block")
    if block:  # EC2 terminates the block's instances from 30 minutes before its end (EC2 user guide)
        lines.append(f"capacity block {block['id']}: {block['state']}, ends {block['ends']}")
    # what nodes wrote (benchmark reasons, parameter values) is shown, never obeyed by the terminal: each line
    # on its own, so a newline inside a value cannot make a line of its own
    return "\n".join(_CONTROL.sub("?", line) for line in lines)


def from_account(
    command: str, stack: str, region: str | None, read: Callable[[Any], T], as_json: bool
) -> T | None:
    """`read(session)` for one deployed stack, in the region it deploys to (:func:`session_for`); what
    keeps it from running (no boto3, no region, an AWS refusal) is one error (:func:`fail`), and None."""
    try:
        import boto3  # noqa: F401  (installed? the account extra)
    except ModuleNotFoundError:
        fail(f"{command} calls AWS with boto3: pip install 'efa-cdk[account]'", CANNOT_RUN_KIND, as_json)
        return None
    try:
        return read(session_for(region, Path("cdk.out"), [stack]))
    except PreflightError as err:
        fail(f"{command}: {err}", CANNOT_RUN_KIND, as_json)
    except _Denied as denied:
        fix = f" ({denied.check.fix})" if denied.check.fix else ""
        fail(f"{command}: {denied.check.found}{fix}", CANNOT_RUN_KIND, as_json)
    return None


def main(stack: str, region: str | None, as_json: bool, pcluster_name: str | None = None) -> int:
    s = from_account(
        "status", stack, region, lambda session: cluster_status(session, stack, pcluster_name), as_json
    )
    if s is None:
        return Exit.CANNOT_RUN
    emit(s, lambda: render(s), as_json)
    return Exit.OK
