"""The template diff as a reader sees it: plain text for a terminal, and Markdown for a pull request.

The Markdown is one comment: a headline (what changes; stateful losses first, each with its cause;
then what widens access), then one folded section per stack that changes (its losses, its security
changes as ``cdk diff``'s tables show them, the cluster's figures before and after, what the checks
find that the base did not, and its resources). It fits a GitHub comment (:data:`COMMENT_LIMIT`):
when it would not, the longest tables of the least urgent kind lose rows first, each table saying how
many, and the comment says how to see it all. The losses and the widenings are folded last.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .template_diff import COMMENT_LIMIT, NODE_TYPES, StackDiff

if TYPE_CHECKING:
    from .template_diff import DiffReport

#: The hidden line a workflow finds its own comment by, to update it instead of adding one per push.
MARKER = "<!-- efa-cdk template-diff -->"


def lost(d: StackDiff, rid: str) -> str:
    """What the deletion or replacement of a stateful resource loses."""
    if d.types[rid] in NODE_TYPES:
        return "their root volumes and instance stores are lost"
    if d.types[rid] == "AWS::PCS::Cluster":
        return "Slurm's queued and running jobs are lost"
    return "data or addresses are lost"


def render(stack: str, d: StackDiff) -> str:
    """Plain text for a terminal: one line per change."""
    if d.empty:
        return f"Stack {stack}: no changes"
    lines = [f"Stack {stack}:"]
    for rid in d.stateful_losses:
        verb = "DELETED" if rid in d.removed else "REPLACED"
        lines.append(f"  !!! STATEFUL {verb}: {rid} ({d.types[rid]}) - {lost(d, rid)}")
    lines += [f"  cause: {c}" for c in d.causes]
    lines += [f"  !!! WIDENS ACCESS: {why}" for why in d.security.widenings()]
    return "\n".join([*lines, *_resource_lines(d), *_security_lines(d), *_cluster_lines(d)])


def _resource_lines(d: StackDiff) -> list[str]:
    lines = [f"  + {rid} ({typ})" for rid, typ in d.added.items()]
    lines += [f"  - {rid} ({typ})" for rid, typ in d.removed.items()]
    lines += [f"  ! REPLACE {rid} ({d.types[rid]}): {why}" for rid, why in sorted(d.replaced.items())]
    lines += [
        f"  ~ {rid} ({d.types[rid]}): {', '.join(paths[:6])}{' ...' if len(paths) > 6 else ''}"
        for rid, paths in d.modified.items()
        if rid not in d.replaced
    ]
    return lines + ([f"  outputs changed: {', '.join(d.outputs_changed)}"] if d.outputs_changed else [])


def _security_lines(d: StackDiff) -> list[str]:
    c = d.security
    lines = [
        f"  iam {sign} {_statement(s.row())}"
        for sign, items in _signed(c.added_statements, c.removed_statements)
        for s in items
    ]
    return lines + [
        f"  sg {sign} {_rule(r.row())}"
        for sign, rules in _signed(c.added_rules, c.removed_rules)
        for r in rules
    ]


def _signed(added: list[Any], removed: list[Any]) -> tuple[tuple[str, list[Any]], ...]:
    return ("+", added), ("-", removed)


def _cluster_lines(d: StackDiff) -> list[str]:
    lines = [
        f"  cluster {name}: {before or '(none)'} -> {after or '(none)'}"
        if before != after
        else f"  cluster {name}: {after} (unchanged)"
        for name, before, after in d.cluster
    ]
    return lines + [f"  new finding: {f}" for f in d.findings]


def _statement(row: dict[str, str]) -> str:
    principal = f" to {row['principal']}" if row["principal"] else ""
    condition = f" if {row['condition']}" if row["condition"] else ""
    on = row["resources"] or "(this resource)"
    return f"{row['effect']} {row['actions']} on {on}{principal}{condition} ({row['where']})"


def _rule(row: dict[str, str]) -> str:
    towards = "from" if row["direction"] == "ingress" else "to"
    return f"{row['direction']} {row['protocol']} {row['ports']} {towards} {row['peer']} on {row['group']}"


def _after(before: str, after: str) -> str:
    """The after column of the cluster table: the new figures in bold, or 'same'."""
    return "same" if before == after else f"**{cell(after) or '(none)'}**"


def cell(text: str) -> str:
    """Text in a Markdown table cell: pipes escaped, on one line."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def code(text: str) -> str:
    """Text as inline code in a cell (a backtick inside becomes a quote)."""
    return f"`{cell(text).replace('`', chr(39))}`" if text else ""


