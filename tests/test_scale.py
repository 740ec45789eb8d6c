"""Scale: the Auto Scaling node group, CloudFormation's limits, capacity reservations and blocks.

What this proves: a 1,024-node cluster's template is the size of a 2-node one and lint-clean;
resizing (up or down, in either mode) replaces nothing; the launch template targets the
reservation or block the way EC2 documents; synthesis stops when a template would exceed
CloudFormation's limits. What it does not: EC2 placing 1,024 nodes (no account here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import assertions

from efa_constructs.core.limits import MAX_RESOURCES, MAX_TEMPLATE_BYTES, limit_violations
from efa_constructs.tools.template_diff import diff_templates
from stacks.cluster_stack import EfaClusterStack
from stacks.params import ClusterParams
from tests.helpers import by_type, cdk_json_context, lint, new_app


def synth(**context: Any) -> dict[str, Any]:
    params = ClusterParams.from_context(context, default_instance_type="trn1.32xlarge")
    stack = EfaClusterStack(new_app(), "Scale", params=params)
    return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def asg() -> dict[int, dict[str, Any]]:
    return {n: synth(node_group="asg", node_count=str(n)) for n in (2, 1024)}


def test_1024_nodes_in_an_auto_scaling_group(asg: dict[int, dict[str, Any]]) -> None:
    small, large = asg[2], asg[1024]
    assert len(large["Resources"]) == len(small["Resources"]) < 60
    assert abs(len(json.dumps(large)) - len(json.dumps(small))) < 100  # only the numbers differ
    (group,) = by_type(large, "AWS::AutoScaling::AutoScalingGroup")
    props = group["Properties"]
    assert (props["MinSize"], props["MaxSize"], props["DesiredCapacity"]) == ("1024", "1024", "1024")
    assert group["CreationPolicy"] == {
        "AutoScalingCreationPolicy": {"MinSuccessfulInstancesPercent": 100},
        "ResourceSignal": {"Count": 1024, "Timeout": "PT45M"},
    }
    # aws-cdk-lib's UpdatePolicy.replacing_update(); its group adds the scheduled-action setting (no
    # scheduled action changes the size of a fixed group, so a deploy keeps the cluster's size either way)
    assert group["UpdatePolicy"] == {
        "AutoScalingReplacingUpdate": {"WillReplace": True},
        "AutoScalingScheduledAction": {"IgnoreUnmodifiedGroupSizeProperties": True},
    }
    tags = {t["Key"]: t for t in props["Tags"]}
    assert all(t["PropagateAtLaunch"] for t in tags.values())
    assert {"efa-cdk:cluster", "efa-cdk:logical-id", "Name"} <= set(tags)
    assert not by_type(large, "AWS::EC2::Instance")
    assert "NodeGroupName" in large["Outputs"] and "NodePrivateIps" not in large["Outputs"]
    assert lint(large) == []


def test_the_group_sets_the_subnet_not_the_launch_template(asg: dict[int, dict[str, Any]]) -> None:
    t = asg[2]
    (group,) = by_type(t, "AWS::AutoScaling::AutoScalingGroup")
    (subnet,) = group["Properties"]["VPCZoneIdentifier"]
    assert subnet["Ref"].startswith("NetworkVpcPrivateSubnet")
    (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
    nics = lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
    assert len(nics) == 9 and not [n for n in nics if "SubnetId" in n]  # 1 ENA + 8 EFA
    group_name = lt["Properties"]["LaunchTemplateData"]["Placement"]["GroupName"]
    assert group_name["Fn::GetAtt"][0].startswith("ClusterPlacementGroup")


@pytest.mark.parametrize(("before", "after"), [(2, 1024), (1024, 16)])
def test_resizing_an_auto_scaling_group_replaces_nothing(
    asg: dict[int, dict[str, Any]], before: int, after: int
) -> None:
    old = asg[before] if before in asg else synth(node_group="asg", node_count=str(before))
    new = asg[after] if after in asg else synth(node_group="asg", node_count=str(after))
    d = diff_templates(old, new)
    assert d.replaced == {} and d.added == {} and d.removed == {}
    (group,) = [k for k, v in new["Resources"].items() if v["Type"] == "AWS::AutoScaling::AutoScalingGroup"]
    (count,) = [
        k for k, v in new["Resources"].items() if v["Type"] == "AWS::SSM::Parameter" and "NodeCount" in k
    ]
    # the group's CreationPolicy waits for as many signals as nodes (an attribute, updated with it)
    assert d.modified == {
        group: ["DesiredCapacity", "MaxSize", "MinSize", "CreationPolicy"],
        count: ["Value"],
    }
    assert d.verdicts[group].impact.name == "UPDATE" and not d.stateful_losses


def node_ids(template: dict[str, Any]) -> dict[str, str]:
    """Logical id of each explicit node, by its efa-cdk:node-index tag."""
    return {
        tag["Value"]: k
        for k, v in template["Resources"].items()
        if v["Type"] == "AWS::EC2::Instance"
        for tag in v["Properties"]["Tags"]
        if tag["Key"] == "efa-cdk:node-index"
    }


def test_shrinking_explicit_nodes_removes_only_the_last_ones() -> None:
    old, new = synth(node_count="4"), synth(node_count="2")
    d = diff_templates(old, new)
    ids = node_ids(old)
    assert d.replaced == {} and d.added == {}
    assert d.removed == {ids["2"]: "AWS::EC2::Instance", ids["3"]: "AWS::EC2::Instance"}
    (count,) = [
        k for k, v in new["Resources"].items() if v["Type"] == "AWS::SSM::Parameter" and "NodeCount" in k
    ]
    (wait,) = [k for k, v in new["Resources"].items() if v["Type"] == "AWS::CloudFormation::WaitCondition"]
    # the node count the nodes read, and what the benchmarks' wait waits for; nothing else changes
    assert d.modified == {count: ["Value"], wait: ["DependsOn"]}


def test_a_replacement_label_replaces_that_node_and_nothing_else() -> None:
    """Issue 23 item 4: CloudFormation never recreates an instance deleted outside it; a label on node 1
    gives it a new logical id (a new instance, the old one deleted), and only a new label does it again."""
    old = synth(node_count="3")
    labelled = synth(node_count="3", node_replacements="1:2026-11-24")
    d = diff_templates(old, labelled)
    before, after = node_ids(old), node_ids(labelled)
    assert d.removed == {before["1"]: "AWS::EC2::Instance"} and d.added == {after["1"]: "AWS::EC2::Instance"}
    assert before["0"] == after["0"] and before["2"] == after["2"] and d.replaced == {}
    assert after["1"].startswith(before["1"]) and after["1"] != before["1"]
    tags = {t["Key"]: t["Value"] for t in labelled["Resources"][after["1"]]["Properties"]["Tags"]}
    assert tags["efa-cdk:logical-id"] == after["1"]  # the node signals its own CreationPolicy
    assert diff_templates(labelled, synth(node_count="3", node_replacements="1:2026-11-24")).removed == {}
    again = node_ids(synth(node_count="3", node_replacements="1:2026-12-01"))
    assert again["1"] not in (before["1"], after["1"])


def test_a_replacement_label_also_renews_the_elastic_ip_interface() -> None:
    """A public node's pre-created interface is held by the old instance: it is replaced with it."""
    old = synth(node_count="2", public_ip="all")
    new = synth(node_count="2", public_ip="all", node_replacements="0:r1")
    d = diff_templates(old, new)
    assert (
        sorted(d.removed.values())
        == sorted(d.added.values())
        == [
            "AWS::EC2::Instance",
            "AWS::EC2::NetworkInterface",
        ]
    )
    assert all(v != "AWS::EC2::EIP" for v in d.removed.values())  # the address is kept
    # Issue 34 item 4: each instance names in DependsOn the interface its launch template attaches, so
    # CloudFormation deletes the old interface only after the old instance (a resource is deleted after
    # the resources that depend on it)
    for t in (old, new):
        for logical_id in node_ids(t).values():
            instance = t["Resources"][logical_id]
            template_id = instance["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]
            data = t["Resources"][template_id]["Properties"]["LaunchTemplateData"]
            (primary,) = [i for i in data["NetworkInterfaces"] if i.get("NetworkInterfaceId")]
            assert primary["NetworkInterfaceId"]["Ref"] in instance["DependsOn"]


def test_switching_mode_is_shown_as_replacing_every_node() -> None:
    old = synth(node_count="2")
    d = diff_templates(old, synth(node_count="2", node_group="asg"))
    assert set(d.removed) == set(node_ids(old).values())
    # the group, the policy that lets its nodes mark themselves Unhealthy (monitoring), the group's
    # last replacement (an SSM parameter) and the alarm on replacements held back
    assert sorted(d.added.values()) == [
        "AWS::AutoScaling::AutoScalingGroup",
        "AWS::CloudWatch::Alarm",
        "AWS::IAM::Policy",
        "AWS::SSM::Parameter",
    ]


# --- capacity -------------------------------------------------------------------------------


def launch_data(t: dict[str, Any]) -> dict[str, Any]:
    (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
    return lt["Properties"]["LaunchTemplateData"]  # type: ignore[no-any-return]


def test_a_reservation_exactly_the_cluster_s_size_is_accepted() -> None:
    """A reservation of 4 instances holds a 4-node cluster (one more node is refused: test_bad_input)."""
    t = synth(
        capacity_reservation="cr-0123456789abcdef0", availability_zone="us-east-1a", capacity_instances="4",
        node_count="4",
    )  # fmt: skip
    assert len(by_type(t, "AWS::EC2::Instance")) == 4


def test_on_demand_reservation_without_its_own_placement_group() -> None:
    t = synth(
        capacity_reservation="cr-0123456789abcdef0", availability_zone="us-east-1a", capacity_instances="4"
    )
    data = launch_data(t)
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "InstanceMarketOptions" not in data and "Placement" not in data
    assert not by_type(t, "AWS::EC2::PlacementGroup")
    assert lint(t) == []


def test_reservation_in_its_cluster_placement_group() -> None:
    t = synth(
        capacity_reservation="cr-0123456789abcdef0",
        availability_zone="us-east-1a",
        placement_group="train-pg",
    )
    assert launch_data(t)["Placement"] == {"GroupName": "train-pg"}
    assert not by_type(t, "AWS::EC2::PlacementGroup")


def test_capacity_block() -> None:
    t = synth(
        capacity_block="cr-0fedcba9876543210",
        availability_zone="us-east-2b",
        node_count="16",
        node_group="asg",
    )
    data = launch_data(t)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": "cr-0fedcba9876543210"
    }
    assert "Placement" not in data and not by_type(t, "AWS::EC2::PlacementGroup")
    assert lint(t) == []


def test_reservation_group() -> None:
    arn = "arn:aws:resource-groups:us-east-1:123456789012:group/trn1-odcrs"
    t = synth(capacity_reservation=arn, availability_zone="us-east-1a")
    assert launch_data(t)["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationResourceGroupArn": arn
    }


# --- CloudFormation limits ------------------------------------------------------------------


def test_limit_violations_pure() -> None:
    ok = {"Resources": {f"R{i}": {} for i in range(MAX_RESOURCES)}, "Outputs": {}}
    assert limit_violations(ok, 1000) == []
    too_many = {
        "Resources": {f"R{i}": {} for i in range(MAX_RESOURCES + 1)},
        "Outputs": {f"O{i}": {} for i in range(201)},
    }
    rules = [v.rule for v in limit_violations(too_many, MAX_TEMPLATE_BYTES + 1)]
    assert rules == ["resources", "outputs", "template-size"]
    assert "node_group=asg" in limit_violations(too_many, 0)[0].fix


def test_too_many_resources_stop_synthesis() -> None:
    """90 explicit nodes with Elastic IPs: six resources each (CDK itself counts resources)."""
    params = ClusterParams.from_context(
        {"node_count": "90", "public_ip": "all"}, default_instance_type="p4d.24xlarge"
    )
    app = new_app()
    EfaClusterStack(app, "TooBig", params=params)
    with pytest.raises(
        RuntimeError, match=r"\[TooBig/Cluster\] TooBig: 5\d\d resources; CloudFormation allows 500"
    ) as err:
        app.synth()
    assert "Fix: use node_group=asg" in str(err.value)


def test_the_limits_validation_stops_synthesis_with_the_fix() -> None:
    """201 outputs next to a cluster: the validation on the cluster's own node fails synthesis; the app
    gains no construct and no plugin (a library construct changes nothing around it)."""
    from aws_cdk import CfnOutput

    params = ClusterParams.from_context({}, default_instance_type="p4d.24xlarge")
    app = new_app()
    stack = EfaClusterStack(app, "ManyOutputs", params=params)
    for i in range(200):
        CfnOutput(stack, f"Extra{i}", value=str(i))
    assert [c.node.id for c in app.node.children] == ["ManyOutputs"]
    with pytest.raises(RuntimeError, match="ValidationFailed") as err:
        app.synth()
    assert "[ManyOutputs/Cluster] ManyOutputs: 2" in str(
        err.value
    ) and "outputs; CloudFormation allows 200" in str(err.value)


@pytest.mark.parametrize(
    ("capacity", "warned"),
    [
        ("capacity_reservation", True),
        ("capacity_block", True),
        (None, False),  # On-Demand: no fixed pool
    ],
)
@pytest.mark.parametrize(("instances", "nodes"), [(2, 2), (3, 2)])
def test_a_replacement_in_a_reservation_without_a_spare_instance_is_warned(
    capacity: str | None, warned: bool, instances: int, nodes: int
) -> None:
    """Issue 34 item 2: CloudFormation creates the new instance before it deletes the old one, so in a
    reservation or Capacity Block exactly the cluster's size the new one cannot launch."""
    context: dict[str, Any] = {"node_count": str(nodes), "node_replacements": "1:2026-11-24"}
    if capacity:
        context |= {
            capacity: "cr-0123456789abcdef0",
            "capacity_instances": str(instances),
            "availability_zone": "us-east-1c",
        }
    params = ClusterParams.from_context(context, default_instance_type="trn1.32xlarge")
    stack = EfaClusterStack(new_app(), "Reserved", params=params)
    found = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("node_replacements")
    )
    texts = [str(m.entry.data) for m in found]
    if warned and instances == nodes:
        (text,) = texts
        assert "holds 2 instances for 2 nodes" in text and "Terminate the node first" in text, text
        assert "aws ec2 terminate-instances" in text
    else:
        assert texts == []


