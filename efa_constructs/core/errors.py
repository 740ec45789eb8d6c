"""The one error type the library raises for bad input.

Every message names the value received, why it is wrong and how to fix it, so that a bad
`cdk synth` stops with something a user can act on instead of a template that fails at deploy.
Every refusal has a stable id (``code``, ``efa-cdk:<what-went-wrong>``) to match on, as every warning
has (``efa-cdk:...``, the id ``cdk synth`` prints to acknowledge it by): the wording may improve, the id
stays.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import TypeVar

#: What an error's id looks like.
CODE_PATTERN = r"^efa-cdk:[a-z0-9]+(-[a-z0-9]+)*$"


class EfaConfigError(ValueError):
    """An EFA cluster was configured with a value that cannot work.

    Raised at synthesis time, before any template is written.

    Attributes:
        code: the refusal's stable id, e.g. ``efa-cdk:efa-count-range``: match on it, not on the message.
        what: the option refused; value: what it was given; why, fix: the message's two halves.
    """

    def __init__(
        self,
        what: str,
        *,
        code: str,
        value: object,
        why: str,
        fix: str,
        stack: str | None = None,
        context_fix: str = "",
    ) -> None:
        if not re.match(CODE_PATTERN, code):
            raise ValueError(f"an EfaConfigError's code is efa-cdk:<lowercase-words>, not {code!r}")
        self.code = code
        self.what = what
        self.value = value
        # what a call site wrote into its sentences is rendered too: a CDK token by what it stands for, an
        # object by its kind, never an address (the message is built here, so no call site can print one)
        self.why = rendered(why)
        self.fix = rendered(fix)
        #: The stack whose configuration was refused (set by the app; None inside a construct).
        self.stack = stack
        #: The fix as a ready stack's context key (``-c node_group=asg``): shown only where the user runs a
        #: ready stack (:meth:`in_stack`), never in their own app.
        self.context_fix = context_fix
        where = f"{stack}: " if stack else ""
        super().__init__(f"{where}{what}={readable(value)}: {self.why}. Fix: {self.fix}")
        global _last_refusal
        _last_refusal = self

    def in_stack(self, stack: str, *, fix_suffix: str = "", what: str | None = None) -> EfaConfigError:
        """The same refusal, naming the stack it happened in (and more to the fix, if given; `what`: the
        option under the name the user gave it, e.g. the context key the ready stacks read it from)."""
        fix = self.fix + (f" ({self.context_fix})" if self.context_fix else "") + fix_suffix
        return EfaConfigError(
            what or self.what, code=self.code, value=self.value, why=self.why, fix=fix, stack=stack
        )


#: The newest refusal made: a refusal raised inside a CDK callback (a validation, a lazy value) reaches
#: Python again as jsii's RuntimeError around the JavaScript stack, with this one's text inside it.
_last_refusal: EfaConfigError | None = None


@contextlib.contextmanager
def refusals_in_one_line() -> Iterator[None]:
    """Inside it, an efa-cdk refusal ends the program as the ready stacks end it: its one line on stderr
    (``error: <option>=<value>: <why>. Fix: <fix>``) and exit code 1, instead of a Python traceback (or,
    raised during synthesis, the same message inside a JavaScript stack). Anything else is raised as is.

    In your app: ``with refusals_in_one_line(): MyStack(app, "Training"); app.synth()``.
    """
    try:
        yield
    except (EfaConfigError, RuntimeError) as err:
        refused = _refusal_of(err)
        if refused is None:
            raise
        print(f"error: {refused}", file=sys.stderr)
        raise SystemExit(1) from None


#: A CDK token in a string (``${Token[TOKEN.42]}``), and an object's default repr (its address).
_TOKEN = re.compile(r"\$\{Token\[[^\]]*\]\}")
_REPR = re.compile(r"<([\w.]+?)(?:\.(\w+))? object at 0x[0-9a-fA-F]+>")


def _cdk() -> object | None:
    """aws-cdk-lib, when the app loaded it (a token exists only then); the pure core never imports it."""
    return sys.modules.get("aws_cdk")


def _stands_for(token: str) -> str:
    """What a CDK token stands for: a reference by the construct and attribute it reads, else that it is
    known only at deploy."""
    cdk = _cdk()
    try:
        found = cdk.Tokenization.reverse_string(token).first_token if cdk is not None else None  # type: ignore[attr-defined]
        target = getattr(found, "target", None)
        path = getattr(getattr(target, "node", None), "path", None)
        if isinstance(path, str):
            return f"<{path}'s {getattr(found, 'display_name', 'value')}, known at deploy>"
    except Exception:  # any answer of another library's internals: said as unknown
        pass
    return "<a value known only at deploy>"


def _unresolved_number(value: object) -> bool:
    cdk = _cdk()
    try:
        return isinstance(value, float) and cdk is not None and bool(cdk.Token.is_unresolved(value))  # type: ignore[attr-defined]
    except Exception:  # as above
        return False


def rendered(text: str) -> str:
    """A sentence with every CDK token in it said as what it stands for, and every default object repr
    as its class's name (``<aws_cdk.aws_ec2.InstanceType object at 0x...>`` names no value)."""
    text = _TOKEN.sub(lambda m: _stands_for(m.group(0)), str(text))
    return _REPR.sub(lambda m: f"<{(m.group(2) or m.group(1)).rsplit('.', 1)[-1]}>", text)


