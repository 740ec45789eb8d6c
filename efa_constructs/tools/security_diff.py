"""What a change widens: IAM statements and security-group rules compared between two templates as
statements and rules (not property paths), as ``cdk diff``'s "IAM Statement Changes" and "Security Group
Changes" tables show them, with a reason on each change that widens access.

A statement is read from every place a template writes one: ``AWS::IAM::Policy`` and ``ManagedPolicy``
documents, a role's inline policies and its trust policy, and the resource policies of the types in
:data:`RESOURCE_POLICIES`. A rule is read from a group's inline ``SecurityGroupIngress``/``Egress`` and from
the ``AWS::EC2::SecurityGroupIngress``/``Egress`` resources (what ``Connections`` writes). Intrinsic
functions are shown as a reader writes them: ``${Bucket.Arn}/*``, ``{sg: ClusterSecurityGroup}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: Resource types whose property holds a resource policy: the property's path.
RESOURCE_POLICIES = {
    "AWS::EFS::FileSystem": "FileSystemPolicy",
    "AWS::S3::BucketPolicy": "PolicyDocument",
    "AWS::SQS::QueuePolicy": "PolicyDocument",
    "AWS::SNS::TopicPolicy": "PolicyDocument",
    "AWS::KMS::Key": "KeyPolicy",
    "AWS::SecretsManager::ResourcePolicy": "ResourcePolicy",
    "AWS::Logs::ResourcePolicy": "PolicyDocument",
}
#: The addresses that mean "anyone on the internet".
WORLD = frozenset({"0.0.0.0/0", "::/0"})


def _join(arg: Any) -> str | None:
    if isinstance(arg, list) and len(arg) == 2 and isinstance(arg[1], list):
        return str(arg[0]).join(show(v) for v in arg[1])
    return None


#: How each intrinsic function reads: ``Ref`` and ``Fn::GetAtt`` as ``${Name}`` / ``${Name.Attribute}``,
#: ``Fn::Join`` and ``Fn::Sub`` as the string they build (None: shown as JSON).
INTRINSICS: dict[str, Callable[[Any], str | None]] = {
    "Ref": lambda arg: f"${{{arg}}}",
    "Fn::GetAtt": lambda arg: f"${{{arg if isinstance(arg, str) else '.'.join(map(str, arg))}}}",
    "Fn::Join": _join,
    "Fn::Sub": lambda arg: str(arg if isinstance(arg, str) else arg[0]),
    "Fn::ImportValue": lambda arg: f"{{import: {show(arg)}}}",
}


def show(value: Any) -> str:
    """A template value as a reader writes it: literals as they are, intrinsics as :data:`INTRINSICS`
    reads them, a condition block as ``Operator: {key=value}``; anything else as compact JSON."""
    if isinstance(value, str | int | float | bool):
        return str(value)
    if isinstance(value, Mapping) and len(value) == 1 and next(iter(value)) in INTRINSICS:
        ((fn, arg),) = value.items()
        shown = INTRINSICS[fn](arg)
        return str(shown) if shown is not None else json.dumps(value, sort_keys=True, separators=(",", ":"))
    if isinstance(value, list):
        return ", ".join(show(v) for v in value)
    if isinstance(value, Mapping):  # a condition block: {operator: {key: value}}
        return "; ".join(
            f"{k}: {{{show(v)}}}" if isinstance(v, Mapping) else f"{k}={show(v)}"
            for k, v in sorted(value.items())
        )
    return json.dumps(value)  # what is left of JSON: null


def _listed(value: Any) -> tuple[str, ...]:
    """A statement's Action/Resource/NotAction...: one value or a list, shown and sorted."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    return tuple(sorted(show(v) for v in items))


def _principal(value: Any) -> str:
    if value is None:
        return ""
    if value == "*":
        return "*"
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {', '.join(_listed(v))}" for k, v in sorted(value.items()))
    return show(value)


