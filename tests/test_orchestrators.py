"""AWS PCS (EfaPcsCluster, Trn1PcsCluster) and Amazon EKS (EfaNodegroup, the docs' example app).

Expected values come from the sources the constructs' docstrings name: EFA counts from EFA-FACTS.md
(8 on trn1.32xlarge), PCS rules from the PCS API reference and user guide, EKS launch-template rules
from the EKS API reference (LaunchTemplateSpecification), AMI types from the EKS API reference.
What these tests do not prove: that PCS or EKS accept the templates (no account here), that PCS's
agent or cloud-init run the user data (neither runs on this machine; the MIME document is parsed
with Python's email package, the parser cloud-init itself uses).
"""

from __future__ import annotations

import base64
import email
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from efa_constructs.cdk import EfaNodegroup, EfaPcsCluster
from efa_constructs.cdk.eks import accelerated_ami_type
from efa_constructs.core import EfaConfigError, instance_type
from efa_constructs.core.capacity import Capacity
from efa_constructs.core.layout import Layout
from tests.helpers import ROOT, by_type, efa_launch_template, executable, isolated_vpc, lint, new_app

#: What an EKS managed node group's launch template must not contain (EKS API reference,
#: LaunchTemplateSpecification): SubnetId (on any interface), IamInstanceProfile, a Spot request
#: (InstanceMarketOptions with spot), HibernationOptions, and a terminate shutdown behaviour.
EKS_FORBIDDEN = ("IamInstanceProfile", "HibernationOptions", "InstanceInitiatedShutdownBehavior")


#: Stand-ins for the values CloudFormation fills into user data at deploy.
DEPLOY_VALUES = {
    "AWS::Region": "us-east-1",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::AccountId": "123456789012",
}


def render(value: Any, refs: dict[str, str]) -> str:
    """A user-data value as CloudFormation renders it: Fn::Join joined, Fn::Base64 encoded, each Ref,
    GetAtt and Sub variable from `refs` (else DEPLOY_VALUES, else ``<name>``)."""

    def name(n: str) -> str:
        return refs.get(n, DEPLOY_VALUES.get(n, f"<{n}>"))

    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(render(v, refs) for v in value["Fn::Join"][1])
    if "Fn::Base64" in value:
        return base64.b64encode(render(value["Fn::Base64"], refs).encode()).decode()
    if "Ref" in value:
        return name(value["Ref"])
    if "Fn::GetAtt" in value:
        return name(".".join(value["Fn::GetAtt"]))
    if "Fn::Sub" in value:
        return re.sub(r"\$\{([^}]+)\}", lambda m: name(m.group(1)), value["Fn::Sub"])
    raise AssertionError(f"unexpected user-data value {value!r}")


def user_data(launch_template: dict[str, Any], refs: dict[str, str] | None = None) -> str:
    """The launch template's user data, decoded, as a node receives it."""
    return base64.b64decode(
        render(launch_template["Properties"]["LaunchTemplateData"]["UserData"], refs or {})
    ).decode()


def mime_parts(launch_template: dict[str, Any], refs: dict[str, str] | None = None) -> dict[str, str]:
    """The user data's MIME parts by content type, decoded."""
    message = email.message_from_string(user_data(launch_template, refs))
    assert message.is_multipart()
    return {p.get_content_type(): p.get_payload(decode=True).decode() for p in message.get_payload()}


def efa_group(template: dict[str, Any], prefix: str = "PcsSecurityGroup") -> str:
    """The logical id of the EFA security group (the EFS has a group of its own)."""
    (group,) = [
        k
        for k, v in template["Resources"].items()
        if v["Type"] == "AWS::EC2::SecurityGroup" and k.startswith(prefix) and len(k) == len(prefix) + 8
    ]
    return group


# --- AWS PCS: the ready stack ------------------------------------------------------------------


@pytest.fixture(scope="module")
def pcs(templates: dict[str, Any]) -> dict[str, Any]:
    return templates["Trn1PcsCluster"]


def test_pcs_cluster_runs_the_default_slurm_in_a_small_cluster(pcs: dict[str, Any]) -> None:
    (cluster,) = by_type(pcs, "AWS::PCS::Cluster")
    assert cluster["Properties"]["Scheduler"] == {"Type": "SLURM", "Version": "25.11"}
    assert cluster["Properties"]["Size"] == "SMALL"
    assert cluster["Properties"]["Networking"]["SecurityGroupIds"] == [
        {"Fn::GetAtt": [efa_group(pcs), "GroupId"]}
    ]


