"""Review in the pull request (issue 54): the security changes read as statements and rules, the cluster's
figures before and after, the Markdown comment bounded to what GitHub takes, the workflow (actionlint) and its
step run end to end on a temporary repository, and the comment posted once and updated after.

What each proves: the widenings are found in templates aws-cdk-lib itself writes (``connections``, ``grant``);
the comment limit is GitHub's (65,536 characters, its REST API refuses more). The workflow and the posting are
tests/test_review_workflow.py's.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from efa_constructs.tools import cluster_summary
from efa_constructs.tools.diff_render import MARKER, render
from efa_constructs.tools.pr_review import workflow
from efa_constructs.tools.security_diff import security_changes, show
from efa_constructs.tools.template_diff import COMMENT_LIMIT, DiffReport, diff_templates
from tests.conftest import FLOOR, background_result
from tests.helpers import ROOT, new_app


def _stack(widen: bool) -> dict[str, Any]:
    """A group and a role as aws-cdk-lib writes them; `widen` adds a world ingress through ``connections``
    and ``ec2:*`` on every resource through the role's ``grant``-style policy, and drops a condition."""
    stack = Stack(new_app(), "S")
    vpc = ec2.Vpc(
        stack,
        "Vpc",
        max_azs=1,
        subnet_configuration=[ec2.SubnetConfiguration(name="p", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
    )
    group = ec2.SecurityGroup(stack, "Nodes", vpc=vpc, allow_all_outbound=False)
    group.connections.allow_internally(ec2.Port.all_traffic(), "EFA")
    role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    bucket_arn = "arn:aws:s3:::results"
    condition = {"StringEquals": {"aws:PrincipalTag/team": "ml"}}
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[f"{bucket_arn}/*"], conditions=None if widen else condition
        )
    )
    if widen:
        group.connections.allow_from(ec2.Peer.any_ipv4(), ec2.Port.tcp(8080), "dashboard")
        group.connections.allow_from(ec2.Peer.any_ipv6(), ec2.Port.tcp(8080), "dashboard")
        role.add_to_principal_policy(iam.PolicyStatement(actions=["ec2:*"], resources=["*"]))
        role.assume_role_policy.add_statements(  # type: ignore[union-attr]
            iam.PolicyStatement(actions=["sts:AssumeRole"], principals=[iam.AccountPrincipal("111122223333")])
        )
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def test_the_widenings_are_found_as_statements_and_rules_with_their_reasons() -> None:
    d = diff_templates(_stack(False), _stack(True))
    why = d.security.widenings()
    assert any("ingress from the world (0.0.0.0/0, 8080)" in w for w in why), why
    assert any("ingress from the world (::/0, 8080)" in w for w in why), why
    assert any("a wildcard action (ec2:*)" in w for w in why), why
    assert any("every resource (*) for ec2:*" in w for w in why), why
    assert any("a condition removed" in w and "aws:PrincipalTag/team" in w for w in why), why
    assert any("a principal outside the account" in w and "111122223333" in w for w in why), why
    # shown as a reader writes them, not as paths into the template
    (rule,) = [r for r in d.security.added_rules if r.peer == "0.0.0.0/0"]
    assert rule.group.startswith("{sg: Nodes") and rule.protocol == "tcp" and rule.ports == "8080"
    (granted,) = [s for s in d.security.added_statements if s.actions == ("ec2:*",)]
    assert granted.where.startswith("NodeRoleDefaultPolicy") and "${NodeRole" in granted.where
    # a new rule replaces nothing: the group's id, which the other rules read, changes only with the group
    assert not d.replaced, d.replaced
    # the EFA rule (the group to itself) is no widening, and unchanged rules are not listed
    assert not [r for r in d.security.added_rules if r.peer.startswith("{sg:")]
    assert not any("DefaultPolicy" in w and "s3:GetObject" in w and "every resource" in w for w in why)
    # the same changes in the text and the JSON, where a program finds each widening with its reason
    text = render("S", d)
    assert text.count("!!! WIDENS ACCESS:") == len(why) and "sg + ingress tcp 8080 from 0.0.0.0/0" in text
    report = DiffReport("base", "head", {"S": d})
    found = report.to_json()
    assert [w["reason"] for w in found["widenings"]] == why and {w["stack"] for w in found["widenings"]} == {
        "S"
    }
    assert found["stacks"]["S"]["security"]["rules"]["added"][0]["peer"] in ("0.0.0.0/0", "::/0")


