"""preflight's node groups and file systems as read from synthesized templates
(efa_constructs/tools/preflight/templates.py): zones, subnets through the assembly's exports, images, the
manifest's stacks; and on templates written by hand, each field node_groups reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_cdk import aws_ec2 as ec2
from botocore.stub import Stubber

from efa_constructs.tools import preflight
from efa_constructs.tools.preflight import LustreAsk, Preflight, lustre_file_systems, node_groups
from efa_constructs.tools.preflight.templates import _made_by
from tests.account import REGION, _assembly, synth
from tests.helpers import cdk_json_context

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse")  # moto: what its CloudFormation skips


def test_an_auto_scaling_groups_zone_comes_from_the_group(tmp_path: Path) -> None:
    """Issue 41 item 3: an Auto Scaling group's launch template has no subnet (the group's
    VPCZoneIdentifier has it), so the zone was lost and a reservation in another zone passed."""
    out = synth(tmp_path, availability_zone="us-east-1a", node_group="asg")
    (group,) = node_groups("Trn1EfaCluster", json.loads((out / "Trn1EfaCluster.template.json").read_text()))
    assert (group.zone, group.count) == ("us-east-1a", 2)


def test_the_template_says_what_the_account_must_have(tmp_path: Path) -> None:
    out = synth(tmp_path, availability_zone="us-east-1a", key_pair="mine")
    (group,) = node_groups("Trn1EfaCluster", json.loads((out / "Trn1EfaCluster.template.json").read_text()))
    assert (group.instance_type, group.count, group.zone) == ("trn1.32xlarge", 2, "us-east-1a")
    assert (group.efa_interfaces, group.network_cards) == (8, 8)  # trn1.32xlarge (EFA-FACTS.md)
    assert (
        group.key_name == "mine"
        and group.image_parameter
        and group.image_parameter.startswith("/aws/service/")
    )


@pytest.mark.parametrize("references", ["weak", "strong"])
def test_a_subnet_imported_from_another_stack_of_the_assembly_is_followed_or_said(
    tmp_path: Path, references: str
) -> None:
    """Issue 41 item 3: a VPC made in one stack and used by another (CDK writes Fn::ImportValue of the
    network stack's export): the node group's zone is read in the exporting stack; an export the
    assembly does not hold is named, and the zone and subnet checks say they could not look."""
    import aws_cdk as cdk

    from efa_constructs import EfaCluster, NodeSoftware

    out = tmp_path / "cdk.out"
    context = {**cdk_json_context(), "@aws-cdk/core:defaultCrossStackReferences": references}
    app = cdk.App(outdir=str(out), context=context)
    network = cdk.Stack(app, "Network")
    vpc = ec2.Vpc(network, "Vpc", availability_zones=["us-east-1c"], nat_gateways=0, subnet_configuration=[
        ec2.SubnetConfiguration(name="nodes", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])  # fmt: skip
    cluster = cdk.Stack(app, "Cluster")
    EfaCluster(cluster, "C", vpc=vpc, instance_type=ec2.InstanceType("trn1.32xlarge"), node_count=2,
               node_software=NodeSoftware.none())  # fmt: skip
    app.synth()
    found = preflight.templates(out, ["Cluster"])
    # the cross-stack reference CDK writes: Fn::ImportValue (its default), Fn::GetStackOutput ("weak")
    wrote = "Fn::GetStackOutput" if references == "weak" else "Fn::ImportValue"
    assert wrote in json.dumps(found["Cluster"])
    exports = preflight.assembly_exports(preflight._every_template(out, found))
    (group,) = node_groups("Cluster", found["Cluster"], exports)
    assert group.zone == "us-east-1c" and group.subnet_from is None
    (alone,) = node_groups("Cluster", found["Cluster"], {})  # the exporting stack not in the assembly
    said = "output Network/Publish" if references == "weak" else "export Network:ExportsOutput"
    assert alone.zone is None and alone.subnet_from is not None and said in alone.subnet_from, alone
    pf = Preflight(boto3.session.Session(region_name=REGION))
    ec2_client = pf.session.client("ec2", region_name=REGION)
    stub = Stubber(ec2_client)
    stub.add_response(
        "describe_instance_type_offerings",
        {
            "InstanceTypeOfferings": [
                {
                    "InstanceType": "trn1.32xlarge",
                    "LocationType": "availability-zone",
                    "Location": "us-east-1c",
                }
            ]
        },
    )
    stub.activate()
    pf._clients["ec2"] = ec2_client
    offered, subnet = pf.offered(alone), pf.subnet(alone)
    assert offered.status == "WARN" and "its zone is not known here" in offered.found, offered
    assert subnet is not None and subnet.status == "WARN" and "not checked" in subnet.found


def test_the_stacks_are_the_manifests_not_every_template_file(tmp_path: Path) -> None:
    """A nested stack's template (CDK writes <Parent><Nested><hash>.nested.template.json beside its
    parent's) is its parent's asset: preflight checks the manifest's stacks only."""
    out = _assembly(tmp_path, REGION)
    (out / "SNestedA1B2C3D4.nested.template.json").write_text(json.dumps({"Resources": {}}))
    assert list(preflight.templates(out, [])) == ["S"]
    with pytest.raises(
        preflight.PreflightError, match=r"no template for SNestedA1B2C3D4\.nested in .* \(it has S\)"
    ):
        preflight.templates(out, ["SNestedA1B2C3D4.nested"])
    (out / "manifest.json").write_text("[]")
    with pytest.raises(preflight.PreflightError, match="is not a cloud assembly manifest"):
        preflight.templates(out, [])


def test_a_pcs_node_group_s_image_is_the_one_preflight_checks(tmp_path: Path) -> None:
    """PCS takes the image from the node group's AmiId, not the launch template (which has none)."""
    import aws_cdk as cdk

    from stacks.params import PcsParams
    from stacks.pcs_stack import EfaPcsClusterStack

    app = cdk.App(outdir=str(tmp_path), context=cdk_json_context())
    context = {"availability_zone": "us-east-1c", "ami_id": "ami-0123456789abcdef0"}
    EfaPcsClusterStack(
        app, "Trn1PcsCluster", params=PcsParams.from_context(context, default_instance_type="trn1.32xlarge")
    )
    app.synth()
    template = json.loads((tmp_path / "Trn1PcsCluster.template.json").read_text())
    (group,) = node_groups("Trn1PcsCluster", template)  # the EFA group (the login group has no EFA)
    assert (group.instance_type, group.image_id, group.zone) == (
        "trn1.32xlarge",
        "ami-0123456789abcdef0",
        "us-east-1c",
    )


# Templates written by hand in the shapes CloudFormation's resource reference gives (AWS::EC2::LaunchTemplate
# LaunchTemplateData, AWS::EC2::Instance, AWS::AutoScaling::AutoScalingGroup, AWS::EC2::Subnet): each field
# node_groups reads, at the values synthesis may write and the ones it may not.


def _efa(card: int | None, kind: str = "efa") -> dict[str, Any]:
    nic: dict[str, Any] = {"InterfaceType": kind, "DeviceIndex": 0 if card in (0, None) else 1}
    return nic if card is None else nic | {"NetworkCardIndex": card}


def _shaped(
    nics: list[dict[str, Any]],
    *,
    launcher: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
    resources: dict[str, Any] | None = None,
    parameters: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One launch template (logical id NodesLaunchTemplate0A1B2C3D) of trn1.32xlarge and what launches it
    (one instance unless `launcher`)."""
    ref = {"Ref": "NodesLaunchTemplate0A1B2C3D"}
    lt_data = {"InstanceType": "trn1.32xlarge", "NetworkInterfaces": nics, **(data or {})}
    return {
        "Parameters": parameters or {},
        "Resources": {
            "NodesLaunchTemplate0A1B2C3D": {
                "Type": "AWS::EC2::LaunchTemplate",
                "Properties": {"LaunchTemplateData": lt_data},
            },
            "Node0": launcher
            or {"Type": "AWS::EC2::Instance", "Properties": {"LaunchTemplate": {"LaunchTemplateId": ref}}},
            **(resources or {}),
        },
    }


def test_a_hand_written_launch_template_is_read_field_by_field() -> None:
    """EC2 user guide: an EFA-only interface has no IP address (interfaces_with_ip counts the others); a
    network interface without NetworkCardIndex is on card 0; MarketType capacity-block is a Capacity Block;
    the group is named by the launch template's logical id without CDK's hash."""
    nics = [_efa(None), _efa(1, "efa-only"), _efa(2, "efa-only"), _efa(3, "efa-only")]
    market = {"InstanceMarketOptions": {"MarketType": "capacity-block"}}
    (group,) = node_groups("S", _shaped(nics, data=market))
    assert (group.name, group.count, group.efa_interfaces, group.network_cards) == ("Nodes", 1, 4, 4)
    assert (group.interfaces_with_ip, group.capacity_block) == (1, True)
    (alone,) = node_groups("S", _shaped([_efa(None)]))
    assert (alone.network_cards, alone.interfaces_with_ip, alone.capacity_block) == (1, 1, False)


@pytest.mark.parametrize(
    ("sizes", "count"),
    [({"MinSize": "0", "MaxSize": "4", "DesiredCapacity": "2"}, 2), ({"MinSize": "0", "MaxSize": "4"}, 4)],
)
def test_an_auto_scaling_group_counts_its_desired_capacity_else_its_most(
    sizes: dict[str, str], count: int
) -> None:
    """AWS::AutoScaling::AutoScalingGroup's sizes are strings; without DesiredCapacity the group may grow to
    MaxSize, which is what the account must hold."""
    ref = {"Ref": "NodesLaunchTemplate0A1B2C3D"}
    asg = {
        "Type": "AWS::AutoScaling::AutoScalingGroup",
        "Properties": {
            "LaunchTemplate": {"LaunchTemplateId": ref},
            "VPCZoneIdentifier": ["subnet-0123456789abcdef0"],
            **sizes,
        },
    }
    (group,) = node_groups("S", _shaped([_efa(0)], launcher=asg))
    assert (group.count, group.subnet_id) == (count, "subnet-0123456789abcdef0")


def test_every_elastic_ip_of_the_stack_is_counted_once_on_the_first_group() -> None:
    """Two groups (one instance type in two zones' subnets) and two EIPs: the account's Elastic IP quota is
    asked for two, not two per group."""
    template = _shaped([_efa(0) | {"SubnetId": {"Ref": "A"}}])
    second = _shaped([_efa(0) | {"SubnetId": {"Ref": "B"}}])["Resources"]["NodesLaunchTemplate0A1B2C3D"]
    template["Resources"] |= {
        "OtherLaunchTemplate0A1B2C3E": second,
        "Node1": {
            "Type": "AWS::EC2::Instance",
            "Properties": {"LaunchTemplate": {"LaunchTemplateId": {"Ref": "OtherLaunchTemplate0A1B2C3E"}}},
        },
        "A": {"Type": "AWS::EC2::Subnet", "Properties": {"AvailabilityZone": "us-east-1a"}},
        "B": {"Type": "AWS::EC2::Subnet", "Properties": {"AvailabilityZone": "us-east-1b"}},
        "Eip0": {"Type": "AWS::EC2::EIP"},
        "Eip1": {"Type": "AWS::EC2::EIP"},
    }
    groups = node_groups("S", template)
    assert [(g.zone, g.elastic_ips) for g in groups] == [("us-east-1a", 2), ("us-east-1b", 0)]


@pytest.mark.parametrize(
    ("image", "parameters", "resources", "parameter"),
    [
        (
            "{{resolve:ssm:/aws/service/neuron/dlami/ubuntu-22.04/latest/image_id}}",
            {},
            {},
            "/aws/service/neuron/dlami/ubuntu-22.04/latest/image_id",
        ),
        (
            {"Ref": "Image"},
            {"Image": {"Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>", "Default": "/my/image"}},
            {},
            "/my/image",
        ),
        ({"Ref": "Image"}, {"Image": {"Type": "String", "Default": "ami-0123456789abcdef0"}}, {}, None),
        ({"Ref": "Lookup"}, {}, {"Lookup": {"Type": "AWS::CloudFormation::CustomResource"}}, None),
    ],
)
def test_the_image_s_ssm_parameter_is_read_only_from_what_names_one(
    image: Any, parameters: dict[str, Any], resources: dict[str, Any], parameter: str | None
) -> None:
    """CloudFormation's dynamic reference {{resolve:ssm:NAME}} and a parameter of an SSM type name an SSM
    parameter; a plain String parameter or another kind of resource does not (and is no error)."""
    template = _shaped([_efa(0)], data={"ImageId": image}, parameters=parameters, resources=resources)
    (group,) = node_groups("S", template)
    assert group.image_parameter == parameter


def test_a_subnet_of_no_given_zone_has_none_and_a_template_named_by_a_parameter_is_no_group() -> None:
    """AWS::EC2::Subnet's AvailabilityZone is optional (EC2 picks one); a launch template id given as a
    parameter is not one this template makes: no node group, and no error."""
    template = _shaped(
        [_efa(0) | {"SubnetId": {"Ref": "A"}}],
        resources={"A": {"Type": "AWS::EC2::Subnet", "Properties": {}}},
    )
    (group,) = node_groups("S", template)
    assert (group.zone, group.subnet_id) == (None, None)
    template["Resources"]["Node0"]["Properties"]["LaunchTemplate"]["LaunchTemplateId"] = {"Ref": "TemplateId"}
    template["Parameters"] = {"TemplateId": {"Type": "String"}}
    assert node_groups("S", template) == []


def test_a_file_system_is_the_stack_s_own_only_by_both_tags() -> None:
    """CloudFormation tags what it makes with aws:cloudformation:stack-name and :logical-id: a file system
    is this stack's resource (an update, not one more against the quota) only when both match."""

    def tagged(stack: str, logical: str) -> dict[str, Any]:
        return {
            "Tags": [
                {"Key": "aws:cloudformation:stack-name", "Value": stack},
                {"Key": "aws:cloudformation:logical-id", "Value": logical},
            ]
        }

    assert _made_by(tagged("S", "Fs"), "S", "Fs")
    assert not _made_by(tagged("Other", "Fs"), "S", "Fs") and not _made_by(tagged("S", "Other"), "S", "Fs")


def test_a_pcs_compute_node_group_gives_the_type_image_count_and_subnets() -> None:
    """AWS::PCS::ComputeNodeGroup: the instance type is the group's InstanceConfigs' (its launch template
    has none), the image its AmiId, the most nodes ScalingConfiguration's MaxInstanceCount, the subnets its
    SubnetIds."""
    pcs = {
        "Type": "AWS::PCS::ComputeNodeGroup",
        "Properties": {
            "CustomLaunchTemplate": {"TemplateId": {"Ref": "NodesLaunchTemplate0A1B2C3D"}, "Version": "1"},
            "InstanceConfigs": [{"InstanceType": "p5.48xlarge"}],
            "AmiId": "ami-0123456789abcdef0",
            "ScalingConfiguration": {"MinInstanceCount": 0, "MaxInstanceCount": 4},
            "SubnetIds": ["subnet-0123456789abcdef0"],
        },
    }
    (group,) = node_groups("S", _shaped([_efa(0)], launcher=pcs, data={"InstanceType": None}))
    assert (group.instance_type, group.count, group.image_id) == ("p5.48xlarge", 4, "ami-0123456789abcdef0")
    assert group.subnet_id == "subnet-0123456789abcdef0"


def test_only_a_persistent_2_lustre_file_system_of_a_known_size_is_asked_of_the_account() -> None:
    """AWS::FSx::FileSystem: preflight holds a PERSISTENT_2 Lustre file system's size (a number at synth)
    against the account; another kind, a SCRATCH deployment or a size known only at deploy is not asked."""

    def fs(kind: str, deployment: str, size: Any) -> dict[str, Any]:
        return {
            "Type": "AWS::FSx::FileSystem",
            "Properties": {
                "FileSystemType": kind,
                "StorageCapacity": size,
                "LustreConfiguration": {"DeploymentType": deployment, "EfaEnabled": True},
            },
        }

    template = {
        "Resources": {
            "Fs": fs("LUSTRE", "PERSISTENT_2", 4800),
            "Ontap": fs("ONTAP", "PERSISTENT_2", 1024),
            "Scratch": fs("LUSTRE", "SCRATCH_2", 1200),
            "Sized": fs("LUSTRE", "PERSISTENT_2", {"Ref": "Size"}),
        }
    }
    assert lustre_file_systems("S", template) == [LustreAsk("S", "Fs", 4800, True)]


def test_a_group_says_its_interfaces_and_whether_the_first_asks_for_a_public_address() -> None:
    """What the route-out check judges an internet gateway by (issue 60 item 1): the launch template's
    interfaces, and the first one's AssociatePublicIpAddress."""
    (group,) = node_groups("S", _shaped([_efa(0), _efa(1), _efa(2, "efa-only")]))
    assert (group.interfaces, group.public_address) == (3, False)
    (group,) = node_groups("S", _shaped([_efa(0) | {"AssociatePublicIpAddress": True}]))
    assert (group.interfaces, group.public_address) == (1, True)
