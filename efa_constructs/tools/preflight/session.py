"""The session and region preflight asks (the assembly's own region when its stacks name one), and the
assembly's templates, read safely.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..assembly import AssemblyError, assembly_stacks, read_json
from .model import Check, PreflightError

#: The largest template preflight reads: far past CloudFormation's own 1 MB (a template in S3), so only
#: something that is no synthesized stack is refused, before it is parsed.
MAX_TEMPLATE_BYTES = 16 * 1024 * 1024


def assembly_region(out: Path, stacks: Iterable[str]) -> str | None:
    """The region the cloud assembly's stacks `stacks` (every one when none is named) were synthesized
    for, when they name one and the same (manifest.json's ``aws://<account>/<region>``); else None."""
    try:
        found = assembly_stacks(out)
    except AssemblyError:
        return None
    wanted = set(stacks)
    regions = {s.environment.rsplit("/", 1)[-1] for name, s in found.items() if not wanted or name in wanted}
    return (
        regions.pop() if len(regions) == 1 and "unknown-region" not in regions and "" not in regions else None
    )


def _session(region: str) -> Any:
    import boto3

    return boto3.session.Session(region_name=region)


def stacks_by_region(out: Path, stacks: Iterable[str], region: str | None) -> dict[str, list[str]]:
    """The stacks grouped by the region each deploys to: the one it was synthesized for (the manifest's
    ``aws://<account>/<region>``), else `region` (--region), else the AWS configuration's; an
    environment-agnostic stack with neither is one line naming --region."""
    found = assembly_stacks(out)
    grouped: dict[str, list[str]] = {}
    fallback: str | None = None
    for name in stacks:
        own = found[name].environment.rsplit("/", 1)[-1] if name in found else ""
        if not own or own == "unknown-region":
            fallback = fallback or session_for(region, out, [name]).region_name
            own = str(fallback)
        grouped.setdefault(own, []).append(name)
    return grouped


def session_for(region: str | None, out: Path, stacks: Iterable[str]) -> Any:
    """A boto3 session in `region` (--region), else the region the stacks were synthesized for (the
    assembly's: where they deploy), else AWS_REGION, else the AWS configuration's (AWS_DEFAULT_REGION, the
    profile); with none, one line naming --region (a client made without a region fails deep in botocore).
    AWS_REGION is read here because botocore does not read it (only AWS_DEFAULT_REGION), while the AWS CLI
    v2 and the CDK CLI do, and the refusals tell users to set it."""
    import boto3

    chosen = region or assembly_region(out, stacks) or os.environ.get("AWS_REGION") or None
    session = boto3.session.Session(region_name=chosen) if chosen else boto3.session.Session()
    if session.region_name:
        return session
    raise PreflightError(
        "no AWS region: none is configured and the stacks are environment-agnostic; "
        "pass --region REGION (or set AWS_REGION)"
    )


def _read_template(path: Path, out: Path) -> dict[str, Any]:
    """One synthesized template of the assembly in `out`, or one line saying why it is none (assembly's
    one reader: a regular file inside the assembly, bounded, any depth)."""
    try:
        template = read_json(path, out, MAX_TEMPLATE_BYTES)
    except FileNotFoundError:
        raise PreflightError(f"{path} is missing: synthesize again") from None
    except AssemblyError as err:
        raise PreflightError(str(err)) from None
    if not isinstance(template, dict) or not isinstance(template.get("Resources", {}), dict):
        raise PreflightError(f"{path} is no CloudFormation template (no Resources object): synthesize again")
    return template


def templates(out: Path, stacks: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The synthesized templates of `stacks` (all of them when none is named) in the cloud assembly, as
    its manifest lists them (a nested stack's template is its parent's asset, no stack to check)."""
    if not out.is_dir():
        raise PreflightError(
            f"no cloud assembly at {out}: synthesize first (npx cdk synth, or scripts/synth)"
        )
    try:
        found = assembly_stacks(out)
    except AssemblyError as err:
        raise PreflightError(str(err)) from None
    names = list(stacks) or sorted(found)
    missing = [n for n in names if n not in found]
    if missing:
        raise PreflightError(
            f"no template for {', '.join(missing)} in {out} (it has {', '.join(sorted(found)) or 'no stack'})"
        )
    return {n: _read_template(found[n].template, out) for n in names}


def template_checks(out: Path, found: Mapping[str, Mapping[str, Any]]) -> list[Check]:
    """Each template (as :func:`templates` read it) against CloudFormation's per-template limits, its
    size the bytes written on disk."""
    from ...core.limits import limit_violations

    checks = []
    files = assembly_stacks(out)
    for name, template in found.items():
        size = files[name].template.stat().st_size
        checks += [
            Check("template", "FAIL", f"{name}: {v.message}", v.fix) for v in limit_violations(template, size)
        ]
    return checks


def _every_template(out: Path, found: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The templates of every stack of the assembly by name (those not asked for too: their outputs),
    each read once; one that cannot be read gives nothing."""
    every: dict[str, Mapping[str, Any]] = dict(found)
    for name, s in assembly_stacks(out).items():
        if name not in found:
            try:
                every[name] = _read_template(s.template, out)
            except (PreflightError, OSError):
                continue
    return every