def test_pcs_instance_profile_and_role_are_where_pcs_accepts_them(pcs: dict[str, Any]) -> None:
    (profile,) = by_type(pcs, "AWS::IAM::InstanceProfile")
    assert profile["Properties"]["Path"] == "/aws-pcs/"
    (role_id,) = [r["Ref"] for r in profile["Properties"]["Roles"]]
    assert pcs["Resources"][role_id]["Properties"]["Path"] == "/aws-pcs/"
    actions = {
        a
        for p in by_type(pcs, "AWS::IAM::Policy")
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert "pcs:RegisterComputeNodeGroupInstance" in actions
    for group in by_type(pcs, "AWS::PCS::ComputeNodeGroup"):
        assert group["Properties"]["IamInstanceProfileArn"]["Fn::GetAtt"][1] == "Arn"


def test_pcs_efa_template_has_the_layout_and_nothing_pcs_sets_itself(pcs: dict[str, Any]) -> None:
    compute_id = efa_launch_template(pcs)
    data = pcs["Resources"][compute_id]["Properties"]["LaunchTemplateData"]
    assert "IamInstanceProfile" not in data and "ImageId" not in data  # the node group's own fields
    efas = [n for n in data["NetworkInterfaces"] if n.get("InterfaceType") in ("efa", "efa-only")]
    assert len(efas) == 8  # trn1.32xlarge (EFA-FACTS.md)
    group_id = efa_group(pcs)
    for nic in data["NetworkInterfaces"]:  # groups on each interface, not SecurityGroupIds
        assert nic["Groups"] == [{"Fn::GetAtt": [group_id, "GroupId"]}]
        assert "SubnetId" in nic
    assert "SecurityGroupIds" not in data
    assert "GroupName" in data["Placement"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"

    (compute,) = [
        g
        for g in by_type(pcs, "AWS::PCS::ComputeNodeGroup")
        if g["Properties"]["Name"].startswith("compute-")
    ]
    props = compute["Properties"]
    assert props["CustomLaunchTemplate"]["TemplateId"] == {"Ref": compute_id}
    assert props["InstanceConfigs"] == [{"InstanceType": "trn1.32xlarge"}]
    assert props["ScalingConfiguration"] == {"MinInstanceCount": 0, "MaxInstanceCount": 2}
    assert props["AmiId"] == {"Ref": "ImageId"}  # asked for at deploy
    assert props["PurchaseOption"] == "ONDEMAND"
    (queue,) = by_type(pcs, "AWS::PCS::Queue")
    compute_logical = next(k for k, v in pcs["Resources"].items() if v is compute)
    assert queue["Properties"]["ComputeNodeGroupConfigurations"] == [
        {"ComputeNodeGroupId": {"Fn::GetAtt": [compute_logical, "Id"]}}
    ]
    assert pcs["Parameters"]["ImageId"]["Type"] == "AWS::EC2::Image::Id"


PREP = ROOT / "efa_constructs/node/pcs/prep.sh"


def test_pcs_user_data_prepares_the_node_then_checks_efa(pcs: dict[str, Any]) -> None:
    """MIME multi-part (PCS user guide): a cloud-config part (node/pcs/prep.sh written in; the
    instance-metadata rule at every boot and at first boot's end; the EFS at /shared over TLS), then a
    shell part running efa-cdk's efa-env and verify-efa for 8 EFAs. The login node gets the same
    cloud-config and no shell part."""
    parts = mime_parts(pcs["Resources"][efa_launch_template(pcs)])
    assert list(parts) == ["text/cloud-config", "text/x-shellscript"]
    config = yaml.safe_load(parts["text/cloud-config"])
    ((written,),) = [config["write_files"]]
    assert written["path"] == "/opt/efa-cdk/pcs/prep.sh" and written["content"] == PREP.read_text()
    assert config["bootcmd"] == ["test ! -x /opt/efa-cdk/pcs/prep.sh || /opt/efa-cdk/pcs/prep.sh imds root"]
    (efs,) = [k for k, v in pcs["Resources"].items() if v["Type"] == "AWS::EFS::FileSystem"]
    assert config["runcmd"] == [
        ["/opt/efa-cdk/pcs/prep.sh", "imds", "root"],
        ["/opt/efa-cdk/pcs/prep.sh", "shared", f"<{efs}>", "/shared"],
    ]
    shell = parts["text/x-shellscript"]
    assert shell.startswith("#!/bin/bash")
    assert "EFA_CDK_STEPS='efa-env,verify-efa'" in shell
    assert "EFA_CDK_EFA_COUNT='8'" in shell
    assert "EFA_CDK_STACK" not in shell.split("EFA_CDK_SETTINGS", 2)[1]  # no CloudFormation signals
    (login,) = [
        v
        for v in by_type(pcs, "AWS::EC2::LaunchTemplate")
        if "NetworkInterfaces" not in v["Properties"]["LaunchTemplateData"]
    ]
    assert mime_parts(login) == {"text/cloud-config": parts["text/cloud-config"]}


def test_pcs_login_template_is_secure_by_default(pcs: dict[str, Any]) -> None:
    (login,) = [
        v
        for v in by_type(pcs, "AWS::EC2::LaunchTemplate")
        if "NetworkInterfaces" not in v["Properties"]["LaunchTemplateData"]
    ]
    data = login["Properties"]["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    # 1 hop, as the compute template: an image registered IMDSv2-only defaults to 2 (EC2 user guide,
    # "Configure the instance metadata options"), which lets a bridged container reach the node role
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    ((volume,),) = [[m["Ebs"] for m in data["BlockDeviceMappings"]]]
    assert volume == {"DeleteOnTermination": True, "Encrypted": True, "VolumeSize": 200, "VolumeType": "gp3"}
    assert "IamInstanceProfile" not in data and "ImageId" not in data


def test_the_pcs_cluster_has_a_valid_name_from_the_stack(pcs: dict[str, Any]) -> None:
    """Name is create-only (PCS API reference, CreateCluster: 3-40 characters, a letter first, letters,
    digits and '-', not pcs_): the cluster gets a stable one from its path, never CloudFormation's."""
    (cluster,) = by_type(pcs, "AWS::PCS::Cluster")
    name = cluster["Properties"]["Name"]
    assert re.fullmatch(r"(?!pcs_)[A-Za-z][A-Za-z0-9-]{2,39}", name) and name.startswith("Trn1PcsCluster"), (
        name
    )


def test_a_long_stack_name_still_gives_a_valid_pcs_cluster_name() -> None:
    stack = Stack(new_app(), "A" + "VeryLongStackNameForTrainingTrainiumNodes" * 3)
    cluster = EfaPcsCluster(
        stack, "Cluster", instance_type=ec2.InstanceType("trn1.32xlarge"), ami_id="ami-0123456789abcdef0",
        availability_zone="us-east-1c",
    )  # fmt: skip
    name = stack.resolve(cluster.cluster.name)
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{2,39}", name), name
    given = EfaPcsCluster(
        stack, "Named", instance_type=ec2.InstanceType("trn1.32xlarge"), ami_id="ami-0123456789abcdef0",
        availability_zone="us-east-1c", cluster_name="trn1-training",
    )  # fmt: skip
    assert given.cluster.name == "trn1-training"


def test_pcs_max_count_change_touches_only_the_scaling_configuration() -> None:
    import app as app_module

    def synth(**context: str) -> dict[str, Any]:
        app = app_module.build(new_app(context))
        return app.synth().get_stack_by_name("Trn1PcsCluster").template  # type: ignore[no-any-return]

    small, large = synth(), synth(**{"Trn1PcsCluster:max_count": "8"})
    assert small["Resources"].keys() == large["Resources"].keys()
    changed = [k for k in small["Resources"] if small["Resources"][k] != large["Resources"][k]]
    assert len(changed) == 1
    assert large["Resources"][changed[0]]["Properties"]["ScalingConfiguration"]["MaxInstanceCount"] == 8


# --- AWS PCS: the construct's refusals and composition ------------------------------------------


def _pcs(**kwargs: Any) -> EfaPcsCluster:
    stack = Stack(new_app(), "Scratch")
    args: dict[str, Any] = {
        "instance_type": ec2.InstanceType("trn1.32xlarge"),
        "ami_id": "ami-0123456789abcdef0",
        "availability_zone": "us-east-1c",
    }
    return EfaPcsCluster(stack, "Pcs", **{**args, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"slurm_version": "22.05"}, "slurm_version='22.05': not a Slurm version AWS PCS runs"),
        ({"max_count": 40}, "a SMALL PCS cluster manages up to 32 instances"),
        ({"max_count": 40}, "create the cluster with size MEDIUM"),
        ({"min_count": 3, "max_count": 2}, "0 <= min_count <= max_count"),
        ({"cluster_name": "pcs_x"}, "cluster_name='pcs_x'"),
        ({"cluster_name": "1abc"}, "starting with a letter"),
        ({"cluster_name": "a" * 41}, "3-40 letters"),  # one past the limit (40 passes: below)
        ({"cluster_name": "ab"}, "3-40 letters"),
        # Queue names: PCS user guide, "Creating a queue in AWS PCS" (a letter first, letters,
        # digits and '-', at most 25 characters).
        ({"queue_name": "1q"}, "queue_name='1q': a PCS queue name is at most 25"),
        ({"queue_name": "gpu_queue"}, "queue_name='gpu_queue'"),
        ({"queue_name": "q" * 26}, "at most 25 letters"),
        ({"queue_name": ""}, "queue_name=''"),
        ({"ami_id": "ami-xyz"}, "ami_id='ami-xyz'"),
        (
            {"instance_type": ec2.InstanceType("p6e-gb200.36xlarge")},
            "launches on PCS from a Capacity Block only",
        ),
        (
            {
                "instance_type": ec2.InstanceType("p6e-gb200.36xlarge"),
                "slurm_version": "24.11",
                "capacity": Capacity.capacity_block("cr-0123456789abcdef0"),
            },
            "needs Slurm 25.05 or later",
        ),
        (
            {"capacity": Capacity.capacity_block("cr-0123456789abcdef0", instance_count=1)},
            "holds 1 instances",
        ),
    ],
)
def test_pcs_refuses_what_pcs_refuses(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(EfaConfigError) as err:
        _pcs(**kwargs)
    assert says in str(err.value), str(err.value)


@pytest.mark.parametrize("name", ["a", "trn1-train", "Q" + "q" * 24])
def test_pcs_takes_the_queue_names_pcs_takes(name: str) -> None:
    from efa_constructs.core.pcs import check_queue_name

    check_queue_name(name)  # PCS user guide: a letter first, letters, digits, '-', up to 25


@pytest.mark.parametrize(
    ("counts", "size", "fits"),
    [
        ((0, 31, 1), "SMALL", True),  # 32 instances: exactly a SMALL cluster (PCS user guide)
        ((0, 32, 1), "SMALL", False),
        ((2, 2, 1), "SMALL", True),  # min_count == max_count: a static group
        ((0, 1, 1), "SMALL", True),
        ((0, 0, 1), "SMALL", False),  # a node group of no nodes
        ((0, 2, 0), "SMALL", True),  # no login node
        ((0, 2, -1), "SMALL", False),
        ((0, 511, 1), "MEDIUM", True),
        ((0, 2047, 1), "LARGE", True),
        ((0, 2048, 1), "LARGE", False),
    ],
)
def test_pcs_node_counts_at_the_size_limits(counts: tuple[int, int, int], size: str, fits: bool) -> None:
    from efa_constructs.core.pcs import PcsClusterSize, check_node_counts

    def check() -> None:
        check_node_counts(*counts, PcsClusterSize(size), Capacity.on_demand(), "trn1.32xlarge")

    if fits:
        check()
    else:
        with pytest.raises(EfaConfigError):
            check()


@pytest.mark.parametrize(
    ("max_count", "names"), [(32, "MEDIUM"), (511, "MEDIUM"), (512, "LARGE"), (2048, None)]
)
def test_pcs_too_many_nodes_names_the_size_that_fits(max_count: int, names: str | None) -> None:
    from efa_constructs.core.pcs import PcsClusterSize, check_node_counts

    with pytest.raises(EfaConfigError) as err:  # max_count + 1 login node
        check_node_counts(0, max_count, 1, PcsClusterSize.SMALL, Capacity.on_demand(), "trn1.32xlarge")
    assert (f"create the cluster with size {names}" if names else "a LARGE cluster manages 2048") in str(
        err.value
    )


@pytest.mark.parametrize(("version", "ok"), [("24.11", False), ("25.05", True), ("25.11", True)])
def test_ultraservers_need_slurm_25_05(version: str, ok: bool) -> None:
    """PCS user guide, capacity-blocks-nvidia-imex: Slurm 25.05 or later for P6e-GB200/GB300."""
    from efa_constructs.core.pcs import check_slurm_version

    if ok:
        check_slurm_version(version, "p6e-gb200.36xlarge")
    else:
        with pytest.raises(EfaConfigError, match=r"needs Slurm 25\.05 or later"):
            check_slurm_version(version, "p6e-gb200.36xlarge")
    check_slurm_version(version, "trn1.32xlarge")  # any listed version for other types


def test_pcs_size_is_an_enum_and_the_context_key_reads_it() -> None:
    from efa_constructs.core import PcsClusterSize
    from stacks.params import PcsParams

    assert PcsParams.from_context({"pcs_size": "medium"}, default_instance_type="trn1.32xlarge").pcs_size is (
        PcsClusterSize.MEDIUM
    )
    with pytest.raises(EfaConfigError, match="pcs_size='HUGE': not a PCS cluster size"):
        PcsParams.from_context({"pcs_size": "HUGE"}, default_instance_type="trn1.32xlarge")
    assert [s.instances for s in PcsClusterSize] == [32, 512, 2048]  # PCS user guide, "Cluster size"


def test_pcs_refuses_a_role_pcs_would_not_accept_and_gives_one_it_takes_what_nodes_need() -> None:
    stack = Stack(new_app(), "Scratch")
    itype, ami = ec2.InstanceType("trn1.32xlarge"), "ami-0123456789abcdef0"
    plain = iam.Role(stack, "Plain", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    misnamed = iam.Role(
        stack, "Misnamed", role_name="trainers", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com")
    )
    for role in (plain, misnamed):
        with pytest.raises(EfaConfigError, match="starts with AWSPCS or its path is /aws-pcs/"):
            EfaPcsCluster(stack, f"Pcs{role.node.id}", instance_type=itype, ami_id=ami, role=role)
    named = iam.Role(
        stack, "Named", role_name="AWSPCS-trainers", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com")
    )
    EfaPcsCluster(stack, "Pcs2", instance_type=itype, ami_id=ami, role=named, login_count=0)
    t = new_template(stack)
    named_id = next(
        k for k, v in t["Resources"].items() if v["Properties"].get("RoleName") == "AWSPCS-trainers"
    )
    granted = [
        s
        for p in by_type(t, "AWS::IAM::Policy")
        if {"Ref": named_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert {"pcs:RegisterComputeNodeGroupInstance", "s3:GetObject"} <= {s["Action"] for s in granted}
    # login_count=0: the compute node group only
    assert [g["Properties"]["Name"][:-7] for g in by_type(t, "AWS::PCS::ComputeNodeGroup")] == ["compute"]


def test_pcs_defaults_and_a_half_given_network() -> None:
    t = new_template(Stack.of(_pcs()))
    groups = {g["Properties"]["Name"][:-7]: g["Properties"] for g in by_type(t, "AWS::PCS::ComputeNodeGroup")}
    assert groups["compute"]["ScalingConfiguration"] == {"MinInstanceCount": 0, "MaxInstanceCount": 2}
    assert groups["login"]["ScalingConfiguration"] == {"MinInstanceCount": 1, "MaxInstanceCount": 1}
    assert groups["login"]["InstanceConfigs"] == [{"InstanceType": "c7i.xlarge"}]
    stack = Stack(new_app(), "Half")
    with pytest.raises(EfaConfigError, match="subnet=None: an existing network is a VPC and the one subnet"):
        _pcs(vpc=isolated_vpc(stack))


def test_pcs_cluster_composes_with_aws_cdk_lib() -> None:
    cluster = _pcs()
    stack = Stack.of(cluster)
    bucket = s3.Bucket(stack, "Data")
    bucket.grant_read(cluster)
    db = ec2.SecurityGroup(stack, "Db", vpc=cluster.vpc)
    db.connections.allow_from(cluster, ec2.Port.tcp(5432))
    t = new_template(stack)
    (role_id,) = [k for k, v in t["Resources"].items() if v["Type"] == "AWS::IAM::Role" and "NodeRole" in k]
    assert any(
        {"Ref": role_id} in p["Properties"]["Roles"] and "s3:GetObject*" in json.dumps(p)
        for p in by_type(t, "AWS::IAM::Policy")
    )
    assert any(
        r["Properties"].get("FromPort") == 5432 and "PcsSecurityGroup" in json.dumps(r["Properties"])
        for r in by_type(t, "AWS::EC2::SecurityGroupIngress")
    )


def new_template(stack: Stack) -> dict[str, Any]:
    from aws_cdk import assertions

    return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


# --- Amazon EKS ---------------------------------------------------------------------------------


def _example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "eks_example", ROOT / "docs" / "examples" / "eks_efa_nodegroup.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["eks_example"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    """The docs' example app, synthesized as `cdk synth` would."""
    app = _example().build(new_app())
    return app.synth().get_stack_by_name("EksEfaExample").template  # type: ignore[no-any-return]


def test_example_node_group_launches_eks_efa_nodes(example: dict[str, Any]) -> None:
    (lt,) = by_type(example, "AWS::EC2::LaunchTemplate")
    data = lt["Properties"]["LaunchTemplateData"]
    # EKS tags its nodes with keys holding '/' (kubernetes.io/cluster/<name>), which EC2 refuses while
    # tags are allowed in the instance metadata (EC2 user guide, "View tags for your EC2 instances from
    # instance metadata"); nothing on an EKS node reads them
    assert data["MetadataOptions"] == {"HttpPutResponseHopLimit": 1, "HttpTokens": "required"}
    for key in (*EKS_FORBIDDEN, "ImageId", "UserData", "SecurityGroupIds"):
        assert key not in data, key
    assert "InstanceMarketOptions" not in data
    nics = data["NetworkInterfaces"]
    assert not [n for n in nics if "SubnetId" in n]
    assert len([n for n in nics if n.get("InterfaceType") in ("efa", "efa-only")]) == 8
    (efa_sg,) = [
        k
        for k in example["Resources"]
        if k.startswith("TrainersSecurityGroup")
        and k[-8:].isalnum()
        and example["Resources"][k]["Type"] == "AWS::EC2::SecurityGroup"
    ]
    (cluster_id,) = [k for k, v in example["Resources"].items() if v["Type"] == "AWS::EKS::Cluster"]
    for nic in nics:  # the EFA group and the cluster's group on every interface
        assert nic["Groups"] == [
            {"Fn::GetAtt": [efa_sg, "GroupId"]},
            {"Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]},
        ]
    assert "GroupName" in data["Placement"]

    (group,) = by_type(example, "AWS::EKS::Nodegroup")
    props = group["Properties"]
    assert props["AmiType"] == "AL2023_x86_64_NEURON"
    assert "InstanceTypes" not in props  # the template's one type (EKS: not both)
    assert "DiskSize" not in props
    assert set(props["LaunchTemplate"]) == {"Id", "Version"}
    assert len(props["Subnets"]) == 1
    assert props["ScalingConfig"] == {"MinSize": 0, "DesiredSize": 2, "MaxSize": 4}
    assert props["CapacityType"] == "ON_DEMAND"


def test_example_installs_the_device_plugin_for_every_catalogued_efa_type(example: dict[str, Any]) -> None:
    (props,) = [p for p in _charts(example) if p["Chart"] == "aws-efa-k8s-device-plugin"]
    assert (props["Chart"], props["Version"], props["Repository"], props["Namespace"]) == (
        "aws-efa-k8s-device-plugin",
        "v0.5.30",
        "https://aws.github.io/eks-charts",
        "kube-system",
    )
    values = json.loads(props["Values"])
    types = values["supportedInstanceLabels"]["values"]
    assert values["supportedInstanceLabels"]["keys"] == ["node.kubernetes.io/instance-type"]
    # the chart's own list (eks-charts 5239609) lacks types AWS lists as EFA-capable, e.g. c8gn.48xlarge
    assert {"trn1.32xlarge", "p5.48xlarge", "c8gn.48xlarge"} <= set(types)
    assert values["tolerations"] == [{"operator": "Exists"}]
    # issue 34 item 13: the image from the cluster's region (EKS user guide, add-on image registries)
    assert values["image"] == {
        "repository": "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"
    }


def _charts(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        v["Properties"] for v in template["Resources"].values() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    ]


def test_example_installs_the_neuron_device_plugin_as_the_eks_guide_does(example: dict[str, Any]) -> None:
    """Issue 34 item 12: without the accelerator's device plugin a pod asking for aws.amazon.com/neuron
    stays Pending. The EKS user guide ("Install Kubernetes device plugin for GPUs") installs Neuron's chart
    from public ECR with the node problem detector off."""
    (neuron,) = [p for p in _charts(example) if p["Chart"] == "neuron-helm-chart"]
    assert neuron["Repository"] == "oci://public.ecr.aws/neuron/neuron-helm-chart"
    assert neuron["Namespace"] == "kube-system" and neuron["Version"] == "1.10.0"
    assert json.loads(neuron["Values"]) == {"npd": {"enabled": False}}


def test_example_node_group_snapshot(example: dict[str, Any], snapshot: Any) -> None:
    """What a pull request changes in EfaNodegroup's output, readable: the example's resources under
    ``Trainers`` (security group, placement group, role, launch template, node group) and the device
    plugin chart (aws-cdk-lib's EKS cluster, VPC and kubectl provider are left out: they are its own)."""
    from syrupy.extensions.json import JSONSnapshotExtension

    from tests.helpers import masked, readable

    ours = {
        k: v
        for k, v in example["Resources"].items()
        if k.startswith("Trainers") or v["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }
    assert readable(masked({"Resources": ours})) == snapshot(extension_class=JSONSnapshotExtension)


def test_example_grants_go_to_a_pod_role_not_the_node_role(example: dict[str, Any]) -> None:
    """Issue 34 item 17: the bucket is granted to the `trainer` service account's role through EKS Pod
    Identity (the role trusts pods.eks.amazonaws.com; an association names the account), not to the node
    role every pod on the node shares; the API endpoint answers the VPC only (no admin_cidr given) and the
    control plane logs every type."""
    (group,) = by_type(example, "AWS::EKS::Nodegroup")
    node_role = group["Properties"]["NodeRole"]["Fn::GetAtt"][0]
    writers = {
        r["Ref"]
        for p in by_type(example, "AWS::IAM::Policy")
        if "s3:PutObject" in json.dumps(p)
        for r in p["Properties"]["Roles"]
    }
    (pod_role,) = writers
    assert pod_role != node_role
    trust = json.dumps(example["Resources"][pod_role]["Properties"]["AssumeRolePolicyDocument"])
    assert "pods.eks.amazonaws.com" in trust
    (association,) = by_type(example, "AWS::EKS::PodIdentityAssociation")
    assert association["Properties"]["ServiceAccount"] == "trainer"
    assert association["Properties"]["RoleArn"] == {"Fn::GetAtt": [pod_role, "Arn"]}
    managed = json.dumps(example["Resources"][node_role]["Properties"]["ManagedPolicyArns"])
    for policy in ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly", "AmazonEKS_CNI_Policy"):
        assert policy in managed
    (cluster,) = by_type(example, "AWS::EKS::Cluster")
    vpc_config = cluster["Properties"]["ResourcesVpcConfig"]
    assert (vpc_config["EndpointPublicAccess"], vpc_config["EndpointPrivateAccess"]) == (False, True)
    logged = {t["Type"] for t in cluster["Properties"]["Logging"]["ClusterLogging"]["EnabledTypes"]}
    assert logged == {"api", "audit", "authenticator", "controllerManager", "scheduler"}


def test_example_is_stock_cfn_lint_clean(example: dict[str, Any]) -> None:
    """Clean under stock cfn-lint, with the two rules the example's template metadata switches off
    for aws-cdk-lib's own resources (the reasons are next to them in the example)."""
    assert lint(example, stock=True) == []
    assert example["Metadata"]["cfn-lint"]["config"]["ignore_checks"] == ["W3005", "W3010"]
    del example["Metadata"]["cfn-lint"]
    findings = lint(example, stock=True)
    assert {f.split()[0] for f in findings} == {"W3005", "W3010"}
    assert not [f for f in findings if "Trainers" in f]  # none in EfaNodegroup's resources


@pytest.mark.parametrize(
    ("itype", "ami_type"),
    [
        ("trn1.32xlarge", "AL2023_x86_64_NEURON"),
        ("trn2.48xlarge", "AL2023_x86_64_NEURON"),
        ("p5.48xlarge", "AL2023_x86_64_NVIDIA"),
        ("p6e-gb200.36xlarge", "AL2023_ARM_64_NVIDIA"),
        ("c7gn.16xlarge", "AL2023_ARM_64_STANDARD"),
        ("hpc7a.96xlarge", "AL2023_x86_64_STANDARD"),
    ],
)
def test_accelerated_ami_type_by_accelerator(itype: str, ami_type: str) -> None:
    assert accelerated_ami_type(instance_type(itype)).name == ami_type.upper()  # jsii spells x86 X86


@pytest.fixture(scope="module")
def eks_cluster() -> Any:
    """A cluster without a kubectl provider (so device_plugin=False unless the test wants the refusal)."""
    stack = Stack(new_app(), "Eks")
    vpc = isolated_vpc(stack)
    cluster = eks.Cluster(
        stack,
        "Cluster",
        version=eks.KubernetesVersion.V1_35,
        vpc=vpc,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
        default_capacity=0,
        vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
    )
    return stack, vpc, cluster


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"device_plugin": True}, "device_plugin=True: the device plugins are Helm charts"),
        ({"instance_type": ec2.InstanceType("dl1.24xlarge")}, "no EKS-optimized AMI has their drivers"),
        (
            {"ami_type": eks.NodegroupAmiType.BOTTLEROCKET_X86_64_NVIDIA},
            "ami_type='BOTTLEROCKET_X86_64_NVIDIA'",
        ),
        ({"ami_type": eks.NodegroupAmiType.AL2023_ARM_64_NVIDIA}, "trn1.32xlarge is x86_64"),
        ({"min_size": 3, "max_size": 2}, "0 <= min_size <= desired_size <= max_size"),
        (
            {"capacity": Capacity.capacity_block("cr-0123456789abcdef0"), "placement_group": "pg"},
            "placement_group",
        ),
    ],
)
def test_node_group_refuses_bad_input(eks_cluster: Any, kwargs: dict[str, Any], says: str) -> None:
    stack, vpc, cluster = eks_cluster
    args: dict[str, Any] = {
        "cluster": cluster,
        "instance_type": ec2.InstanceType("trn1.32xlarge"),
        "subnet": vpc.isolated_subnets[0],
        "device_plugin": False,
    }
    if kwargs.get("placement_group") == "pg":
        kwargs = {
            **kwargs,
            "placement_group": ec2.PlacementGroup.from_placement_group_name(stack, f"Pg{len(kwargs)}", "pg"),
        }
    with pytest.raises(EfaConfigError) as err:
        EfaNodegroup(stack, f"Bad{abs(hash(says))}", **{**args, **kwargs})
    assert says in str(err.value), str(err.value)


@pytest.mark.parametrize(
    ("sizes", "ok", "key"),
    [
        ((0, 1, None), True, ""),
        ((0, 2, 2), True, ""),
        ((2, 2, None), True, ""),
        ((0, 0, None), False, "max_size"),
        ((0, 2, 3), False, "desired_size"),
        ((3, 2, None), False, "max_size"),
    ],
)
def test_node_group_sizes(sizes: tuple[int, int, int | None], ok: bool, key: str) -> None:
    """EKS: 0 <= minSize <= desiredSize <= maxSize, maxSize >= 1 (EKS API, NodegroupScalingConfig)."""
    from efa_constructs.cdk.eks import _check_sizes

    if ok:
        _check_sizes(*sizes)
    else:
        with pytest.raises(EfaConfigError) as err:
            _check_sizes(*sizes)
        assert str(err.value).startswith(f"{key}=")


def test_node_group_defaults_and_user_data_parts(eks_cluster: Any) -> None:
    stack, vpc, cluster = eks_cluster
    extra = ec2.MultipartUserData()
    extra.add_part(
        ec2.MultipartBody.from_raw_body(content_type="application/node.eks.aws", body="kind: NodeConfig")
    )
    group = EfaNodegroup(
        stack,
        "Defaults",
        cluster=cluster,
        instance_type=ec2.InstanceType("trn1.32xlarge"),
        subnet=vpc.isolated_subnets[0],
        device_plugin=False,
        user_data=extra,
    )
    t = new_template(stack)
    lt_id = stack.get_logical_id(group.launch_template.launch_template.node.default_child)
    parts = email.message_from_string(user_data(t["Resources"][lt_id])).get_payload()
    assert [(p.get_content_type(), p.get_payload()) for p in parts] == [
        ("application/node.eks.aws", "kind: NodeConfig")
    ]
    ng = t["Resources"][stack.get_logical_id(group.nodegroup.node.default_child)]["Properties"]
    assert ng["ScalingConfig"] == {"MinSize": 0, "DesiredSize": 0, "MaxSize": 2}


def test_node_group_refuses_a_subnet_of_another_vpc(eks_cluster: Any) -> None:
    stack, _, cluster = eks_cluster
    other = ec2.Vpc(
        stack,
        "Other",
        max_azs=1,
        nat_gateways=0,
        subnet_configuration=[ec2.SubnetConfiguration(name="P", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
    )
    with pytest.raises(EfaConfigError, match="belongs to the VPC Eks/Other"):
        EfaNodegroup(
            stack,
            "Elsewhere",
            cluster=cluster,
            instance_type=ec2.InstanceType("trn1.32xlarge"),
            subnet=other.isolated_subnets[0],
            device_plugin=False,
        )


def test_one_device_plugin_for_two_node_groups_and_capacity_blocks() -> None:
    app = new_app()
    stack = Stack(app, "Two")
    vpc = isolated_vpc(stack)
    from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

    cluster = eks.Cluster(
        stack, "Cluster", version=eks.KubernetesVersion.V1_35, vpc=vpc,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP, default_capacity=0,
        vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
        kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "Kubectl")),
    )  # fmt: skip
    subnet = vpc.isolated_subnets[0]
    a = EfaNodegroup(
        stack, "A", cluster=cluster, instance_type=ec2.InstanceType("p5.48xlarge"), subnet=subnet
    )
    block = Capacity.capacity_block("cr-0123456789abcdef0")
    EfaNodegroup(
        stack,
        "B",
        cluster=cluster,
        instance_type=ec2.InstanceType("p5.48xlarge"),
        subnet=subnet,
        capacity=block,
        taints=[eks.TaintSpec(effect=eks.TaintEffect.NO_SCHEDULE, key="efa", value="true")],
    )
    db = ec2.SecurityGroup(stack, "Db", vpc=vpc)
    db.connections.allow_from(a, ec2.Port.tcp(5432))  # IConnectable: both groups of its interfaces
    t = new_template(stack)
    sources = {
        json.dumps(r["Properties"]["SourceSecurityGroupId"])
        for r in by_type(t, "AWS::EC2::SecurityGroupIngress")
        if r["Properties"].get("FromPort") == 5432
    }
    assert len(sources) == 2 and any("ASecurityGroup" in s for s in sources)
    assert any("ClusterSecurityGroupId" in s for s in sources)
    # one EFA and one NVIDIA device plugin for the cluster (the EKS user guide's NVIDIA chart)
    charts = sorted(_charts(t), key=lambda c: c["Chart"])
    assert [(c["Chart"], c["Namespace"], c["Version"]) for c in charts] == [
        ("aws-efa-k8s-device-plugin", "kube-system", "v0.5.30"),
        ("nvidia-device-plugin", "nvidia", "0.17.4"),
    ]
    assert charts[1]["Repository"] == "https://nvidia.github.io/k8s-device-plugin"
    assert json.loads(charts[1]["Values"]) == {"gfd": {"enabled": True}}
    groups = {k: v["Properties"] for k, v in t["Resources"].items() if v["Type"] == "AWS::EKS::Nodegroup"}
    assert sorted(g["CapacityType"] for g in groups.values()) == ["CAPACITY_BLOCK", "ON_DEMAND"]
    assert sorted(g["AmiType"] for g in groups.values()) == ["AL2023_x86_64_NVIDIA"] * 2
    assert sorted(json.dumps(g.get("Taints")) for g in groups.values()) == [
        json.dumps([{"Effect": "NO_SCHEDULE", "Key": "efa", "Value": "true"}]),
        "null",
    ]
    lts = by_type(t, "AWS::EC2::LaunchTemplate")
    block_lt = [lt for lt in lts if "InstanceMarketOptions" in lt["Properties"]["LaunchTemplateData"]]
    assert len(block_lt) == 1  # a Capacity Block: capacity-block market, no placement group
    data = block_lt[0]["Properties"]["LaunchTemplateData"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert "Placement" not in data


def test_node_group_alone_is_cdk_nag_clean() -> None:
    """cdk-nag (AwsSolutions) over an EfaNodegroup on an imported cluster: none of its resources has an
    unacknowledged finding. (The example app's other findings are aws-cdk-lib's EKS cluster and the
    example's own bucket and grant.) Trn1PcsCluster is checked with the other ready stacks in
    tests/test_security.py."""
    from aws_cdk import Validations
    from cdk_nag import AwsSolutionsChecks

    app = new_app()
    stack = Stack(app, "Imported")
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-east-1c"]
    )
    subnet = ec2.Subnet.from_subnet_attributes(
        stack, "Subnet", subnet_id="subnet-0123456789abcdef0", availability_zone="us-east-1c"
    )
    cluster = eks.Cluster.from_cluster_attributes(
        stack, "Cluster", cluster_name="training", vpc=vpc, cluster_security_group_id="sg-0123456789abcdef0"
    )
    EfaNodegroup(
        stack,
        "Trainers",
        cluster=cluster,
        instance_type=ec2.InstanceType("trn1.32xlarge"),
        subnet=subnet,
        device_plugin=False,
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # raises on an unacknowledged finding


CLOUD_INIT = shutil.which("cloud-init")


def _cloud_init(pcs: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The PCS compute node's user data through tests/cloud_init_check.py (cloud-init's own code)."""
    compute = pcs["Resources"][efa_launch_template(pcs)]
    (efs,) = [k for k, v in pcs["Resources"].items() if v["Type"] == "AWS::EFS::FileSystem"]
    (tmp_path / "user-data").write_text(user_data(compute, {efs: "fs-0123456789abcdef0"}))
    run = subprocess.run(
        [
            "/usr/bin/python3",
            str(ROOT / "tests/cloud_init_check.py"),
            str(tmp_path / "user-data"),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    seen: dict[str, Any] = json.loads(run.stdout)
    return seen


NO_CLOUD_INIT = pytest.mark.skipif(
    CLOUD_INIT is None, reason="cloud-init is not installed (scripts/setup --dev installs it as root)"
)

#: Stand-ins for what prep.sh calls on a node: the EFS mount helper is there; `mount` records and
#: mounts (STUB_MOUNT_FAILS: it fails), `mountpoint` answers from that; iptables and sleep record.
PREP_STUBS = {
    "mount.efs": "exit 0",
    "mount": '[ -z "${STUB_MOUNT_FAILS:-}" ] || exit 32\n'
    'echo "mount $*" >>"$STUB_DIR/calls"; touch "$STUB_DIR/mounted"',
    "mountpoint": '[ -e "$STUB_DIR/mounted" ]',
    "iptables": 'echo "iptables $*" >>"$STUB_DIR/calls"; case "$*" in *" -C "*) exit 1 ;; esac',
    "sleep": "exit 0",
    "dnf": 'echo "dnf $*" >>"$STUB_DIR/calls"; exit 1',  # the package manager has no such package
}


def _prep_env(tmp_path: Path) -> dict[str, str]:
    stubs = tmp_path / "stubs"
    for name, body in PREP_STUBS.items():
        executable(stubs / name, f"#!/bin/bash\n{body}\n")
    (tmp_path / "node/etc").mkdir(parents=True, exist_ok=True)
    return {"PATH": f"{stubs}:/usr/bin:/bin", "EFA_CDK_ROOT": str(tmp_path / "node"), "STUB_DIR": str(stubs)}


@NO_CLOUD_INIT
def test_cloud_init_runs_the_pcs_cloud_config_and_the_node_mounts_efs_over_tls(
    pcs: dict[str, Any], tmp_path: Path
) -> None:
    """Debian's cloud-init (22.4), its own code: the MIME parts are types its handlers take; the
    cloud-config passes its strict schema; bootcmd runs on a first boot, before write_files, without
    failing; write_files writes prep.sh executable; runcmd's script, run as the final stage runs it (here
    with stand-ins for mount, mountpoint and iptables), mounts the EFS with the EFS mount helper over TLS
    from /etc/fstab (issue 34 item 14), makes /shared mode 1777 (item 9) and sets the metadata rule."""
    seen = _cloud_init(pcs, tmp_path)
    assert seen["types"] == ["text/cloud-config", "text/x-shellscript"]
    assert set(seen["types"]) <= set(seen["handled"])
    # issue 34 item 8: plain text, as AWS's PCS examples (PCS merges the document with its own), and
    # cloud-init still reads the shell part whole: the bootstrap that runs the EFA check
    raw = (tmp_path / "user-data").read_text()
    assert "Content-Transfer-Encoding: base64" not in raw
    assert seen["encodings"] == ["7bit", "7bit"]
    (shell,) = seen["shell"]
    assert shell.startswith("#!/bin/bash\n") and "EFA_CDK_STEPS='efa-env,verify-efa'" in shell
    assert seen["schema_errors"] == [] and seen["warnings"] == []
    assert seen["bootcmd_ok"] is True
    assert seen["written"] == {"/opt/efa-cdk/pcs/prep.sh": "0o755"}
    prep = tmp_path / "root/opt/efa-cdk/pcs/prep.sh"
    assert prep.read_text() == PREP.read_text()
    runcmd = seen["runcmd"]
    assert "'/opt/efa-cdk/pcs/prep.sh' 'shared' 'fs-0123456789abcdef0' '/shared'" in runcmd
    script = tmp_path / "runcmd"
    script.write_text(runcmd.replace("/opt/efa-cdk/pcs/prep.sh", str(prep)))
    run = subprocess.run(["/bin/sh", str(script)], env=_prep_env(tmp_path), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    node = tmp_path / "node"
    assert (node / "etc/fstab").read_text() == "fs-0123456789abcdef0:/ /shared efs _netdev,tls 0 0\n"
    assert (node / "shared").stat().st_mode & 0o7777 == 0o1777
    calls = (tmp_path / "stubs/calls").read_text()
    assert f"mount {node}/shared" in calls
    assert "-m owner --uid-owner 0 -j ACCEPT" in calls and "-A efa-cdk-imds -j REJECT" in calls
    assert "fs-0123456789abcdef0 mounted at /shared over TLS, mode 1777" in run.stderr


def test_an_efs_that_cannot_be_mounted_leaves_shared_alone_and_says_why(tmp_path: Path) -> None:
    """A mount target that never answers: six tries, then one line naming the file system; /shared is
    not opened up. The same line when the image has no EFS mount helper and none can be installed."""
    env = _prep_env(tmp_path)
    run = subprocess.run(
        ["bash", str(PREP), "shared", "fs-0123456789abcdef0", "/shared"],
        env={**env, "STUB_MOUNT_FAILS": "1"}, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 1 and "could not mount fs-0123456789abcdef0 at /shared over TLS" in run.stderr
    assert (tmp_path / "node/shared").stat().st_mode & 0o7777 != 0o1777
    (tmp_path / "stubs/mount.efs").unlink()
    run = subprocess.run(["bash", str(PREP), "shared", "fs-0123456789abcdef0", "/shared"], env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 1 and "no EFS mount helper (amazon-efs-utils) on this image" in run.stderr
    assert "dnf -y -q install amazon-efs-utils" in (tmp_path / "stubs/calls").read_text()  # tried first


def test_node_group_on_an_aws_eks_cluster() -> None:
    """aws-cdk-lib's older EKS module (``aws_eks``, which most existing apps use): the same node group,
    made with that module's classes; the device plugin through the cluster's own kubectl handler, once;
    enums and taints of either module accepted."""
    from aws_cdk import aws_eks as eks_v1
    from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

    stack = Stack(new_app(), "EksV1")
    vpc = isolated_vpc(stack)
    cluster = eks_v1.Cluster(
        stack, "Cluster", version=eks_v1.KubernetesVersion.V1_35, vpc=vpc, default_capacity=0,
        vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
        kubectl_layer=KubectlV35Layer(stack, "Kubectl"),
    )  # fmt: skip
    subnet = vpc.isolated_subnets[0]
    a = EfaNodegroup(
        stack, "A", cluster=cluster, instance_type=ec2.InstanceType("trn1.32xlarge"), subnet=subnet,
        taints=[eks_v1.TaintSpec(effect=eks_v1.TaintEffect.NO_SCHEDULE, key="efa", value="true")],
    )  # fmt: skip
    b = EfaNodegroup(
        stack, "B", cluster=cluster, instance_type=ec2.InstanceType("p5.48xlarge"), subnet=subnet,
        capacity=Capacity.capacity_block("cr-0123456789abcdef0"),
        ami_type=eks_v1.NodegroupAmiType.AL2023_X86_64_NVIDIA,
        taints=[eks.TaintSpec(effect=eks.TaintEffect.NO_EXECUTE, key="gpu")],  # the v2 module's struct
    )  # fmt: skip
    assert isinstance(a.nodegroup, eks_v1.Nodegroup) and isinstance(b.device_plugin, eks_v1.HelmChart)
    assert a.device_plugin is b.device_plugin
    bucket = s3.Bucket(stack, "Data")
    bucket.grant_read(a)  # IGrantable through CDK: the node role
    db = ec2.SecurityGroup(stack, "Db", vpc=vpc)
    db.connections.allow_from(a, ec2.Port.tcp(5432))  # IConnectable: the EFA and the cluster's group
    t = new_template(stack)
    groups = {k: v["Properties"] for k, v in t["Resources"].items() if v["Type"] == "AWS::EKS::Nodegroup"}
    by_ami = {g["AmiType"]: g for g in groups.values()}
    assert set(by_ami) == {"AL2023_x86_64_NEURON", "AL2023_x86_64_NVIDIA"}
    assert by_ami["AL2023_x86_64_NEURON"]["CapacityType"] == "ON_DEMAND"
    assert by_ami["AL2023_x86_64_NVIDIA"]["CapacityType"] == "CAPACITY_BLOCK"
    assert by_ami["AL2023_x86_64_NEURON"]["Taints"] == [
        {"Effect": "NO_SCHEDULE", "Key": "efa", "Value": "true"}
    ]
    assert by_ami["AL2023_x86_64_NVIDIA"]["Taints"] == [{"Effect": "NO_EXECUTE", "Key": "gpu"}]
    assert sorted(c["Chart"] for c in _charts(t)) == [
        "aws-efa-k8s-device-plugin", "neuron-helm-chart", "nvidia-device-plugin"
    ]  # fmt: skip
    lts = by_type(t, "AWS::EC2::LaunchTemplate")
    efa = [n for lt in lts for n in lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]]
    assert sum(n.get("InterfaceType") == "efa-only" for n in efa) == 8 + 32  # trn1 and p5 layouts
    sources = {
        json.dumps(r["Properties"]["SourceSecurityGroupId"])
        for r in by_type(t, "AWS::EC2::SecurityGroupIngress")
        if r["Properties"].get("FromPort") == 5432
    }
    assert len(sources) == 2 and any("ClusterSecurityGroupId" in s for s in sources)
    role = stack.get_logical_id(a.role.node.default_child)
    assert any(
        {"Ref": role} in p["Properties"]["Roles"] and "s3:GetObject*" in json.dumps(p["Properties"])
        for p in by_type(t, "AWS::IAM::Policy")
    )


def test_node_group_on_an_imported_aws_eks_cluster_needs_its_kubectl_role_for_the_plugin() -> None:
    from aws_cdk import aws_eks as eks_v1

    stack = Stack(new_app(), "ImportedV1")
    vpc = isolated_vpc(stack)
    args: dict[str, Any] = {
        "instance_type": ec2.InstanceType("trn1.32xlarge"),
        "subnet": vpc.isolated_subnets[0],
    }
    no_group = eks_v1.Cluster.from_cluster_attributes(stack, "NoGroup", cluster_name="t0", vpc=vpc)
    with pytest.raises(EfaConfigError) as err:
        EfaNodegroup(stack, "Ungrouped", cluster=no_group, device_plugin=False, **args)
    assert str(err.value).startswith("cluster='ImportedV1/NoGroup': the imported cluster names no cluster")
    assert "import it with cluster_security_group_id=" in str(err.value)
    group_id = "sg-0123456789abcdef0"
    bare = eks_v1.Cluster.from_cluster_attributes(
        stack, "Bare", cluster_name="training", vpc=vpc, cluster_security_group_id=group_id
    )
    with pytest.raises(EfaConfigError) as err:
        EfaNodegroup(stack, "NoRole", cluster=bare, **args)
    assert str(err.value).startswith("device_plugin=True: the device plugins are Helm charts")
    assert "import the cluster with kubectl_role_arn=" in str(err.value)
    with pytest.raises(EfaConfigError, match=r"^accelerator_device_plugin=True: the device plugins"):
        EfaNodegroup(
            stack, "NoEfaPlugin", cluster=bare, device_plugin=False, accelerator_device_plugin=True, **args
        )
    EfaNodegroup(stack, "NoPlugin", cluster=bare, device_plugin=False, **args)  # neither, by default
    with_role = eks_v1.Cluster.from_cluster_attributes(
        stack, "WithRole", cluster_name="training2", vpc=vpc, cluster_security_group_id=group_id,
        kubectl_role_arn="arn:aws:iam::123456789012:role/kubectl",
    )  # fmt: skip
    group = EfaNodegroup(stack, "Plugged", cluster=with_role, **args)
    assert isinstance(group.device_plugin, eks_v1.HelmChart)


def test_node_group_refuses_what_is_not_an_eks_cluster(eks_cluster: Any) -> None:
    stack, vpc, _ = eks_cluster
    with pytest.raises(EfaConfigError) as err:
        EfaNodegroup(
            stack, "NotACluster", cluster=vpc, instance_type=ec2.InstanceType("trn1.32xlarge"),  # type: ignore[arg-type]
            subnet=vpc.isolated_subnets[0], device_plugin=False,
        )  # fmt: skip
    assert "not an EKS cluster of aws-cdk-lib's aws_eks_v2 or aws_eks module" in str(err.value)


@pytest.mark.parametrize("change", ["instance_type", "login_instance_type"])
def test_a_type_change_replaces_the_node_group_under_a_new_name(change: str) -> None:
    """Issue 34 item 6: InstanceConfigs and Name are create-only (CloudFormation's schema) and the new
    group is created before the old one is deleted, in the same cluster: the name changes with the type,
    so the two never collide, and template-diff shows the group replaced."""
    from efa_constructs.tools.template_diff import diff_templates

    new_type = {"instance_type": "trn1n.32xlarge", "login_instance_type": "c7i.2xlarge"}[change]
    old = new_template(Stack.of(_pcs()))
    new = new_template(Stack.of(_pcs(**{change: ec2.InstanceType(new_type)})))

    def names(t: dict[str, Any]) -> dict[str, str]:
        groups = t["Resources"].items()
        return {k: g["Properties"]["Name"] for k, g in groups if g["Type"] == "AWS::PCS::ComputeNodeGroup"}

    before, after = names(old), names(new)
    (changed,) = [k for k in before if before[k] != after[k]]
    assert before[changed][:-7] == after[changed][:-7] and len(after[changed]) <= 25
    d = diff_templates(old, new)
    assert changed in d.replaced and "InstanceConfigs" in json.dumps(d.replaced[changed])


def test_pcs_nodes_get_the_layout_pcs_documents_and_the_other_on_request(pcs: dict[str, Any]) -> None:
    """Issue 34 item 7: every PCS source (user guide, "Using EFA with AWS PCS"; aws-hpc-recipes
    recipes/pcs/enable_efa) puts an `efa` interface on each card, card 0 at DeviceIndex 0 and the others
    at 1; none shows efa-only. trn1.32xlarge has 8 cards (EFA-FACTS.md)."""
    data = pcs["Resources"][efa_launch_template(pcs)]["Properties"]["LaunchTemplateData"]
    placed = sorted(
        (n["NetworkCardIndex"], n["DeviceIndex"], n["InterfaceType"]) for n in data["NetworkInterfaces"]
    )
    assert placed == [(0, 0, "efa")] + [(card, 1, "efa") for card in range(1, 8)]
    t = new_template(Stack.of(_pcs(nic_layout=Layout.recommended())))
    data = t["Resources"][efa_launch_template(t)]["Properties"]["LaunchTemplateData"]
    assert {n.get("InterfaceType", "interface") for n in data["NetworkInterfaces"]} == {
        "interface",
        "efa-only",
    }


def test_pcs_cluster_prolog_storage_policy_and_node_group_order(pcs: dict[str, Any]) -> None:
    """Issue 34 items 10, 14, 11: the cluster names efa-cdk's Prolog (a node that has not verified EFA
    is drained, tests/e2e/test_pcs_node.py runs it under real slurmd); the EFS refuses connections
    without TLS (Amazon EFS user guide: aws:SecureTransport); every node group waits for the EFS mount
    target its nodes mount at first boot."""
    (cluster,) = by_type(pcs, "AWS::PCS::Cluster")
    assert cluster["Properties"]["SlurmConfiguration"]["SlurmCustomSettings"] == [
        {"ParameterName": "Prolog", "ParameterValue": "/opt/efa-cdk/bin/slurm-prolog.sh"}
    ]
    assert (ROOT / "efa_constructs/node/boot/slurm-prolog.sh").exists()  # staged to /opt/efa-cdk/bin
    (efs,) = by_type(pcs, "AWS::EFS::FileSystem")
    (deny,) = [s for s in efs["Properties"]["FileSystemPolicy"]["Statement"] if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} and deny["Action"] == "*"
    targets = {k for k, v in pcs["Resources"].items() if v["Type"] == "AWS::EFS::MountTarget"}
    assert targets
    for group in by_type(pcs, "AWS::PCS::ComputeNodeGroup"):
        assert targets <= set(group["DependsOn"])


def test_pcs_metadata_users_and_a_second_hop_on_request() -> None:
    """Issue 34 items 16 and 11: more users than root through to instance metadata, and hop limit 2 for
    bridged containers, on the login and the compute templates alike; a bad user name is refused."""
    t = new_template(Stack.of(_pcs(imds_users=["ec2-user"], bridged_containers=True)))
    templates = by_type(t, "AWS::EC2::LaunchTemplate")
    assert len(templates) == 2
    for lt in templates:
        assert lt["Properties"]["LaunchTemplateData"]["MetadataOptions"]["HttpPutResponseHopLimit"] == 2
        config = yaml.safe_load(mime_parts(lt, {})["text/cloud-config"])
        assert config["runcmd"][0] == ["/opt/efa-cdk/pcs/prep.sh", "imds", "root", "ec2-user"]
    for bad in ("root", "Ec2 User", ""):
        with pytest.raises(EfaConfigError, match=r"imds_users=.*not a local user name besides root"):
            _pcs(imds_users=[bad])


def test_accelerator_plugin_options_and_the_efa_image_region() -> None:
    """Issue 34 items 12, 13 and 17: the accelerator's plugin can be left off on its own; the EFA
    plugin's image comes from the cluster's region where EKS lists a registry for it (another account in
    some regions), the chart's default otherwise; the CNI policy can stay off a created node role."""
    from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

    def charts(region: str | None, **kwargs: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        app = new_app()
        env = cdk.Environment(region=region) if region else None
        stack = Stack(app, "Plugins", env=env)
        vpc = isolated_vpc(stack)
        cluster = eks.Cluster(
            stack, "Cluster", version=eks.KubernetesVersion.V1_35, vpc=vpc, default_capacity=0,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
            kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "K")),
        )  # fmt: skip
        EfaNodegroup(stack, "G", cluster=cluster, subnet=vpc.isolated_subnets[0], **kwargs)
        t = new_template(stack)
        return _charts(t), t

    p5 = {"instance_type": ec2.InstanceType("p5.48xlarge")}
    found, _ = charts("af-south-1", **p5, accelerator_device_plugin=False)
    (efa,) = found
    assert json.loads(efa["Values"])["image"]["repository"] == (
        "877085696533.dkr.ecr.af-south-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"
    )
    found, _ = charts(None, **p5)
    (efa,) = [c for c in found if c["Chart"] == "aws-efa-k8s-device-plugin"]
    assert "image" not in json.loads(efa["Values"])  # no region known at synth: the chart's default
    _, t = charts("us-east-1", instance_type=ec2.InstanceType("trn1.32xlarge"), cni_policy=False)
    (role,) = [
        v for k, v in t["Resources"].items() if v["Type"] == "AWS::IAM::Role" and k.startswith("GNodeRole")
    ]
    managed = json.dumps(role["Properties"]["ManagedPolicyArns"])
    assert "AmazonEKSWorkerNodePolicy" in managed and "AmazonEKS_CNI_Policy" not in managed


@pytest.mark.parametrize(("desired", "warned"), [(2, True), (0, False)])
def test_a_capacity_block_node_group_says_how_to_update_it(
    eks_cluster: Any, desired: int, warned: bool
) -> None:
    """Issue 34 item 13: EKS updates a Capacity Block node group only at desired size 0."""
    from aws_cdk import assertions

    stack, vpc, cluster = eks_cluster
    EfaNodegroup(
        stack, f"Block{desired}", cluster=cluster, instance_type=ec2.InstanceType("p5.48xlarge"),
        subnet=vpc.isolated_subnets[0], device_plugin=False, max_size=2, desired_size=desired,
        capacity=Capacity.capacity_block("cr-0123456789abcdef0", instance_count=2),
    )  # fmt: skip
    found = assertions.Annotations.from_stack(stack).find_warning(
        f"/{stack.stack_name}/Block{desired}", assertions.Match.string_like_regexp("only at desired size 0")
    )
    assert bool(found) is warned


def test_the_eks_pod_asks_for_the_whole_node_with_huge_pages() -> None:
    """Issue 34 item 12: the docs' pod requests every EFA and every Neuron device of a trn1.32xlarge (the
    catalogue's counts) and 2 MiB huge pages, requests equal to limits (Kubernetes requires it of huge
    pages), as the EKS user guide's EFA example does on p5; it runs as the pod-role service account."""
    text = (ROOT / "docs/eks.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", text, re.S)
    spec = yaml.safe_load(block)["spec"]
    assert spec["serviceAccountName"] == "trainer"
    (container,) = spec["containers"]
    limits, requests = container["resources"]["limits"], container["resources"]["requests"]
    it = instance_type("trn1.32xlarge")
    assert limits["vpc.amazonaws.com/efa"] == it.max_efa_interfaces
    assert limits["aws.amazon.com/neuron"] == it.accelerator.count
    assert limits["hugepages-2Mi"] == requests["hugepages-2Mi"] == "5120Mi"
    assert limits == requests


@pytest.mark.parametrize("name", ["abc", "a" * 40])
def test_pcs_cluster_names_at_both_edges_of_the_rule_pass(name: str) -> None:
    """3 and 40 characters are PCS's edges (API reference, CreateCluster clusterName)."""
    t = new_template(Stack.of(_pcs(cluster_name=name)))
    (cluster,) = by_type(t, "AWS::PCS::Cluster")
    assert cluster["Properties"]["Name"] == name


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [
        (Capacity.on_demand(), "ON_DEMAND"),
        (Capacity.reservation("cr-0123456789abcdef0"), "ON_DEMAND"),
        (
            Capacity.reservation_group("arn:aws:resource-groups:us-east-1:123456789012:group/efa"),
            "ON_DEMAND",
        ),
        (Capacity.capacity_block("cr-0123456789abcdef0"), "CAPACITY_BLOCK"),
    ],
)
def test_the_eks_capacity_type_of_each_capacity_in_both_modules(capacity: Any, expected: str) -> None:
    """Every member of the mapping (each CapacityKind), in aws_eks_v2 and aws_eks alike: a reservation is
    targeted by the launch template of an On-Demand group; a Capacity Block is its own capacity type."""
    from aws_cdk import aws_eks as eks_v1
    from aws_cdk import aws_eks_v2 as eks_v2

    from efa_constructs.cdk.eks import capacity_type

    for module in (eks_v2, eks_v1):
        assert capacity_type(module, capacity) is getattr(module.CapacityType, expected)


def test_every_capacity_kind_has_an_eks_capacity_type_case() -> None:
    """The parametrization above covers every CapacityKind (a new kind must say its EKS capacity type)."""
    from efa_constructs.core.capacity import CapacityKind

    covered = {
        Capacity.on_demand().kind,
        Capacity.reservation("cr-0123456789abcdef0").kind,
        Capacity.reservation_group("arn:aws:resource-groups:us-east-1:123456789012:group/efa").kind,
        Capacity.capacity_block("cr-0123456789abcdef0").kind,
    }
    assert covered == set(CapacityKind)