@dataclass
class Table:
    """A titled Markdown table (or list, with no header) whose rows may be folded to fit."""

    title: str
    header: list[str]
    rows: list[str]
    urgency: int  # the lower, the sooner folded: resources 0, findings 1, cluster 2, security 3, losses 4
    folded: int = 0

    def text(self) -> str:
        """The table, and a line saying how many rows were folded."""
        if not self.rows and not self.folded:
            return ""
        out = [f"**{self.title}**", ""]
        if self.header and self.rows:
            out += ["| " + " | ".join(self.header) + " |", "|" + " --- |" * len(self.header)]
        out += self.rows
        if self.folded:  # after a blank line: a line under a table is one more row of it (GFM)
            out += ["", f"_… {self.folded} {'more ' if self.rows else ''}folded to fit the comment_"]
        return "\n".join(out) + "\n"

    def fold(self) -> None:
        """Drop the second half of the rows (at least one)."""
        keep = len(self.rows) // 2
        self.folded += len(self.rows) - keep
        self.rows = self.rows[:keep]


@dataclass
class Section:
    """One stack's folded details."""

    stack: str
    summary: str
    tables: list[Table] = field(default_factory=list)

    def text(self) -> str:
        """The stack's ``<details>`` block."""
        body = "\n".join(text for text in (t.text() for t in self.tables) if text)
        return f"<details><summary>{self.summary}</summary>\n\n{body}\n</details>\n"


def _section(stack: str, d: StackDiff) -> Section:
    losses, widenings = d.stateful_losses, d.security.widenings()
    counts = [f"{len(getattr(d, k))} {k}" for k in ("replaced", "added", "removed") if getattr(d, k)]
    counts.append(f"{len([r for r in d.modified if r not in d.replaced])} modified")
    summary = f"<b>{stack}</b>: {', '.join(counts)}"
    summary += f", <b>{len(losses)} stateful lost</b>" if losses else ""
    summary += f", <b>{len(widenings)} widening access</b>" if widenings else ""
    tables = [
        _loss_table(d),
        Table("Widens access", [], [f"- ⚠️ {cell(w)}" for w in widenings], 4),
        *_security_tables(d),
        Table(
            "Cluster",
            ["", "before", "after"],
            [f"| {code(n)} | {cell(b) or '(none)'} | {_after(b, a)} |" for n, b, a in d.cluster],
            2,
        ),
        Table("New findings (cfn-lint, synth)", [], [f"- {cell(f)}" for f in d.findings], 1),
        Table("Causes", [], [f"- {cell(c)}" for c in d.causes], 4),
        Table("Resources", ["", "logical id", "type", "change"], list(_resource_rows(d)), 0),
        Table("Outputs changed", [], [f"- {code(o)}" for o in d.outputs_changed], 0),
    ]
    return Section(stack, summary, tables)


def _loss_table(d: StackDiff) -> Table:
    """The stateful losses, one row per kind of loss: 64 nodes replaced for one cause are one row."""
    groups: dict[tuple[str, str], list[str]] = {}
    for rid in d.stateful_losses:
        groups.setdefault((d.types[rid], d.replaced.get(rid, "deleted")), []).append(rid)
    rows = [
        f"| {len(ids)} | {code(kind)} | {cell(lost(d, ids[0]))} | {cell(why)} "
        f"| {', '.join(code(r) for r in ids)} |"
        for (kind, why), ids in groups.items()
    ]
    return Table("Stateful losses", ["", "type", "lost", "why", "resources"], rows, 4)


def _security_tables(d: StackDiff) -> list[Table]:
    """The IAM statements and security-group rules added (+) and removed (-), as cdk diff tables them."""
    c = d.security
    statements = [
        f"| {sign} | {code(s.where)} | {s.effect} | {code(', '.join(s.actions))} "
        f"| {code(', '.join(s.resources))} | {code(s.principal)} | {code(s.condition)} |"
        for sign, items in _signed(c.added_statements, c.removed_statements)
        for s in items
    ]
    rules = [
        f"| {sign} | {code(r.group)} | {r.direction} | {r.protocol} | {r.ports} | {code(r.peer)} "
        f"| {cell(r.description)} |"
        for sign, items in _signed(c.added_rules, c.removed_rules)
        for r in items
    ]
    return [
        Table(
            "IAM statement changes",
            ["", "where", "effect", "actions", "resources", "principal", "condition"],
            statements,
            3,
        ),
        Table(
            "Security group changes",
            ["", "group", "direction", "protocol", "ports", "peer", "description"],
            rules,
            3,
        ),
    ]


