"""Readable per-stack template diffs for pull requests, without AWS credentials.

``python -m efa_constructs template-diff [--base REV] [--head REV]`` synthesizes the app at two git
revisions (the head defaults to the working tree), each with its own dependencies, and says per stack what
is added, removed, modified, replaced or rolled, with deletions and replacements of stateful resources
flagged loudly and every verdict from its owner's source (:mod:`.change_rules`).

A resource also changes through what it reads: a create-only property that reads a replaced resource, or
an attribute that an in-place update changes (a launch template's ``LatestVersionNumber``; not a file
system's ``LustreMountName``), replaces it too. That is how a launch-template change replaces every node
that launches from its latest version, while growing the file system the template reads replaces none.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import EfaConfigError
from . import change_rules, cluster_summary
from .assembly import synth_findings, validation_findings
from .diff_model import COMMENT_LIMIT, NODE_TYPES, STATEFUL_TYPES, Impact, Lit, StackDiff, Verdict, Why, lits
from .revision_env import changed_packages
from .revisions import app_command, revision_context, stack_templates, synth_revision, synthesize
from .security_diff import security_changes
from .template_paths import Path as PropPath
from .template_paths import changed_paths, references, show_path, template_shape

__all__ = [
    "COMMENT_LIMIT",
    "NODE_TYPES",
    "STATEFUL_TYPES",
    "DiffReport",
    "StackDiff",
    "app_command",
    "diff_templates",
    "revision_context",
    "run",
    "stack_templates",
    "synth_revision",
]

#: The keys of a resource beside its properties that CloudFormation compares (cdk diff's "other" changes).
OTHER_KEYS = (
    "Condition",
    "CreationPolicy",
    "DeletionPolicy",
    "DependsOn",
    "Metadata",
    "UpdatePolicy",
    "UpdateReplacePolicy",
)


def _few(paths: list[PropPath], shown: int = 2) -> Why:
    """The first changed paths, for a reason: ``A, B changed (and 3 more)``."""
    more = f" (and {len(paths) - shown} more)" if len(paths) > shown else ""
    return Why(lits(show_path(p) for p in paths[:shown]), f" changed{more}")


def _own(
    d: StackDiff, rid: str, before: Mapping[str, Any], after: Mapping[str, Any], region: str
) -> Verdict | None:
    """A resource's verdict from its own text: its type, its properties path by path, its other keys."""
    rtype = after["Type"]
    if before["Type"] != rtype:
        why = Why("its type changed: ", Lit(str(before["Type"])), " -> ", Lit(str(rtype)))
        return Verdict(Impact.REPLACE, why, "CloudFormation: a resource of another type is a new resource")
    paths = changed_paths(before.get("Properties") or {}, after.get("Properties") or {})
    others = [(k,) for k in OTHER_KEYS if not _same_other(k, before.get(k), after.get(k))]
    if paths or others:
        d.modified[rid] = [show_path(p) for p in [*paths, *others]]
    _refused_and_unguarded(d, rid, before, after, paths)
    verdict = _worst([change_rules.property_verdict(rtype, after, p, region) for p in paths], paths)
    if others and verdict is None:
        return Verdict(
            Impact.UPDATE, _few(list(others)), "CloudFormation: an update of the resource's attributes"
        )
    return verdict


def _refused_and_unguarded(
    d: StackDiff, rid: str, before: Mapping[str, Any], after: Mapping[str, Any], paths: list[PropPath]
) -> None:
    """What a resource's change asks that its provider refuses, and a guard its policies lower."""
    refused = [v for v in (change_rules.refusal(after["Type"], p) for p in paths) if v is not None]
    if refused:
        d.refused[rid] = str(refused[0].why)
    lowered = change_rules.guard_lowered(before, after)
    if lowered is not None and after["Type"] in STATEFUL_TYPES:
        d.unguarded[rid] = lowered


#: How a reason names several changed paths that each give a resource the same verdict.
EACH = {
    Impact.REPLACE: "each replaces it",
    Impact.MAY_REPLACE: "each may replace it",
    Impact.ROLL: "each replaces its nodes",
}


def _worst(found: list[Verdict], paths: list[PropPath]) -> Verdict | None:
    """The most severe of a resource's own path verdicts, naming every path that gives it (an update:
    the paths that changed)."""
    if not found:
        return None
    impact = max(v.impact for v in found)
    worst = [(v, p) for v, p in zip(found, paths, strict=True) if v.impact == impact]
    if len(worst) == 1:
        return worst[0][0]
    if impact == Impact.UPDATE:
        return Verdict(impact, _few(paths), worst[0][0].source)
    sources = "; ".join(dict.fromkeys(v.source for v, _ in worst))
    return Verdict(impact, Why(_few([p for _, p in worst], 4), ": ", EACH[impact]), sources)