def test_no_change_widens_nothing_and_a_narrowing_is_no_widening() -> None:
    assert security_changes(_stack(True), copy.deepcopy(_stack(True))).empty
    narrowed = security_changes(_stack(True), _stack(False))
    assert narrowed.widenings() == [] and narrowed.removed_rules and narrowed.removed_statements


def _storage(open_up: bool) -> dict[str, Any]:
    """A bucket and an EFS file system with the resource policies aws-cdk-lib writes: `open_up` drops the
    bucket's TLS-only Deny (``enforce_ssl``) and grants another account read through the bucket policy."""
    from aws_cdk import RemovalPolicy
    from aws_cdk import aws_efs as efs
    from aws_cdk import aws_s3 as s3

    stack = Stack(new_app(), "Data")
    bucket = s3.Bucket(stack, "Results", enforce_ssl=not open_up, removal_policy=RemovalPolicy.RETAIN)
    if open_up:
        bucket.grant_read(iam.AccountPrincipal("444455556666"))
    vpc = ec2.Vpc(
        stack,
        "Vpc",
        max_azs=1,
        subnet_configuration=[ec2.SubnetConfiguration(name="p", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
    )
    fs = efs.FileSystem(stack, "Shared", vpc=vpc)
    fs.add_to_resource_policy(
        iam.PolicyStatement(
            effect=iam.Effect.DENY,
            actions=["*"],
            principals=[iam.AnyPrincipal()],
            conditions={"Bool": {"aws:SecureTransport": "false"}},
        )
    )
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def test_resource_policies_are_read_the_bucket_and_the_file_system() -> None:
    """The bucket's policy (``AWS::S3::BucketPolicy``) and the file system's (``FileSystemPolicy``) are
    statements too: a removed Deny and another account's read widen access; the file system's Deny,
    unchanged, is no change."""
    d = diff_templates(_storage(False), _storage(True))
    why = d.security.widenings()
    assert any("(resource policy): a Deny removed" in w and "s3:*" in w for w in why), why
    assert any("a principal outside the account" in w and "444455556666" in w for w in why), why
    old = security_changes({"Resources": {}}, _storage(False))
    (efs_deny,) = [s for s in old.added_statements if s.where.startswith("Shared") and s.effect == "Deny"]
    assert efs_deny.where.endswith("(resource policy)") and efs_deny.principal == "AWS: *"
    assert efs_deny.condition == "Bool: {aws:SecureTransport=false}"
    assert not any(
        s.where.startswith("Shared") for s in d.security.added_statements + d.security.removed_statements
    )


def test_intrinsics_read_as_a_reader_writes_them() -> None:
    assert show({"Fn::Join": ["", [{"Fn::GetAtt": ["Bucket", "Arn"]}, "/*"]]}) == "${Bucket.Arn}/*"
    assert show({"Ref": "AWS::AccountId"}) == "${AWS::AccountId}"
    assert show({"Fn::Sub": "arn:${AWS::Partition}:s3:::x"}) == "arn:${AWS::Partition}:s3:::x"


def test_the_cluster_summary_names_nodes_efas_and_line_rate_before_and_after(
    templates: dict[str, Any],
) -> None:
    """The figures come from the template and the catalogue: trn1.32xlarge, 8 EFA cards of 100 Gbps (AWS's
    "Network cards" table of the EC2 user guide: 800 Gbps)."""
    old = templates["Trn1EfaCluster"]
    (lt,) = [k for k, v in old["Resources"].items() if v["Type"] == "AWS::EC2::LaunchTemplate"]
    assert cluster_summary.summary(old)[lt] == "2 x trn1.32xlarge (instances), 8 EFAs each, 800 Gbps per node"
    new = copy.deepcopy(old)
    (node,) = [k for k, v in new["Resources"].items() if v["Type"] == "AWS::EC2::Instance" and "Node1" in k]
    new["Resources"]["ClusterNode2"] = copy.deepcopy(new["Resources"][node])
    assert cluster_summary.compare(old, new) == [
        (
            lt,
            "2 x trn1.32xlarge (instances), 8 EFAs each, 800 Gbps per node",
            "3 x trn1.32xlarge (instances), 8 EFAs each, 800 Gbps per node",
        )
    ]


def _many_nodes(templates: dict[str, Any], count: int) -> DiffReport:
    """`count` nodes all replaced by a new node-scripts asset, in each of the six cluster stacks."""
    stacks = {}
    from stacks.cluster_stack import READY_CLUSTERS

    for name in READY_CLUSTERS:
        old = copy.deepcopy(templates[name])
        (node,) = [
            k for k, v in old["Resources"].items() if v["Type"] == "AWS::EC2::Instance" and "Node1" in k
        ]
        for i in range(2, count):
            old["Resources"][f"ClusterNode{i}Long{'x' * 40}"] = copy.deepcopy(old["Resources"][node])
        new = json.loads(json.dumps(old).replace('"InstanceType": "', '"InstanceType": "x', 1))
        stacks[name] = diff_templates(old, new)
    return DiffReport("main", "HEAD", stacks)


def test_the_comment_fits_github_and_says_what_was_folded(templates: dict[str, Any]) -> None:
    """64 nodes replaced in each of six stacks: one row per kind of loss, so the comment fits GitHub's
    65,536 characters whole; held to less, the least urgent tables fold first, each saying how much."""
    report = _many_nodes(templates, 64)
    comment = report.markdown()
    assert len(comment) <= COMMENT_LIMIT and "folded" not in comment, len(comment)
    assert comment.startswith(MARKER)
    headline = comment.split("<details>")[0]  # the losses named first, before any stack's details
    assert "🛑 **64 stateful resources lost in `Trn1EfaCluster`**" in headline
    (row,) = [
        line
        for line in comment.split("<code>Trn1EfaCluster</code>")[1].split("</details>")[0].splitlines()
        if line.startswith("| 64 |")
    ]
    assert row.count("`ClusterNode") == 64 and "create-only `LaunchTemplate.Version` reads" in row
    small = report.markdown(limit=6000)
    assert len(small) <= 6000 and "folded to fit the comment_" in small, len(small)
    assert "`efa-cdk template-diff --base main --head HEAD` shows all of it" in small
    assert "🛑 **64 stateful resources lost in `Trn1EfaCluster`**" in small  # the headline is kept
    # whole stacks go, named, when folding their tables is not enough
    limit = len(comment.split("<details>")[0]) + 600
    fewer = report.markdown(limit=limit)
    assert len(fewer) <= limit and "`Dl1EfaCluster`'s details left out" in fewer and fewer.startswith(MARKER)
    cut = report.markdown(limit=1500)  # the headline alone is longer: cut, and said
    assert len(cut) <= 1500 and "cut at 1,500 characters" in cut


def test_a_small_change_is_not_folded(templates: dict[str, Any]) -> None:
    comment = _many_nodes(templates, 2).markdown()
    assert "folded" not in comment and comment.count("| 2 | `AWS::EC2::Instance` |") == 6


@pytest.mark.waits
def test_the_workflows_step_reviews_a_real_change_on_a_temporary_repository(
    request: pytest.FixtureRequest,
) -> None:
    """tests/pr_review_check.py: base = the ready stacks, head = a node-scripts change, a world ingress and
    ``ec2:*`` on the nodes' role; Trn1EfaCluster with 64 nodes. The replaced nodes are named with the cause,
    both widenings marked, the comment fits GitHub, and the check fails (exit 3)."""
    run, tmp = background_result(request.node.nodeid)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "FAILS: add the label efa-cdk:allow-stateful-loss" in run.stdout, run.stdout
    comment = (Path(tmp) / "comment.md").read_text()
    assert len(comment) <= COMMENT_LIMIT and comment.startswith(MARKER)
    assert "🛑 **64 stateful resources lost in `Trn1EfaCluster`**" in comment
    assert "the node scripts changed" in comment
    # the template's values as code spans (diff_words.literal): never read as Markdown
    assert "ingress from the world (`0.0.0.0/0`, `8080`)" in comment
    assert "a wildcard action (`ec2:*`)" in comment
    assert (Path(tmp) / "summary.md").read_text() == comment  # the job summary: the same, whole


def _cluster_pair(tmp_path: Path) -> tuple[Path, Path, dict[str, Any], dict[str, Any]]:
    """The ready Trn1EfaCluster, and the same with a larger root volume (a new launch template version:
    every node replaced), TCP 8080 open to the world and ``ec2:*`` on every resource for the nodes' role;
    the base's template file and the head's cloud assembly, as ``cdk diff --template`` reads them."""
    import aws_cdk as cdk

    from stacks.cluster_stack import EfaClusterStack
    from stacks.params import ClusterParams

    def build(outdir: Path, **context: str) -> EfaClusterStack:
        app = cdk.App(
            outdir=str(outdir),
            context={**json.loads((ROOT / "cdk.json").read_text())["context"]},
            default_stack_synthesizer=cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False),
        )
        params = ClusterParams.from_context(
            {"availability_zone": "us-east-1a", **context}, default_instance_type="trn1.32xlarge"
        )
        return EfaClusterStack(app, "Trn1EfaCluster", params=params)

    base = build(tmp_path / "base")
    head = build(tmp_path / "head", root_volume_gib="300")
    head.cluster.connections.allow_from(ec2.Peer.any_ipv4(), ec2.Port.tcp(8080), "a world ingress")
    head.cluster.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(actions=["ec2:*"], resources=["*"])
    )
    for stack in (base, head):
        stack.node.root.synth()  # type: ignore[attr-defined]
    old = json.loads((tmp_path / "base" / "Trn1EfaCluster.template.json").read_text())
    new = json.loads((tmp_path / "head" / "Trn1EfaCluster.template.json").read_text())
    return tmp_path / "base" / "Trn1EfaCluster.template.json", tmp_path / "head", old, new


