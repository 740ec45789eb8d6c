"""The cloud assembly the CDK writes (``cdk.out``): its stacks as its manifest lists them.

The manifest is the one list of stacks (aws-cdk-lib's cloud-assembly-schema, ``manifest.json``:
artifacts of type ``aws:cloudformation:stack`` with ``properties.templateFile``). A directory listing
of ``*.template.json`` is not: a nested stack's template is written beside its parent's as an asset of
the parent, not a stack of its own. preflight, status and template-diff read the stacks from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


class AssemblyError(ValueError):
    """The directory is no cloud assembly the CDK wrote; one line says why."""


@dataclass(frozen=True)
class AssemblyStack:
    """One stack of the assembly: its template file and ``aws://<account>/<region>`` environment."""

    name: str
    template: Path
    environment: str


def assembly_stacks(out: Path) -> dict[str, AssemblyStack]:
    """The stacks of the cloud assembly in `out`, by artifact name (the stack's name in ``cdk``)."""
    manifest = out / "manifest.json"
    try:
        artifacts = json.loads(manifest.read_text()).get("artifacts", {})
    except FileNotFoundError:
        raise AssemblyError(f"no cloud assembly at {out} (no manifest.json): synthesize first") from None
    except (OSError, ValueError, AttributeError) as err:
        raise AssemblyError(
            f"{manifest} is not a cloud assembly manifest ({err}): synthesize again"
        ) from None
    if not isinstance(artifacts, dict):
        raise AssemblyError(f"{manifest} has no artifacts object: synthesize again")
    stacks = {}
    for name, artifact in artifacts.items():
        if not isinstance(artifact, dict) or artifact.get("type") != "aws:cloudformation:stack":
            continue
        template = (artifact.get("properties") or {}).get("templateFile")
        if not isinstance(template, str):
            raise AssemblyError(f"{manifest}: stack {name} names no templateFile: synthesize again")
        stacks[name] = AssemblyStack(name, out / template, str(artifact.get("environment", "")))
    return stacks
