"""The template diff for a terminal: one line per change, every value through :func:`.diff_words.plain`."""

from __future__ import annotations

from .diff_model import Report, StackDiff
from .diff_words import kind, lost, plain, verb, why_of


def render(stack: str, d: StackDiff) -> str:
    """Plain text for a terminal: one line per change."""
    if d.empty:
        return f"Stack {plain(stack)}: no changes"
    lines = [f"Stack {plain(stack)}:"]
    for rid in d.stateful_losses:
        lines.append(f"  !!! STATEFUL {verb(d, rid)}: {plain(rid)} ({plain(d.types[rid])}) - {lost(d, rid)}")
    lines += [f"  !!! DEPLOY FAILS: {plain(rid)}: {plain(why)}" for rid, why in sorted(d.refused.items())]
    lines += [f"  cause: {plain(c)}" for c in d.causes]
    lines += [f"  !!! WIDENS ACCESS: {plain(why)}" for why in d.security.widening_reasons()]
    lines += [
        f"  kept outside the stack: {plain(rid)} - {plain(why)}" for rid, why in sorted(d.orphaned.items())
    ]
    lines += [
        f"  !!! PROTECTION REMOVED: {plain(rid)}: {plain(why)}" for rid, why in sorted(d.unguarded.items())
    ]
    lines += [f"  nested stack not read: {plain(rid)}" for rid in d.unread_nested]
    return "\n".join([*lines, *_resource_lines(d), *_security_lines(d), *_cluster_lines(d)])


def report_text(report: Report) -> str:
    """The whole report for a terminal."""
    lines = [f"Template diff {plain(report.base)} -> {plain(report.head or 'working tree')}"]
    lines += [
        f"dependencies differ: {plain(n)} {plain(b or '(none)')} -> {plain(h or '(none)')}"
        for n, b, h in report.dependencies
    ]
    return "\n".join([*lines, *(render(stack, d) for stack, d in report.stacks.items())])


def _resource_lines(d: StackDiff) -> list[str]:
    lines = [f"  + {plain(rid)} ({plain(typ)})" for rid, typ in d.added.items()]
    lines += [f"  - {plain(rid)} ({plain(typ)})" for rid, typ in d.removed.items()]
    lines += [
        f"  ! REPLACE {plain(rid)} ({plain(d.types[rid])}): {plain(why_of(d, rid))}"
        for rid in sorted(d.replaced)
    ]
    lines += [
        f"  ? MAY REPLACE {plain(rid)} ({plain(d.types[rid])}): {plain(why_of(d, rid))}"
        for rid in sorted(d.may_replace)
    ]
    lines += [
        f"  ! NODES REPLACED {plain(rid)} ({plain(d.types[rid])}): {plain(why_of(d, rid))}"
        for rid in sorted(d.rolled)
    ]
    lines += [
        f"  ~ {plain(rid)} ({plain(d.types[rid])}): {plain(', '.join(paths[:6]))}"
        + (" ..." if len(paths) > 6 else "")
        for rid, paths in d.modified.items()
        if not kind(d, rid)
    ]
    return lines + (
        [f"  outputs changed: {plain(', '.join(d.outputs_changed))}"] if d.outputs_changed else []
    )


def _security_lines(d: StackDiff) -> list[str]:
    c = d.security
    if c.empty:
        return []
    rows = c.to_json()
    lines = [f"  iam {sign} {plain(_statement(s))}" for sign in "+-" for s in rows["statements"][side(sign)]]
    lines += [
        f"  attach {sign} {plain(a['policy'])} on {plain(a['where'])}"
        for sign in "+-"
        for a in rows["attachments"][side(sign)]
    ]
    return lines + [f"  sg {sign} {plain(_rule(r))}" for sign in "+-" for r in rows["rules"][side(sign)]]


def side(sign: str) -> str:
    """The JSON list a sign reads: + added, - removed."""
    return "added" if sign == "+" else "removed"


def _cluster_lines(d: StackDiff) -> list[str]:
    lines = [
        f"  {kind} {plain(name)}: {plain(before or '(none)')} -> {plain(after or '(none)')}"
        if before != after
        else f"  {kind} {plain(name)}: {plain(after)} (unchanged)"
        for kind, rows in (("cluster", d.cluster), ("storage", d.storage))
        for name, before, after in rows
    ]
    return lines + [f"  new finding: {plain(f)}" for f in d.findings]


def _statement(row: dict[str, str]) -> str:
    principal = f" to {row['principal']}" if row["principal"] else ""
    condition = f" if {row['condition']}" if row["condition"] else ""
    on = row["resources"] or "(this resource)"
    return f"{row['effect']} {row['actions']} on {on}{principal}{condition} ({row['where']})"


def _rule(row: dict[str, str]) -> str:
    towards = "from" if row["direction"] == "ingress" else "to"
    return f"{row['direction']} {row['protocol']} {row['ports']} {towards} {row['peer']} on {row['group']}"
