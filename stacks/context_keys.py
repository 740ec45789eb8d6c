"""The context's keys themselves: a misspelt key refused with the nearest known one, a key the stack does not
read refused, a renamed key read under its new name with a warning, and the key a refusal names.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from efa_constructs.core import (
    EfaConfigError,
)

from .params import BY_KEY, FIELDS, KINDS, READER_NAMES, _is_cdk_key, _unknown, check_keys


def check_context_keys(ctx: Mapping[str, Any], stacks: Mapping[str, str]) -> None:
    """Refuse every context key that would be ignored: a plain key no stack reads, ``Prefix:key`` whose
    Prefix names no ready stack or whose key that stack (`stacks`: name -> CLUSTER or PCLUSTER) does not
    read. CDK's own keys pass."""
    check_keys({k: v for k, v in ctx.items() if ":" not in k})
    for name in ctx:
        prefix, _, key = name.rpartition(":")
        if not prefix or _is_cdk_key(name):
            continue
        if prefix not in stacks:
            what = f"{key} would be ignored" if key in BY_KEY else "the key would be ignored"
            close = difflib.get_close_matches(prefix, list(stacks), n=1, cutoff=0.6)
            raise EfaConfigError(
                "context",
                code="efa-cdk:context-not-a-ready-stack",
                value=name,
                why=f"{prefix!r} is not a ready stack, so {what}",
                fix=f"write {close[0]}:{key}" if close else f"prefix one of {', '.join(stacks)}",
            )
        reads = [f.key for f in FIELDS if stacks[prefix] in f.stacks]
        if key not in BY_KEY:
            raise _unknown(key, reads, f"{prefix} reads no key {key!r} (it would be ignored)", f"{prefix}:")
        if key not in reads:
            readers = " and ".join(READER_NAMES[k] for k in KINDS if k in BY_KEY[key].stacks)
            raise EfaConfigError(
                "context",
                code="efa-cdk:context-key-not-read-by-stack",
                value=name,
                why=f"{prefix} does not read {key} (only the {readers} stacks do), so it would be ignored",
                fix=f"drop it, or see the keys {prefix} reads in docs/context.md's table",
            )


#: A construct option the ready stacks fill from a context key of another name: a refusal names the key
#: the user typed (-c fsx_lustre_throughput=...), never the construct's argument.
CONTEXT_KEY_OF_OPTION = {
    "sweep_interval": "sweep_minutes",
    # EfaLustreFileSystem's options, and EfaCluster's lustre
    "capacity_gib": "fsx_lustre_capacity_gib",
    "throughput": "fsx_lustre_throughput",
    "efa": "fsx_lustre_efa",
    "gds": "fsx_lustre_gds",
    "lustre": "fsx_lustre_capacity_gib",
}


#: Context keys renamed to the constructs' option names (ssh_cidr and replace_nodes in 0.2.0,
#: fsx_lustre_gib, as StorageOptions names it; all in 0.2.0): the old key still works, with a warning naming
#: the new one.
RENAMED = {
    "ssh_cidr": "ssh_peers",
    "replace_nodes": "node_replacements",
    "fsx_lustre_gib": "fsx_lustre_capacity_gib",
}


def renamed_keys(ctx: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The context with every renamed key (plain or ``Stack:key``) under its new name, and a warning per
    old key given; the old and the new key for the same stacks together are refused (which one counts?)."""
    out, warnings = dict(ctx), []
    for name in ctx:
        prefix, sep, key = name.rpartition(":")
        if key not in RENAMED or _is_cdk_key(name):
            continue
        new = f"{prefix}{sep}{RENAMED[key]}"
        if new in ctx:
            raise EfaConfigError(
                "context",
                code="efa-cdk:context-key-renamed-and-new",
                value=name,
                why=f"{key} is the old name of {RENAMED[key]}, and {new} is given too",
                fix=f"drop -c {name}",
            )
        out[new] = out.pop(name)
        warnings.append(f"-c {name} is renamed {RENAMED[key]} (the construct's option): write -c {new}=...")
    return out, warnings


def plain_key_hint(ctx: Mapping[str, Any], err: EfaConfigError) -> str:
    """When a refused value came from a plain ``-c key=value`` (which every ready stack reads), how to
    give it to one stack only."""
    key = CONTEXT_KEY_OF_OPTION.get(err.what, err.what)
    if key not in ctx:
        return ""
    return f" (to set it for one stack only, write -c <StackName>:{key}=...)"