def test_the_template_size_estimate_stops_synthesis() -> None:
    """A resource beside the cluster whose properties pass CloudFormation's 1 MB: every resource's
    properties are resolved and measured, and synthesis stops with the estimate."""
    from aws_cdk import CfnResource

    params = ClusterParams.from_context({}, default_instance_type="p4d.24xlarge")
    app = new_app()
    stack = EfaClusterStack(app, "Large", params=params)
    CfnResource(stack, "Big", type="AWS::SSM::Document", properties={"Content": {"x": "y" * 1_100_000}})
    with pytest.raises(RuntimeError, match=r"\[Large/Cluster\] Large: .*\(an estimate\)"):
        app.synth()


def test_a_nested_stack_s_resources_count_in_its_own_template() -> None:
    """480 resources in a nested stack beside a cluster: the cluster's stack holds far fewer than 500
    (the nested stack's template is its own), so synthesis passes."""
    from aws_cdk import CfnWaitConditionHandle, NestedStack

    params = ClusterParams.from_context({}, default_instance_type="p4d.24xlarge")
    app = new_app()
    stack = EfaClusterStack(app, "WithNested", params=params)
    nested = NestedStack(stack, "Nested")
    for i in range(480):
        CfnWaitConditionHandle(nested, f"H{i}")
    app.synth()


