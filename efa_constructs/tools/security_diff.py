"""What a change widens: one reader of access, comparing two templates as IAM statements, policy
attachments and security-group rules (not property paths), as ``cdk diff``'s "IAM Statement Changes" and
"Security Group Changes" tables show them, with a reason on each change that widens access.

A statement is read from every place a template writes one: the IAM policies (``AWS::IAM::Policy``,
``ManagedPolicy``, ``RolePolicy``, ``UserPolicy``, ``GroupPolicy``), the inline policies of roles, users and
groups, a role's trust policy, the resource policies of :data:`RESOURCE_POLICIES`, and, for any other type,
every top-level property that holds a policy document (a ``Statement`` list: ECR's ``RepositoryPolicyText``,
SNS's and SQS's inline policies, ...). A Lambda permission and a function URL are statements too (who may
invoke). Managed policies attached by ARN are attachments. A rule is read from a group's inline
``SecurityGroupIngress``/``Egress`` and from the ``AWS::EC2::SecurityGroupIngress``/``Egress`` resources
(what ``Connections`` writes).

What widens is judged by :mod:`.access` (each statement, attachment and rule on its own); here, what only
the change as a whole shows: a statement that took another's place widens by what it adds, a removed Deny
or condition, and rules that cover the world only together (``0.0.0.0/1`` with ``128.0.0.0/1``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .access import (
    Attachment,
    Parameters,
    Rule,
    Statement,
    judged,
    listed,
    noted,
    principal_text,
    principals_of,
    show,
    wide_action,
    wide_resource,
)
from .diff_model import Lit, Why, lits

__all__ = [
    "Attachment",
    "Rule",
    "SecurityChanges",
    "Statement",
    "attachments",
    "rules",
    "security_changes",
    "show",
    "statements",
    "wide_action",
    "wide_resource",
]

#: Resource types whose property holds a resource policy: the property's path (others are found by their
#: ``Statement`` list).
RESOURCE_POLICIES = {
    "AWS::EFS::FileSystem": "FileSystemPolicy",
    "AWS::S3::BucketPolicy": "PolicyDocument",
    "AWS::SQS::QueuePolicy": "PolicyDocument",
    "AWS::SNS::TopicPolicy": "PolicyDocument",
    "AWS::KMS::Key": "KeyPolicy",
    "AWS::SecretsManager::ResourcePolicy": "ResourcePolicy",
    "AWS::Logs::ResourcePolicy": "PolicyDocument",
    "AWS::ECR::Repository": "RepositoryPolicyText",
}
#: IAM's own policy resources: their document, and the property naming whom each is on.
IAM_POLICIES = {
    "AWS::IAM::Policy": ("Roles", "Users", "Groups"),
    "AWS::IAM::ManagedPolicy": ("Roles", "Users", "Groups"),
    "AWS::IAM::RolePolicy": ("RoleName",),
    "AWS::IAM::UserPolicy": ("UserName",),
    "AWS::IAM::GroupPolicy": ("GroupName",),
}


def _parameters(template: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (p or {}).get("Default") for k, p in (template.get("Parameters") or {}).items()}


def statements(template: Mapping[str, Any]) -> set[Statement]:
    """Every IAM statement the template writes (Lambda's invoke permissions and URLs among them)."""
    found: set[Statement] = set()
    parameters = tuple(sorted(_parameters(template).items(), key=lambda kv: kv[0]))
    for rid, resource in (template.get("Resources") or {}).items():
        if not isinstance(resource, Mapping):
            continue
        for where, document in _documents(rid, resource):
            raw = document.get("Statement", []) if isinstance(document, Mapping) else []
            for s in raw if isinstance(raw, list) else [raw]:
                if not isinstance(s, Mapping):
                    continue
                found.add(
                    Statement(
                        where=where,
                        effect=str(s.get("Effect", "")),
                        actions=listed(s.get("Action"))
                        + tuple(f"NOT {a}" for a in listed(s.get("NotAction"))),
                        resources=listed(s.get("Resource"))
                        + tuple(f"NOT {r}" for r in listed(s.get("NotResource"))),
                        principal=principal_text(s.get("Principal"))
                        + ("; NOT " + principal_text(s["NotPrincipal"]) if "NotPrincipal" in s else ""),
                        condition="" if "Condition" not in s else show(s["Condition"]),
                        parameters=parameters,
                        principals=principals_of(s.get("Principal")),
                    )
                )
        found |= {s for s in _invocations(rid, resource, parameters)}
    return found


def _documents(rid: str, resource: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The policy documents of one resource, each with where it is written."""
    kind, props = resource.get("Type", ""), resource.get("Properties") or {}
    if kind in IAM_POLICIES:
        on = [show(r) for key in IAM_POLICIES[kind] for r in _as_list(props.get(key))]
        yield f"{rid}{' (' + ', '.join(on) + ')' if on else ''}", props.get("PolicyDocument")
        return
    if kind == "AWS::IAM::Role":
        yield f"{rid} (trust)", props.get("AssumeRolePolicyDocument")
    if kind in ("AWS::IAM::Role", "AWS::IAM::User", "AWS::IAM::Group"):
        for policy in _as_list(props.get("Policies")):
            yield f"{rid} (inline {show(policy.get('PolicyName'))})", policy.get("PolicyDocument")
        return
    if kind in RESOURCE_POLICIES:
        yield f"{rid} (resource policy)", props.get(RESOURCE_POLICIES[kind])
        return
    for key, value in sorted(props.items()):  # any other type: a property that is a policy document
        if isinstance(value, Mapping) and "Statement" in value:
            yield f"{rid} ({key})", value


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _invocations(
    rid: str, resource: Mapping[str, Any], parameters: tuple[tuple[str, Any], ...]
) -> list[Statement]:
    """Who may invoke a function: a Lambda permission (its principal, its source conditions), a function
    URL (anyone, when its AuthType is NONE; AWS Lambda developer guide, "Function URLs")."""
    kind, props = resource.get("Type", ""), resource.get("Properties") or {}
    if kind == "AWS::Lambda::Permission":
        source = {k: show(props[k]) for k in ("SourceArn", "SourceAccount", "PrincipalOrgID") if k in props}
        url = props.get("FunctionUrlAuthType")
        principal = show(props.get("Principal", ""))
        kind_of = "Service" if principal.endswith(".amazonaws.com") else "AWS"
        return [
            Statement(
                where=f"{rid} (Lambda permission{', URL auth ' + show(url) if url else ''})",
                effect="Allow",
                actions=(show(props.get("Action", "")),),
                resources=(show(props.get("FunctionName", "")),),
                principal="*" if principal == "*" else f"{kind_of}: {principal}",
                condition="; ".join(f"{k}={v}" for k, v in sorted(source.items())),
                parameters=parameters,
                principals=(("*", "*"),) if principal == "*" else ((kind_of, principal),),
            )
        ]
    if kind == "AWS::Lambda::Url":
        public = show(props.get("AuthType", "")) == "NONE"
        return [
            Statement(
                where=f"{rid} (function URL, AuthType {show(props.get('AuthType', ''))})",
                effect="Allow",
                actions=("lambda:InvokeFunctionUrl",),
                resources=(show(props.get("TargetFunctionArn", "")),),
                principal="*" if public else "AWS: IAM-authenticated callers",
                condition="",
                parameters=parameters,
                principals=(("*", "*"),) if public else (),
            )
        ]
    return []


def attachments(template: Mapping[str, Any]) -> set[Attachment]:
    """Every managed policy attached by ARN to a role, user or group of the template."""
    found: set[Attachment] = set()
    for rid, resource in (template.get("Resources") or {}).items():
        if isinstance(resource, Mapping) and resource.get("Type") in (
            "AWS::IAM::Role",
            "AWS::IAM::User",
            "AWS::IAM::Group",
        ):
            arns = (resource.get("Properties") or {}).get("ManagedPolicyArns")
            found |= {Attachment(rid, show(arn)) for arn in _as_list(arns)}
    return found


def _group(value: Any) -> str:
    """A group reference as ``{sg: Name}`` (the logical id of a group of this template), else as shown."""
    if isinstance(value, Mapping) and set(value) == {"Fn::GetAtt"}:
        return f"{{sg: {value['Fn::GetAtt'][0]}}}"
    if isinstance(value, Mapping) and set(value) == {"Ref"}:
        return f"{{sg: {value['Ref']}}}"
    return show(value)


PEER_KEYS = (
    "CidrIp",
    "CidrIpv6",
    "SourceSecurityGroupId",
    "DestinationSecurityGroupId",
    "SourcePrefixListId",
    "DestinationPrefixListId",
)


def _rule(group: str, direction: str, r: Mapping[str, Any], parameters: Parameters) -> Rule:
    protocol = show(r.get("IpProtocol", "-1"))
    low, high = r.get("FromPort"), r.get("ToPort")
    if protocol == "-1":
        protocol, ports = "all", "all ports"
    elif low is None or (low in (0, -1) and high in (65535, -1)):
        ports = "all ports"
    else:
        ports = str(low) if low == high else f"{low}-{high}"
    peer_key = next((k for k in PEER_KEYS if k in r), None)
    peer = "(none)" if peer_key is None else _group(r[peer_key]) if "Group" in peer_key else show(r[peer_key])
    address, notes = judged(peer, parameters) if peer_key in ("CidrIp", "CidrIpv6") else (peer, [])
    return Rule(
        group,
        direction,
        protocol,
        ports,
        peer,
        show(r.get("Description", "")),
        address if notes else "",
        noted(notes),
    )


def rules(template: Mapping[str, Any]) -> set[Rule]:
    """Every security-group rule the template writes, inline or as its own resource."""
    found: set[Rule] = set()
    parameters = _parameters(template)
    for rid, resource in (template.get("Resources") or {}).items():
        if not isinstance(resource, Mapping):
            continue
        kind, props = resource.get("Type", ""), resource.get("Properties") or {}
        if kind == "AWS::EC2::SecurityGroup":
            for direction, key in (("ingress", "SecurityGroupIngress"), ("egress", "SecurityGroupEgress")):
                found |= {_rule(f"{{sg: {rid}}}", direction, r, parameters) for r in _as_list(props.get(key))}
        elif kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
            direction = "ingress" if kind.endswith("Ingress") else "egress"
            found.add(_rule(_group(props.get("GroupId")), direction, props, parameters))
    return found


def _covering(rules: set[Rule], key: tuple[str, str, str, str], world: Any) -> list[Rule]:
    """The rules of one group, direction, protocol and ports whose ranges together cover `world` (one
    address family's whole space), when it takes more than one of them; else none."""
    rules_of = [r for r in rules if (r.group, r.direction, r.protocol, r.ports) == key]
    found = [(r, n) for r in rules_of if (n := r.network()) is not None and n.version == world.version]
    merged = list(ipaddress.collapse_addresses(n for _, n in found))  # type: ignore[type-var]
    return [r for r, _ in found] if world in merged and len(found) > 1 else []


def _world_together(old: set[Rule], new: set[Rule]) -> list[Why]:
    """Rules that cover the world only together (``0.0.0.0/1`` and ``128.0.0.0/1`` on one group, protocol
    and ports), newly so: each such group once, naming its ranges."""
    out: list[Why] = []
    for world in (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")):
        for key in sorted({(r.group, r.direction, r.protocol, r.ports) for r in new}):
            parts = _covering(new, key, world)
            if parts and not _covering(old, key, world) and not any(r.address == str(world) for r in parts):
                towards = "from" if key[1] == "ingress" else "to"
                ranges = lits(sorted(r.address for r in parts))
                split = f": {key[1]} {towards} the world, split in ranges ("
                out.append(Why(Lit(key[0]), split, ranges, ", ", Lit(key[3]), ")"))
    return out


@dataclass
class SecurityChanges:
    """The statements, attachments and rules a change adds and removes, and why each widening widens."""

    added_statements: list[Statement]
    removed_statements: list[Statement]
    added_rules: list[Rule]
    removed_rules: list[Rule]
    added_attachments: list[Attachment] | None = None
    removed_attachments: list[Attachment] | None = None
    #: Widenings only the whole of a template shows (world coverage split across rules).
    together: list[Why] | None = None

    @property
    def empty(self) -> bool:
        """True when no statement, attachment or rule changes."""
        return not (
            self.added_statements
            or self.removed_statements
            or self.added_rules
            or self.removed_rules
            or self.added_attachments
            or self.removed_attachments
        )

    def widening_reasons(self) -> list[Why]:
        """Each change that widens access, with where and why: an added Allow with a wildcard action or
        resource or a principal outside the account, a managed policy attached, a removed condition or
        Deny, a rule open to the world or a wide range (alone or together)."""
        out = [
            Why(Lit(s.where), ": ", why)
            for s in self.added_statements
            for why in s.widening_whys(next((o for o in self.removed_statements if s.replaces(o)), None))
        ]
        out += [
            Why(Lit(a.where), ": ", why) for a in self.added_attachments or [] for why in a.widening_whys()
        ]
        out += [why for s in self.removed_statements if (why := self._removal(s)) is not None]
        out += [Why(Lit(r.group), ": ", why) for r in self.added_rules for why in r.widening_whys()]
        return out + list(self.together or [])

    def _removal(self, s: Statement) -> Why | None:
        """A removed statement that widens access: a Deny, or a condition (the same statement is back
        without it)."""
        if s.effect == "Deny":
            return Why(Lit(s.where), ": a Deny removed (", lits(s.actions), ")")
        if s.condition and any(_same_but_condition(s, n) for n in self.added_statements):
            return Why(Lit(s.where), ": a condition removed (", Lit(s.condition), ") from ", lits(s.actions))
        return None

    def widenings(self) -> list[str]:
        """:meth:`widening_reasons` as text."""
        return [str(w) for w in self.widening_reasons()]

    def to_json(self) -> dict[str, Any]:
        """For a program: each change as a row, each widening with its reason."""
        return {
            "statements": {
                "added": [s.row() for s in self.added_statements],
                "removed": [s.row() for s in self.removed_statements],
            },
            "attachments": {
                "added": [a.row() for a in self.added_attachments or []],
                "removed": [a.row() for a in self.removed_attachments or []],
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
    """The statements, attachments and rules in one template and not the other."""
    old_s, new_s, old_r, new_r = statements(old), statements(new), rules(old), rules(new)
    old_a, new_a = attachments(old), attachments(new)

    def order(items: set[Any]) -> list[Any]:
        return sorted(items, key=lambda x: tuple(x.row().values()))

    return SecurityChanges(
        order(new_s - old_s),
        order(old_s - new_s),
        order(new_r - old_r),
        order(old_r - new_r),
        order(new_a - old_a),
        order(old_a - new_a),
        _world_together(old_r, new_r),
    )
