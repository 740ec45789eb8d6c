"""The pull-request template diff: replacements, propagation and stateful losses are flagged."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from efa_constructs.tools.diff_render import render
from efa_constructs.tools.template_diff import diff_templates
from stacks.cluster_stack import READY_CLUSTERS
from stacks.parallel_cluster_stack import READY_PCLUSTERS
from tests.conftest import background_result


def test_no_change(templates: dict[str, Any]) -> None:
    t = templates["Trn1EfaCluster"]
    d = diff_templates(t, copy.deepcopy(t))
    assert d.empty
    assert render("Trn1EfaCluster", d) == "Stack Trn1EfaCluster: no changes"


def test_launch_template_change_replaces_every_node(templates: dict[str, Any]) -> None:
    old = templates["Trn1EfaCluster"]
    new = copy.deepcopy(old)
    (lt,) = [k for k, v in new["Resources"].items() if v["Type"] == "AWS::EC2::LaunchTemplate"]
    new["Resources"][lt]["Properties"]["LaunchTemplateData"]["InstanceType"] = "trn1n.32xlarge"
    d = diff_templates(old, new)
    assert lt in d.modified and lt not in d.replaced  # a new version, same template
    nodes = sorted(k for k, v in old["Resources"].items() if v["Type"] == "AWS::EC2::Instance")
    assert sorted(r for r in d.replaced if r in nodes) == nodes
    assert d.replaced[nodes[0]].startswith("create-only LaunchTemplate.Version reads ClusterLaunchTemplate")
    assert d.replaced[nodes[0]].endswith("LaunchTemplateData.InstanceType changed")
    assert "! REPLACE ClusterNode0" in render("Trn1EfaCluster", d)


def test_security_group_description_change_is_a_replacement(templates: dict[str, Any]) -> None:
    old = templates["P4dEfaCluster"]
    new = copy.deepcopy(old)
    (sg,) = [k for k, v in new["Resources"].items() if v["Type"] == "AWS::EC2::SecurityGroup"]
    new["Resources"][sg]["Properties"]["GroupDescription"] = "renamed"
    d = diff_templates(old, new)
    assert d.replaced[sg] == "create-only GroupDescription changed"


def test_stateful_deletion_is_loud(templates: dict[str, Any]) -> None:
    new = copy.deepcopy(templates["P5EfaCluster"])
    old = copy.deepcopy(new)
    old["Resources"]["Scratch"] = {"Type": "AWS::EFS::FileSystem", "Properties": {}}
    d = diff_templates(old, new)
    assert d.stateful_losses == ["Scratch"]
    assert "!!! STATEFUL DELETED: Scratch (AWS::EFS::FileSystem)" in render("P5EfaCluster", d)


def test_renamed_logical_id_shows_as_delete_and_add(templates: dict[str, Any]) -> None:
    old = templates["Dl1EfaCluster"]
    new = copy.deepcopy(old)
    (node,) = [k for k in new["Resources"] if k.startswith("ClusterNode1")]
    new["Resources"]["Renamed"] = new["Resources"].pop(node)
    d = diff_templates(old, new)
    assert d.removed == {node: "AWS::EC2::Instance"}
    assert d.added == {"Renamed": "AWS::EC2::Instance"}


def test_command_synthesizes_two_revisions(request: pytest.FixtureRequest) -> None:
    """End to end through git: a commit that changes one stack's instance type, diffed against its parent.

    Runs in the background from collection time (see conftest.BACKGROUND_COMMANDS and
    tests/template_diff_check.py).
    """
    run, _ = background_result(request.node.nodeid)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Template diff HEAD~1 -> HEAD"
    unchanged = {
        f"Stack {s}: no changes" for s in [*READY_CLUSTERS, *READY_PCLUSTERS] if s != "P4dEfaCluster"
    }
    assert unchanged <= set(lines)
    p4d = run.stdout.split("Stack P4dEfaCluster")[1].split("\nStack ")[0]
    assert p4d.count("! REPLACE ClusterNode") == 2, p4d  # the launch template changed under both nodes


def _cluster(stack: str, **context: str) -> dict[str, Any]:
    from aws_cdk import assertions

    from stacks.cluster_stack import EfaClusterStack
    from stacks.params import ClusterParams
    from tests.helpers import new_app

    params = ClusterParams.from_context(
        {"availability_zone": "us-east-1a", **context}, default_instance_type=READY_CLUSTERS[stack]
    )
    return assertions.Template.from_stack(EfaClusterStack(new_app(), stack, params=params)).to_json()  # type: ignore[no-any-return]


def test_an_image_refresh_replaces_every_node_and_a_resize_none() -> None:
    """The image is read once: a resize keeps it; asking for a newer one (ami_refresh) shows up as
    the lookup replaced and every node with it."""
    base = _cluster("P4dEfaCluster")
    grown = diff_templates(base, _cluster("P4dEfaCluster", node_count="3"))
    assert not grown.replaced and "AWS::EC2::Instance" in grown.added.values()
    assert not [r for r in grown.modified if base["Resources"].get(r, {}).get("Type") == "AWS::EC2::Instance"]
    refreshed = diff_templates(base, _cluster("P4dEfaCluster", ami_refresh="2026-12-01"))
    assert list(refreshed.added.values()).count("Custom::EfaImageLookup") == 1
    assert list(refreshed.removed.values()).count("Custom::EfaImageLookup") == 1
    nodes = sorted(k for k, v in base["Resources"].items() if v["Type"] == "AWS::EC2::Instance")
    assert sorted(r for r in refreshed.replaced if r in nodes) == nodes


def test_elastic_ip_nodes_can_be_replaced() -> None:
    """A change that replaces an Elastic IP node also replaces its pre-created interface (new logical
    id), so the new node never waits for an interface the old one holds; the Elastic IP is kept."""
    old = _cluster("P5EfaCluster", public_ip="all")
    new = _cluster("P5EfaCluster", public_ip="all", root_volume_gib="300")
    d = diff_templates(old, new)
    nodes = sorted(k for k, v in old["Resources"].items() if v["Type"] == "AWS::EC2::Instance")
    assert sorted(r for r in d.replaced if r in nodes) == nodes
    enis = {k for k, v in old["Resources"].items() if v["Type"] == "AWS::EC2::NetworkInterface"}
    assert (
        set(d.removed) >= enis
        and len([t for t in d.added.values() if t == "AWS::EC2::NetworkInterface"]) == 2
    )
    assocs = {k for k, v in old["Resources"].items() if v["Type"] == "AWS::EC2::EIPAssociation"}
    assert assocs <= set(d.replaced)  # re-associated with the new interface
    assert d.stateful_losses == nodes  # the Elastic IPs stay; the nodes' root volumes do not
    # every node launches after its Elastic IP is associated (its boot fetches the software)
    for node in nodes:
        assert any(dep in assocs for dep in new["Resources"][node]["DependsOn"])
    # a resize touches no interface
    resized = diff_templates(old, _cluster("P5EfaCluster", public_ip="all", node_count="3"))
    assert not (set(resized.removed) & enis) and not resized.replaced


def test_replaced_nodes_are_stateful_losses_and_strict_says_so(templates: dict[str, Any]) -> None:
    """Issue 23 item 7: every instance replaced takes its root volume with it; --strict must not pass."""
    old = templates["Trn1EfaCluster"]
    new = copy.deepcopy(old)
    (lt,) = [k for k, v in new["Resources"].items() if v["Type"] == "AWS::EC2::LaunchTemplate"]
    new["Resources"][lt]["Properties"]["LaunchTemplateData"]["Monitoring"] = {"Enabled": False}
    d = diff_templates(old, new)
    nodes = sorted(k for k, v in old["Resources"].items() if v["Type"] == "AWS::EC2::Instance")
    assert d.stateful_losses == nodes
    assert f"!!! STATEFUL REPLACED: {nodes[0]} (AWS::EC2::Instance) - their root volumes" in render("T", d)


def test_a_new_node_scripts_asset_is_named_as_the_cause(templates: dict[str, Any]) -> None:
    """A library upgrade changes the scripts' asset hash in the user data: the diff says that is why."""
    old = templates["P4dEfaCluster"]
    text = json.dumps(old)
    (asset,) = set(re.findall(r"/([0-9a-f]{64})\.zip", text))
    new = json.loads(text.replace(asset, "f" * 64))
    d = diff_templates(old, new)
    (lt,) = [k for k, v in old["Resources"].items() if v["Type"] == "AWS::EC2::LaunchTemplate"]
    out = render("P4dEfaCluster", d)
    assert f"cause: {lt}: the node scripts changed" in out and "a new efa-cdk version" in out
    assert out.count("cause:") == 1  # the launch template, not the role's policy that names the asset too
    assert out.count("! REPLACE ClusterNode") == 2
    assert "cause:" not in render(
        "P4dEfaCluster", diff_templates(old, _cluster("P4dEfaCluster", node_count="3"))
    )


