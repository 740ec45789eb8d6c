"""Readable per-stack template diffs for pull requests, without AWS credentials.

``python -m efa_constructs template-diff [--base REV] [--head REV]`` synthesizes the app at two git
revisions (the head defaults to the working tree) and prints, per stack, what is added, removed,
modified and REPLACED, with deletions and replacements of stateful resources flagged loudly.

Whether a change replaces a resource comes from CloudFormation's own provider schemas
(``createOnlyProperties``), as shipped in cfn-lint. Replacement also propagates: a resource whose
create-only property references a resource that changes (``Fn::GetAtt`` of a modified resource, or
``Ref`` of a replaced one) is replaced too, and a resource whose text is the same but reads a value
that changes (the AMI id a refreshed image lookup returns) counts as modified. That is how a
launch-template or image change replaces every node that launches from ``LatestVersionNumber``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ..core.errors import EfaConfigError
from . import cluster_summary
from .assembly import VALIDATION_REPORT, assembly_stacks, read_json, synth_findings, validation_findings
from .security_diff import SecurityChanges, security_changes

#: Resource types whose deletion or replacement loses data or an address someone relies on. Instances
#: count: their root volumes (and instance stores) go with them, and so does the group's nodes'.
STATEFUL_TYPES = frozenset(
    {
        "AWS::EC2::Instance",
        "AWS::AutoScaling::AutoScalingGroup",
        "AWS::EC2::Volume",
        "AWS::EC2::EIP",
        "AWS::EFS::FileSystem",
        "AWS::FSx::FileSystem",
        "AWS::S3::Bucket",
        "AWS::Logs::LogGroup",
        "AWS::RDS::DBInstance",
        "AWS::RDS::DBCluster",
        "AWS::DynamoDB::Table",
        "AWS::EC2::KeyPair",
        "AWS::SSM::Parameter",
        "AWS::SecretsManager::Secret",
        # AWS PCS: the cluster holds Slurm's state (queued and running jobs); a node group, its nodes
        "AWS::PCS::Cluster",
        "AWS::PCS::ComputeNodeGroup",
        # Amazon EKS: the cluster (its workloads and their state); a managed node group, its nodes
        "AWS::EKS::Cluster",
        "AWS::EKS::Nodegroup",
    }
)
#: Stateful types whose loss is their nodes: (root volumes, instance stores, the jobs and pods on them).
NODE_TYPES = frozenset(
    {
        "AWS::EC2::Instance",
        "AWS::AutoScaling::AutoScalingGroup",
        "AWS::PCS::ComputeNodeGroup",
        "AWS::EKS::Nodegroup",
    }
)


@cache
def create_only_properties(resource_type: str, region: str = "us-east-1") -> frozenset[str]:
    """Top-level properties whose change replaces a resource of this type (CloudFormation schema)."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    try:
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, resource_type).schema
    except Exception:  # custom resources and unknown types: no schema, no known create-only props
        return frozenset()
    paths = schema.get("createOnlyProperties", [])
    return frozenset(p.split("/")[2] for p in paths if p.startswith("/properties/"))


#: What an Auto Scaling group with ``AutoScalingReplacingUpdate: WillReplace`` is replaced for (with
#: all its nodes): CloudFormation user guide, "UpdatePolicy attribute" (the policy applies when the
#: launch configuration or template, the VPCZoneIdentifier or the MixedInstancesPolicy changes).
ASG_REPLACING = frozenset(
    {"LaunchConfigurationName", "LaunchTemplate", "VPCZoneIdentifier", "MixedInstancesPolicy"}
)


#: Nested properties whose change replaces a resource though the provider schema (as cfn-lint ships it)
#: lists none: FSx's UpdateFileSystemLustreConfiguration has neither, so CloudFormation can change them only
#: with a new file system (FSx API reference; FSx for Lustre user guide, "efa-file-systems": EFA cannot be
#: enabled or disabled on an existing file system).
NESTED_CREATE_ONLY = {
    "AWS::FSx::FileSystem": frozenset(
        {"LustreConfiguration.EfaEnabled", "LustreConfiguration.DeploymentType"}
    ),
}


def _replacing_properties(resource: Mapping[str, Any], region: str) -> frozenset[str]:
    """Properties whose change replaces this resource: the schema's create-only ones (with the nested ones
    :data:`NESTED_CREATE_ONLY` adds), and for an Auto Scaling group under a replacing update policy, the
    ones that policy applies to."""
    props = create_only_properties(resource["Type"], region)
    props |= NESTED_CREATE_ONLY.get(resource["Type"], frozenset())
    policy = (resource.get("UpdatePolicy") or {}).get("AutoScalingReplacingUpdate") or {}
    if resource["Type"] == "AWS::AutoScaling::AutoScalingGroup" and policy.get("WillReplace"):
        props |= ASG_REPLACING
    return props


