"""Issue 58 points 9, 12 and 14: the comment as GitHub renders it. Rendered with cmarkgfm (GitHub's own fork
of cmark, with raw HTML let through: stricter than GitHub, whose sanitizer then drops some), a comment whose
template strings are hostile has exactly the elements and blocks of the same comment with plain strings, and
the hostile text sits inside code elements only (GitHub links mentions, issues and URLs outside code alone).
The headline keeps its budget: every loss and widening counted, each line capped, never cut; the hard cut and
the job summary stay within GitHub's limits (65,536 characters a comment; 1 MiB a summary, in bytes).
"""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser
from typing import Any

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from efa_constructs.tools.diff_model import COMMENT_LIMIT
from efa_constructs.tools.diff_render import HEADLINE_LINE, MARKER, literal, visible
from efa_constructs.tools.template_diff import DiffReport, diff_templates
from tests.test_pr_review import _stack
from tests.test_review_verdicts import _lustre

#: What the review was seen to let through (issue 58 point 9), and what else GitHub's Markdown reads.
HOSTILE = (
    "`|![i](https://e.example/i.png) [l](https://e.example) @team <img src=x onerror=alert(1)> </code>"
    "</details> \r\r_No other change widens access._\r<!-- \u202e www.e.example #1 :+1: __b__ ~~s~~ &amp; \\"
    "\n\n# h\n| a | b |\n- item ``` ` "
)
#: Plain text as long as the hostile text shows (so that every cap and budget cuts both alike).
PLAIN = "P" * len(visible(HOSTILE))
#: Values the verdicts read (a type, an effect, an address): kept as they are, so both comments judge alike.
KEPT = {"Type", "Effect", "CidrIp", "CidrIpv6", "IpProtocol", "DeletionPolicy", "UpdateReplacePolicy"}


def _marked(node: Any, mark: str, key: str = "") -> Any:
    """Every logical id and string value of a template with `mark` appended (references kept pointing at
    the renamed resources; the values the verdicts read kept)."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            name = k + mark if key == "Resources" else k
            out[name] = v if k in KEPT else _marked(v, mark, k)
        return out
    if isinstance(node, list):
        if key == "Fn::GetAtt":
            return [node[0] + mark, *node[1:]]
        return [_marked(v, mark, key) for v in node]
    if isinstance(node, str) and key not in ("Ref",):
        return node + mark if not node.startswith("AWS::") else node
    if isinstance(node, str):
        return node if node.startswith("AWS::") else node + mark
    return node


def _report(mark: str) -> DiffReport:
    grown = _lustre(1200)
    grown["Resources"]["Fs"]["Properties"]["SubnetIds"] = [
        "subnet-2"
    ]  # the file system and the node replaced
    stacks = {
        f"Security{mark}": diff_templates(_marked(_stack(False), mark), _marked(_stack(True), mark)),
        f"Storage{mark}": diff_templates(_marked(_lustre(1200), mark), _marked(grown, mark)),
    }
    return DiffReport(
        f"main{mark}",
        f"HEAD{mark}",
        stacks,
        [(f"aws-cdk-lib{mark}", "2.270.0", f"2.275.0{mark}")],
        (f"requirements.txt{mark}", "requirements.txt"),
    )


def html(markdown: str) -> str:
    """The comment as GitHub's cmark renders it (GFM extensions; raw HTML kept, as before its sanitizer)."""
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