def test_cdk_diff_finds_the_same_widenings_and_this_diff_says_more(tmp_path: Path) -> None:
    """The CDK CLI's own security tables on the same pair of templates (``cdk diff --template``: no
    credentials, no synth): both show the world ingress and the ``ec2:*`` statement; this diff also says
    why each widens, and that every node is replaced (cdk diff shows the nodes' instances as modified in
    place: the launch template version they read is a create-only property, which it does not follow).
    docs/operate.md's comparison is this test's."""
    base_file, head_dir, old, new = _cluster_pair(tmp_path)
    command = ["npx", "--no-install", "cdk", "diff", "--app", str(head_dir), "--template", str(base_file)]
    cdk = subprocess.run(
        [*command, "Trn1EfaCluster", "--no-color"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "AWS_EC2_METADATA_DISABLED": "true"},
    )
    said = cdk.stdout + cdk.stderr
    assert "IAM Statement Changes" in said and "Security Group Changes" in said, said
    assert re.search(r"\+ │ \*\s+│ Allow\s+│ ec2:\*", said), said
    assert re.search(r"In\s+│ TCP 8080\s+│ Everyone \(IPv4\)", said), said
    nodes = sorted(k for k, v in new["Resources"].items() if v["Type"] == "AWS::EC2::Instance")
    for n in nodes:  # cdk diff: modified in place ([~]), not replaced ([-/+])
        (line,) = [x for x in said.splitlines() if x.endswith(f" {n}") and "AWS::EC2::Instance" in x]
        assert line.startswith("[~] "), line
    d = diff_templates(old, new)
    assert set(nodes) <= set(d.stateful_losses)  # replaced: their root volumes go with them
    why = d.security.widenings()
    assert any("ingress from the world (0.0.0.0/0, 8080)" in w for w in why), why
    assert any("a wildcard action (ec2:*)" in w for w in why), why
    assert any("every resource (*) for ec2:*" in w for w in why), why


