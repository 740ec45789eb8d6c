"""The template diff as a pull-request comment (Markdown, as GitHub renders it).

One comment: a headline (the counts first; what is lost, each with its cause and the property that changed;
what cannot deploy; what widens access, the most dangerous first; what leaves the stack; which dependencies
differ; or the good news that none of that happens), then one folded section per stack that changes. Every
template string goes through :func:`.diff_words.literal`. The headline has its budget: each kind is
counted in all and shown up to :data:`HEADLINE_LINES` lines, each line capped, so it is never cut. The
sections fold to fit a GitHub comment (:data:`COMMENT_LIMIT` characters) or a job summary (bytes): the longest
tables of the least urgent kind lose rows first, each table saying how many, then whole sections go, named; a
last cut, at a line, says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .diff_model import COMMENT_LIMIT, Lit, Report, StackDiff, Why
from .diff_text import render, report_text, side
from .diff_words import kind, literal, lost, say, verb, visible, why_of
from .post_comment import MARKER

__all__ = ["HEADLINE_LINE", "MARKER", "literal", "markdown", "render", "report_text", "visible"]

#: How many lines of each kind the headline shows (the rest are counted), how much template text a
#: headline line shows of each value, and how long a headline line may be.
HEADLINE_LINES = 12
HEADLINE_VALUE = 120
HEADLINE_LINE = 700


# ---- Markdown --------------------------------------------------------------------------------------


def code(text: str) -> str:
    """Template text in a table cell (:func:`literal`)."""
    return literal(text, cell=True)


@dataclass
class Table:
    """A titled Markdown table (or list, with no header) whose rows may be folded to fit."""

    title: str
    header: list[str]
    rows: list[str]
    urgency: int  # the lower, the sooner folded: resources 0, findings 1, figures 2, security 3, losses 4
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


def _summary(stack: str, d: StackDiff) -> str:
    """A stack's line in its ``<summary>``: its counts, the losses, refusals and widenings in bold."""
    kinds = ("replaced", "may_replace", "rolled", "added", "removed")
    counts = [f"{len(getattr(d, k))} {k.replace('_', ' ')}" for k in kinds if getattr(d, k)]
    counts.append(f"{len([r for r in d.modified if not kind(d, r)])} modified")
    bold = [
        (len(d.stateful_losses), "stateful lost"),
        (len(d.refused), "refused"),
        (len(d.security.widening_reasons()), "widening access"),
    ]
    return f"{literal(stack, in_html=True)}: {', '.join(counts)}" + "".join(
        f", <b>{n} {what}</b>" for n, what in bold if n
    )


def _listing(title: str, mark: str, items: Iterable[tuple[str, Why | str]], urgency: int) -> Table:
    """A list of findings, each a logical id (or none) and its reason."""
    return Table(
        title, [], [f"- {mark}{code(r) + ': ' if r else ''}{say(w, cell=True)}" for r, w in items], urgency
    )


def _section(stack: str, d: StackDiff) -> Section:
    tables = [
        _loss_table(d),
        _listing("The deploy fails", "⛔ ", sorted(d.refused.items()), 4),
        _listing(
            "Widens access", "⚠️ ", (("", w) for w in _dangerous_first(d.security.widening_reasons())), 4
        ),
        _listing("Protection removed", "⚠️ ", sorted(d.unguarded.items()), 4),
        _listing("Kept outside the stack", "📦 ", sorted(d.orphaned.items()), 3),
        *_security_tables(d),
        _figures("Nodes", d.cluster),
        _figures("Storage", d.storage),
        Table("New findings (cfn-lint, synth)", [], [f"- {code(f)}" for f in d.findings], 1),
        Table("Causes", [], [f"- {code(c)}" for c in d.causes], 4),
        Table(
            "Nested stacks not read (their resources are not shown)",
            [],
            [f"- {code(r)}" for r in d.unread_nested],
            4,
        ),
        Table("Resources", ["", "logical id", "type", "change", "source"], list(_resource_rows(d)), 0),
        Table("Outputs changed", [], [f"- {code(o)}" for o in d.outputs_changed], 0),
    ]
    return Section(stack, _summary(stack, d), tables)


def _figures(title: str, rows: list[tuple[str, str, str]]) -> Table:
    def after(before: str, now: str) -> str:
        return "same" if before == now else f"**{code(now) or '(none)'}**"

    lines = [f"| {code(n)} | {code(b) or '(none)'} | {after(b, a)} |" for n, b, a in rows]
    return Table(title, ["", "before", "after"], lines, 2)


