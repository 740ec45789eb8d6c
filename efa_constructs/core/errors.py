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
import re
import sys
from collections.abc import Iterator
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
        self.why = why
        self.fix = fix
        #: The stack whose configuration was refused (set by the app; None inside a construct).
        self.stack = stack
        #: The fix as a ready stack's context key (``-c node_group=asg``): shown only where the user runs a
        #: ready stack (:meth:`in_stack`), never in their own app.
        self.context_fix = context_fix
        where = f"{stack}: " if stack else ""
        super().__init__(f"{where}{what}={readable(value)}: {why}. Fix: {fix}")
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
    except EfaConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1) from None
    except RuntimeError as err:
        refused = _last_refusal
        if refused is None or str(refused) not in str(err):
            raise
        print(f"error: {refused}", file=sys.stderr)
        raise SystemExit(1) from None


def readable(value: object) -> str:
    """A value as a user wrote it: a construct by its path, a CDK instance type by its name, an enum
    member by its name, a mapping as key=value pairs; anything else by its repr."""
    node = getattr(value, "node", None)
    if node is not None and isinstance(getattr(node, "path", None), str):
        return f"<{type(value).__name__} {node.path}>"
    to_string = getattr(value, "to_string", None)
    if callable(to_string) and type(value).__name__ == "InstanceType":
        return repr(to_string())
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={readable(v)}" for k, v in value.items())
    return repr(value)


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
