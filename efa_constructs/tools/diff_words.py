"""The words of the template diff: every string that comes from a template (or an app, or its dependencies)
reaches a page through one function, :func:`literal`: control and bidirectional characters made visible,
then a code span (or, inside HTML, an escaped ``<code>`` element), so that no logical id, description or
policy can add a link, an image, a mention, a new block, or hide what follows. Our own words are
:class:`.diff_model.Why`'s plain parts (:func:`say`); a terminal gets :func:`plain`.
"""

from __future__ import annotations

import html
import re
import unicodedata

from .change_rules import PROVIDERS
from .diff_model import NODE_TYPES, Lit, StackDiff, Why

#: Characters that change how text around them is read or shown: controls (C0, C1, DEL), the
#: bidirectional embeddings, overrides and isolates, zero-width and line/paragraph separators.
_HIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def visible(text: str) -> str:
    """`text` with every hidden or control character written as its code (``\\u202e``, ``\\n``)."""

    def code(found: re.Match[str]) -> str:
        char = found.group(0)
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, f"\\u{ord(char):04x}")

    return _HIDDEN.sub(code, unicodedata.normalize("NFC", text))


def literal(text: str, *, cell: bool = False, in_html: bool = False, cap: int = 0) -> str:
    """Template text as data on the page: made :func:`visible`, cut to `cap` characters (with an
    ellipsis after it, outside), then a code span whose fence is longer than any run of backticks in it
    (in a table cell its pipes escaped, which GFM reads before the span); inside HTML, an escaped
    ``<code>`` element. Empty text is nothing."""
    shown = visible(str(text))
    more = "…" if cap and len(shown) > cap else ""
    shown = shown[:cap] if more else shown
    if not shown:
        return more
    if in_html:
        return f"<code>{html.escape(shown, quote=True)}</code>{more}"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", shown)), default=0) + 1)
    pad = " " if shown[0] == "`" or shown[-1] == "`" or (shown[0] == " " and shown[-1] == " ") else ""
    if cell:
        shown = shown.replace("|", "\\|")
    return f"{fence}{pad}{shown}{pad}{fence}{more}"


def say(why: Why | str, *, cell: bool = False, cap: int = 0, budget: int = 0) -> str:
    """A reason in Markdown: our words as they are, template text through :func:`literal` (each value cut
    to `cap`); with a `budget` of characters as a reader counts them (not the code spans' fences), the parts
    that fit, then an ellipsis (never inside a code span)."""
    if not isinstance(why, Why):
        why = Why(Lit(why))
    out, used = "", 0
    for part in why:
        length = min(len(visible(part)), cap or len(part) + 8) if isinstance(part, Lit) else len(part)
        if budget and used + length > budget:
            return out + " …"
        out += literal(part, cell=cell, cap=cap) if isinstance(part, Lit) else part
        used += length
    return out


def plain(text: str | Why) -> str:
    """A reason or value for a terminal: joined, every hidden or control character made visible."""
    return visible(str(text))


def lost(d: StackDiff, rid: str) -> str:
    """What the deletion or replacement of a stateful resource loses."""
    kind = d.types[rid]
    if kind in NODE_TYPES:
        return "their root volumes and instance stores are lost"
    if kind == "AWS::PCS::Cluster":
        return "Slurm's queued and running jobs are lost"
    if kind in PROVIDERS:
        return PROVIDERS[kind].lost
    if kind == "AWS::CloudFormation::Stack":
        return "every resource of the nested stack goes with it"
    if kind == "AWS::EKS::Cluster":
        return "the cluster's workloads and their state are lost"
    return "data or addresses are lost"


def verb(d: StackDiff, rid: str) -> str:
    if rid in d.removed:
        return "DELETED"
    return {"rolled": "NODES REPLACED", "may_replace": "MAY BE REPLACED"}.get(kind(d, rid), "REPLACED")


def kind(d: StackDiff, rid: str) -> str:
    for name in ("replaced", "may_replace", "rolled", "removed"):
        if rid in getattr(d, name):
            return name
    return ""


def why_of(d: StackDiff, rid: str) -> Why:
    """The reason of a resource's verdict."""
    verdict = d.verdicts.get(rid)
    return verdict.why if verdict is not None else Why("changed")