#: docs/operate.md's example comment: what pr-review writes for _cluster_pair's change, regenerated with
#: ``python -m tests.test_pr_review`` (the test below keeps the two equal).
EXAMPLE = ROOT / "docs" / "examples" / "pr-comment.md"


def _example_comment(tmp_path: Path) -> str:
    *_, old, new = _cluster_pair(tmp_path)
    return DiffReport("main", "HEAD", {"Trn1EfaCluster": diff_templates(old, new)}).markdown()


@pytest.mark.skipif(FLOOR, reason="the floor's aws-cdk-lib writes other templates than the pinned one")
def test_the_docs_example_comment_is_what_the_review_writes(tmp_path: Path) -> None:
    assert EXAMPLE.read_text() == _example_comment(tmp_path), "python -m tests.test_pr_review rewrites it"


if __name__ == "__main__":
    import tempfile

    EXAMPLE.write_text(_example_comment(Path(tempfile.mkdtemp())))
    print(f"wrote {EXAMPLE}")


NAGGED_APP = """
import aws_cdk as cdk
from aws_cdk import aws_s3 as s3, aws_ssm as ssm
from cdk_nag import AwsSolutionsChecks

app = cdk.App()
stack = cdk.Stack(app, "Data")
ssm.StringParameter(stack, "Size", string_value="1")
if app.node.try_get_context("head"):
    s3.Bucket(stack, "Results", enforce_ssl=False)  # cdk-nag: no server access logs, no TLS-only policy
    cdk.CfnParameter(stack, "Unused", type="String", default="x")  # cfn-lint: W2001, a parameter not used
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))  # cdk-nag 3: a policy-validation plugin
app.synth()
"""


