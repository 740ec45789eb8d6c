"""Evaluate the IAM policies a synthesized template writes, for one request, as AWS decides it.

For permissions that are no API call a test can make against the emulator (an NFS client mounting EFS is
authorized by EFS itself, from the file system policy and the caller's identity policy together). The
logic is AWS's documented evaluation for one account (IAM user guide, "Policy evaluation logic" and
"Determining whether a request is allowed or denied within an account"): an explicit Deny in any policy
wins; otherwise an Allow in the identity policy or in the resource policy (for a matching principal)
allows; otherwise the request is implicitly denied. An anonymous caller has no identity policy and
matches only the principal ``*``.

Why not moto's evaluator (moto/iam/access_control.py, ``IAMPolicyStatement``): it answers DENIED for a
statement whose condition or principal does not match, whatever the statement's effect, so an Allow
statement for another principal, or a Deny whose condition does not hold (the EFS policy's
``aws:SecureTransport = false``), would deny every request.

Only what the project's templates write is understood; anything else raises, so a test never passes on
a policy it could not read.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from .helpers import DEPLOY_VALUES

ANONYMOUS = "anonymous"


def resolve(value: Any) -> Any:
    """A policy value with CloudFormation's functions worked out: Ref/GetAtt of a resource become
    ``ref:<id>`` / ``arn:<id>`` (stable names to compare with), pseudo parameters their DEPLOY_VALUES."""
    if isinstance(value, list):
        return [resolve(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "Ref" in value:
        return DEPLOY_VALUES.get(value["Ref"], f"ref:{value['Ref']}")
    if "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        return f"{attribute.lower()}:{logical_id}"
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(str(resolve(p)) for p in parts)
    if "Fn::Sub" in value and isinstance(value["Fn::Sub"], str):
        text = value["Fn::Sub"]
        for name, known in DEPLOY_VALUES.items():
            text = text.replace("${" + name + "}", known)
        return text
    if len(value) == 1 and next(iter(value)).startswith("Fn::"):
        raise ValueError(f"iam_eval cannot resolve {value!r}")
    return {k: resolve(v) for k, v in value.items()}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _like(pattern: str, text: str, *, case: bool = True) -> bool:
    if not case:
        pattern, text = pattern.lower(), text.lower()
    return fnmatch.fnmatchcase(text, pattern.replace("[", "[[]"))


def _matches(operator: str, have: str, wanted: list[str]) -> bool:
    if operator in ("Bool", "StringEquals", "ArnEquals"):
        return (have.lower() if operator == "Bool" else have) in wanted
    if operator in ("StringLike", "ArnLike"):
        return any(_like(w, have) for w in wanted)
    raise ValueError(f"iam_eval does not evaluate condition operator {operator}")


def _condition_holds(condition: dict[str, Any], context: dict[str, Any]) -> bool:
    """Each test of the condition holds (IAM user guide, "IAM JSON policy elements: Condition operators"):
    a single-valued key must be present and match; ``ForAllValues:`` holds when every value of a multivalued
    key (a list in `context`) matches, and also when the key is absent (so policies pair it with ``Null``);
    ``Null`` "false" holds when the key is present, "true" when it is absent."""
    for operator, tests in condition.items():
        for key, wanted in tests.items():
            have = context.get(key)
            wanted = [str(w).lower() if operator in ("Bool", "Null") else str(w) for w in _as_list(wanted)]
            if operator == "Null":
                ok = (have is None) == (wanted == ["true"])
            elif operator.startswith("ForAllValues:"):
                ok = all(_matches(operator.split(":", 1)[1], v, wanted) for v in _as_list(have or []))
            else:
                ok = have is not None and _matches(operator, have, wanted)
            if not ok:
                return False
    return True


@dataclass
class Request:
    """One request: who (a role's logical id, or ANONYMOUS), what, on what, and its context keys."""

    principal: str
    action: str
    resource: str
    context: dict[str, Any] = field(default_factory=dict)  # a multivalued key's values as a list


def _applies(statement: dict[str, Any], request: Request, *, resource_policy: bool) -> bool:
    if "Action" in statement:
        if not any(_like(a, request.action, case=False) for a in _as_list(statement["Action"])):
            return False
    elif any(_like(a, request.action, case=False) for a in _as_list(statement["NotAction"])):
        return False
    if "Resource" in statement:
        if not any(_like(r, request.resource) for r in _as_list(statement["Resource"])):
            return False
    elif not resource_policy:  # an identity statement names its resources; a resource policy's is itself
        raise ValueError(f"iam_eval: identity statement without Resource: {statement!r}")
    if resource_policy:
        principal = statement.get("Principal")
        everyone = principal == "*" or (isinstance(principal, dict) and principal.get("AWS") == "*")
        named = isinstance(principal, dict) and f"arn:{request.principal}" in _as_list(principal.get("AWS"))
        if not (everyone or named):
            return False
    return _condition_holds(statement.get("Condition", {}), request.context)


def role_statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """Every statement of the identity policies attached to role `role` (a logical id) in the template:
    its inline Policies and each AWS::IAM::Policy naming it. Managed policies (ARNs) are not read."""
    resources = template["Resources"]
    statements: list[dict[str, Any]] = []
    for policy in resources[role]["Properties"].get("Policies", []):
        statements += policy["PolicyDocument"]["Statement"]
    for resource in resources.values():
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role} in resource["Properties"].get(
            "Roles", []
        ):
            statements += resource["Properties"]["PolicyDocument"]["Statement"]
    return [resolve(s) for s in statements]


def allowed(request: Request, identity: list[dict[str, Any]], resource_policy: list[dict[str, Any]]) -> bool:
    """Whether AWS allows `request` given the caller's identity statements and the resource's policy."""
    if request.principal == ANONYMOUS:
        identity = []
    mine = [(s, False) for s in identity] + [(resolve(s), True) for s in resource_policy]
    hits = [s for s, is_resource in mine if _applies(s, request, resource_policy=is_resource)]
    if any(s["Effect"] == "Deny" for s in hits):
        return False
    return any(s["Effect"] == "Allow" for s in hits)