@dataclass(frozen=True)
class Statement:
    """One IAM statement where it is written (`where`: the resource, and which of its documents)."""

    where: str
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    principal: str
    condition: str

    def widens(self, before: Statement | None = None) -> list[str]:
        """Why an added Allow statement widens access (none for a Deny): what it grants that `before` (the
        statement it took the place of, when the policy merged or changed one) did not."""
        if self.effect != "Allow":
            return []
        actions = _new(self.actions, before.actions if before else ())
        wild = [a for a in actions if a == "*" or a.endswith(":*")]
        every = "*" in self.resources and bool(
            actions or "*" in _new(self.resources, before.resources if before else ())
        )
        other = _outside_account(self.principal) and (before is None or before.principal != self.principal)
        found = {
            f"a wildcard action ({', '.join(wild)})": bool(wild),
            f"every resource (*) for {', '.join(actions or self.actions)}": every,
            f"a principal outside the account ({self.principal})": other,
        }
        return [why for why, widened in found.items() if widened]

    def replaces(self, old: Statement) -> bool:
        """Whether this statement took `old`'s place: the same document and effect, and the same actions,
        resources or principal (what a merged or edited statement keeps)."""
        same = (self.where, self.effect) == (old.where, old.effect)
        overlap = bool(set(self.actions) & set(old.actions))
        kept = (
            self.resources == old.resources or self.actions == old.actions or self.principal == old.principal
        )
        return same and overlap and kept

    def row(self) -> dict[str, str]:
        """The statement as a table row (and as JSON)."""
        return {
            "where": self.where,
            "effect": self.effect,
            "actions": ", ".join(self.actions),
            "resources": ", ".join(self.resources),
            "principal": self.principal,
            "condition": self.condition,
        }


def _new(now: tuple[str, ...], before: tuple[str, ...]) -> list[str]:
    """What `now` lists that `before` did not."""
    return [x for x in now if x not in before]


def _outside_account(principal: str) -> bool:
    """A principal anyone is (``*``), or one named by an account id written out (12 digits: an account the
    template cannot tell is the stack's own, which CDK writes as ``${AWS::AccountId}``)."""
    for part in principal.split("; "):
        kind, _, names = part.partition(": ")
        for name in names.split(", ") if names else [part]:
            if name == "*" or (kind == "AWS" and re.search(r"(?<![0-9])[0-9]{12}(?![0-9])", name)):
                return True
    return False


def statements(template: Mapping[str, Any]) -> set[Statement]:
    """Every IAM statement the template writes."""
    found: set[Statement] = set()
    for rid, resource in template.get("Resources", {}).items():
        for where, document in _documents(rid, resource):
            raw = document.get("Statement", []) if isinstance(document, Mapping) else []
            for s in raw if isinstance(raw, list) else [raw]:
                found.add(
                    Statement(
                        where=where,
                        effect=str(s.get("Effect", "")),
                        actions=_listed(s.get("Action"))
                        + tuple(f"NOT {a}" for a in _listed(s.get("NotAction"))),
                        resources=_listed(s.get("Resource"))
                        + tuple(f"NOT {r}" for r in _listed(s.get("NotResource"))),
                        principal=_principal(s.get("Principal")),
                        condition="" if "Condition" not in s else show(s["Condition"]),
                    )
                )
    return found