def _identifier(attribute: str) -> bool:
    """An attribute that names the resource (``GroupId``, ``Arn``, ``FileSystemId``): it changes only when
    the resource is replaced (CloudFormation user guide, "Update behaviors of stack resources": only a
    replacement gives the resource a new physical id), not when an update changes other properties."""
    return attribute.endswith(("Id", "Arn")) or attribute == "Name"


def _references(node: Any) -> Iterator[tuple[str, str]]:
    """(kind, logical id) of every Ref / Fn::GetAtt inside a template fragment: ``Ref``, ``GetAtt``, or
    ``Identifier`` for a GetAtt of an attribute that names the resource (changing with a replacement only)."""
    if isinstance(node, dict):
        if isinstance(node.get("Ref"), str):
            yield "Ref", node["Ref"]
        getatt = node.get("Fn::GetAtt")
        if isinstance(getatt, list) and getatt:
            named = len(getatt) > 1 and isinstance(getatt[1], str) and _identifier(getatt[1])
            yield "Identifier" if named else "GetAtt", str(getatt[0])
        for value in node.values():
            yield from _references(value)
    elif isinstance(node, list):
        for value in node:
            yield from _references(value)


def _changed_paths(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += _changed_paths(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            p
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for p in _changed_paths(a, b, f"{path}[{i}]")
        ]
    return [] if old == new else [path]


@dataclass
class StackDiff:
    """What changes in one stack between two templates."""

    added: dict[str, str] = field(default_factory=dict)  # logical id -> type
    removed: dict[str, str] = field(default_factory=dict)
    modified: dict[str, list[str]] = field(default_factory=dict)  # logical id -> changed property paths
    replaced: dict[str, str] = field(default_factory=dict)  # logical id -> why
    types: dict[str, str] = field(default_factory=dict)
    outputs_changed: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)  # root causes worth naming (a new node-scripts asset)
    #: IAM statements and security-group rules added and removed, with what widens access.
    security: SecurityChanges = field(default_factory=lambda: SecurityChanges([], [], [], []))
    #: The cluster's figures: (node group or file system, before, after), the same where it stays.
    cluster: list[tuple[str, str, str]] = field(default_factory=list)
    #: What the head's checks find that the base's did not (cfn-lint; synth errors and warnings).
    findings: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when nothing changes."""
        return not (self.added or self.removed or self.modified or self.replaced or self.outputs_changed)

    @property
    def stateful_losses(self) -> list[str]:
        """Stateful resources that are deleted or replaced."""
        gone = list(self.removed) + list(self.replaced)
        return sorted(r for r in gone if self.types.get(r) in STATEFUL_TYPES)


def diff_templates(old: Mapping[str, Any], new: Mapping[str, Any], region: str = "us-east-1") -> StackDiff:
    """Compare two synthesized templates of the same stack."""
    old_r: Mapping[str, Any] = old.get("Resources", {})
    new_r: Mapping[str, Any] = new.get("Resources", {})
    d = StackDiff(types={rid: r["Type"] for rid, r in {**old_r, **new_r}.items()})
    d.added = {rid: new_r[rid]["Type"] for rid in sorted(set(new_r) - set(old_r))}
    d.removed = {rid: old_r[rid]["Type"] for rid in sorted(set(old_r) - set(new_r))}
    both = sorted(set(old_r) & set(new_r))
    for rid in both:
        _compare(d, rid, old_r[rid], new_r[rid], region)
    d.causes = [
        f"{rid}: the node scripts changed (their asset hash is in the user data: a new efa-cdk "
        "version, or a change under efa_constructs/node), so every node launched from it is replaced"
        for rid in both
        if rid in d.modified
        and d.types[rid] == "AWS::EC2::LaunchTemplate"
        and _scripts_assets(old_r[rid]) != _scripts_assets(new_r[rid])
    ]
    while any([_follow(d, rid, new_r[rid], region) for rid in both if rid not in d.replaced]):
        pass  # propagate through references until nothing more changes
    old_o, new_o = old.get("Outputs", {}), new.get("Outputs", {})
    d.outputs_changed = sorted(k for k in set(old_o) | set(new_o) if old_o.get(k) != new_o.get(k))
    d.security = security_changes(old, new)
    d.cluster = cluster_summary.compare(old, new)
    return d


def lint_findings(template: Mapping[str, Any], region: str = "us-east-1") -> set[str]:
    """cfn-lint's findings on a template (``E3012 Resources/Node/Properties/...: message``)."""
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(template), config=ManualArgs(regions=[region]))
    return {f"cfn-lint {m.rule.id} {'/'.join(map(str, m.path))}: {m.message}" for m in matches}


def _findings(out: Path) -> dict[str, set[str]]:
    """A revision's synth findings by stack: its errors and warnings, and its policy-validation report's."""
    found = synth_findings(out)
    for stack, lines in validation_findings(out).items():
        found.setdefault(stack, set()).update(lines)
    return found


