"""One reader of access: what an IAM statement, a managed-policy attachment or a security-group rule grants,
and why one widens access, judged by IAM's policy grammar and EC2's rules on values as a reader writes them
(:func:`show`). The lowest room of the security diff: :mod:`.security_diff` reads templates into these.

Widening: an action or resource with a wildcard anywhere in what it names (``iam:Pass*``,
``arn:aws:s3:::*/*``; a wildcard after a resource the template names, as in ``${Bucket.Arn}/*``, stays inside
it), a principal outside the account (anyone, an account id written out, or one given by a parameter), a
managed policy attached, and a rule open to the world or to any range wider than a /8. A value given by a
parameter is judged by its default, and says so.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .diff_model import Lit, Why, lits

#: The addresses that mean "anyone on the internet".
WORLD = frozenset({"0.0.0.0/0", "::/0"})
#: A range wider than this (a shorter prefix) opens a rule to a large part of the internet.
WIDEST_PREFIX = 8


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


def listed(value: Any) -> tuple[str, ...]:
    """A statement's Action/Resource/NotAction...: one value or a list, shown and sorted."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    return tuple(sorted(show(v) for v in items))


def principal_text(value: Any) -> str:
    if value is None:
        return ""
    if value == "*":
        return "*"
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {', '.join(listed(v))}" for k, v in sorted(value.items()))
    return show(value)


#: A template's parameters as the reader judges them: name -> its default (None: given at deploy).
Parameters = Mapping[str, Any]
_REFERENCE = re.compile(r"\$\{([^}.]+)\}")