def _loss_table(d: StackDiff) -> Table:
    """The stateful losses, one row per kind of loss: 64 nodes replaced for one cause are one row."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for rid in d.stateful_losses:
        verdict = d.verdicts.get(rid)
        key = (d.types[rid], str(why_of(d, rid)), verdict.source if verdict else "")
        groups.setdefault(key, []).append(rid)
    rows = [
        f"| {len(ids)} | {code(kind)} | {verb(d, ids[0]).lower()}: {lost(d, ids[0])} "
        f"| {say(why_of(d, ids[0]), cell=True)} "
        f"| {code(source)} | {', '.join(code(r) for r in ids)} |"
        for (kind, _, source), ids in groups.items()
    ]
    return Table("Stateful losses", ["", "type", "lost", "why", "source", "resources"], rows, 4)


def _security_tables(d: StackDiff) -> list[Table]:
    """The IAM statements, attachments and security-group rules added (+) and removed (-), as cdk diff
    tables them."""
    if d.security.empty:
        return []
    rows = d.security.to_json()
    statements = [
        f"| {sign} | {code(s['where'])} | {code(s['effect'])} | {code(s['actions'])} "
        f"| {code(s['resources'])} "
        f"| {code(s['principal'])} | {code(s['condition'])} |"
        for sign in "+-"
        for s in rows["statements"][side(sign)]
    ]
    attached = [
        f"| {sign} | {code(a['where'])} | {code(a['policy'])} |"
        for sign in "+-"
        for a in rows["attachments"][side(sign)]
    ]
    rules = [
        f"| {sign} | {code(r['group'])} | {r['direction']} | {code(r['protocol'])} | {code(r['ports'])} "
        f"| {code(r['peer'])} | {code(r['description'])} |"
        for sign in "+-"
        for r in rows["rules"][side(sign)]
    ]
    return [
        Table(
            "IAM statement changes",
            ["", "where", "effect", "actions", "resources", "principal", "condition"],
            statements,
            3,
        ),
        Table("Managed policies attached and detached", ["", "where", "policy"], attached, 3),
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
    marks = {"replaced": "⟳", "may_replace": "⟳?", "rolled": "⟳ nodes", "removed": "-"}
    for rid in sorted(d.verdicts):
        how = kind(d, rid)
        if rid in losses or (rid not in d.modified and not how and rid not in d.added):
            continue
        verdict = d.verdicts[rid]
        mark = "+" if rid in d.added else marks.get(how, "~")
        change = (
            say(why_of(d, rid), cell=True)
            if how or rid in d.added
            else say(_paths(d.modified[rid]), cell=True)
        )
        yield f"| {mark} | {code(rid)} | {code(d.types[rid])} | {change} | {code(verdict.source)} |"


def _paths(paths: list[str]) -> Why:
    more = f" (+{len(paths) - 4} more)" if len(paths) > 4 else ""
    return Why(*[x for i, p in enumerate(paths[:4]) for x in ([", ", Lit(p)] if i else [Lit(p)])], more)


#: The order of widenings, most dangerous first, by our own words in each reason (never by template text).
DANGER = (
    "the world",
    "outside the account",
    "managed policy attached",
    "a wildcard action",
    "every resource",
    "a /",
    "a wildcard resource",
    "a Deny removed",
    "a condition removed",
)


def _ours(why: Why) -> str:
    return "".join(p for p in why if not isinstance(p, Lit))


def _rank(why: Why) -> int:
    """The place of a widening in :data:`DANGER` (unranked ones last)."""
    words = _ours(why)
    return next((i for i, danger in enumerate(DANGER) if danger in words), len(DANGER))


def _dangerous_first(whys: list[Why]) -> list[Why]:
    return sorted(whys, key=_rank)


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


@dataclass
class _Findings:
    """What the headline says of a report: each kind gathered over its stacks, then written as its lines."""

    report: Report
    cap: int = HEADLINE_VALUE
    #: what a line's reason may take beside the two names it also shows
    room: int = HEADLINE_LINE - 2 * HEADLINE_VALUE - 60

    def __post_init__(self) -> None:
        stacks = self.report.stacks
        self.changed = [s for s, d in stacks.items() if not d.empty]
        self.losses = [(s, d) for s, d in stacks.items() if d.stateful_losses]
        self.widenings = [(s, w) for s, d in stacks.items() for w in d.security.widening_reasons()]
        self.refused = [(s, r, w) for s, d in stacks.items() for r, w in sorted(d.refused.items())]
        self.lost = sum(len(d.stateful_losses) for _, d in self.losses)

    def counts(self) -> str:
        """The first line under the title: every kind counted in all, and the stacks that change."""
        counts = [
            _plural(self.lost, "stateful resource lost", "stateful resources lost"),
            *([_plural(len(self.refused), "change refused", "changes refused")] if self.refused else []),
            _plural(len(self.widenings), "widening of access", "widenings of access"),
        ]
        names = ", ".join(literal(s, cap=self.cap) for s in self.changed[:HEADLINE_LINES])
        more = f" and {len(self.changed) - HEADLINE_LINES} more" if len(self.changed) > HEADLINE_LINES else ""
        where = f": {names}{more}." if self.changed else "."
        stacks = f"{len(self.changed)} of {len(self.report.stacks)} stacks that change"
        return f"**{', '.join(counts)}** in {stacks}{where}"

    def lost_lines(self) -> list[str]:
        lines = [line for stack, d in self.losses[:HEADLINE_LINES] for line in _loss_lines(stack, d)]
        if len(self.losses) > HEADLINE_LINES:
            lines.append(
                f"- 🛑 and {len(self.losses) - HEADLINE_LINES} more stacks with losses "
                "(in their sections below)"
            )
        return lines

    def refused_lines(self) -> list[str]:
        return [
            f"- ⛔ **the deploy fails in {literal(s, cap=self.cap)}**: {literal(r, cap=self.cap)}: "
            f"{say(w, cap=self.cap, budget=self.room)}"
            for s, r, w in self.refused[:HEADLINE_LINES]
        ]

    def widening_lines(self) -> list[str]:
        shown = sorted(self.widenings, key=lambda sw: _rank(sw[1]))[:HEADLINE_LINES]
        lines = [
            f"- ⚠️ **widens access** in {literal(s, cap=self.cap)}: {say(w, cap=self.cap, budget=self.room)}"
            for s, w in shown
        ]
        if len(self.widenings) > len(shown):
            lines.append(
                f"- ⚠️ {len(self.widenings)} widenings in all, {len(shown)} shown: "
                "the rest in the stacks below"
            )
        return lines

    def stack_lines(self, stack: str, d: StackDiff) -> list[str]:
        """A stack's guards lowered, resources kept outside it, nested stacks not read."""
        name = literal(stack, cap=self.cap)
        lines = [
            f"- ⚠️ **protection removed** in {name}: {literal(r, cap=self.cap)}: "
            f"{say(w, cap=self.cap, budget=self.room)}"
            for r, w in sorted(d.unguarded.items())[:HEADLINE_LINES]
        ]
        orphans = d.stateful_orphans
        if orphans:
            kept = ", ".join(literal(r, cap=self.cap) for r in orphans[:3])
            more = f" and {len(orphans) - 3} more" if len(orphans) > 3 else ""
            lines.append(
                f"- 📦 **kept outside the stack** in {name}: {kept}{more} (their DeletionPolicy keeps "
                "them in the account: delete them by hand, or import them back)"
            )
        if d.unread_nested:
            lines.append(
                f"- ⚠️ {len(d.unread_nested)} nested stacks of {name} not read: their changes are not shown"
            )
        return lines

    def good_news(self) -> list[str]:
        good = (
            ["no node, file system or other stateful resource is replaced or deleted"]
            if not self.lost
            else []
        )
        good += ["nothing widens access"] if not self.widenings else []
        return [f"- ✅ {'; '.join(good).capitalize()}."] if good else []