def _refusal_of(error: BaseException) -> EfaConfigError | None:
    """The refusal an uncaught exception is: itself, or the one a CDK callback raised inside jsii's
    RuntimeError around the JavaScript stack."""
    if isinstance(error, EfaConfigError):
        return error
    refused = _last_refusal
    if isinstance(error, RuntimeError) and refused is not None and str(refused) in str(error):
        return refused
    return None


def one_line_or(
    previous: Callable[..., object], kind: type[BaseException], error: BaseException, trace: object
) -> None:
    """The body of the hook ``import efa_constructs`` installs (its ``__init__``): an uncaught refusal ends
    a user's app as :func:`refusals_in_one_line` does (its one line on stderr; Python exits 1, as on any
    uncaught exception), with no traceback; anything else, or ``EFA_CDK_TRACEBACK=1``, goes to the hook that
    was there (`previous`)."""
    refused = _refusal_of(error)
    if refused is None or os.environ.get("EFA_CDK_TRACEBACK") == "1":
        previous(kind, error, trace)
        return
    print(f"error: {refused}", file=sys.stderr)


def readable(value: object) -> str:
    """A value as a user wrote it: a construct by its path, a CDK instance type by its name, an enum
    member by its name, a mapping as key=value pairs, a CDK token by what it stands for; anything else by
    its repr, never an address."""
    node = getattr(value, "node", None)
    if node is not None and isinstance(getattr(node, "path", None), str):
        return f"<{type(value).__name__} {node.path}>"
    to_string = getattr(value, "to_string", None)
    if callable(to_string) and type(value).__name__ == "InstanceType":
        return repr(rendered(to_string()))
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={readable(v)}" for k, v in value.items())
    if isinstance(value, str) and _TOKEN.search(value):
        return rendered(value)
    if _unresolved_number(value):
        return "<a number known only at deploy>"
    return rendered(repr(value))


E = TypeVar("E", bound=enum.Enum)


def parse_choice(choices: type[E], value: str | E, *, what: str, why: str) -> E:
    """A member of `choices` from itself or its string value; otherwise an error listing the choices."""
    if isinstance(value, choices):
        return value
    try:
        return choices(value)
    except ValueError:
        raise EfaConfigError(
            what,
            # one id per set of choices: efa-cdk:layout-mode-unknown, efa-cdk:node-group-unknown...
            code="efa-cdk:" + re.sub(r"(?<!^)(?=[A-Z])", "-", choices.__name__).lower() + "-unknown",
            value=value,
            why=why,
            fix=f"use one of {', '.join(str(m.value) for m in choices)}",
        ) from None
