"""The one error type the library raises for bad input.

Every message names the value received, why it is wrong and how to fix it, so that a bad
`cdk synth` stops with something a user can act on instead of a template that fails at deploy.
"""

from __future__ import annotations

import enum
from typing import TypeVar


class EfaConfigError(ValueError):
    """An EFA cluster was configured with a value that cannot work.

    Raised at synthesis time, before any template is written.
    """

    def __init__(self, what: str, *, value: object, why: str, fix: str, stack: str | None = None) -> None:
        self.what = what
        self.value = value
        self.why = why
        self.fix = fix
        #: The stack whose configuration was refused (set by the app; None inside a construct).
        self.stack = stack
        where = f"{stack}: " if stack else ""
        super().__init__(f"{where}{what}={readable(value)}: {why}. Fix: {fix}")

    def in_stack(self, stack: str, *, fix_suffix: str = "") -> EfaConfigError:
        """The same refusal, naming the stack it happened in (and more to the fix, if given)."""
        return EfaConfigError(
            self.what, value=self.value, why=self.why, fix=self.fix + fix_suffix, stack=stack
        )


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
            what, value=value, why=why, fix=f"use one of {', '.join(str(m.value) for m in choices)}"
        ) from None