def test_an_auto_scaling_group_is_replaced_by_a_new_launch_template_version_not_by_a_resize() -> None:
    """CloudFormation's UpdatePolicy: AutoScalingReplacingUpdate replaces the group (and its nodes) when
    its launch template changes; a size change updates it in place."""
    base = _cluster("P4dEfaCluster", node_group="asg")
    (group,) = [k for k, v in base["Resources"].items() if v["Type"] == "AWS::AutoScaling::AutoScalingGroup"]
    assert (
        group
        not in diff_templates(base, _cluster("P4dEfaCluster", node_group="asg", node_count="4")).replaced
    )
    d = diff_templates(base, _cluster("P4dEfaCluster", node_group="asg", root_volume_gib="300"))
    assert "LaunchTemplate.Version reads" in d.replaced[group] and group in d.stateful_losses
    assert "under AutoScalingReplacingUpdate: a new group with new nodes" in d.replaced[group]


def test_a_pcs_size_change_replaces_the_cluster_loudly_and_a_resize_does_not() -> None:
    """PCS's Size is create-only (the AWS::PCS::Cluster schema in cfn-lint): the cluster, its node
    groups and its queue are replaced, and the diff says what is lost; max_count changes in place."""
    from aws_cdk import assertions

    from stacks.params import PcsParams
    from stacks.pcs_stack import EfaPcsClusterStack
    from tests.helpers import new_app

    def synth(**context: str) -> dict[str, Any]:
        params = PcsParams.from_context(context, default_instance_type="trn1.32xlarge")
        stack = EfaPcsClusterStack(new_app(), "Trn1PcsCluster", params=params)
        return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]

    base = synth()
    cluster = next(k for k, v in base["Resources"].items() if v["Type"] == "AWS::PCS::Cluster")
    bigger = diff_templates(base, synth(pcs_size="MEDIUM"))
    assert bigger.replaced[cluster] == "create-only Size changed"
    groups = sorted(k for k, v in base["Resources"].items() if v["Type"] == "AWS::PCS::ComputeNodeGroup")
    assert bigger.stateful_losses == sorted([cluster, *groups])
    text = render("Trn1PcsCluster", bigger)
    assert f"!!! STATEFUL REPLACED: {cluster} (AWS::PCS::Cluster) - Slurm's queued and running jobs" in text
    resized = diff_templates(base, synth(max_count="4"))
    assert resized.replaced == {} and resized.stateful_losses == []


