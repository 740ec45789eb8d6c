"""`EfaLaunchTemplate` (cdk/launch_template.py): the interfaces the layout gives, IMDSv2 and its hop
limit, encrypted volumes, the default image per accelerator, and composition with aws-cdk-lib (grants,
connections, aws-cdk-lib's AutoScalingGroup launching from it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3

from efa_constructs import (
    EfaLaunchTemplate,
    EfaSecurityGroup,
    Layout,
    plan_layout,
)
from efa_constructs.core.errors import EfaConfigError
from tests.helpers import isolated_vpc, policy_statements

Match = assertions.Match


def _lt(make_stack: Any, **kwargs: Any) -> tuple[EfaLaunchTemplate, assertions.Template]:
    stack = make_stack()
    vpc = isolated_vpc(stack)
    sg = EfaSecurityGroup(stack, "Sg", vpc=vpc)
    lt = EfaLaunchTemplate(stack, "Lt", security_groups=[sg], subnet=vpc.isolated_subnets[0], **kwargs)
    return lt, assertions.Template.from_stack(stack)


@pytest.mark.parametrize(
    ("itype", "mode"),
    [
        ("trn1.32xlarge", "recommended"),
        ("trn1.32xlarge", "legacy"),
        ("p5.48xlarge", "max-bandwidth"),
        ("p6-b300.48xlarge", "recommended"),
        ("c5n.18xlarge", "recommended"),
        ("hpc6id.32xlarge", "recommended"),
    ],
)
def test_launch_template_interfaces_follow_the_layout(make_stack: Any, itype: str, mode: str) -> None:
    _, t = _lt(make_stack, instance_type=ec2.InstanceType(itype), nic_layout=Layout.mode(mode))
    data = next(iter(t.find_resources("AWS::EC2::LaunchTemplate").values()))["Properties"][
        "LaunchTemplateData"
    ]
    nics = data["NetworkInterfaces"]
    expected = plan_layout(itype, mode).interfaces
    assert [(n["NetworkCardIndex"], n["DeviceIndex"], n.get("InterfaceType", "interface")) for n in nics] == [
        (i.network_card_index, i.device_index, i.interface_type) for i in expected
    ]
    assert all(len(n["Groups"]) == 1 and "SubnetId" in n for n in nics)  # SG + one subnet on EVERY interface
    assert "SecurityGroupIds" not in data  # would conflict with NetworkInterfaces
    assert data["InstanceType"] == itype


@pytest.mark.parametrize(("bridged", "hops"), [(False, 1), (True, 2)])
def test_imds_is_one_hop_away_unless_bridged_containers_are_asked_for(
    make_stack: Any, bridged: bool, hops: int
) -> None:
    """Hop limit 1: the node and host-networked containers reach IMDS; a container on a bridge, one
    hop further, cannot take the node role's credentials (AWS Control Tower's IMDS hop-limit control)."""
    _, t = _lt(make_stack, instance_type=ec2.InstanceType("p4d.24xlarge"), bridged_containers=bridged)
    (lt,) = t.find_resources("AWS::EC2::LaunchTemplate").values()
    assert lt["Properties"]["LaunchTemplateData"]["MetadataOptions"]["HttpPutResponseHopLimit"] == hops


def test_launch_template_is_secure_by_default(make_stack: Any) -> None:
    _, t = _lt(make_stack, instance_type=ec2.InstanceType("p4d.24xlarge"))
    t.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {
                    "MetadataOptions": Match.object_like({"HttpTokens": "required"}),
                    "MaintenanceOptions": {"AutoRecovery": "default"},  # EC2 recovers supported types
                    "BlockDeviceMappings": [
                        {
                            "DeviceName": "/dev/sda1",
                            "Ebs": {
                                "Encrypted": True,
                                "VolumeType": "gp3",
                                "VolumeSize": 200,
                                "DeleteOnTermination": True,
                            },
                        }
                    ],
                }
            )
        },
    )
    assert _image_parameters(t) == [
        "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
    ]


def _image_parameters(t: assertions.Template) -> list[str]:
    """The SSM parameters the stack's one-time image lookups read (at create, never on update). The
    launch templates take the AMI id from the lookup's physical id (Ref), which an update of the lookup
    keeps, never from its response data (GetAtt), which an update empties (issue 23 item 6)."""
    resources = t.to_json()["Resources"]
    ids = [k for k, r in resources.items() if r["Type"] == "Custom::EfaImageLookup"]
    lookups = [resources[k]["Properties"] for k in ids]
    assert all("Update" not in r for r in lookups)
    image_ids = [r["Properties"]["LaunchTemplateData"]["ImageId"] for r in resources.values()
                 if r["Type"] == "AWS::EC2::LaunchTemplate"]  # fmt: skip
    assert image_ids and all(i in [{"Ref": k} for k in ids] for i in image_ids), image_ids
    return [str(json.loads(r["Create"])["parameters"]["Name"]) for r in lookups]


@pytest.mark.parametrize(
    ("itype", "ssm_path"),
    [
        ("trn1.32xlarge", "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id"),
        (
            "p6e-gb200.36xlarge",
            "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id",
        ),
        ("hpc7g.16xlarge", "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-arm64"),
        ("c5n.18xlarge", "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64"),
    ],
)
def test_default_ami_by_accelerator(make_stack: Any, itype: str, ssm_path: str) -> None:
    _, t = _lt(make_stack, instance_type=ec2.InstanceType(itype))
    assert _image_parameters(t) == [ssm_path]
    assert not [
        p
        for p in t.to_json().get("Parameters", {}).values()
        if "SSM" in p["Type"] and "ami" in p.get("Default", "")
    ]


def test_launch_template_rejects_a_layout_for_another_type(make_stack: Any) -> None:
    with pytest.raises(EfaConfigError, match="another type"):
        _lt(
            make_stack,
            instance_type=ec2.InstanceType("trn1.32xlarge"),
            nic_layout=Layout.custom(plan_layout("p5.48xlarge")),
        )


@pytest.mark.parametrize("bad", [4, 20000])
def test_root_volume_size(make_stack: Any, bad: int) -> None:
    with pytest.raises(EfaConfigError, match="root_volume_gib"):
        _lt(make_stack, instance_type=ec2.InstanceType("trn1.32xlarge"), root_volume_gib=bad)


def test_launch_template_composes_with_cdk_grants_and_connections(make_stack: Any) -> None:
    stack = make_stack()
    vpc = isolated_vpc(stack)
    sg = EfaSecurityGroup(stack, "Sg", vpc=vpc)
    lt = EfaLaunchTemplate(stack, "Lt", instance_type=ec2.InstanceType("trn1.32xlarge"), security_groups=[sg])
    s3.Bucket(stack, "Ckpt").grant_write(lt)
    cache = ec2.SecurityGroup(stack, "Cache", vpc=vpc)
    cache.connections.allow_from(lt, ec2.Port.tcp(6379))
    t = assertions.Template.from_stack(stack)
    assert any("s3:PutObject" in st["Action"] for st in policy_statements(t, "LtRole"))
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "FromPort": 6379,
            "SourceSecurityGroupId": {"Fn::GetAtt": [Match.string_like_regexp("^Sg"), "GroupId"]},
        },
    )


def test_an_aws_cdk_lib_auto_scaling_group_launches_from_the_efa_launch_template(make_stack: Any) -> None:
    """EfaLaunchTemplate is an ec2.ILaunchTemplate: aws-cdk-lib's AutoScalingGroup takes it and launches
    the template's latest version in the subnets it is given (the template names none)."""
    from aws_cdk import RemovalPolicy
    from aws_cdk import aws_autoscaling as autoscaling

    stack = make_stack()
    vpc = isolated_vpc(stack)
    sg = EfaSecurityGroup(stack, "Sg", vpc=vpc)
    lt = EfaLaunchTemplate(stack, "Lt", instance_type=ec2.InstanceType("c5n.18xlarge"), security_groups=[sg])
    autoscaling.AutoScalingGroup(
        stack, "Group", vpc=vpc, launch_template=lt, min_capacity=2, max_capacity=2,
        vpc_subnets=ec2.SubnetSelection(subnets=[vpc.isolated_subnets[0]]),
    )  # fmt: skip
    lt.apply_removal_policy(RemovalPolicy.RETAIN)
    t = assertions.Template.from_stack(stack)
    (lt_id,) = t.find_resources("AWS::EC2::LaunchTemplate")
    t.has_resource_properties(
        "AWS::AutoScaling::AutoScalingGroup",
        {
            "LaunchTemplate": {
                "LaunchTemplateId": {"Ref": lt_id},
                "Version": {"Fn::GetAtt": [lt_id, "LatestVersionNumber"]},
            },
            "MinSize": "2",
            "VPCZoneIdentifier": [{"Ref": Match.string_like_regexp("^VpcPSubnet1")}],
        },
    )
    t.has_resource("AWS::EC2::LaunchTemplate", {"DeletionPolicy": "Retain"})
    assert lt.stack is stack and lt.env.region == stack.region