def _resource_rows(d: StackDiff) -> Iterable[str]:
    """Every resource that changes, but the stateful losses (their own table, above)."""
    losses = set(d.stateful_losses)
    for rid, why in sorted(d.replaced.items()):
        if rid not in losses:
            yield f"| ⟳ | {code(rid)} | {code(d.types[rid])} | replaced: {cell(why)} |"
    for rid, typ in d.added.items():
        yield f"| + | {code(rid)} | {code(typ)} | added |"
    for rid, typ in d.removed.items():
        if rid not in losses:
            yield f"| - | {code(rid)} | {code(typ)} | removed |"
    for rid, paths in d.modified.items():
        if rid not in d.replaced:
            more = f" (+{len(paths) - 4} more)" if len(paths) > 4 else ""
            yield f"| ~ | {code(rid)} | {code(d.types[rid])} | {cell(', '.join(paths[:4]))}{more} |"


def _headline(report: DiffReport) -> list[str]:
    changed = [s for s, d in report.stacks.items() if not d.empty]
    head = report.head or "the working tree"
    lines = [MARKER, f"### efa-cdk template diff: `{report.base}` → `{head}`", ""]
    if not changed:
        return [*lines, f"No stack changes ({len(report.stacks)} compared)."]
    lines.append(
        f"{len(changed)} of {len(report.stacks)} stacks change: {', '.join(f'`{s}`' for s in changed)}."
    )
    for stack, d in report.stacks.items():
        lines += _loss_lines(stack, d)
    widening = report.widenings
    lines += [f"- ⚠️ **widens access** in `{stack}`: {cell(why)}" for stack, why in widening[:20]]
    if len(widening) > 20:
        lines.append(f"- ⚠️ and {len(widening) - 20} more widenings (in the stacks below)")
    return [*lines, ""]


def _loss_lines(stack: str, d: StackDiff) -> list[str]:
    """A stack's stateful losses in the headline: how many, of which types, the first names, the cause."""
    losses = d.stateful_losses
    if not losses:
        return []
    kinds = ", ".join(f"`{k}`" for k in sorted({d.types[r] for r in losses}))
    names = ", ".join(f"`{r}`" for r in losses[:8]) + (
        f" and {len(losses) - 8} more" if len(losses) > 8 else ""
    )
    plural = "s" if len(losses) > 1 else ""
    reasons = sorted({d.replaced.get(r, "deleted") for r in losses})
    why = [f"  - cause: {cell(c)}" for c in d.causes] or [f"  - why: {cell(w)}" for w in reasons[:3]]
    return [f"- 🛑 **{len(losses)} stateful resource{plural} lost in `{stack}`** ({kinds}): {names}", *why]


def markdown(report: DiffReport, limit: int = COMMENT_LIMIT) -> str:
    """The comment: headline, then each changed stack's details, folded to at most `limit` characters."""
    head = "\n".join(_headline(report))
    sections = [_section(s, d) for s, d in report.stacks.items() if not d.empty]
    rerun = f"`efa-cdk template-diff --base {report.base}{f' --head {report.head}' if report.head else ''}`"

    def whole(note: str = "") -> str:
        return "\n".join([head, *(s.text() for s in sections), note]).rstrip() + "\n"

    tables = [t for s in sections for t in s.tables]
    while len(whole()) > limit:
        foldable = [t for t in tables if t.rows]
        if not foldable:
            break
        min(foldable, key=lambda t: (t.urgency, -len("\n".join(t.rows)))).fold()
    note = (
        f"\n_Folded to fit a comment ({limit:,} characters): {rerun} shows all of it._"
        if any(t.folded for t in tables)
        else ""
    )
    text = whole(note)
    while len(text) > limit and sections:  # still too long: whole stacks go, named
        gone = sections.pop()
        note += f"\n_`{gone.stack}`'s details left out: {rerun} shows them._"
        text = whole(note)
    return (
        text if len(text) <= limit else text[: limit - 80] + f"\n\n_…cut at {limit:,} characters: {rerun}._\n"
    )