def _same_other(key: str, a: Any, b: Any) -> bool:
    if key == "DependsOn":  # one name or a list, in any order (cdk diff sorts them)
        return sorted([a] if isinstance(a, str) else a or []) == sorted(
            [b] if isinstance(b, str) else b or []
        )
    return bool(a == b)


def _reading(
    target_verdict: Verdict | None, target_type: str, attribute: str | None
) -> tuple[str, str] | None:
    """Whether a value read from a changing resource changes at deploy: ``changes`` or ``may``, with the
    source; None when it stays (a Ref of an updated resource: its physical id; an attribute kept)."""
    if target_verdict is None or target_verdict.impact == Impact.NONE:
        return None
    if target_verdict.impact == Impact.REPLACE:
        return "changes", "CloudFormation: a replacement is a new resource, with a new id and attributes"
    if target_verdict.impact == Impact.MAY_REPLACE:
        return "may", target_verdict.source
    if attribute is None:
        return None
    how, source = change_rules.attribute_on_update(target_type, attribute)
    return None if how == "kept" else (how, source)


def _maybe(verdict: Verdict) -> Impact:
    """The impact of a change that may not happen: a replacement or a roll becomes a possible one."""
    return Impact.MAY_REPLACE if verdict.impact > Impact.MAY_REPLACE else verdict.impact


def _value_change(
    d: StackDiff, rid: str, target: str, attribute: str | None, changing: Mapping[str, Why]
) -> tuple[str, str, Why] | None:
    """What a value read from `target` does at deploy: (``changes`` or ``may``, the source, why the target
    changes), or None when it stays."""
    if target in changing:
        return "changes", "CloudFormation: a parameter's new value", changing[target]
    reading = _reading(d.verdicts.get(target), d.types.get(target, ""), attribute)
    if reading is None or target == rid:
        return None
    return reading[0], reading[1], d.verdicts[target].why


def _read_verdict(rule: Verdict, how: str, source: str, read: Why, what: Why) -> Verdict:
    """The verdict of a property that reads a changing value: the property's own rule for a change (a
    replacement only "may" be when the value only may change), with why."""
    impact = rule.impact if how == "changes" else _maybe(rule)
    kind = "create-only " if rule.why[:1] == ("create-only ",) else ""
    verb = "changes" if how == "changes" else "may change"
    why = Why(kind, read, f", which {verb}: ", what)
    if not kind and rule.impact > Impact.UPDATE and isinstance(rule.why[0], Lit):  # a policy's, a service's
        why = Why(why, "; so its ", *rule.why)
    return Verdict(impact, why, f"{rule.source}; {source}")


def _follow(
    d: StackDiff, rid: str, resource: Mapping[str, Any], changing: Mapping[str, Why], region: str
) -> bool:
    """A resource whose properties read a value that changes at deploy: the property's own verdict for
    that change (a create-only one replaces it). True when this made its verdict worse."""
    worst, read_from = d.verdicts.get(rid), ""
    for path, target, attribute in references(resource.get("Properties") or {}):
        change = _value_change(d, rid, target, attribute, changing)
        if change is None:
            continue
        rule = change_rules.property_verdict(resource["Type"], resource, path, region)
        read = Why(Lit(show_path(path)), " reads ", Lit(f"{target}.{attribute}" if attribute else target))
        found = _read_verdict(rule, change[0], change[1], read, change[2])
        if worst is None or found.impact > worst.impact:
            worst, read_from = found, target
    if worst is None or not read_from or (rid in d.verdicts and worst.impact <= d.verdicts[rid].impact):
        return False
    d.verdicts[rid] = worst
    d.modified.setdefault(rid, [f"(a value read from {read_from}, which changes)"])
    return True


def _parameters(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Why]:
    """Parameters whose definition (its default, its type) changed: what reads them changes at deploy."""
    a, b = old.get("Parameters") or {}, new.get("Parameters") or {}
    return {
        name: Why("the parameter ", Lit(name), " is defined anew")
        for name in set(a) & set(b)
        if (a[name].get("Default"), a[name].get("Type")) != (b[name].get("Default"), b[name].get("Type"))
    }