class _Shape(HTMLParser):
    """The elements of a page in order (no text), and the text found outside any code element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.shape: list[str] = []
        self.outside: list[str] = []
        self.depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.shape.append(f"<{tag} {sorted(k for k, _ in attrs)}>")
        self.depth += tag == "code"

    def handle_endtag(self, tag: str) -> None:
        self.shape.append(f"</{tag}>")
        self.depth -= tag == "code"

    def handle_comment(self, data: str) -> None:
        self.shape.append(f"<!--{data}-->")

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.outside.append(data)


def _shape(markdown: str) -> _Shape:
    parser = _Shape()
    parser.feed(html(markdown))
    return parser


def test_no_template_string_yields_an_element_or_a_block() -> None:
    hostile, plain = _report(HOSTILE).markdown(), _report(PLAIN).markdown()
    assert hostile.count("\n") == plain.count("\n")  # no line of its own: every line ending made visible
    bad, good = _shape(hostile), _shape(plain)
    assert bad.shape == good.shape  # the same elements, blocks and comments, in the same order
    outside = "".join(bad.outside)
    for piece in ("e.example", "@team", "onerror", "No other change", "#1", ":+1:", "\u202e"):
        assert piece not in outside, piece
    assert bad.shape.count("<!-- efa-cdk template-diff -->") == 1  # the marker alone is a comment
    # every widening of the plain comment is there in the hostile one
    assert hostile.count("**widens access**") == plain.count("**widens access**") > 0


def test_the_marker_starts_the_comment_and_the_stack_name_is_escaped_inside_html() -> None:
    comment = _report(HOSTILE).markdown()
    assert comment.startswith(MARKER + "\n")
    summary = next(
        line for line in comment.splitlines() if line.startswith("<details><summary><code>Security")
    )
    assert "<img" not in summary and "&lt;img src=x onerror=alert(1)&gt;" in summary
    assert "\\u202e" in summary and "\u202e" not in summary


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a`b", "``a`b``"),
        ("`x`", "`` `x` ``"),
        ("a|b", "`a|b`"),
        ("line\nnext", "`line\\nnext`"),
        ("", ""),
    ],
)
def test_literal_fences_any_backticks_and_shows_line_ends(text: str, shown: str) -> None:
    assert literal(text) == shown
    if text:
        rendered = html(f"x {literal(text)} y")
        assert rendered.count("<code>") == 1


def test_a_pipe_in_a_table_cell_stays_in_its_cell() -> None:
    table = f"| a | b |\n| --- | --- |\n| {literal('x|y', cell=True)} | z |\n"
    assert html(table).count("<td>") == 2 and "<code>x|y</code>" in html(table)


# ---- 12. the headline's budget, the hard cut, the summary in bytes ----


def _many(losses: int, widenings: int, name: str = "N") -> DiffReport:
    old: dict[str, Any] = {"Resources": {}}
    new: dict[str, Any] = {"Resources": {}}
    for i in range(losses):
        old["Resources"][f"{name}ode{i:03d}{'x' * 150}"] = {"Type": "AWS::EFS::FileSystem", "Properties": {}}
    for i in range(widenings):
        new["Resources"][f"Rule{i:03d}{'y' * 150}"] = {
            "Type": "AWS::EC2::SecurityGroupIngress",
            "Properties": {
                "GroupId": f"sg-{i}",
                "IpProtocol": "tcp",
                "FromPort": i,
                "ToPort": i,
                "CidrIp": "0.0.0.0/0",
            },
        }
    return DiffReport("main", "HEAD", {"Big": diff_templates(old, new)})


def test_the_headline_counts_everything_caps_every_line_and_is_never_cut() -> None:
    report = _many(losses=300, widenings=400)
    comment = report.markdown()
    assert len(comment) <= COMMENT_LIMIT
    headline = comment.split("<details>")[0]
    assert "**300 stateful resources lost, 400 widenings of access**" in headline
    assert "400 widenings in all, 12 shown" in headline and "and 297 more" in headline
    assert max(len(line) for line in headline.splitlines()) <= HEADLINE_LINE
    # held to a few thousand characters the sections go, the headline stays whole
    small = report.markdown(limit=len(headline) + 400)
    assert small.startswith(headline.rstrip()) and len(small) <= len(headline) + 400


def test_the_hard_cut_stays_under_the_limit_with_its_note_and_closes_what_it_opened() -> None:
    report = _many(losses=300, widenings=400)
    for limit in (1500, 4000, COMMENT_LIMIT):
        cut = report.markdown(limit=limit)
        assert len(cut) <= limit, (limit, len(cut))
        assert cut.count("<details>") == cut.count("</details>")
    cut = report.markdown(limit=1500)
    assert cut.rstrip().endswith("`efa-cdk template-diff --base main --head HEAD`._")
    assert "**300 stateful resources lost, 400 widenings of access**" in cut  # the counts come first


def test_the_job_summary_is_bounded_in_bytes() -> None:
    report = _many(losses=40, widenings=10, name="\u30ce")  # three bytes a character in UTF-8
    whole = report.markdown(10**7)
    limit = (len(whole) + len(whole.encode())) // 2  # more characters than it has, fewer bytes
    assert len(report.markdown(limit, in_bytes=True).encode()) <= limit
    assert report.markdown(limit) == whole  # counted in characters, it would be written whole: too many bytes


# ---- 14. what a new user reads: the good news, the property behind a loss, storage apart ----


def test_the_good_news_is_said() -> None:
    base = _lustre(1200)
    grown = copy.deepcopy(base)
    grown["Resources"]["Fs"]["Properties"]["StorageCapacity"] = 2400
    comment = DiffReport("main", "HEAD", {"S": diff_templates(base, grown)}).markdown()
    assert (
        "✅ No node, file system or other stateful resource is replaced or deleted; nothing widens access."
        in comment
    )
    widened = DiffReport("main", "HEAD", {"S": diff_templates(_stack(False), _stack(True))}).markdown()
    assert "✅ No node, file system or other stateful resource is replaced or deleted." in widened


def test_a_loss_names_the_property_that_changed_and_storage_has_its_own_table() -> None:
    moved = _lustre(1200)
    moved["Resources"]["Fs"]["Properties"]["SubnetIds"] = ["subnet-2"]
    comment = DiffReport("main", "HEAD", {"S": diff_templates(_lustre(1200), moved)}).markdown()
    headline = comment.split("<details>")[0]
    assert "create-only `SubnetIds[0]` changed" in headline  # the file system's own property
    assert "`LaunchTemplate.Version` reads `Lt.LatestVersionNumber`, which changes" in headline  # the node's
    assert "**Storage**" in comment and "**Cluster**" not in comment


def test_the_json_has_each_verdict_with_its_source() -> None:
    moved = _lustre(1200)
    moved["Resources"]["Fs"]["Properties"]["SubnetIds"] = ["subnet-2"]
    found = DiffReport("main", "HEAD", {"S": diff_templates(_lustre(1200), moved)}).to_json()
    fs = found["stacks"]["S"]["verdicts"]["Fs"]
    assert fs["impact"] == "REPLACE" and "createOnlyProperties /properties/SubnetIds" in fs["source"]
    assert json.loads(json.dumps(found)) == found and found["fails"] is True