def test_the_node_group_is_aws_cdk_lib_s_auto_scaling_group_and_grants_through_it() -> None:
    """`EfaAutoScalingGroup.group` is aws-cdk-lib's AutoScalingGroup over the same CfnAutoScalingGroup: a
    grant to it (iam.IGrantable, through CDK) reaches the node role, and its signals are the group's
    CreationPolicy."""
    from aws_cdk import aws_autoscaling as autoscaling
    from aws_cdk import aws_s3 as s3

    params = ClusterParams.from_context(
        {"node_group": "asg", "node_count": "3", "availability_zone": "us-east-1a"},
        default_instance_type="p4d.24xlarge",
    )
    stack = EfaClusterStack(new_app(), "Group", params=params)
    group = stack.cluster.auto_scaling_group
    assert group is not None and isinstance(group.group, autoscaling.AutoScalingGroup)
    assert group.group.node.default_child.node.path == group.auto_scaling_group.node.path  # type: ignore[union-attr]
    s3.Bucket(stack, "Data").grant_read(group.group)
    t = assertions.Template.from_stack(stack).to_json()
    (asg,) = by_type(t, "AWS::AutoScaling::AutoScalingGroup")
    assert asg["CreationPolicy"]["ResourceSignal"]["Count"] == 3
    role = stack.resolve(stack.cluster.role.role_name)
    policies = [p["Properties"] for p in by_type(t, "AWS::IAM::Policy")]
    assert any(role in p["Roles"] and "s3:GetObject*" in json.dumps(p["PolicyDocument"]) for p in policies)


