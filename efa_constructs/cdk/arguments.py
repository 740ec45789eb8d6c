"""Argument types checked at the construct's door, with the library's one-line error.

A str where a list, a number or a construct is expected (or None where one is required) would
otherwise surface as a TypeError or a jsii error from deep inside aws-cdk-lib. ``@checked`` on a
construct's ``__init__`` compares each argument with its annotation first. The checking is
typeguard's (the checker jsii itself uses for aws-cdk-lib's arguments, pinned by jsii); what it
does not cover is added here: jsii interfaces (``ec2.IVpc``...) are protocols typeguard lets
anything through, so a plain value (str, number, list...) given for one is refused. CDK tokens
(unresolved values such as a CloudFormation parameter) are left to the checks that know them.
"""

from __future__ import annotations

import collections.abc
import difflib
import enum
import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import typeguard
from aws_cdk import Token

from ..core.errors import EfaConfigError

F = TypeVar("F", bound=Callable[..., None])
#: How to make the CDK objects users most often pass as plain strings.
EXAMPLES = {
    "IPeer": "ec2.Peer.ipv4('10.0.0.0/8'), or efa_constructs.cdk.ssh_peer('10.0.0.0/8' or 'pl-...')",
    "IVpc": "an ec2.Vpc, or ec2.Vpc.from_lookup(self, 'Vpc', vpc_id='vpc-...') for an existing one",
    "ISubnet": "vpc.private_subnets[0], or ec2.Subnet.from_subnet_attributes(...) for an existing one",
    "IKeyPair": "ec2.KeyPair.from_key_pair_name(self, 'Key', 'my-key')",
    "IPlacementGroup": "ec2.PlacementGroup.from_placement_group_name(self, 'Pg', 'my-group')",
    "InstanceType": "ec2.InstanceType('trn1.32xlarge')",
    "Layout": "Layout.recommended(), Layout.legacy(efa_count=4), Layout.mode('legacy') "
    "or Layout.custom(layout)",
    "NodeSoftware": "NodeSoftware.efa(), NodeSoftware.efa(EfaUserData(...)), NodeSoftware.custom(user_data) "
    "or NodeSoftware.none()",
    "Capacity": "Capacity.on_demand(), Capacity.reservation('cr-...') or Capacity.capacity_block('cr-...')",
}


def _enum_example(hint: Any) -> str | None:
    """``NodeGroup.EXPLICIT or NodeGroup.ASG`` for an option that takes an enum (a str is parsed only at
    the edge: ``NodeGroup.parse("asg")``)."""
    options = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    enum_type = next((o for o in options if isinstance(o, type) and issubclass(o, enum.Enum)), None)
    if enum_type is None:
        return None
    members = " or ".join(f"{enum_type.__name__}.{m.name}" for m in enum_type)
    return f"{members} ({enum_type.__name__}.parse reads a string)"


_PLAIN = (str, int, float, bool, list, tuple, dict, set)


def _normal(hint: Any) -> Any:
    """``X | Y`` (types.UnionType, which typeguard 2 does not know) as ``typing.Union[X, Y]``."""
    if isinstance(hint, types.UnionType):
        return typing.Union[tuple(_normal(a) for a in typing.get_args(hint))]  # noqa: UP007
    return hint


