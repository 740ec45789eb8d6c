"""``efa-cdk preflight``: the command that reads the assembly and runs every check, one line each."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..aws import hint
from ..exits import CANNOT_RUN_KIND, Exit, emit, fail
from .checks import Preflight
from .model import Check, NodeGroup, PreflightError
from .pcluster import parallelcluster_configs, parallelcluster_groups
from .register import run as run_checks
from .session import _every_template, _session, stacks_by_region, template_checks, templates
from .templates import _node_groups_of, assembly_exports, bootstrap_required, lustre_file_systems


def _groups_of_assembly(
    out: Path, found: Mapping[str, dict[str, Any]]
) -> tuple[list[NodeGroup], list[Check]]:
    """Every node group of the stacks `found` (their launch templates and ParallelCluster queues, with
    subnets followed into the assembly's other stacks), and the notes on what could not be read."""
    exports = assembly_exports(_every_template(out, found))
    groups = [g for name, t in found.items() for g in _node_groups_of(name, t, exports)]
    notes: list[Check] = []
    for name, t in found.items():
        configs, unread = parallelcluster_configs(name, t)
        groups += parallelcluster_groups(name, t, configs, exports)
        notes += unread
    return groups, notes


def _bootstrap_of(found: Mapping[str, Mapping[str, Any]], names: Iterable[str]) -> dict[str, int]:
    """The bootstrap version each qualifier's parameter must hold for the stacks `names`."""
    required: dict[str, int] = {}
    for parameter, version in filter(None, (bootstrap_required(found[n]) for n in names)):
        required[parameter] = max(required.get(parameter, 0), version)
    return required


def _check_assembly(
    stacks: list[str], out: Path, region: str | None, as_json: bool
) -> tuple[list[Check], dict[str, list[str]]]:
    """Every check of the assembly's stacks (each in the region it deploys to), and those regions."""
    found = templates(out, stacks)
    progress = (lambda _: None) if as_json else (lambda m: print(f"... {m}", file=sys.stderr))
    groups, notes = _groups_of_assembly(out, found)
    checks = template_checks(out, found) + notes
    regions = stacks_by_region(out, found, region)
    checks += [
        Check(
            "region",
            "WARN",
            f"{n} was synthesized for {r}: checked there, not in --region {region}",
            "synthesize it for the region you mean (env=...), or leave --region out",
        )
        for r, names in regions.items()
        for n in names
        if region and r != region
    ]
    lustre = [f for name, t in found.items() for f in lustre_file_systems(name, t)]
    for where, names in regions.items():  # each stack is checked in the region it deploys to
        mine = [g for g in groups if g.stack in names]
        fss = [f for f in lustre if f.stack in names]
        checks += run_checks(Preflight(_session(where), progress), mine, _bootstrap_of(found, names), fss)
    return checks, regions


def main(stacks: list[str], out: Path, region: str | None, as_json: bool) -> int:
    try:
        import boto3  # noqa: F401  (installed? the account extra)
    except ModuleNotFoundError:
        fail("preflight calls AWS with boto3: pip install 'efa-cdk[account]'", CANNOT_RUN_KIND, as_json)
        return Exit.CANNOT_RUN
    try:
        checks, regions = _check_assembly(stacks, out, region, as_json)
    except PreflightError as err:
        fail(f"preflight: {err}", CANNOT_RUN_KIND, as_json)
        return Exit.CANNOT_RUN
    except Exception as err:  # botocore's NoCredentialsError and kin, raised before any call
        from botocore.exceptions import BotoCoreError

        if isinstance(err, BotoCoreError):
            fail(f"preflight: {err} ({hint(err)})", CANNOT_RUN_KIND, as_json)
            return Exit.CANNOT_RUN
        raise
    of_stack = {n: r for r, names in regions.items() for n in names}
    body = {"region": next(iter(regions), None), "regions": of_stack, "checks": [asdict(c) for c in checks]}
    emit(body, lambda: "\n".join(c.line() for c in checks), as_json)
    return Exit.FOUND if any(c.status == "FAIL" for c in checks) else Exit.OK