def _group_warnings(stack: Any) -> dict[str, list[str]]:
    """The efa-cdk warnings on Auto Scaling groups, by code: the construct path each is on."""
    out: dict[str, list[str]] = {}
    for m in assertions.Annotations.from_stack(stack).find_warning("*", Match.any_value()):
        text = str(m.entry.data)
        for code in ("auto-scaling-group-spans-zones", "auto-scaling-group-without-placement-group"):
            if f"efa-cdk:{code}" in text:
                out.setdefault(code, []).append(m.id)
    return out


@pytest.mark.parametrize(
    ("subnets", "placement", "expected"),
    [
        # two zones of a VPC this stack makes: EFA does not cross zones (EC2 user guide, EFA limitations)
        ("two zones", True, {"auto-scaling-group-spans-zones"}),
        ("one subnet", True, set()),
        # no placement group in the template or the group (EC2 user guide, EFA: a cluster placement group)
        ("one subnet", False, {"auto-scaling-group-without-placement-group"}),
        # imported subnets: their zones are not in the template; two of them are warned of
        ("two imported", True, {"auto-scaling-group-spans-zones"}),
        ("one imported", True, set()),
    ],
)
def test_an_aws_cdk_lib_auto_scaling_group_across_zones_or_without_placement_is_warned_of(
    make_stack: Any, subnets: str, placement: bool, expected: set[str]
) -> None:
    from aws_cdk import aws_autoscaling as autoscaling

    stack = make_stack()
    vpc = ec2.Vpc(
        stack, "Vpc", max_azs=2, nat_gateways=0,
        subnet_configuration=[ec2.SubnetConfiguration(name="i", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
    )  # fmt: skip
    pg = ec2.PlacementGroup(stack, "Pg", strategy=ec2.PlacementGroupStrategy.CLUSTER) if placement else None
    lt = EfaLaunchTemplate(
        stack, "Lt", instance_type=ec2.InstanceType("c5n.18xlarge"),
        security_groups=[EfaSecurityGroup(stack, "Sg", vpc=vpc)], placement_group=pg,
    )  # fmt: skip
    imported = [
        ec2.Subnet.from_subnet_attributes(
            stack, f"S{i}", subnet_id=f"subnet-0{i}", availability_zone=f"us-east-1{z}"
        )
        for i, z in enumerate("ab")
    ]
    chosen = {
        "two zones": vpc.isolated_subnets,
        "one subnet": vpc.isolated_subnets[:1],
        "two imported": imported,
        "one imported": imported[:1],
    }[subnets]
    autoscaling.AutoScalingGroup(
        stack, "Group", vpc=vpc, launch_template=lt, min_capacity=2, max_capacity=2,
        vpc_subnets=ec2.SubnetSelection(subnets=chosen),
    )  # fmt: skip
    warned = _group_warnings(stack)
    assert set(warned) == expected
    assert all(path == [f"/{stack.stack_name}/Group/ASG"] for path in warned.values())
    if subnets == "two zones":
        text = str(
            assertions.Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("zones"))[0]
        )
        assert "(zones the region's zone 1, the region's zone 2)" in text and "/Lt" in text


def test_efa_clusters_own_auto_scaling_group_is_not_warned_of(make_stack: Any) -> None:
    """EfaCluster places its group itself (one subnet; placement as the user chose)."""
    from efa_constructs import EfaCluster, NodeGroup, NodeSoftware

    stack = make_stack()
    EfaCluster(
        stack, "C", vpc=isolated_vpc(stack), instance_type=ec2.InstanceType("c5n.18xlarge"), node_count=2,
        node_group=NodeGroup.ASG, node_software=NodeSoftware.none(), use_placement_group=False,
    )  # fmt: skip
    assert _group_warnings(stack) == {}


def test_constructs_take_cdks_own_instance_type(make_stack: Any) -> None:
    lt, t = _lt(make_stack, instance_type=ec2.InstanceType("p4d.24xlarge"))
    assert lt.instance_type.name == "p4d.24xlarge"
    t.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {"LaunchTemplateData": Match.object_like({"InstanceType": "p4d.24xlarge"})},
    )


