"""preflight's node groups and file systems as read from synthesized templates
(efa_constructs/tools/preflight/templates.py): zones, subnets through the assembly's exports, images, the
manifest's stacks.
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from aws_cdk import aws_ec2 as ec2
from botocore.stub import Stubber

from efa_constructs.tools import preflight
from efa_constructs.tools.preflight import Preflight, node_groups
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