def _name(hint: Any) -> str:
    """A readable type: ``ec2.IVpc``, ``int``, ``a sequence of ec2.IPeer``, ``str or None``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        return " or ".join(_name(a) for a in args)
    if origin is not None and args:
        kind = getattr(origin, "__name__", str(origin)).lower()
        if kind in ("mapping", "dict"):
            return f"a mapping of {_name(args[0])} to {_name(args[1])}"
        return f"a {kind} of {' or '.join(_name(a) for a in args if a is not Ellipsis)}"
    if hint is type(None):
        return "None"
    module = getattr(hint, "__module__", "")
    name = getattr(hint, "__name__", str(hint))
    if module.startswith("aws_cdk.aws_"):
        return f"{module.removeprefix('aws_cdk.aws_')}.{name}"
    if module == "efa_constructs.core.catalogue":  # not to be read as ec2's InstanceType
        return f"efa_constructs.{name}"
    return name


def _is_jsii_interface(hint: Any) -> bool:
    return isinstance(hint, type) and hasattr(hint, "__jsii_proxy_class__")


def _problem(owner: str, value: Any, hint: Any) -> str | None:
    """Why `value` is not a `hint`, or None. typeguard first; then what it lets through: None where the
    hint has no None, a plain value where a jsii interface is wanted, a str where a sequence is."""
    wanted = _name(hint)
    try:
        typeguard.check_type("argument", value, hint)
    except TypeError:
        return f"{owner} takes {wanted} here, not a {type(value).__name__}"
    options = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    if value is None:
        return None if type(None) in options or hint is Any else f"{owner} needs {wanted} here (None given)"
    for option in options:
        problem = _interface_problem(value, option, options) or _sequence_problem(
            owner, value, option, options
        )
        if problem:
            return f"{owner} takes {wanted} here{problem}"
    return None


def _interface_problem(value: Any, option: Any, options: tuple[Any, ...]) -> str | None:
    """A plain value (str, number, list...) for a jsii interface, which typeguard lets through, where no
    plain type among `options` takes it."""
    plain = [o for o in options if isinstance(o, type) and not _is_jsii_interface(o)]
    if (
        _is_jsii_interface(option)
        and isinstance(value, _PLAIN)
        and not any(isinstance(value, o) for o in plain)
    ):
        return f" (a construct or a CDK object), not a {type(value).__name__}"
    return None


def _sequence_problem(owner: str, value: Any, option: Any, options: tuple[Any, ...]) -> str | None:
    """A str for a sequence (where no option is str), or an item of the sequence of the wrong type."""
    if typing.get_origin(option) not in (collections.abc.Sequence, list, tuple):
        return None
    if isinstance(value, str) and str not in options:
        return " (a list), not a str"
    inner = typing.get_args(option)
    if inner and isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if _problem(owner, item, inner[0]) is not None:
                return f"; item {i} is a {type(item).__name__}"
    return None


def check_argument(owner: str, name: str, value: Any, hint: Any) -> None:
    """Refuse `value` for argument `name` of `owner` when it is not of type `hint`."""
    hint = _normal(hint)
    problem = _problem(owner, value, hint)
    # Asked only on a problem: each question is a call into Node (jsii), and most arguments pass.
    if problem is not None and not (isinstance(value, (str, int, float)) and Token.is_unresolved(value)):
        shown = value if len(repr(value)) <= 80 else f"{repr(value)[:77]}..."
        example = _enum_example(hint) or next((e for k, e in EXAMPLES.items() if k in repr(hint)), None)
        fix = f"pass {name}=<{_name(hint)}>" + (f", e.g. {example}" if example else "")
        raise EfaConfigError(name, code="efa-cdk:argument-wrong-type", value=shown, why=problem, fix=fix)


#: Arguments users reach for that a construct names otherwise (or does not need).
MEANT = {
    ("EfaCluster", "nodes"): "node_count",
    ("EfaPcsCluster", "node_count"): "max_count (min_count: the nodes PCS keeps running)",
    ("EfaParallelCluster", "node_count"): "max_count (min_count: the static nodes)",
    ("EfaNodegroup", "vpc"): "nothing: the nodes are in the cluster's VPC; pass subnet= (one of its subnets)",
    ("EfaNodegroup", "node_count"): "desired_size (with min_size and max_size)",
}


def _unknown_error(owner: str, name: str, value: Any, known: list[str]) -> EfaConfigError:
    """An unknown keyword names the argument meant (the closest of the construct's own names)."""
    hint = MEANT.get((owner, name))
    close = [hint] if hint else difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    meant = f"did you mean {' or '.join(close)}? " if close else ""
    return EfaConfigError(
        name,
        code="efa-cdk:argument-unknown",
        value=value,
        why=f"{owner} has no argument {name!r}",
        fix=f"{meant}{owner} takes: {', '.join(known)}",
    )


def _missing_error(owner: str, why: str, known: list[str]) -> EfaConfigError:
    return EfaConfigError(
        owner,
        code="efa-cdk:argument-missing",
        value="(arguments)",
        why=why,
        fix=f"{owner} takes: {', '.join(known)}",
    )


class _Parameters:
    """A construct's keywords and their types, its own and those of the options it unpacks
    (``**node: Unpack[NodeOptions]``, a TypedDict: :mod:`efa_constructs.cdk.options`), read at the first
    call, when every module the annotations name is loaded."""

    def __init__(self, init: Callable[..., None], signature: inspect.Signature) -> None:
        self.hints = {n: h for n, h in typing.get_type_hints(init).items() if n not in ("scope", "return")}
        self.known = [n for n in signature.parameters if n not in ("self", "scope", "id_")]
        self.options_name: str | None = None
        self.required: frozenset[str] = frozenset()
        for name, parameter in signature.parameters.items():
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                (options,) = typing.get_args(self.hints.pop(name))  # Unpack[SomeOptions]
                fields = typing.get_type_hints(options)
                self.options_name, self.required = name, options.__required_keys__
                self.hints.update(fields)
                self.known.remove(name)
                self.known += list(fields)

    def arguments(self, owner: str, bound: inspect.BoundArguments) -> dict[str, Any]:
        """Every keyword given, the unpacked options' among them; an unknown or missing one refused."""
        given = dict(list(bound.arguments.items())[1:])
        options = given.pop(self.options_name, {}) if self.options_name else {}
        for name, value in options.items():
            if name not in self.hints:
                raise _unknown_error(owner, name, value, self.known)
        missing = sorted(self.required - set(options))
        if missing:
            raise _missing_error(
                owner, f"missing 1 required keyword-only argument: {missing[0]!r}", self.known
            )
        return {**given, **options}


def checked(init: F) -> F:
    """Check every argument of a construct's ``__init__`` against its annotation before it runs."""
    signature = inspect.signature(init)
    parameters: list[_Parameters] = []

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        if not parameters:
            parameters.append(_Parameters(init, signature))
        owner, known = type(self).__name__, parameters[0]
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as err:  # a missing or unknown keyword: Python's own message says which
            unknown = [k for k in kwargs if k not in known.known]  # the unpacked options' names are known
            if unknown:
                raise _unknown_error(owner, unknown[0], kwargs[unknown[0]], known.known) from None
            raise _missing_error(owner, str(err), known.known) from None
        for name, value in known.arguments(owner, bound).items():
            if name in known.hints:
                check_argument(owner, name, value, known.hints[name])
        init(self, *args, **kwargs)

    return typing.cast(F, wrapper)