def test_the_head_s_new_findings_are_listed_and_the_base_s_are_not(tmp_path: Path) -> None:
    """What the checks find in the head and not in the base, per changed stack: cfn-lint's (W2001 for a
    parameter nothing uses) and cdk-nag's (AwsSolutions-S1 and -S10 for a bucket without access logs or a
    TLS-only policy). cdk-nag 3 is a policy-validation plugin: its findings fail the head's synthesis, and the
    diff reads them from the assembly's validation report, beside the templates aws-cdk-lib still wrote."""
    from efa_constructs.tools.template_diff import run

    repo = tmp_path / "app"
    repo.mkdir()
    (repo / "infra.py").write_text(NAGGED_APP)
    (repo / "cdk.json").write_text(json.dumps({"app": "python3 infra.py"}))
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for step in (["init", "-q"], ["add", "."], ["commit", "-qm", "base"]):
        subprocess.run([*git, *step], check=True, capture_output=True)
    (repo / "cdk.json").write_text(json.dumps({"app": "python3 infra.py", "context": {"head": True}}))
    subprocess.run([*git, "commit", "-qam", "head"], check=True, capture_output=True)
    report = run("HEAD~1", "HEAD", {}, repo=repo)
    found = report.stacks["Data"].findings
    assert any(f.startswith("cfn-lint W2001 Parameters/Unused") for f in found), found
    assert any(f.startswith("validation AwsSolutions-S1 Data/Results/Resource: ") for f in found), found
    assert any("AwsSolutions-S10" in f for f in found), found
    assert not any("Size" in f for f in found), found  # the base's parameter: nothing new there
    assert "**New findings (cfn-lint, synth)**" in report.markdown()