def _headline(report: Report) -> list[str]:
    """The headline: counts first (so that even a cut comment keeps them), then each kind of finding, up
    to :data:`HEADLINE_LINES` lines, each value capped at :data:`HEADLINE_VALUE` characters."""
    found = _Findings(report)
    head = report.head or "the working tree"
    title = (
        f"### efa-cdk template diff: {literal(report.base, cap=found.cap)} → {literal(head, cap=found.cap)}"
    )
    lines = [MARKER, title, "", found.counts(), *_dependency_lines(report)]
    if not found.changed:
        return [*lines, "", f"No stack changes ({len(report.stacks)} compared)."]
    body = [*found.lost_lines(), *found.refused_lines(), *found.widening_lines()]
    body += [line for stack, d in report.stacks.items() for line in found.stack_lines(stack, d)]
    return [*lines, *body, *found.good_news(), ""]


def _dependency_lines(report: Report) -> list[str]:
    base_env, head_env = report.environments
    if report.dependencies:
        shown = [
            f"{literal(n, cap=60)} {literal(b, cap=40) or '(none)'} → {literal(h, cap=40) or '(none)'}"
            for n, b, h in report.dependencies[:HEADLINE_LINES]
        ]
        more = (
            f" and {len(report.dependencies) - HEADLINE_LINES} more"
            if len(report.dependencies) > HEADLINE_LINES
            else ""
        )
        return [
            "**Dependencies differ** (each revision synthesized with its own, from "
            f"{literal(base_env, cap=80)} and "
            f"{literal(head_env, cap=80)}): {', '.join(shown)}{more}. What they change is below."
        ]
    if base_env:
        return [f"Both revisions synthesized with the same dependencies ({literal(head_env, cap=80)})."]
    return []