def diff_templates(
    old: Mapping[str, Any], new: Mapping[str, Any], region: str = "us-east-1", stack: str = "the stack"
) -> StackDiff:
    """Compare two templates of the same stack (with their nested stacks read in: revisions.flatten), by the
    registry schemas of `region`. A template that is not one CloudFormation could read is refused in one
    line (:class:`EfaConfigError`), never a traceback: the text of a template is data."""
    fix = "run cfn-lint on the synthesized template (cdk.out/<stack>.template.json): it names what is wrong"
    for template, which in ((old, "base"), (new, "head")):
        wrong = template_shape(template, which)
        if wrong:
            raise EfaConfigError(
                "template", code="efa-cdk:diff-template-malformed", value=stack, why=wrong, fix=fix
            )
    try:
        return _diff_templates(old, new, region)
    except (AttributeError, TypeError, KeyError, ValueError, IndexError) as err:
        raise EfaConfigError(
            "template",
            code="efa-cdk:diff-template-unreadable",
            value=stack,
            why="a resource's properties are not shaped as CloudFormation's resource schema has them, a "
            f"template CloudFormation would refuse ({type(err).__name__}: {str(err)[:120]})",
            fix=fix,
        ) from None


def _diff_templates(old: Mapping[str, Any], new: Mapping[str, Any], region: str) -> StackDiff:
    old_r: Mapping[str, Any] = old.get("Resources") or {}
    new_r: Mapping[str, Any] = new.get("Resources") or {}
    d = StackDiff(types={rid: r["Type"] for rid, r in {**old_r, **new_r}.items()})
    _added_and_removed(d, old_r, new_r)
    both = sorted(set(old_r) & set(new_r))
    for rid in both:
        own = _own(d, rid, old_r[rid], new_r[rid], region)
        if own is not None:
            d.verdicts[rid] = own
    changing = _parameters(old, new)
    while any([_follow(d, rid, new_r[rid], changing, region) for rid in both]):
        pass  # propagate through references until no verdict gets worse
    _views(d, both, new_r)
    d.causes = _causes(d, both, old_r, new_r)
    old_o, new_o = old.get("Outputs") or {}, new.get("Outputs") or {}
    d.outputs_changed = sorted(k for k in set(old_o) | set(new_o) if old_o.get(k) != new_o.get(k))
    d.security = security_changes(old, new)
    d.cluster = cluster_summary.compare(old, new, cluster_summary.node_groups)
    d.storage = cluster_summary.compare(old, new, cluster_summary.file_systems)
    return d


def _causes(d: StackDiff, both: list[str], old_r: Mapping[str, Any], new_r: Mapping[str, Any]) -> list[str]:
    """Root causes worth naming: a launch template whose node-scripts asset changed."""
    return [
        f"{rid}: the node scripts changed (their asset hash is in the user data: a new efa-cdk "
        "version, or a change under efa_constructs/node), so every node launched from it is replaced"
        for rid in both
        if rid in d.modified
        and d.types[rid] == "AWS::EC2::LaunchTemplate"
        and _scripts_assets(old_r[rid]) != _scripts_assets(new_r[rid])
    ]


def _added_and_removed(d: StackDiff, old_r: Mapping[str, Any], new_r: Mapping[str, Any]) -> None:
    """The resources of one template only: created, or deleted (or kept, under a retaining policy)."""
    for rid in sorted(set(new_r) - set(old_r)):
        d.added[rid] = new_r[rid]["Type"]
        d.verdicts[rid] = Verdict(Impact.CREATE, Why("added"), "the template")
    for rid in sorted(set(old_r) - set(new_r)):
        d.removed[rid] = old_r[rid]["Type"]
        d.verdicts[rid] = change_rules.removal(old_r[rid])
        if d.verdicts[rid].impact == Impact.ORPHAN:
            d.orphaned[rid] = str(d.verdicts[rid].why)


def _views(d: StackDiff, both: list[str], new_r: Mapping[str, Any]) -> None:
    """The dictionaries by logical id, read off the verdicts (a replacement's with what it keeps)."""
    views = {Impact.REPLACE: d.replaced, Impact.MAY_REPLACE: d.may_replace, Impact.ROLL: d.rolled}
    for rid in both:
        verdict = d.verdicts.get(rid)
        if verdict is None or verdict.impact not in views:
            continue
        kept = change_rules.replacement_keeps(new_r[rid]) if verdict.impact == Impact.REPLACE else None
        if kept:
            verdict = d.verdicts[rid] = Verdict(verdict.impact, Why(verdict.why, "; ", kept), verdict.source)
        views[verdict.impact][rid] = str(verdict.why)


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


#: The node-scripts asset in user data: a CDK asset is named by its content hash (64 hex digits).
_ASSET = re.compile(r"/([0-9a-f]{64})\.zip")


def _scripts_assets(resource: Mapping[str, Any]) -> set[str]:
    """Content hashes of the zip assets a resource's properties name (the node scripts)."""
    return set(_ASSET.findall(json.dumps(resource.get("Properties", {}))))


