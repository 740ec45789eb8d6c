"""How a context value becomes a value: each parser takes the key and the raw value (a string from ``-c``,
or a typed value from cdk.json) and returns the value or refuses it in one line naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from efa_constructs.core import (
    EfaConfigError,
    parse_ssh_source,
)

#: A context value's parser: (key, raw value) -> the value, or a refusal naming the key.
Parser = Callable[[str, Any], Any]


def whole(key: str, raw: Any) -> int:
    """A whole number >= 0 (an int from cdk.json, or digits from ``-c``)."""
    if isinstance(raw, bool) or not (
        isinstance(raw, int) or (isinstance(raw, str) and raw.strip().isdigit())
    ):
        raise EfaConfigError(
            key,
            code="efa-cdk:context-not-a-number",
            value=raw,
            why="not a whole number",
            fix=f"pass -c {key}=<a whole number>",
        )
    return int(raw)


def boolean(key: str, raw: Any) -> bool:
    """``true`` or ``false`` (any case), or a JSON boolean."""
    value = str(raw).lower()
    if value not in ("true", "false"):
        raise EfaConfigError(
            key,
            code="efa-cdk:context-not-a-boolean",
            value=raw,
            why="not true or false",
            fix=f"pass -c {key}=true or false",
        )
    return value == "true"


def text(pattern: str, what: str, example: str) -> Parser:
    """A string matching `pattern` (an id or name whose form is known)."""
    regex = re.compile(pattern)

    def parse(key: str, raw: Any) -> str:
        if not regex.match(str(raw)):
            raise EfaConfigError(
                key,
                code="efa-cdk:context-form",
                value=raw,
                why=f"not {what}",
                fix=f"pass e.g. -c {key}={example}",
            )
        return str(raw)

    return parse


def any_text(key: str, raw: Any) -> str:
    """Any string (checked where it is used)."""
    return str(raw)


def choice(parse: Callable[[Any], Any]) -> Parser:
    """One of an enum's values, parsed by the enum's own ``parse`` (which lists the choices)."""
    return lambda _key, raw: parse(raw)


def replacements(key: str, raw: Any) -> tuple[tuple[int, str], ...]:
    """Comma-separated INDEX:LABEL pairs (the labels are checked where they are used)."""
    out = []
    for item in (i.strip() for i in str(raw).split(",") if i.strip()):
        index, sep, label = item.partition(":")
        if not sep or not index.strip().isdigit():
            raise EfaConfigError(
                key,
                code="efa-cdk:context-replacement-form",
                value=raw,
                why=f"{item!r} is not INDEX:LABEL",
                fix=f"pass e.g. -c {key}=1:2026-11-24,3:2026-11-24 (node index, then any label)",
            )
        out.append((int(index), label.strip()))
    return tuple(out)


def ssh_sources(key: str, raw: Any) -> tuple[str, ...]:
    """Comma-separated CIDRs or prefix list ids: at least one (an empty value would silently open nothing)."""
    sources = tuple(parse_ssh_source(c) for c in str(raw).split(",") if c.strip())
    if not sources:
        raise EfaConfigError(
            key,
            code="efa-cdk:context-ssh-source-empty",
            value=raw,
            why="empty: it names no source to allow SSH from",
            fix=f"pass -c {key}=<your address>/32 or a prefix list id, or leave {key} out (port 22 closed)",
        )
    return sources


def at_least_one(key: str, raw: Any) -> int:
    """A whole number >= 1."""
    value = whole(key, raw)
    if value < 1:
        raise EfaConfigError(
            key,
            code="efa-cdk:context-below-one",
            value=raw,
            why="it must be at least one",
            fix=f"pass -c {key}=<1 or more>",
        )
    return value