def _loss_lines(stack: str, d: StackDiff) -> list[str]:
    """A stack's stateful losses in the headline: how many, of which types, the first names, each cause."""
    cap = HEADLINE_VALUE
    losses = d.stateful_losses
    kinds = sorted({d.types[r] for r in losses})
    shown_kinds = ", ".join(literal(k, cap=60) for k in kinds[:3]) + (
        f" and {len(kinds) - 3} more" if len(kinds) > 3 else ""
    )
    names = ", ".join(literal(r, cap=cap) for r in losses[:3]) + (
        f" and {len(losses) - 3} more" if len(losses) > 3 else ""
    )
    plural = "s" if len(losses) > 1 else ""
    reasons: dict[str, Why] = {}
    for rid in losses:
        reasons.setdefault(str(why_of(d, rid)), Why(f"{verb(d, rid).lower()}: ", why_of(d, rid)))
    why = [f"  - cause: {literal(c, cap=cap)}" for c in d.causes]
    why += [f"  - {say(w, cap=cap, budget=HEADLINE_LINE - 10)}" for w in list(reasons.values())[:3]]
    if len(reasons) > 3:
        why.append(f"  - and {len(reasons) - 3} more reasons (in the section below)")
    head = (
        f"- 🛑 **{len(losses)} stateful resource{plural} lost in {literal(stack, cap=cap)}** "
        f"({shown_kinds}): {names}"
    )
    return [head, *why]


def markdown(report: Report, limit: int = COMMENT_LIMIT, *, in_bytes: bool = False) -> str:
    """The comment: headline, then each changed stack's details, folded to at most `limit` characters
    (or bytes, for a job summary)."""
    size: Callable[[str], int] = (lambda t: len(t.encode())) if in_bytes else len
    unit = "bytes" if in_bytes else "characters"
    head = "\n".join(_headline(report))
    sections = [_section(s, d) for s, d in report.stacks.items() if not d.empty]
    head_flag = f" --head {report.head}" if report.head else ""
    rerun = literal(f"efa-cdk template-diff --base {report.base}{head_flag}", cap=2 * HEADLINE_VALUE)

    def whole(note: str = "") -> str:
        return "\n".join([head, *(s.text() for s in sections), note]).rstrip() + "\n"

    folded = _fold([t for s in sections for t in s.tables], lambda: size(whole()), limit)
    note = f"\n_Folded to fit ({limit:,} {unit}): {rerun} shows all of it._" if folded else ""
    text = whole(note)
    while size(text) > limit and sections:  # still too long: whole stacks go, named
        gone = sections.pop()
        note += f"\n_{literal(gone.stack, cap=HEADLINE_VALUE)}'s details left out: {rerun} shows them._"
        text = whole(note)
    if size(text) <= limit:
        return text
    return _cut(text, limit, size, f"\n\n_…cut at {limit:,} {unit}: {rerun}._\n")


def _fold(tables: list[Table], size: Callable[[], int], limit: int) -> bool:
    """Fold the longest tables of the least urgent kind until the whole fits (or nothing is left to fold);
    whether any was folded."""
    while size() > limit:
        foldable = [t for t in tables if t.rows]
        if not foldable:
            break
        min(foldable, key=lambda t: (t.urgency, -len("\n".join(t.rows)))).fold()
    return any(t.folded for t in tables)


def _cut(text: str, limit: int, size: Callable[[str], int], note: str) -> str:
    """The text cut at a line so that it and `note` fit in `limit`; an open ``<details>`` closed first."""
    closing = "\n</details>"
    budget = limit - size(note) - size(closing)
    kept: list[str] = []
    used = 0
    for line in text.splitlines():
        used += size(line) + 1
        if used > budget:
            break
        kept.append(line)
    body = "\n".join(kept)
    return body + (closing if body.count("<details>") > body.count("</details>") else "") + note