@pytest.mark.parametrize(
    ("resource_type", "lost"),
    [
        # every node type: what goes with a node (template_diff.NODE_TYPES)
        ("AWS::EC2::Instance", "their root volumes and instance stores are lost"),
        ("AWS::AutoScaling::AutoScalingGroup", "their root volumes and instance stores are lost"),
        ("AWS::PCS::ComputeNodeGroup", "their root volumes and instance stores are lost"),
        ("AWS::EKS::Nodegroup", "their root volumes and instance stores are lost"),
        # the PCS cluster holds Slurm's state; every other stateful type, its data or address
        ("AWS::PCS::Cluster", "Slurm's queued and running jobs are lost"),
        ("AWS::EFS::FileSystem", "data or addresses are lost"),
        ("AWS::EC2::EIP", "data or addresses are lost"),
    ],
)
def test_each_stateful_type_says_what_its_deletion_loses(resource_type: str, lost: str) -> None:
    """The wording of every member of the mapping, for a deleted resource of each type."""
    old = {"Resources": {"Thing": {"Type": resource_type, "Properties": {}}}}
    out = render("S", diff_templates(old, {"Resources": {}}))
    assert f"!!! STATEFUL DELETED: Thing ({resource_type}) - {lost}" in out


def test_a_deleted_resource_of_a_stateless_type_is_not_a_loss() -> None:
    """The mapping's other side: a security group's deletion is listed, not called a loss."""
    old = {"Resources": {"Sg": {"Type": "AWS::EC2::SecurityGroup", "Properties": {}}}}
    out = render("S", diff_templates(old, {"Resources": {}}))
    assert "STATEFUL" not in out and "Sg" in out


USER_APP = """
import aws_cdk as cdk
from aws_cdk import aws_ssm as ssm

app = cdk.App()
stack = cdk.Stack(app, "Infra")
flag = app.node.try_get_context("@aws-cdk/aws-efs:denyAnonymousAccess")
ssm.StringParameter(stack, "Size", string_value=f"{app.node.try_get_context('size')} {flag}")
nested = cdk.NestedStack(stack, "Inner")
ssm.StringParameter(nested, "InnerParameter", string_value="x")
app.synth()
"""


def _git(repo: Any, *args: str) -> None:
    import subprocess

    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True)  # fmt: skip