def new_findings(
    old: Mapping[str, Any], new: Mapping[str, Any], old_notes: set[str], new_notes: set[str]
) -> list[str]:
    """What the head's checks find and the base's did not: cfn-lint on both templates, the synth's errors
    and warnings (efa-cdk's own among them) and the policy-validation plugins' (cdk-nag 3's)."""
    before = lint_findings(old) if old else set()
    return sorted(
        (lint_findings(new) - before)
        | {n if n.startswith("validation ") else f"synth {n}" for n in new_notes - old_notes}
    )


def _compare(
    d: StackDiff, rid: str, before: Mapping[str, Any], after: Mapping[str, Any], region: str
) -> None:
    """One resource in both templates: replaced (another type, a create-only property changed), modified
    (its changed property paths) or neither."""
    if before["Type"] != after["Type"]:
        d.replaced[rid] = f"type changed {before['Type']} -> {after['Type']}"
        return
    paths = _changed_paths(before.get("Properties", {}), after.get("Properties", {}))
    if paths:
        d.modified[rid] = paths
        replacing = _replacing_properties(after, region)
        hit = sorted(
            {p.split(".")[0].split("[")[0] for p in paths} & replacing
            | {n for n in replacing if "." in n for p in paths if p == n or p.startswith(n + ".")}
        )
        if hit:
            d.replaced[rid] = f"create-only {', '.join(hit)} changed"


def _changing(d: StackDiff, fragment: Any) -> str | None:
    """The first resource `fragment` reads that changes at deploy: a replaced one (a new physical id), or
    a modified one read through Fn::GetAtt (its attributes may change)."""
    return next(
        (t for kind, t in _references(fragment) if t in d.replaced or (kind == "GetAtt" and t in d.modified)),
        None,
    )


def _follow(d: StackDiff, rid: str, resource: Mapping[str, Any], region: str) -> bool:
    """A resource of the same text whose values change at deploy through what it reads: modified, or
    replaced when a create-only property reads it. True when this marked it."""
    props = resource.get("Properties", {})
    changed = False
    if rid not in d.modified:  # same text, but a value it reads changes at deploy
        target = _changing(d, props)
        if target is not None:
            d.modified[rid] = [f"(a value read from {target}, which changes)"]
            changed = True
    for prop in sorted(_replacing_properties(resource, region) & set(props)):
        target = _changing(d, props[prop])
        if target is not None:
            d.replaced[rid] = f"create-only {prop} refers to {target}, which changes"
            return True
    return changed


#: The node-scripts asset in user data: a CDK asset is named by its content hash (64 hex digits).
_ASSET = re.compile(r"/([0-9a-f]{64})\.zip")


def _scripts_assets(resource: Mapping[str, Any]) -> set[str]:
    """Content hashes of the zip assets a resource's properties name (the node scripts)."""
    return set(_ASSET.findall(json.dumps(resource.get("Properties", {}))))


def app_command(tree: Path, app: str | None) -> list[str]:
    """The program that synthesizes the app at `tree`, as the CDK CLI finds it: `app` (``--app``), else
    cdk.json's ``app``; its Python file is run with this Python (the one efa-cdk runs in, which has the
    app's libraries), any other command as the shell runs it; with neither, ``app.py``."""
    command = app
    if command is None and (tree / "cdk.json").is_file():
        command = json.loads((tree / "cdk.json").read_text()).get("app")
    if not command:
        return [sys.executable, "app.py"]
    words = shlex.split(command)
    script = next((w for w in words if w.endswith(".py")), None)
    return [sys.executable, script] if script else ["/bin/sh", "-c", command]


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


def stack_templates(out: Path) -> dict[str, dict[str, Any]]:
    """The templates of the cloud assembly's stacks, as its manifest lists them (a nested stack's
    template is an asset of its parent, not a stack of its own)."""
    return {name: read_json(s.template, out) for name, s in assembly_stacks(out).items()}


