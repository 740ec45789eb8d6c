"""The cloud assembly the CDK writes (``cdk.out``): its stacks as its manifest lists them.

The manifest is the one list of stacks (aws-cdk-lib's cloud-assembly-schema, ``manifest.json``:
artifacts of type ``aws:cloudformation:stack`` with ``properties.templateFile``). A directory listing
of ``*.template.json`` is not: a nested stack's template is written beside its parent's as an asset of
the parent, not a stack of its own. preflight, status and template-diff read the stacks from here.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The largest file of an assembly read (a manifest, a template): far past CloudFormation's own 1 MB (a
#: template in S3), so only something that is no synthesized file is refused, before it is parsed.
MAX_FILE_BYTES = 16 * 1024 * 1024


class AssemblyError(ValueError):
    """The directory is no cloud assembly the CDK wrote; one line says why."""


@dataclass(frozen=True)
class AssemblyStack:
    """One stack of the assembly: its template file and ``aws://<account>/<region>`` environment."""

    name: str
    template: Path
    environment: str


def read_json(path: Path, out: Path, limit: int = MAX_FILE_BYTES) -> Any:
    """A JSON file of the assembly in `out`, read only when it is a regular file inside `out` (no ``../``
    or link out of it, no device or FIFO: /dev/zero would fill memory, a FIFO would never end) of at most
    `limit` bytes, parsed without Python's recursion limit ending it in a traceback; else one line why."""
    real, root = path.resolve(), out.resolve()
    if not real.is_relative_to(root):
        raise AssemblyError(f"{path} is outside the assembly {out}: synthesize again")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise AssemblyError(f"{path} cannot be read ({err.strerror}): synthesize again") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise AssemblyError(
                f"{path} is no file the CDK wrote (a device, FIFO or folder): synthesize again"
            )
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise AssemblyError(
            f"{path} is over {limit:,} bytes: no synthesized template or manifest (synthesize again)"
        )
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise AssemblyError(f"{path} is not JSON the CDK wrote ({why}): synthesize again") from None


def assembly_stacks(out: Path) -> dict[str, AssemblyStack]:
    """The stacks of the cloud assembly in `out`, by artifact name (the stack's name in ``cdk``)."""
    manifest = out / "manifest.json"
    try:
        artifacts = read_json(manifest, out).get("artifacts", {})
    except FileNotFoundError:
        raise AssemblyError(f"no cloud assembly at {out} (no manifest.json): synthesize first") from None
    except (OSError, AttributeError) as err:
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
        if not (out / template).resolve().is_relative_to(out.resolve()):
            raise AssemblyError(
                f"{manifest}: stack {name}'s template {template} is outside the assembly: synthesize again"
            )
        stacks[name] = AssemblyStack(name, out / template, str(artifact.get("environment", "")))
    return stacks


#: The annotation kinds a reviewer is shown (``Annotations.of(...).add_warning_v2`` / ``add_error``; cdk-nag
#: writes its findings so when its pack runs as an Aspect).
FINDING_KINDS = {"aws:cdk:error": "error", "aws:cdk:warning": "warning"}


def synth_findings(out: Path) -> dict[str, set[str]]:
    """Each stack's synth-time errors and warnings (``error <path>: <message>``), from the manifest's
    metadata or the file it names (``additionalMetadataFile``, as aws-cdk-lib 2.17x writes it)."""
    artifacts = read_json(out / "manifest.json", out).get("artifacts", {})
    found: dict[str, set[str]] = {}
    for name, artifact in artifacts.items():
        if not isinstance(artifact, dict) or artifact.get("type") != "aws:cloudformation:stack":
            continue
        metadata = dict(artifact.get("metadata") or {})
        extra = artifact.get("additionalMetadataFile")
        if isinstance(extra, str):
            metadata.update(read_json(out / extra, out))
        found[name] = {
            f"{FINDING_KINDS[e['type']]} {path}: {(str(e.get('data') or '').splitlines() or [''])[0]}"
            for path, entries in metadata.items()
            for e in entries
            if isinstance(e, dict) and e.get("type") in FINDING_KINDS
        }
    return found


#: Where aws-cdk-lib writes its policy-validation plugins' findings (cdk-nag 3's among them) when synthesis
#: fails on them: ``validation-report.json`` in the assembly, beside the templates it still wrote.
VALIDATION_REPORT = "validation-report.json"


def validation_findings(out: Path) -> dict[str, set[str]]:
    """Each stack's policy-validation violations (``validation AwsSolutions-S1 Data/Results/Resource:
    <description>``), from the assembly's report; none without one."""
    if not (out / VALIDATION_REPORT).is_file():
        return {}
    report = read_json(out / VALIDATION_REPORT, out)
    found: dict[str, set[str]] = {}
    for plugin in report.get("pluginReports", []) if isinstance(report, dict) else []:
        for violation in plugin.get("violations", []):
            for where in violation.get("violatingConstructs", []):
                path = str(where.get("constructPath", ""))
                line = f"validation {violation.get('ruleName')} {path}: {violation.get('description', '')}"
                found.setdefault(path.split("/")[0], set()).add(line)
    return found