def test_a_users_app_is_synthesized_as_the_cdk_cli_does(tmp_path: Any) -> None:
    """Issue 41 item 11: another app file (infra.py, named by cdk.json's app), cdk.json's context (the
    feature flags, and a committed change of a value, which must show), cdk.context.json, and the old
    aws_eks module's kind of nested stack not listed as a stack of its own."""
    import os
    import subprocess
    import sys

    repo = tmp_path / "user"
    repo.mkdir()
    (repo / "infra.py").write_text(USER_APP)
    cdk_json = {
        "app": "python3 infra.py",
        "context": {"size": "1", "@aws-cdk/aws-efs:denyAnonymousAccess": True},
    }
    (repo / "cdk.json").write_text(json.dumps(cdk_json))
    (repo / "cdk.context.json").write_text(json.dumps({"size": "from-cache"}))  # overridden by nothing
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    cdk_json["context"]["size"] = "2"
    (repo / "cdk.json").write_text(json.dumps(cdk_json))
    (repo / "cdk.context.json").unlink()
    _git(repo, "commit", "-qam", "two")
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    command = [sys.executable, "-m", "efa_constructs", "template-diff", "--base", "HEAD~1", "--head", "HEAD"]
    run = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "Stack Infra:" in run.stdout and "(AWS::SSM::Parameter): Value" in run.stdout, run.stdout
    assert "Inner" not in run.stdout.replace("InnerNestedStack", "")  # the nested stack: a resource only
    from efa_constructs.tools.template_diff import revision_context, stack_templates, synth_revision

    assert revision_context(repo, {"size": "3"})["size"] == "3"  # -c wins over cdk.json
    out = tmp_path / "out"
    templates = synth_revision(repo, "HEAD~1", {}, out)
    assert list(templates) == ["Infra"] and stack_templates(out).keys() == {"Infra"}
    (value,) = [r["Properties"]["Value"] for r in templates["Infra"]["Resources"].values()
                if r["Type"] == "AWS::SSM::Parameter"]  # fmt: skip
    assert value == "from-cache True"  # cdk.context.json over cdk.json's value; the flag from cdk.json


def test_outside_a_git_repository_it_says_so(tmp_path: Path) -> None:
    """Issue 53 item 19: outside a repository the refusal said the base was "not a commit"."""
    from efa_constructs.core.errors import EfaConfigError
    from efa_constructs.tools.template_diff import run

    with pytest.raises(EfaConfigError) as err:
        run("HEAD", None, {}, repo=tmp_path)
    assert err.value.code == "efa-cdk:diff-not-a-repository" and "in none" in str(err.value)


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ([], "the head template is a JSON list, not an object"),
        ({"Resources": []}, "the head template's Resources is not an object"),
        ({"Resources": {"A": 5}}, "resource A has no Type string"),
        ({"Resources": {"A": {"Properties": {}}}}, "resource A has no Type string"),
        ({"Resources": {"A": {"Type": "AWS::S3::Bucket", "Properties": []}}},
         "Properties that are not an object"),
        ({"Outputs": 5, "Resources": {}}, "the head template's Outputs is not an object"),
        # shaped as a template, a property not as the schema has it: the readers' own failure, in one line
        ({"Resources": {"A": {"Type": "AWS::EC2::Instance", "Properties": {"LaunchTemplate": 5}}}},
         "not shaped as CloudFormation's resource schema has them"),
        ({"Resources": {"G": {"Type": "AWS::EC2::SecurityGroup",
                              "Properties": {"SecurityGroupIngress": [5]}}}},
         "not shaped as CloudFormation's resource schema has them"),
    ],
)  # fmt: skip
def test_a_malformed_template_is_refused_in_one_line_never_a_traceback(template: Any, says: str) -> None:
    """Issue 60 item 8: template-diff printed tracebacks on malformed templates; a template is data. Each is
    one refusal naming the stack and what is wrong, with the fix (cfn-lint names the property)."""
    from efa_constructs.core.errors import EfaConfigError
    from efa_constructs.tools.template_diff import diff_templates

    ok = {"Resources": {"A": {"Type": "AWS::S3::Bucket"}}}
    with pytest.raises(EfaConfigError) as err:
        diff_templates(ok, template, stack="Trn1EfaCluster")
    said = str(err.value)
    assert said.startswith("template='Trn1EfaCluster': ") and "\n" not in said, said
    assert says in said and "Fix: run cfn-lint" in said, said
    assert err.value.code in ("efa-cdk:diff-template-malformed", "efa-cdk:diff-template-unreadable")