@dataclass
class DiffReport:
    """Every stack's :class:`StackDiff` between two revisions, as text or JSON (one result, two views)."""

    base: str
    head: str | None
    stacks: dict[str, StackDiff]
    #: (distribution, base version, head version) of each dependency that differs ('' where absent).
    dependencies: list[tuple[str, str, str]] = field(default_factory=list)
    #: Where each revision's environment came from (its dependency files), or how it ran.
    environments: tuple[str, str] = ("", "")

    @property
    def stateful_loss(self) -> bool:
        """True when any stateful resource is destroyed, replaced or rolled (or may be)."""
        return any(d.stateful_losses for d in self.stacks.values())

    @property
    def fails(self) -> bool:
        """True when the change loses state or cannot deploy (a provider refuses it)."""
        return self.stateful_loss or any(d.refused for d in self.stacks.values())

    def text(self) -> str:
        """Plain text for a terminal."""
        from .diff_render import report_text

        return report_text(self)

    def markdown(self, limit: int = COMMENT_LIMIT, *, in_bytes: bool = False) -> str:
        """One pull-request comment of at most `limit` characters (or bytes) (:mod:`.diff_render`)."""
        from .diff_render import markdown

        return markdown(self, limit, in_bytes=in_bytes)

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
            "fails": self.fails,
            "dependencies": [{"name": n, "base": b, "head": h} for n, b, h in self.dependencies],
            "environments": {"base": self.environments[0], "head": self.environments[1]},
            "widenings": [{"stack": stack, "reason": why} for stack, why in self.widenings],
            "stacks": {stack: _stack_json(d) for stack, d in self.stacks.items()},
        }


def _stack_json(d: StackDiff) -> dict[str, Any]:
    return {
        "added": d.added,
        "removed": d.removed,
        "modified": d.modified,
        "replaced": d.replaced,
        "may_replace": d.may_replace,
        "rolled": d.rolled,
        "orphaned": d.orphaned,
        "refused": d.refused,
        "unguarded": {rid: str(why) for rid, why in d.unguarded.items()},
        "stateful_losses": d.stateful_losses,
        "verdicts": {
            rid: {"impact": v.impact.name, "why": str(v.why), "source": v.source}
            for rid, v in sorted(d.verdicts.items())
        },
        "outputs_changed": d.outputs_changed,
        "causes": d.causes,
        "unread_nested_stacks": d.unread_nested,
        "security": d.security.to_json(),
        **{
            key: [{"name": n, "before": b, "after": a, "changed": b != a} for n, b, a in rows]
            for key, rows in (("cluster", d.cluster), ("storage", d.storage))
        },
        "findings": d.findings,
    }


def _commit(repo: Path, rev: str, flag: str) -> str:
    found = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        raise EfaConfigError(
            flag,
            code="efa-cdk:diff-revision-unknown",
            value=rev,
            why=f"not a commit of the git repository at {repo}",
            fix="name a branch, tag or commit that exists (git log --oneline; git tag)",
        )
    return found.stdout.strip()


def run(
    base: str,
    head: str | None,
    context: Mapping[str, str],
    repo: Path | None = None,
    app: str | None = None,
    findings: bool = True,
    requirements: list[str] | None = None,
    same_environment: bool = False,
) -> DiffReport:
    """Every stack's diff between `base` and `head` (None: the working tree), each revision synthesized
    with its own dependencies (`requirements`: the files that say them; default requirements.txt, else
    pyproject.toml; `same_environment`: the running Python for both); with `findings`, what the head's
    checks find that the base's did not, in each stack that changes."""
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
    base_commit = _commit(repo, base, "--base")
    head_commit = None if head is None else _commit(repo, head, "--head")
    options = {"app": app, "requirements": requirements, "same_environment": same_environment}
    with tempfile.TemporaryDirectory() as tmp:
        old = synthesize(repo, base, context, Path(tmp) / "base", **options)  # type: ignore[arg-type]
        same = head_commit == base_commit  # same commit: same templates
        new = old if same else synthesize(repo, head, context, Path(tmp) / "head", **options)  # type: ignore[arg-type]
        old_notes = _findings(Path(tmp) / "base")
        new_notes = old_notes if same else _findings(Path(tmp) / "head")
    stacks = {}
    for stack in sorted(set(old.templates) | set(new.templates)):
        d = diff_templates(old.flat.get(stack, {}), new.flat.get(stack, {}), stack=stack)
        d.unread_nested = sorted(
            set(old.unread_nested.get(stack, [])) | set(new.unread_nested.get(stack, []))
        )
        if findings and not d.empty and stack in new.templates:
            d.findings = new_findings(
                old.templates.get(stack, {}),
                new.templates[stack],
                old_notes.get(stack, set()),
                new_notes.get(stack, set()),
            )
        stacks[stack] = d
    environments = (old.environment.origin, new.environment.origin)
    return DiffReport(base, head, stacks, changed_packages(old.environment, new.environment), environments)