def test_a_widening_is_named_for_what_it_adds_and_nothing_else() -> None:
    """Each reason for its own change only: a statement merged with an earlier one (aws-cdk-lib's
    minimizePolicies does) widens by the actions it adds; a named resource is not "every resource"; a
    service principal is no other account; the EFA rule of a group to itself is read through its GroupId and
    peer references, and widens nothing."""
    from efa_constructs.tools.security_diff import Rule, Statement, rules

    where = "Policy (${Role})"
    old = Statement(where, "Allow", ("ec2:DescribeInstances",), ("*",), "", "")
    merged = Statement(where, "Allow", ("ec2:*", "ec2:DescribeInstances"), ("*",), "", "")
    assert merged.replaces(old) and merged.widens(old) == [
        "a wildcard action (ec2:*)",
        "every resource (*) for ec2:*",
    ]
    named = Statement(where, "Allow", ("s3:GetObject",), ("${Bucket.Arn}/*",), "", "")
    assert named.widens() == [] and not named.replaces(old)
    other_role = Statement("Other (${Role2})", "Allow", ("ec2:DescribeInstances",), ("*",), "", "")
    assert not other_role.replaces(old) and other_role.widens() == [
        "every resource (*) for ec2:DescribeInstances"
    ]
    service = Statement("Role (trust)", "Allow", ("sts:AssumeRole",), (), "Service: ec2.amazonaws.com", "")
    assert service.widens() == []
    deny = Statement(where, "Deny", ("*",), ("*",), "AWS: *", "")
    assert deny.widens() == []
    template = _stack(False)
    (efa,) = [r for r in rules(template) if r.direction == "ingress"]
    group = efa.group
    assert (
        group.startswith("{sg: Nodes") and efa.peer == group and efa.protocol == "all" and efa.widens() == []
    )
    assert Rule(group, "egress", "tcp", "443", "0.0.0.0/0", "").widens() == [
        "egress to the world (0.0.0.0/0, 443)"
    ]
    assert show({"Fn::Sub": ["${Name}-x", {"Name": "y"}]}) == "${Name}-x"
    assert show({"Fn::Join": ["", "not a list"]}) == '{"Fn::Join":["","not a list"]}'


def test_the_review_fails_on_a_loss_unless_allowed_and_the_workflow_is_written_once(
    templates: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pr-review's verdict (exit 3 on a stateful loss, 0 when --allow-loss or the label allows it; the job
    summary written whole when GitHub Actions names one) and --write-workflow (written, then refused over an
    existing file unless --force)."""
    from efa_constructs.__main__ import main
    from efa_constructs.tools.pr_review import review

    report = _many_nodes(templates, 2)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    fails, line = review(report, tmp_path / "comment.md", False, None)
    assert fails and "FAILS: add the label efa-cdk:allow-stateful-loss" in line
    assert summary.read_text() == (tmp_path / "comment.md").read_text()
    fails, line = review(report, tmp_path / "comment.md", True, None)
    assert not fails and line.endswith("; the loss is allowed (--allow-loss)")
    path = tmp_path / ".github" / "workflows" / "review.yml"
    assert main(["pr-review", "--write-workflow", str(path)]) == 0 and path.read_text() == workflow()
    assert main(["pr-review", "--write-workflow", str(path)]) == 1
    assert "a file is there, and writing would replace it" in capsys.readouterr().err
    assert main(["pr-review", "--write-workflow", str(path), "--force"]) == 0


def test_posting_without_a_pull_request_is_refused_before_any_synth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--post outside a GitHub Actions run of a pull request says so at once, not after synthesizing two
    revisions (here a repository with no app at all: a synth would fail first, with another reason)."""
    from efa_constructs.__main__ import main

    for name in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH"):
        monkeypatch.delenv(name, raising=False)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for step in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run([*git, *step], check=True, capture_output=True)
    monkeypatch.chdir(tmp_path)
    assert main(["pr-review", "--base", "HEAD", "--post"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --post=") and "GITHUB_TOKEN" in err and "synthesize" not in err, err