def _cluster_with_resources(total: int) -> Any:
    """The P4d ready stack padded with wait-condition handles to `total` resources as written, CDK's
    CDKMetadata resource included (version reporting on, as `cdk synth` has it by default)."""
    import aws_cdk as cdk
    from aws_cdk import CfnWaitConditionHandle

    app = cdk.App(context=cdk_json_context(), analytics_reporting=True)
    stack = EfaClusterStack(
        app, "Edge", params=ClusterParams.from_context({}, default_instance_type="p4d.24xlarge")
    )
    probe = cdk.App(context=cdk_json_context(), analytics_reporting=True)
    base = EfaClusterStack(
        probe, "Edge", params=ClusterParams.from_context({}, default_instance_type="p4d.24xlarge")
    )
    written = len(assertions.Template.from_stack(base).to_json()["Resources"])
    for i in range(total - written):
        CfnWaitConditionHandle(stack, f"Pad{i}")
    return app


def test_exactly_500_resources_pass_and_501_are_refused() -> None:
    """Issue 41 item 19: CDKMetadata is in the tree when the validation runs (it was counted twice, so
    500 was refused as 501). The written template is counted too (the ready app's check)."""
    app = _cluster_with_resources(MAX_RESOURCES)
    written = app.synth().get_stack_by_name("Edge").template
    assert len(written["Resources"]) == MAX_RESOURCES and "CDKMetadata" in written["Resources"]
    with pytest.raises(RuntimeError, match=r"Edge: 501 resources; CloudFormation allows 500"):
        _cluster_with_resources(MAX_RESOURCES + 1).synth()


