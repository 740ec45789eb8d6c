"""A revision of a CDK app synthesized as the CDK CLI would, without AWS credentials: its tree (a git
worktree of the revision), its context (cdk.json, cdk.context.json, ``-c``), its program (cdk.json's
``app``) and its own dependencies (:mod:`.revision_env`); its templates read from the cloud assembly, the
nested stacks read into their parents (:func:`flatten`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import EfaConfigError
from .assembly import VALIDATION_REPORT, AssemblyError, assembly_stacks, read_json
from .revision_env import Environment, environment

#: The metadata key aws-cdk-lib writes on a nested stack's resource: its template's file in the assembly.
ASSET_PATH = "aws:asset:path"


def app_command(tree: Path, app: str | None, python: str | None = None) -> list[str]:
    """The program that synthesizes the app at `tree`, as the CDK CLI finds it: `app` (``--app``), else
    cdk.json's ``app``; its Python file is run with `python` (the revision's environment; default this
    Python), any other command as the shell runs it; with neither, ``app.py``."""
    python = python or sys.executable
    command = app
    if command is None and (tree / "cdk.json").is_file():
        command = json.loads((tree / "cdk.json").read_text()).get("app")
    if not command:
        return [python, "app.py"]
    words = shlex.split(command)
    script = next((w for w in words if w.endswith(".py")), None)
    return [python, script] if script else ["/bin/sh", "-c", command]


def revision_context(tree: Path, context: Mapping[str, str]) -> dict[str, Any]:
    """The context the CDK CLI gives the app at `tree`: cdk.json's ``context`` (the feature flags among
    it), then cdk.context.json (cached lookups), then what the user passed (``-c``), later winning."""
    merged: dict[str, Any] = {}
    for name in ("cdk.json", "cdk.context.json"):
        path = tree / name
        if path.is_file():
            found = json.loads(path.read_text())
            merged.update(found.get("context", {}) if name == "cdk.json" else found)
    return {**merged, **context}


def _rewrite(node: Any, prefix: str, local: set[str], parameters: Mapping[str, Any]) -> Any:
    """A nested template's fragment as the parent sees it: its resources' ids prefixed, a reference to one
    of its parameters replaced by the value the parent passes (so a change there reaches what reads it)."""
    if isinstance(node, list):
        return [_rewrite(v, prefix, local, parameters) for v in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"Ref"} and isinstance(node["Ref"], str):
        name = node["Ref"]
        if name in parameters:
            return parameters[name]
        return {"Ref": prefix + name} if name in local else node
    if set(node) == {"Fn::GetAtt"}:
        target = node["Fn::GetAtt"]
        target = target.split(".", 1) if isinstance(target, str) else target
        if isinstance(target, list) and target and target[0] in local:
            return {"Fn::GetAtt": [prefix + str(target[0]), *target[1:]]}
    return {k: _rewrite(v, prefix, local, parameters) for k, v in node.items()}


def _nested_files(out: Path) -> dict[str, str]:
    """The nested-stack templates the assembly's asset manifests list: their content hash (the name of the
    object a ``TemplateURL`` points at) -> their file in the assembly."""
    try:
        artifacts = read_json(out / "manifest.json", out).get("artifacts", {})
    except (FileNotFoundError, AssemblyError, AttributeError):
        return {}
    found: dict[str, str] = {}
    for artifact in artifacts.values() if isinstance(artifacts, dict) else []:
        name = (artifact.get("properties") or {}).get("file") if isinstance(artifact, dict) else None
        if artifact.get("type") != "cdk:asset-manifest" or not isinstance(name, str):
            continue
        try:
            files = read_json(out / name, out).get("files", {})
        except (FileNotFoundError, AssemblyError, AttributeError):
            continue
        for digest, entry in files.items() if isinstance(files, dict) else []:
            path = ((entry or {}).get("source") or {}).get("path")
            if isinstance(path, str) and path.endswith(".nested.template.json"):
                found[str(digest)] = path
    return found


def _nested_path(resource: Mapping[str, Any], files: Mapping[str, str]) -> str | None:
    """A nested stack resource's template in the assembly: its ``aws:asset:path`` metadata (the CLI's asset
    metadata), else the asset whose hash its ``TemplateURL`` names."""
    path = (resource.get("Metadata") or {}).get(ASSET_PATH)
    if isinstance(path, str):
        return path
    url = json.dumps((resource.get("Properties") or {}).get("TemplateURL"))
    return next((p for digest, p in files.items() if digest in url), None)


def flatten(template: Mapping[str, Any], out: Path) -> tuple[dict[str, Any], list[str]]:
    """The stack's template with its nested stacks' resources in it (``Nested/Resource``, recursively), each
    nested parameter read as the value the parent passes and each ``Fn::GetAtt [Nested, Outputs.X]`` as the
    output's value: one template, so that a change in either reaches what reads it. aws-cdk-lib writes a
    nested stack's template beside its parent (its resource's ``aws:asset:path`` metadata names it, and the
    asset manifest by the hash its ``TemplateURL`` holds); the nested stacks whose template is not in the
    assembly (a URL of someone else's) are listed."""
    flat: dict[str, Any] = {**template, "Resources": dict(template.get("Resources") or {})}
    unread: list[str] = []
    files = _nested_files(out)
    outputs: dict[tuple[str, str], Any] = {}
    for rid, resource in list(flat["Resources"].items()):
        if not isinstance(resource, Mapping) or resource.get("Type") != "AWS::CloudFormation::Stack":
            continue
        path = _nested_path(resource, files)
        try:
            if path is None:
                raise FileNotFoundError(rid)
            inner, deeper = flatten(read_json(out / path, out), out)
        except (FileNotFoundError, AssemblyError):
            unread.append(rid)
            continue
        unread += [f"{rid}/{n}" for n in deeper]
        outputs.update(_inline(flat["Resources"], rid, resource, inner))
    if outputs:
        flat["Resources"] = _read_outputs(flat["Resources"], outputs)
    return flat, unread


def _inline(
    resources: dict[str, Any], rid: str, resource: Mapping[str, Any], inner: Mapping[str, Any]
) -> dict[tuple[str, str], Any]:
    """A nested stack's resources put in `resources` under ``rid/``, read with the parameters the parent
    passes (else their defaults); its outputs, by the ``Fn::GetAtt`` that reads each."""
    local = set(inner.get("Resources") or {})
    passed = dict((resource.get("Properties") or {}).get("Parameters") or {})
    defaults = {k: p.get("Default") for k, p in (inner.get("Parameters") or {}).items() if "Default" in p}
    parameters = {**{k: v for k, v in defaults.items() if k not in passed}, **passed}
    for inner_id, inner_resource in (inner.get("Resources") or {}).items():
        resources[f"{rid}/{inner_id}"] = _rewrite(inner_resource, f"{rid}/", local, parameters)
    return {
        (rid, f"Outputs.{name}"): _rewrite(output.get("Value"), f"{rid}/", local, parameters)
        for name, output in (inner.get("Outputs") or {}).items()
    }


def _read_outputs(node: Any, outputs: Mapping[tuple[str, str], Any]) -> Any:
    """`node` with each ``Fn::GetAtt [Nested, Outputs.X]`` replaced by that output's value."""
    if isinstance(node, list):
        return [_read_outputs(v, outputs) for v in node]
    if not isinstance(node, dict):
        return node
    target = node.get("Fn::GetAtt") if set(node) == {"Fn::GetAtt"} else None
    if isinstance(target, list) and len(target) == 2 and tuple(target) in outputs:
        return outputs[(target[0], target[1])]
    return {k: _read_outputs(v, outputs) for k, v in node.items()}


def stack_templates(out: Path) -> dict[str, dict[str, Any]]:
    """The templates of the cloud assembly's stacks, as its manifest lists them (a nested stack's
    template is an asset of its parent, not a stack of its own: :func:`flatten`)."""
    return {name: read_json(s.template, out) for name, s in assembly_stacks(out).items()}


@dataclass
class Synthesized:
    """One revision synthesized: its templates by stack, the same with their nested stacks read in
    (:func:`flatten`), the nested stacks not read, and the environment it ran in."""

    templates: dict[str, dict[str, Any]]
    flat: dict[str, dict[str, Any]] = field(default_factory=dict)
    unread_nested: dict[str, list[str]] = field(default_factory=dict)
    environment: Environment = field(default_factory=lambda: Environment(sys.executable))


def _read(out: Path, env: Environment) -> Synthesized:
    templates = stack_templates(out)
    done = Synthesized(templates, environment=env)
    for name, template in templates.items():
        done.flat[name], done.unread_nested[name] = flatten(template, out)
    return done


def synth_revision(
    repo: Path,
    rev: str | None,
    context: Mapping[str, str],
    out: Path,
    app: str | None = None,
    requirements: list[str] | None = None,
    same_environment: bool = False,
) -> dict[str, Any]:
    """Synthesize the app at a git revision (None: the working tree) into `out`; its templates by stack."""
    return synthesize(repo, rev, context, out, app, requirements, same_environment).templates


def synthesize(
    repo: Path,
    rev: str | None,
    context: Mapping[str, str],
    out: Path,
    app: str | None = None,
    requirements: list[str] | None = None,
    same_environment: bool = False,
) -> Synthesized:
    """Synthesize the app at a git revision (None: the working tree) into `out` as the CDK CLI would
    (:func:`app_command`, :func:`revision_context`), with the revision's own dependencies unless
    `same_environment` (:func:`.revision_env.environment`)."""
    scratch = out.parent / f".{out.name}-scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    tree = repo
    if rev is not None:
        tree = scratch / "tree"
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(tree), rev], check=True
        )
    try:
        label = rev or "the working tree"
        env = (
            Environment(sys.executable)
            if same_environment
            else environment(tree, label, requirements, scratch)
        )
        command = app_command(tree, app, env.python)
        run_env = {
            **os.environ,
            "CDK_OUTDIR": str(out),
            "CDK_CONTEXT_JSON": json.dumps(revision_context(tree, context)),
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            "PYTHONPATH": str(tree),
        }
        try:
            subprocess.run(command, cwd=tree, env=run_env, check=True, capture_output=True, text=True)
        except subprocess.CalledProcessError as err:
            # a policy-validation plugin (cdk-nag 3) failed it: the templates are written, its report read
            if (out / VALIDATION_REPORT).is_file() and (out / "manifest.json").is_file():
                return _read(out, env)
            last = (err.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise EfaConfigError(
                "template-diff",
                code="efa-cdk:diff-synth-failed",
                value=label,
                why=f"the app ({' '.join(command)}) failed to synthesize there: {last}",
                fix="fix that revision's configuration, or diff other revisions",
            ) from None
        return _read(out, env)
    finally:
        if rev is not None:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], check=False)
