"""The one-machine cluster's node calls, authorized against the node role as IAM would.

The nodes sign with their own key (tests/e2e/aws_endpoint.py's ``NODE_KEY``) and the endpoint keeps each
call as IAM sees it. Here each call becomes IAM's request (action, resource ARN, condition keys: the
Service Authorization Reference's resource types for these actions) and is evaluated with AWS's
evaluation logic (tests/iam_eval.py) against the node role's policies as moto's CloudFormation created
them (inline, AWS::IAM::Policy, and managed policies, every function already resolved). moto's own
authorization is not used: it checks actions against resource ``*`` only, so it would refuse every
statement the template scopes to an ARN.

A call this module cannot map raises, so a new call never passes unexamined.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tests.iam_eval import Request, allowed

ACCOUNT, REGION = "123456789012", "us-east-1"
NODE = "node-role"


def role_statements(iam: Any, role: str) -> list[dict[str, Any]]:
    """Every statement of role `role`'s identity policies in moto's IAM (inline and managed)."""
    statements: list[dict[str, Any]] = []

    def add(document: Any) -> None:
        doc = json.loads(unquote(document)) if isinstance(document, str) else document
        found = doc["Statement"]
        statements.extend(found if isinstance(found, list) else [found])

    for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        add(iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"])
    for attached in iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]:
        policy = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]
        version = iam.get_policy_version(
            PolicyArn=attached["PolicyArn"], VersionId=policy["DefaultVersionId"]
        )
        add(version["PolicyVersion"]["Document"])
    return statements


def _parameter(name: str) -> str:
    return f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/{name.lstrip('/')}"


def requests_of(call: dict[str, Any], lookup: Callable[[str, str], str]) -> list[Request]:
    """IAM's requests for one recorded call; `lookup(kind, name)` gives an ARN the call does not carry
    (``stack``: a stack's name; ``group``: an instance's Auto Scaling group)."""
    service, action, p = call["service"], call["action"], call["params"]
    prefix = {"monitoring": "cloudwatch"}.get(service, service)

    def one(resource: str, **context: str) -> list[Request]:
        return [Request(NODE, f"{prefix}:{action}", resource, context)]

    if service == "sts" and action == "GetCallerIdentity":
        return []  # needs no permission (IAM user guide)
    if service == "ssm" and action in (
        "GetParameter",
        "PutParameter",
        "DeleteParameter",
        "GetParameterHistory",
    ):
        return one(_parameter(p["Name"]))
    if service == "ssm" and action == "GetParameters":
        return [r for n in p["Names"] for r in one(_parameter(n))]
    if service == "ec2" and action in ("DescribeInstances", "DescribeInstanceTopology", "DescribeTags"):
        return one("*")  # Describe actions take no resource (Service Authorization Reference)
    if service == "ec2" and action in ("CreateTags", "DeleteTags", "GetConsoleOutput"):
        # CreateTags and DeleteTags: the keys the request carries (aws:TagKeys, absent without keys) and the
        # instance's own tags (aws:ResourceTag/<key>: the cluster's, which the node's policy names)
        ids = [v for k, v in sorted(p.items()) if k.startswith("ResourceId.")] or [p.get("InstanceId", "")]
        keys = [v for k, v in sorted(p.items()) if k.startswith("Tag.") and k.endswith(".Key")]
        out = []
        for i in ids:
            context: dict[str, Any] = {"aws:ResourceTag/efa-cdk:cluster": lookup("cluster-tag", i)}
            if keys:
                context["aws:TagKeys"] = keys
            out.append(
                Request(NODE, f"{prefix}:{action}", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{i}", context)
            )
        return out
    if service == "cloudformation" and action in (
        "SignalResource",
        "DescribeStackResource",
        "DescribeStacks",
    ):
        name = p["StackName"]
        return one(name if name.startswith("arn:") else lookup("stack", name))
    if service == "monitoring" and action == "PutMetricData":
        return one("*", **{"cloudwatch:namespace": p["Namespace"]})
    if service == "autoscaling" and action == "SetInstanceHealth":
        return one(lookup("group", p["InstanceId"]))
    if service == "s3" and action == "GetObject":
        return one(f"arn:aws:s3:::{p['Bucket']}/{p['Key']}")
    raise ValueError(f"node_iam: no IAM mapping for {service} {action} (add it, with its resource type)")


def calls(state: Path, sources: set[str] | None = None) -> list[dict[str, Any]]:
    """The recorded node calls (those from the addresses `sources`, when given)."""
    path = state / "node-requests.jsonl"
    found = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [c for c in found if sources is None or c["source"] in sources]


def denied(
    recorded: list[dict[str, Any]], statements: list[dict[str, Any]], lookup: Callable[[str, str], str]
) -> list[str]:
    """Each call the node role's statements do not allow: action, resource and node, one per line."""
    out = []
    for call in recorded:
        for request in requests_of(call, lookup):
            if not allowed(request, statements, []):
                out.append(
                    f"{request.action} on {request.resource} {request.context or ''} from {call['source']}"
                )
    return sorted(set(out))