@pytest.mark.parametrize("over", [0, 1])
def test_a_written_template_is_held_to_the_byte_limit(tmp_path: Path, over: int) -> None:
    """Issue 41 item 19: what is written, in bytes: exactly the limit passes, one byte more is refused."""
    from efa_constructs.core.limits import written_violations

    body = json.dumps({"Resources": {"R": {"Type": "AWS::SSM::Document", "Properties": {"Content": ""}}}})
    pad = MAX_TEMPLATE_BYTES + over - len(body)
    text = body.replace('"Content": ""', '"Content": "' + "y" * pad + '"')
    path = tmp_path / "S.template.json"
    path.write_text(text)
    assert path.stat().st_size == MAX_TEMPLATE_BYTES + over
    assert [v.rule for v in written_violations(path)] == (["template-size"] if over else [])


def test_the_ready_app_refuses_a_written_template_its_estimate_could_not_see(tmp_path: Path) -> None:
    """A property override (which the construct's estimate cannot read from Python) takes a stack of the
    app over 1,000,000 bytes as written: the ready app's exit is 1 with the stack's line."""
    import aws_cdk as cdk
    from aws_cdk import CfnResource

    import app as ready_app

    app = cdk.App(outdir=str(tmp_path), context=cdk_json_context())
    big = cdk.Stack(app, "Overridden")
    blob = CfnResource(
        big, "Blob", type="Custom::Blob", properties={"ServiceToken": "arn:aws:sns:us-east-1:1:t"}
    )
    blob.add_property_override("Blob", "y" * MAX_TEMPLATE_BYTES)
    assert ready_app.main(app) == 1