def _documents(rid: str, resource: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The policy documents of one resource, each with where it is written."""
    kind, props = resource.get("Type", ""), resource.get("Properties", {})
    if kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        attached = [show(r) for r in props.get("Roles", [])]
        yield f"{rid}{' (' + ', '.join(attached) + ')' if attached else ''}", props.get("PolicyDocument")
    elif kind == "AWS::IAM::Role":
        yield f"{rid} (trust)", props.get("AssumeRolePolicyDocument")
        for policy in props.get("Policies", []):
            yield f"{rid} (inline {show(policy.get('PolicyName'))})", policy.get("PolicyDocument")
    elif kind in RESOURCE_POLICIES:
        yield f"{rid} (resource policy)", props.get(RESOURCE_POLICIES[kind])


@dataclass(frozen=True)
class Rule:
    """One security-group rule: the group, the direction, the protocol and ports, the peer."""

    group: str
    direction: str  # "ingress" or "egress"
    protocol: str
    ports: str
    peer: str
    description: str

    def widens(self) -> list[str]:
        """Why an added rule widens access: open to the world."""
        if self.peer in WORLD:
            towards = "from" if self.direction == "ingress" else "to"
            return [f"{self.direction} {towards} the world ({self.peer}, {self.ports})"]
        return []

    def row(self) -> dict[str, str]:
        """The rule as a table row (and as JSON)."""
        return {
            "group": self.group,
            "direction": self.direction,
            "protocol": self.protocol,
            "ports": self.ports,
            "peer": self.peer,
            "description": self.description,
        }


def _group(value: Any) -> str:
    """A group reference as ``{sg: Name}`` (the logical id of a group of this template), else as shown."""
    if isinstance(value, Mapping) and set(value) == {"Fn::GetAtt"}:
        return f"{{sg: {value['Fn::GetAtt'][0]}}}"
    if isinstance(value, Mapping) and set(value) == {"Ref"}:
        return f"{{sg: {value['Ref']}}}"
    return show(value)


def _rule(group: str, direction: str, r: Mapping[str, Any]) -> Rule:
    protocol = show(r.get("IpProtocol", "-1"))
    low, high = r.get("FromPort"), r.get("ToPort")
    if protocol == "-1":
        protocol, ports = "all", "all ports"
    elif low is None or (low in (0, -1) and high in (65535, -1)):
        ports = "all ports"
    else:
        ports = str(low) if low == high else f"{low}-{high}"
    peer_key = next(
        (
            k
            for k in (
                "CidrIp",
                "CidrIpv6",
                "SourceSecurityGroupId",
                "DestinationSecurityGroupId",
                "SourcePrefixListId",
                "DestinationPrefixListId",
            )
            if k in r
        ),
        None,
    )
    peer = "(none)" if peer_key is None else _group(r[peer_key]) if "Group" in peer_key else show(r[peer_key])
    return Rule(group, direction, protocol, ports, peer, show(r.get("Description", "")))


def rules(template: Mapping[str, Any]) -> set[Rule]:
    """Every security-group rule the template writes, inline or as its own resource."""
    found: set[Rule] = set()
    for rid, resource in template.get("Resources", {}).items():
        kind, props = resource.get("Type", ""), resource.get("Properties", {})
        if kind == "AWS::EC2::SecurityGroup":
            for direction, key in (("ingress", "SecurityGroupIngress"), ("egress", "SecurityGroupEgress")):
                found |= {_rule(f"{{sg: {rid}}}", direction, r) for r in props.get(key, [])}
        elif kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
            direction = "ingress" if kind.endswith("Ingress") else "egress"
            found.add(_rule(_group(props.get("GroupId")), direction, props))
    return found


@dataclass
class SecurityChanges:
    """The statements and rules a change adds and removes, and why each widening widens."""

    added_statements: list[Statement]
    removed_statements: list[Statement]
    added_rules: list[Rule]
    removed_rules: list[Rule]

    @property
    def empty(self) -> bool:
        """True when no statement or rule changes."""
        return not (
            self.added_statements or self.removed_statements or self.added_rules or self.removed_rules
        )

    def widenings(self) -> list[str]:
        """Each change that widens access, with its reason: an added Allow with a wildcard action or
        resource or a principal outside the account, a removed condition or Deny, a rule open to the world."""
        out = [
            f"{s.where}: {why}"
            for s in self.added_statements
            for why in s.widens(next((o for o in self.removed_statements if s.replaces(o)), None))
        ]
        for s in self.removed_statements:
            if s.effect == "Deny":
                out.append(f"{s.where}: a Deny removed ({', '.join(s.actions)})")
            elif s.condition and any(_same_but_condition(s, n) for n in self.added_statements):
                out.append(f"{s.where}: a condition removed ({s.condition}) from {', '.join(s.actions)}")
        out += [f"{r.group}: {why}" for r in self.added_rules for why in r.widens()]
        return out

    def to_json(self) -> dict[str, Any]:
        """For a program: each change as a row, each widening with its reason."""
        return {
            "statements": {
                "added": [s.row() for s in self.added_statements],
                "removed": [s.row() for s in self.removed_statements],
            },
            "rules": {
                "added": [r.row() for r in self.added_rules],
                "removed": [r.row() for r in self.removed_rules],
            },
            "widenings": self.widenings(),
        }


def _same_but_condition(old: Statement, new: Statement) -> bool:
    """`new` is `old` with fewer conditions (none, or another that is a part of it)."""
    same = (old.where, old.effect, old.actions, old.resources, old.principal)
    return same == (new.where, new.effect, new.actions, new.resources, new.principal) and len(
        new.condition
    ) < len(old.condition)


def security_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> SecurityChanges:
    """The statements and rules in one template and not the other."""
    old_s, new_s, old_r, new_r = statements(old), statements(new), rules(old), rules(new)

    def order(items: set[Any]) -> list[Any]:
        return sorted(items, key=lambda x: tuple(x.row().values()))

    return SecurityChanges(
        order(new_s - old_s), order(old_s - new_s), order(new_r - old_r), order(old_r - new_r)
    )