@pytest.mark.parametrize(("gib", "refused"), [(100, False), (99, True)])
def test_the_root_volume_may_equal_the_images_own_size_but_not_go_below(
    make_stack: Any, gib: int, refused: bool
) -> None:
    """Issue 41 item 18 (boundaries): the trn1 default image (the Neuron DLAMI) needs 100 GiB; EC2
    refuses only a volume smaller than the snapshot, so 100 passes and 99 is refused."""
    stack = make_stack()
    build = lambda: EfaLaunchTemplate(  # noqa: E731
        stack, "Lt", instance_type=ec2.InstanceType("trn1.32xlarge"), root_volume_gib=gib,
        security_groups=[EfaSecurityGroup(stack, "Sg", vpc=isolated_vpc(stack))],
    )  # fmt: skip
    if refused:
        with pytest.raises(EfaConfigError, match=r"root_volume_gib=99: .* at least 100 GiB"):
            build()
    else:
        assert build().plan.root_volume_gib == 100


def _fingerprint(make_stack: Any, change: str) -> str:
    """The fingerprint of a c5n template with one input changed (`change`), in a stack of its own."""
    from aws_cdk import aws_iam as iam

    from efa_constructs import Capacity, EfaMachineImage

    stack = make_stack()
    vpc = isolated_vpc(stack)
    groups = [EfaSecurityGroup(stack, "Sg", vpc=vpc)]
    kwargs: dict[str, Any] = {"instance_type": ec2.InstanceType("c5n.18xlarge"), "security_groups": groups}
    user_data = ec2.UserData.for_linux()
    user_data.add_commands("echo one")
    kwargs["user_data"] = user_data
    kwargs["machine_image"] = EfaMachineImage.from_ami_id("ami-0123456789abcdef0")
    if change == "image":
        kwargs["machine_image"] = EfaMachineImage.from_ami_id("ami-0fedcba9876543210")
    elif change == "user data":
        user_data.add_commands("echo two")
    elif change == "role":
        kwargs["role"] = iam.Role(stack, "Other", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    elif change == "root volume":
        kwargs["root_volume_gib"] = 300
    elif change == "hop limit":
        kwargs["bridged_containers"] = True
    elif change == "key pair":
        kwargs["key_pair"] = ec2.KeyPair.from_key_pair_name(stack, "Key", "mine")
    elif change == "placement":
        kwargs["placement_group"] = ec2.PlacementGroup(
            stack, "Pg", strategy=ec2.PlacementGroupStrategy.CLUSTER
        )
    elif change == "metadata tags":
        kwargs["instance_metadata_tags"] = False
    elif change == "layout":
        kwargs["nic_layout"] = Layout.legacy(efa_count=1)
    elif change == "security groups":
        kwargs["security_groups"] = [*groups, ec2.SecurityGroup(stack, "Extra", vpc=vpc)]
    elif change == "capacity":
        kwargs["capacity"] = Capacity.reservation("cr-0123456789abcdef0")
    elif change == "subnet":
        kwargs["subnet"] = vpc.isolated_subnets[0]
    elif change == "primary interface":
        kwargs["primary_network_interface_id"] = "eni-0123456789abcdef0"
    else:
        assert change == "nothing"
    return EfaLaunchTemplate(stack, "Lt", **kwargs).fingerprint()


FINGERPRINT_INPUTS = ["image", "user data", "root volume", "hop limit", "key pair", "placement",
                      "metadata tags", "layout", "security groups", "capacity"]  # fmt: skip


@pytest.mark.parametrize("change", FINGERPRINT_INPUTS)
def test_each_input_of_the_fingerprint_changed_alone_changes_it(make_stack: Any, change: str) -> None:
    """Issue 41 item 18: the fingerprint (the nodes' generation, the Elastic IP interfaces' names) moves
    with every input the docstring lists, each changed alone, and only with them."""
    assert _fingerprint(make_stack, change) != _fingerprint(make_stack, "nothing")


@pytest.mark.parametrize("change", ["nothing", "subnet", "primary interface"])
def test_the_fingerprint_leaves_out_the_subnet_and_the_pre_created_interface(
    make_stack: Any, change: str
) -> None:
    assert _fingerprint(make_stack, change) == _fingerprint(make_stack, "nothing")