def judged(text: str, parameters: Parameters) -> tuple[str, list[str]]:
    """`text` with each parameter it names (``${Name}``) replaced by that parameter's default, and how each
    was read (``the default of parameter Name``; ``parameter Name, given at deploy``: no default)."""
    notes: list[str] = []

    def default(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in parameters:
            return found.group(0)
        value = parameters[name]
        notes.append(
            f"parameter {name}, given at deploy" if value is None else f"the default of parameter {name}"
        )
        return "${deploy-time}" if value is None else show(value)

    return _REFERENCE.sub(default, text), notes


def noted(notes: list[str]) -> str:
    return f" [{'; '.join(notes)}]" if notes else ""


def _wild(text: str) -> bool:
    return "*" in text or "?" in text


def wide_action(action: str) -> bool:
    """An action with a wildcard anywhere in it (``*``, ``ec2:*``, ``iam:Pass*``, ``s3:Get?bject``)."""
    return _wild(action.removeprefix("NOT "))


def wide_resource(resource: str) -> bool:
    """A resource whose wildcard reaches beyond one named resource: in an ARN's partition, service,
    or account, in its resource's first segment (an S3 bucket's name, another service's resource
    type), or every resource of a type (``instance/*``). A wildcard after a resource the template names
    (``${Bucket.Arn}/*``) or a literal resource name (``arn:aws:s3:::results/*``) stays inside it."""
    if resource == "*" or not _wild(resource):
        return resource == "*"
    if resource.startswith("${") and not resource.startswith("${AWS::"):
        return _wild(resource.split("}", 1)[0])  # a reference to the template's own resource, then a path
    parts = re.sub(r"\$\{[^}]*\}", "${}", resource).split(":", 5)  # a reference's own colons: not fields
    if len(parts) < 6 or parts[0] != "arn":
        return True
    _, partition, service, _region, account, rest = parts
    if any(_wild(x) for x in (partition, service, account)):
        return True
    name, *inside = re.split(r"[/:]", rest, maxsplit=1)
    if _wild(name):
        return True
    return service != "s3" and bool(inside) and all(c in "*?" for c in inside[0])


@dataclass(frozen=True)
class Statement:
    """One IAM statement where it is written (`where`: the resource, and which of its documents); a
    principal given by a parameter is judged by `parameters` (its default)."""

    where: str
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    principal: str
    condition: str
    parameters: tuple[tuple[str, Any], ...] = ()
    #: The principal as (kind, each value), read from the template's structure; empty: parsed from
    #: `principal` (a statement written by hand).
    principals: tuple[tuple[str, str], ...] = ()

    def widening_whys(self, before: Statement | None = None) -> list[Why]:
        """Why an added Allow statement widens access (none for a Deny): what it grants that `before` (the
        statement it took the place of, when the policy merged or changed one) did not."""
        if self.effect != "Allow":
            return []
        found = self._grants(
            _new(self.actions, before.actions if before else ()),
            _new(self.resources, before.resources if before else ()),
        )
        outside = self.outside_account()
        if outside is not None and (before is None or before.principal != self.principal):
            found.append(outside)
        return found

    def _grants(self, actions: list[str], resources: list[str]) -> list[Why]:
        """What the actions and resources this statement adds grant beyond a named resource."""
        wild = [a for a in actions if wide_action(a)]
        every = "*" in self.resources and bool(actions or "*" in resources)
        broad = [r for r in (self.resources if actions else resources) if r != "*" and wide_resource(r)]
        found = [
            (bool(wild), Why("a wildcard action (", lits(wild), ")")),
            (every, Why("every resource (*) for ", lits(actions or self.actions))),
            (bool(broad), Why("a wildcard resource (", lits(broad), ")")),
        ]
        return [why for widened, why in found if widened]

    def outside_account(self) -> Why | None:
        """Why the principal is outside the account, read from the template's structure (a parameter by its
        default), or None."""
        notes: list[str] = []
        values = []
        for kind, name in self.principals or _parsed(self.principal):
            value, how = judged(name, dict(self.parameters))
            values.append((kind, value))
            notes += how
        if not _outside_account(values):
            return None
        return Why("a principal outside the account (", Lit(self.principal), ")", noted(notes))

    def widens(self, before: Statement | None = None) -> list[str]:
        """:meth:`widening_whys` as text."""
        return [str(w) for w in self.widening_whys(before)]

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


def _parsed(principal: str) -> list[tuple[str, str]]:
    """(kind, value) of a principal written as text (``AWS: a, b; Service: c``, or ``*``)."""
    pairs = []
    for part in principal.split("; ") if principal else []:
        kind, _, names = part.partition(": ")
        pairs += [(kind, n) for n in names.split(", ")] if names else [("", part)]
    return pairs


def _outside_account(principals: list[tuple[str, str]]) -> bool:
    """A principal anyone is (``*``), one named by an account id written out (12 digits: an account the
    template cannot tell is the stack's own, which CDK writes as ``${AWS::AccountId}``), or one only known
    at deploy (``${deploy-time}``: a parameter with no default)."""
    for kind, name in principals:
        if name == "*" or "${deploy-time}" in name:
            return True
        if kind == "AWS" and re.search(r"(?<![0-9])[0-9]{12}(?![0-9])", name):
            return True
    return False


def principals_of(value: Any) -> tuple[tuple[str, str], ...]:
    """A statement's Principal as (kind, value) pairs, from its structure."""
    if value is None:
        return ()
    if value == "*":
        return (("*", "*"),)
    if isinstance(value, Mapping):
        return tuple((str(k), v) for k, vs in sorted(value.items()) for v in listed(vs))
    return (("", show(value)),)


@dataclass(frozen=True)
class Attachment:
    """A managed policy attached to a role, user or group by its ARN (``ManagedPolicyArns``)."""

    where: str
    policy: str

    def widening_whys(self) -> list[Why]:
        """An attached policy grants what it holds: always a widening."""
        return [Why("a managed policy attached (", Lit(self.policy), ")")]

    def row(self) -> dict[str, str]:
        """The attachment as a table row (and as JSON)."""
        return {"where": self.where, "policy": self.policy}


@dataclass(frozen=True)
class Rule:
    """One security-group rule: the group, the direction, the protocol and ports, the peer (and, when the
    peer is a parameter, its default as `judged` with how it was read in `note`)."""

    group: str
    direction: str  # "ingress" or "egress"
    protocol: str
    ports: str
    peer: str
    description: str
    judged: str = ""
    note: str = ""

    @property
    def address(self) -> str:
        """The peer's address range as judged (a parameter's default), or the peer itself."""
        return self.judged or self.peer

    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
        """The peer as an address range, or None (a group, a prefix list, an unknown value)."""
        try:
            return ipaddress.ip_network(self.address, strict=False)
        except ValueError:
            return None

    def widening_whys(self) -> list[Why]:
        """Why an added rule widens access: open to the world, or to a range wider than a /8."""
        towards = "from" if self.direction == "ingress" else "to"
        net = self.network()
        if self.address in WORLD:
            what = "the world"
        elif net is not None and net.prefixlen < WIDEST_PREFIX:
            what = f"a /{net.prefixlen} range"
        else:
            return []
        return [
            Why(f"{self.direction} {towards} {what} (", Lit(self.peer), ", ", Lit(self.ports), ")", self.note)
        ]

    def widens(self) -> list[str]:
        """:meth:`widening_whys` as text."""
        return [str(w) for w in self.widening_whys()]

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
