"""Behaviour of the constructs on their own (one shared scratch App)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3

from efa_constructs import (
    EfaCluster,
    EfaLaunchTemplate,
    EfaSecurityGroup,
    InternetEgress,
    Layout,
    NodeGroup,
    NodeSoftware,
    PublicIp,
    plan_layout,
)
from efa_constructs.cdk.security_group import ssh_peer
from efa_constructs.core.errors import EfaConfigError
from tests.helpers import isolated_vpc

Match = assertions.Match


def _sg_template(make_stack: Any, **kwargs: Any) -> assertions.Template:
    stack = make_stack()
    EfaSecurityGroup(stack, "Sg", vpc=isolated_vpc(stack), **kwargs)
    return assertions.Template.from_stack(stack)


def test_security_group_self_ingress_and_self_egress(make_stack: Any) -> None:
    t = _sg_template(make_stack)
    self_ref = {"Fn::GetAtt": [Match.string_like_regexp("^Sg"), "GroupId"]}
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"IpProtocol": "-1", "SourceSecurityGroupId": self_ref, "GroupId": self_ref},
    )
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"IpProtocol": "-1", "DestinationSecurityGroupId": self_ref, "GroupId": self_ref},
    )


def test_security_group_has_no_ingress_from_the_world_by_default(make_stack: Any) -> None:
    t = _sg_template(make_stack)
    sg = next(iter(t.find_resources("AWS::EC2::SecurityGroup").values()))
    assert "SecurityGroupIngress" not in sg["Properties"]
    assert len(t.find_resources("AWS::EC2::SecurityGroupIngress")) == 1  # only the self rule
    egress = sg["Properties"]["SecurityGroupEgress"]
    assert sorted((e["IpProtocol"], e.get("FromPort")) for e in egress) == [("tcp", 80), ("tcp", 443)]


def _egress(t: assertions.Template) -> tuple[list[Any], list[Any]]:
    sg = next(iter(t.find_resources("AWS::EC2::SecurityGroup").values()))
    separate = [r["Properties"] for r in t.find_resources("AWS::EC2::SecurityGroupEgress").values()]
    return sg["Properties"].get("SecurityGroupEgress", []), separate


def test_security_group_egress_all(make_stack: Any) -> None:
    inline, separate = _egress(_sg_template(make_stack, internet_egress=InternetEgress.ALL))
    assert inline == []  # no placeholder left behind
    assert sorted(
        (r["IpProtocol"], "DestinationSecurityGroupId" in r, r.get("CidrIp")) for r in separate
    ) == [("-1", False, "0.0.0.0/0"), ("-1", True, None)]


def test_security_group_egress_none_really_blocks_the_internet(make_stack: Any) -> None:
    """Without an inline egress rule EC2 keeps its default allow-all egress; the placeholder prevents that."""
    inline, separate = _egress(_sg_template(make_stack, internet_egress=InternetEgress.NONE))
    assert [r["CidrIp"] for r in inline] == ["255.255.255.255/32"]
    assert len(separate) == 1
    assert "DestinationSecurityGroupId" in separate[0]  # only the self rule EFA needs


def test_security_group_ssh_from_named_sources_only(make_stack: Any) -> None:
    t = _sg_template(make_stack, ssh_peers=[ssh_peer("203.0.113.0/24"), ssh_peer("pl-0123abcd")])
    sg = next(iter(t.find_resources("AWS::EC2::SecurityGroup").values()))
    ingress = sg["Properties"]["SecurityGroupIngress"] + [
        r["Properties"] for r in t.find_resources("AWS::EC2::SecurityGroupIngress").values()
    ]
    assert {(r.get("CidrIp"), r.get("SourcePrefixListId"), r.get("FromPort")) for r in ingress} == {
        ("203.0.113.0/24", None, 22),
        (None, "pl-0123abcd", 22),
        (None, None, None),
    }  # last: the self rule


@pytest.mark.parametrize("bad", ["10.0.0.1/8", "10.0.0.0/33", "my-laptop", "10.0.0.0/8;rm"])
def test_malformed_ssh_cidr(bad: str) -> None:
    with pytest.raises(EfaConfigError) as err:
        ssh_peer(bad)
    assert repr(bad) in str(err.value)
    assert "Fix:" in str(err.value)


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


def test_cluster_wires_placement_group_and_nodes(make_stack: Any) -> None:
    stack = make_stack()
    vpc = isolated_vpc(stack)
    cluster = EfaCluster(stack, "C", vpc=vpc, instance_type=ec2.InstanceType("trn1.32xlarge"), node_count=3)
    t = assertions.Template.from_stack(stack)
    t.resource_count_is("AWS::EC2::Instance", 3)
    t.has_resource_properties("AWS::EC2::PlacementGroup", {"Strategy": "cluster"})
    t.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {"LaunchTemplateData": Match.object_like({"Placement": {"GroupName": Match.any_value()}})},
    )
    assert cluster.layout.efa_count == 8


def _policy_statements(t: assertions.Template, role_prefix: str) -> list[dict[str, Any]]:
    """Statements of the IAM policies attached to the role whose logical id starts with role_prefix."""
    out = []
    for policy in t.find_resources("AWS::IAM::Policy").values():
        if any(r["Ref"].startswith(role_prefix) for r in policy["Properties"]["Roles"]):
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def test_cluster_composes_with_cdk_grants_and_connections(make_stack: Any) -> None:
    """`bucket.grant_read(cluster)` and `db.connections.allow_from(cluster, ...)`, through CDK itself."""
    stack = make_stack()
    vpc = isolated_vpc(stack)
    cluster = EfaCluster(
        stack, "C", vpc=vpc, instance_type=ec2.InstanceType("p4d.24xlarge"), node_software=NodeSoftware.none()
    )
    bucket = s3.Bucket(stack, "Data")
    bucket.grant_read(cluster)
    db = ec2.SecurityGroup(stack, "Db", vpc=vpc, allow_all_outbound=False)
    db.connections.allow_from(cluster, ec2.Port.tcp(5432), "nodes to Postgres")
    cluster.connections.allow_from(db, ec2.Port.tcp(8080), "db to the nodes")
    t = assertions.Template.from_stack(stack)
    statements = _policy_statements(t, "CLaunchTemplateRole")
    assert any("s3:GetObject*" in st["Action"] and "Data" in str(st["Resource"]) for st in statements)
    sg = {"Fn::GetAtt": [Match.string_like_regexp("^CSecurityGroup"), "GroupId"]}
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "FromPort": 5432,
            "GroupId": {"Fn::GetAtt": [Match.string_like_regexp("^Db"), "GroupId"]},
            "SourceSecurityGroupId": sg,
        },
    )
    t.has_resource_properties("AWS::EC2::SecurityGroupIngress", {"FromPort": 8080, "GroupId": sg})


def test_launch_template_composes_with_cdk_grants_and_connections(make_stack: Any) -> None:
    stack = make_stack()
    vpc = isolated_vpc(stack)
    sg = EfaSecurityGroup(stack, "Sg", vpc=vpc)
    lt = EfaLaunchTemplate(stack, "Lt", instance_type=ec2.InstanceType("trn1.32xlarge"), security_groups=[sg])
    s3.Bucket(stack, "Ckpt").grant_write(lt)
    cache = ec2.SecurityGroup(stack, "Cache", vpc=vpc)
    cache.connections.allow_from(lt, ec2.Port.tcp(6379))
    t = assertions.Template.from_stack(stack)
    assert any("s3:PutObject" in st["Action"] for st in _policy_statements(t, "LtRole"))
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


@pytest.mark.parametrize("bad", [0, -2, True])
def test_cluster_node_count(make_stack: Any, bad: Any) -> None:
    stack = make_stack()
    with pytest.raises(EfaConfigError, match="node_count"):
        EfaCluster(
            stack,
            "C",
            vpc=isolated_vpc(stack),
            instance_type=ec2.InstanceType("trn1.32xlarge"),
            node_count=bad,
        )


def test_a_token_node_count_needs_the_auto_scaling_group(make_stack: Any) -> None:
    """A CloudFormation parameter as node_count: explicit nodes cannot be counted at synth (one
    resource each), so the error names the fix; the Auto Scaling group takes it as its size."""
    from aws_cdk import CfnParameter

    stack = make_stack()
    count = CfnParameter(stack, "Nodes", type="Number", default=2).value_as_number
    with pytest.raises(EfaConfigError, match=r"^node_count=.*token.*node_group=NodeGroup\.ASG"):
        EfaCluster(
            stack,
            "C",
            vpc=isolated_vpc(stack),
            instance_type=ec2.InstanceType("trn1.32xlarge"),
            node_count=count,
        )
    other = make_stack()
    count = CfnParameter(other, "Nodes", type="Number", default=2).value_as_number
    EfaCluster(
        other,
        "C",
        vpc=isolated_vpc(other),
        instance_type=ec2.InstanceType("trn1.32xlarge"),
        node_count=count,
        node_group=NodeGroup.ASG,
    )
    (group,) = (
        assertions.Template.from_stack(other).find_resources("AWS::AutoScaling::AutoScalingGroup").values()
    )
    assert "Nodes" in json.dumps(group["Properties"]["MaxSize"])


@pytest.mark.parametrize("with_key", [False, True])
def test_ssh_without_a_key_pair_is_warned(make_stack: Any, with_key: bool) -> None:
    stack = make_stack()
    key = ec2.KeyPair.from_key_pair_name(stack, "Key", "mine") if with_key else None
    EfaCluster(
        stack, "C", vpc=isolated_vpc(stack), instance_type=ec2.InstanceType("c5n.18xlarge"), key_pair=key,
        ssh_peers=[ssh_peer("203.0.113.0/24")],
    )  # fmt: skip
    found = assertions.Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("no key_pair")
    )
    assert bool(found) is not with_key
    if found:
        assert "203.0.113.0/24" in str(found[0].entry.data) and "-c key_pair=" in str(found[0].entry.data)


def test_constructs_take_cdks_own_instance_type(make_stack: Any) -> None:
    lt, t = _lt(make_stack, instance_type=ec2.InstanceType("p4d.24xlarge"))
    assert lt.instance_type.name == "p4d.24xlarge"
    t.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {"LaunchTemplateData": Match.object_like({"InstanceType": "p4d.24xlarge"})},
    )


def test_network_refuses_a_zone_of_another_region(make_stack: Any) -> None:
    from aws_cdk import Environment

    from efa_constructs import EfaNetwork

    stack = make_stack(env=Environment(region="us-west-2"))
    with pytest.raises(
        EfaConfigError, match="availability_zone='us-east-1a': the stack deploys to us-west-2"
    ):
        EfaNetwork(stack, "Net", availability_zone="us-east-1a")


def test_help_shows_our_docstrings_not_constructs_own() -> None:
    import pydoc

    text = pydoc.render_doc(EfaCluster)
    assert "instance_type: an EFA-capable instance type" in text and ":param id:" not in text


def test_nodes_wait_for_their_route_out_and_elastic_ips_for_the_internet_gateway(make_stack: Any) -> None:
    from efa_constructs import EfaNetwork

    stack = make_stack()
    net = EfaNetwork(stack, "Net")
    EfaCluster(
        stack,
        "C",
        vpc=net.vpc,
        instance_type=ec2.InstanceType("p4d.24xlarge"),
        node_count=2,
        public_ip=PublicIp.LEADER,
    )
    t = assertions.Template.from_stack(stack).to_json()["Resources"]
    (nat_route,) = [
        k for k, v in t.items() if v["Type"] == "AWS::EC2::Route" and "NatGatewayId" in v["Properties"]
    ]
    (igw_route,) = [
        k for k, v in t.items() if v["Type"] == "AWS::EC2::Route" and "GatewayId" in v["Properties"]
    ]
    (attachment,) = [k for k, v in t.items() if v["Type"] == "AWS::EC2::VPCGatewayAttachment"]
    for node in (v for v in t.values() if v["Type"] == "AWS::EC2::Instance"):
        assert nat_route in node["DependsOn"]
    for kind in ("AWS::EC2::EIP", "AWS::EC2::EIPAssociation"):
        (eip,) = [v for k, v in t.items() if v["Type"] == kind and k.startswith("C")]
        assert igw_route in eip["DependsOn"]  # the route out, which itself waits for the attachment
    assert attachment in t[igw_route]["DependsOn"]
