"""The ready stacks: behaviour, cfn-lint, snapshots and the no-replacement guarantee on resize."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import assertions
from syrupy.extensions.json import JSONSnapshotExtension

from efa_constructs.tools.template_diff import diff_templates
from stacks.cluster_stack import READY_CLUSTERS, EfaClusterStack
from stacks.parallel_cluster_stack import READY_PCLUSTERS
from stacks.params import ClusterParams
from stacks.pcs_stack import READY_PCS
from tests.conftest import lint_results
from tests.helpers import SNAPSHOT_BASE, against, by_type, lint, masked, new_app, readable


# (rule, logical-id prefix, reason): findings in resources CDK itself generates, not ours.
@pytest.mark.parametrize("name", [*READY_CLUSTERS, *READY_PCLUSTERS, *READY_PCS])
def test_ready_stack_is_cfn_lint_clean(templates: dict[str, Any], name: str) -> None:
    assert name in templates
    assert lint_results()[name] == []  # linted in the background as soon as the templates existed


#: EFA interfaces per node, from the sources (EFA-FACTS.md section 3's reference counts, the EC2 user
#: guide): not from the layout engine under test.
EFAS_PER_NODE = {
    "Trn1EfaCluster": 8,
    "Trn1nEfaCluster": 16,
    "P4dEfaCluster": 4,
    "P5EfaCluster": 32,
    "P3dnEfaCluster": 1,
    "Dl1EfaCluster": 4,
}


@pytest.mark.parametrize(("name", "itype"), list(READY_CLUSTERS.items()))
def test_ready_stack_launches_its_type_with_the_recommended_layout(
    templates: dict[str, Any], name: str, itype: str
) -> None:
    t = templates[name]
    (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
    data = lt["Properties"]["LaunchTemplateData"]
    assert data["InstanceType"] == itype
    nics = data["NetworkInterfaces"]
    efas = [n for n in nics if n.get("InterfaceType") in ("efa", "efa-only")]
    assert len(efas) == EFAS_PER_NODE[name]
    # the recommended layout: one ENA primary at card 0 / device 0, one EFA per card (EFA-FACTS.md section 3)
    assert [(n["NetworkCardIndex"], n["DeviceIndex"]) for n in nics if "InterfaceType" not in n] == [(0, 0)]
    assert len({n["NetworkCardIndex"] for n in efas}) == len(efas)
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert len(by_type(t, "AWS::EC2::Instance")) == 2
    assert by_type(t, "AWS::EC2::PlacementGroup")[0]["Properties"]["Strategy"] == "cluster"
    for node in by_type(t, "AWS::EC2::Instance"):  # nodes launch from the template, nothing overridden
        assert set(node["Properties"]) == {"LaunchTemplate", "Monitoring", "Tags"}


def test_trn1_cluster_has_eight_efas_per_node(templates: dict[str, Any]) -> None:
    (lt,) = by_type(templates["Trn1EfaCluster"], "AWS::EC2::LaunchTemplate")
    nics = lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
    assert [(n["NetworkCardIndex"], n["DeviceIndex"], n.get("InterfaceType", "interface")) for n in nics] == [
        (0, 0, "interface"),
        (0, 1, "efa-only"),
        *[(c, 0, "efa-only") for c in range(1, 8)],
    ]


def test_no_ingress_from_the_world(templates: dict[str, Any]) -> None:
    for name, t in templates.items():
        rules = [r["Properties"] for r in by_type(t, "AWS::EC2::SecurityGroupIngress")]
        for sg in by_type(t, "AWS::EC2::SecurityGroup"):
            rules += sg["Properties"].get("SecurityGroupIngress", [])
        assert rules, name
        assert not [r for r in rules if r.get("CidrIp") == "0.0.0.0/0" or r.get("CidrIpv6") == "::/0"], name


#: What the README's "What `cdk destroy` leaves behind" lists, as (type, a part of the logical id) pairs.
DOCUMENTED_RETAINED = {
    ("AWS::Logs::LogGroup", "NetworkFlowLogs"),  # each stack's VPC flow logs
    ("AWS::Logs::LogGroup", "ClusterMonitoringLogs"),  # the monitoring log group
    ("AWS::KMS::Key", "ClusterMonitoringAlarmKey"),  # the alarm topic's key
    ("AWS::Logs::LogGroup", "AWS679f53fac002430cb0da5b7982bd2287LogGroup"),  # the image lookup's function
    ("AWS::EFS::FileSystem", "ParallelClusterStorage"),  # Trn1ParallelCluster's EFS
    ("AWS::EFS::FileSystem", "PcsStorage"),  # Trn1PcsCluster's EFS
}


@pytest.mark.parametrize("name", [*READY_CLUSTERS, *READY_PCLUSTERS, *READY_PCS])
def test_what_stack_deletion_keeps_is_what_the_readme_lists(templates: dict[str, Any], name: str) -> None:
    kept = {
        (v["Type"], rid)
        for rid, v in templates[name]["Resources"].items()
        if v.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate", "Snapshot")
    }
    undocumented = {
        (t, rid) for t, rid in kept if not any(t == dt and dp in rid for dt, dp in DOCUMENTED_RETAINED)
    }
    assert not undocumented, f"{name} keeps {sorted(undocumented)} after cdk destroy: list them in the README"


@pytest.mark.parametrize("name", [*READY_CLUSTERS, *READY_PCLUSTERS, *READY_PCS])
def test_snapshot(templates: dict[str, Any], snapshot: Any, name: str) -> None:
    """What a pull request changes in each ready stack, readable: Trn1EfaCluster whole, the other cluster
    stacks as what differs from it (a change to all of them shows once), scripts as lines (the bootstrap's
    own lines folded: it is in the repository), long JSON one member a line (tests.helpers.readable)."""
    text = readable(masked(templates[name]))
    if name in READY_CLUSTERS and name != SNAPSHOT_BASE:
        text = against(readable(masked(templates[SNAPSHOT_BASE])), text)
    assert text == snapshot(extension_class=JSONSnapshotExtension)


def _synth(**context: Any) -> dict[str, Any]:
    app = new_app()
    params = ClusterParams.from_context(context, default_instance_type="trn1.32xlarge")
    stack = EfaClusterStack(app, "Resize", params=params)
    return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def two_and_three() -> tuple[dict[str, Any], dict[str, Any]]:
    return _synth(node_count="2"), _synth(node_count="3")


def test_growing_the_cluster_adds_a_node_and_changes_nothing_else(
    two_and_three: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    two, three = two_and_three
    added = set(three["Resources"]) - set(two["Resources"])
    assert [three["Resources"][r]["Type"] for r in added] == ["AWS::EC2::Instance"]
    assert set(two["Resources"]) <= set(three["Resources"])
    d = diff_templates(two, three)
    assert d.replaced == {} and d.removed == {}
    # Only the node-count parameter's value changes (an in-place update the nodes read at boot).
    (count_id,) = [
        r for r, v in three["Resources"].items() if v["Type"] == "AWS::SSM::Parameter" and "NodeCount" in r
    ]  # (the cluster's other parameter, Formed, is the leader's to write, and unchanged)
    (wait_id,) = [
        r for r, v in three["Resources"].items() if v["Type"] == "AWS::CloudFormation::WaitCondition"
    ]
    # and the benchmarks' wait lists the new node among what it waits for (DependsOn: cdk diff shows it too)
    assert d.modified == {count_id: ["Value"], wait_id: ["DependsOn"]}
    assert all(v.impact.name == "UPDATE" for r, v in d.verdicts.items() if r in d.modified)
    assert three["Resources"][count_id]["Properties"]["Value"] == "3"
    for rid, resource in two["Resources"].items():
        if rid == count_id:
            continue
        if resource["Type"] == "AWS::CloudFormation::WaitCondition":  # waits for the new node too
            assert set(three["Resources"][rid]["DependsOn"]) - set(resource["DependsOn"]) == added
            assert {**three["Resources"][rid], "DependsOn": None} == {**resource, "DependsOn": None}
            continue
        assert three["Resources"][rid] == resource, rid


def test_shrinking_removes_only_the_last_node(two_and_three: tuple[dict[str, Any], dict[str, Any]]) -> None:
    two, three = two_and_three
    (removed,) = set(three["Resources"]) - set(two["Resources"])
    assert removed.startswith("ClusterNode2")


def test_availability_zone_pins_subnet_and_region() -> None:
    t = _synth(availability_zone="us-east-1c")
    subnets = by_type(t, "AWS::EC2::Subnet")
    assert {s["Properties"]["AvailabilityZone"] for s in subnets} == {"us-east-1c"}


def test_existing_vpc_creates_no_network() -> None:
    t = _synth(
        vpc_id="vpc-0123456789abcdef0", subnet_id="subnet-0123456789abcdef0", availability_zone="us-west-2d"
    )
    assert by_type(t, "AWS::EC2::VPC") == []
    (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
    nics = lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
    assert {n["SubnetId"] for n in nics} == {"subnet-0123456789abcdef0"}


def test_key_pair_and_ssh_peers() -> None:
    t = _synth(key_pair="my-key", ssh_peers="198.51.100.0/24,pl-0abc1234")
    (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
    assert lt["Properties"]["LaunchTemplateData"]["KeyName"] == "my-key"
    (sg,) = by_type(t, "AWS::EC2::SecurityGroup")
    assert [r["CidrIp"] for r in sg["Properties"]["SecurityGroupIngress"]] == ["198.51.100.0/24"]
    assert lint(t) == []


BENCHMARKS = {
    "Trn1EfaCluster": "nccom-test fi_pingpong",
    "Trn1nEfaCluster": "nccom-test fi_pingpong",
    "P4dEfaCluster": "nccl-tests fi_pingpong",
    "P5EfaCluster": "nccl-tests fi_pingpong",
    "P3dnEfaCluster": "nccl-tests fi_pingpong",
    "Dl1EfaCluster": "fi_pingpong",
}


@pytest.mark.parametrize("name", list(READY_CLUSTERS))
def test_ready_stack_verifies_every_node_and_reports_benchmarks(templates: dict[str, Any], name: str) -> None:
    t = templates[name]
    for node in by_type(t, "AWS::EC2::Instance"):
        assert node["CreationPolicy"]["ResourceSignal"]["Count"] == 1
    assert t["Outputs"]["BenchmarkResults"]["Value"]["Fn::GetAtt"][1] == "Data"
    (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
    user_data = json.dumps(lt["Properties"]["LaunchTemplateData"]["UserData"])
    assert f"EFA_CDK_BENCHMARKS='{BENCHMARKS[name]}'" in user_data
    rdma = name != "P3dnEfaCluster" and name != "Dl1EfaCluster"
    assert f"EFA_CDK_RDMA_READ='{int(rdma)}'" in user_data


def test_public_ip_for_the_leader_only() -> None:
    t = _synth(public_ip="leader", node_count="3")
    value = t["Outputs"]["NodePublicIps"]["Value"]["Fn::Join"]
    assert value[1][1:] == ["-,-"] and value[1][0]["Fn::GetAtt"][1] == "PublicIp"  # CDK folds the literals
    assert len(by_type(t, "AWS::EC2::EIPAssociation")) == 1
    assert lint(t) == []


def test_benchmarks_can_be_switched_off() -> None:
    t = _synth(benchmarks="none")
    assert not by_type(t, "AWS::CloudFormation::WaitCondition") and "BenchmarkResults" not in t["Outputs"]
    assert all("CreationPolicy" in n for n in by_type(t, "AWS::EC2::Instance"))  # still verified


def test_node_software_off_allows_a_cluster_without_egress() -> None:
    t = _synth(node_software="false", internet_egress="none")
    assert all("CreationPolicy" not in n for n in by_type(t, "AWS::EC2::Instance"))
    assert not by_type(t, "AWS::EC2::KeyPair") and "BenchmarkResults" not in t["Outputs"]
    assert lint(t) == []


def test_without_a_zone_deploy_asks_for_one() -> None:
    """No availability_zone: synthesis stays offline, and the template has an AvailabilityZone
    parameter with no default (`cdk deploy` stops until one is chosen) that every subnet uses."""
    t = _synth()
    param = t["Parameters"]["AvailabilityZone"]
    assert param["Type"] == "AWS::EC2::AvailabilityZone::Name" and "Default" not in param
    assert "describe-instance-type-offerings" in param["Description"]
    subnets = by_type(t, "AWS::EC2::Subnet")
    assert subnets and all(
        s["Properties"]["AvailabilityZone"] == {"Ref": "AvailabilityZone"} for s in subnets
    )
    chosen = _synth(availability_zone="us-east-1c")
    assert "AvailabilityZone" not in chosen.get("Parameters", {})
    assert {s["Properties"]["AvailabilityZone"] for s in by_type(chosen, "AWS::EC2::Subnet")} == {
        "us-east-1c"
    }


def test_pcluster_without_a_zone_deploy_asks_for_one(templates: dict[str, Any]) -> None:
    param = templates["Trn1ParallelCluster"]["Parameters"]["AvailabilityZone"]
    assert "Default" not in param


def test_p3dn_asks_for_an_image_and_takes_one_from_context() -> None:
    """No current AWS image runs V100: the P3dn stack asks for ImageId at deploy, or takes ami_id."""
    app = new_app()
    params = ClusterParams.from_context({}, default_instance_type="p3dn.24xlarge")
    t = assertions.Template.from_stack(EfaClusterStack(app, "P3dn", params=params)).to_json()
    assert (
        t["Parameters"]["ImageId"]["Type"] == "AWS::EC2::Image::Id"
        and "Default" not in t["Parameters"]["ImageId"]
    )
    (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
    assert lt["Properties"]["LaunchTemplateData"]["ImageId"] == {"Ref": "ImageId"}
    assert not by_type(t, "Custom::EfaImageLookup")
    params = ClusterParams.from_context(
        {"ami_id": "ami-0123456789abcdef0", "ami_os": "al2023"}, default_instance_type="p3dn.24xlarge"
    )
    t = assertions.Template.from_stack(EfaClusterStack(new_app(), "P3dn", params=params)).to_json()
    (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
    data = lt["Properties"]["LaunchTemplateData"]
    assert data["ImageId"] == "ami-0123456789abcdef0" and "ImageId" not in t.get("Parameters", {})
    assert data["BlockDeviceMappings"][0]["DeviceName"] == "/dev/xvda"  # Amazon Linux's root device
    # the image asked for at deploy can be Amazon Linux too: ami_os alone describes that ImageId
    params = ClusterParams.from_context({"ami_os": "al2023"}, default_instance_type="p3dn.24xlarge")
    t = assertions.Template.from_stack(EfaClusterStack(new_app(), "P3dn", params=params)).to_json()
    (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
    data = lt["Properties"]["LaunchTemplateData"]
    assert (
        data["ImageId"] == {"Ref": "ImageId"} and data["BlockDeviceMappings"][0]["DeviceName"] == "/dev/xvda"
    )
    assert "EFA_CDK_USER='ec2-user'" in json.dumps(data["UserData"])


def test_the_ready_stacks_read_the_node_options_in_one_place() -> None:
    """Every ready stack hands its construct the node options through ``ReadyStackBase.node_options``
    (efa_constructs.cdk.NodeOptions, read from the context once): no stack module passes one of them
    itself."""
    import ast

    from efa_constructs.cdk import NodeOptions
    from tests.helpers import ROOT

    own = [
        f"{path.name}:{node.lineno} {node.arg}"
        for path in sorted((ROOT / "stacks").glob("*.py"))
        if path.name != "base.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.keyword) and node.arg in NodeOptions.__annotations__
    ]
    assert not own, own