def synth_revision(
    repo: Path, rev: str | None, context: Mapping[str, str], out: Path, app: str | None = None
) -> dict[str, Any]:
    """Synthesize the app at a git revision (None: the working tree) into `out` as the CDK CLI would
    (:func:`app_command`, :func:`revision_context`); templates by stack."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = repo
        if rev is not None:
            tree = Path(tmp) / "tree"
            subprocess.run(
                ["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(tree), rev], check=True
            )
        env = {
            **os.environ,
            "CDK_OUTDIR": str(out),
            "CDK_CONTEXT_JSON": json.dumps(revision_context(tree, context)),
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            "PYTHONPATH": str(tree),
        }
        try:
            subprocess.run(
                app_command(tree, app), cwd=tree, env=env, check=True, capture_output=True, text=True
            )
        except subprocess.CalledProcessError as err:
            # a policy-validation plugin (cdk-nag 3) failed it: the templates are written, its report read
            if (out / VALIDATION_REPORT).is_file() and (out / "manifest.json").is_file():
                return stack_templates(out)
            last = (err.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise EfaConfigError(
                "template-diff",
                code="efa-cdk:diff-synth-failed",
                value=rev or "the working tree",
                why=f"the app ({' '.join(app_command(tree, app))}) failed to synthesize there: {last}",
                fix="fix that revision's configuration, or diff other revisions",
            ) from None
        finally:
            if rev is not None:
                subprocess.run(
                    ["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], check=False
                )
    return stack_templates(out)


#: The most characters a GitHub comment holds (its REST API refuses a longer body).
COMMENT_LIMIT = 65536


@dataclass
class DiffReport:
    """Every stack's :class:`StackDiff` between two revisions, as text or JSON (one result, two views)."""

    base: str
    head: str | None
    stacks: dict[str, StackDiff]

    @property
    def stateful_loss(self) -> bool:
        """True when any stateful resource is deleted or replaced."""
        return any(d.stateful_losses for d in self.stacks.values())

    def text(self) -> str:
        """Plain text for a terminal."""
        from .diff_render import render

        lines = [f"Template diff {self.base} -> {self.head or 'working tree'}"]
        return "\n".join([*lines, *(render(stack, d) for stack, d in self.stacks.items())])

    def markdown(self, limit: int = COMMENT_LIMIT) -> str:
        """One pull-request comment of at most `limit` characters (:mod:`.diff_render`)."""
        from .diff_render import markdown

        return markdown(self, limit)

    @property
    def widenings(self) -> list[tuple[str, str]]:
        """(stack, reason) for each change that widens access."""
        return [(stack, why) for stack, d in self.stacks.items() for why in d.security.widenings()]

    def to_json(self) -> dict[str, Any]:
        """The same, for a program: per stack what is added, removed, modified, replaced and lost."""
        return {
            "base": self.base,
            "head": self.head,
            "stateful_loss": self.stateful_loss,
            "widenings": [{"stack": stack, "reason": why} for stack, why in self.widenings],
            "stacks": {
                stack: {
                    "added": d.added,
                    "removed": d.removed,
                    "modified": d.modified,
                    "replaced": d.replaced,
                    "stateful_losses": d.stateful_losses,
                    "outputs_changed": d.outputs_changed,
                    "causes": d.causes,
                    "security": d.security.to_json(),
                    "cluster": [
                        {"name": n, "before": b, "after": a, "changed": b != a} for n, b, a in d.cluster
                    ],
                    "findings": d.findings,
                }
                for stack, d in self.stacks.items()
            },
        }


def run(
    base: str,
    head: str | None,
    context: Mapping[str, str],
    repo: Path | None = None,
    app: str | None = None,
    findings: bool = True,
) -> DiffReport:
    """Every stack's diff between `base` and `head` (None: the working tree); with `findings`, what the
    head's checks find that the base's did not, in each stack that changes."""
    repo = repo or Path.cwd()
    inside = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--git-dir"], capture_output=True, text=True
    )
    if inside.returncode != 0:
        raise EfaConfigError(
            "template-diff",
            code="efa-cdk:diff-not-a-repository",
            value=str(repo),
            why="it synthesizes two revisions of a git repository, and this folder is in none",
            fix="run it in your CDK app's git repository (git init; git commit, to have a base)",
        )

    def commit(rev: str) -> str:
        found = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
            capture_output=True,
            text=True,
        )
        if found.returncode != 0:
            raise EfaConfigError(
                "--base" if rev == base else "--head",
                code="efa-cdk:diff-revision-unknown",
                value=rev,
                why=f"not a commit of the git repository at {repo}",
                fix="name a branch, tag or commit that exists (git log --oneline; git tag)",
            )
        return found.stdout.strip()

    base_commit = commit(base)
    head_commit = None if head is None else commit(head)
    with tempfile.TemporaryDirectory() as tmp:
        old = synth_revision(repo, base, context, Path(tmp) / "base", app)
        same = head_commit == base_commit  # same commit: same templates
        new = old if same else synth_revision(repo, head, context, Path(tmp) / "head", app)
        old_notes = _findings(Path(tmp) / "base")
        new_notes = old_notes if same else _findings(Path(tmp) / "head")
    stacks = {
        stack: diff_templates(old.get(stack, {}), new.get(stack, {})) for stack in sorted(set(old) | set(new))
    }
    for stack, d in stacks.items():
        if findings and not d.empty and stack in new:
            d.findings = new_findings(
                old.get(stack, {}), new[stack], old_notes.get(stack, set()), new_notes.get(stack, set())
            )
    return DiffReport(base, head, stacks)
