"""Amazon EKS: `EfaNodegroup` (cdk/eks.py) and the docs' example app.

Expected values come from the sources the construct's docstring names: EKS launch-template rules from
the EKS API reference (LaunchTemplateSpecification), AMI types from the EKS API reference, the device
plugins as the EKS user guide installs them. What these tests do not prove: that EKS accepts the
templates or runs the node group (no account here).
"""

from __future__ import annotations

import contextlib
import email
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3

from efa_constructs.cdk import EfaMachineImage, EfaNodegroup
from efa_constructs.cdk.eks import accelerated_ami_type
from efa_constructs.core import EfaConfigError, instance_type
from efa_constructs.core.capacity import Capacity
from tests.helpers import (
    EKS_FORBIDDEN,
    ROOT,
    by_type,
    eks_cluster_with_kubectl,
    isolated_vpc,
    lint,
    new_app,
    new_template,
    user_data,
)


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
            {"machine_image": EfaMachineImage.eks_ami_type(eks.NodegroupAmiType.BOTTLEROCKET_X86_64_NVIDIA)},
            "ami_type='BOTTLEROCKET_X86_64_NVIDIA'",
        ),
        (
            {"machine_image": EfaMachineImage.eks_ami_type(eks.NodegroupAmiType.AL2023_ARM_64_NVIDIA)},
            "trn1.32xlarge is x86_64",
        ),
        ({"min_size": 3, "max_size": 2}, "EfaNodegroup needs 0 <= min_size <= max_size and max_size >= 1"),
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
    """EKS: 0 <= minSize <= desiredSize <= maxSize, maxSize >= 1 (EKS API, NodegroupScalingConfig): the
    register's count rule (min and max, as the node base runs it for EKS) and EKS's own desired size."""
    from efa_constructs import instance_type
    from efa_constructs.cdk.eks import _check_sizes
    from efa_constructs.core.node_rules import NodeRequest, node_rule, run_node_rules

    def check() -> None:
        request = NodeRequest("EfaNodegroup", instance_type("trn1.32xlarge"), sizes[1], "max_size",
                              min_count=sizes[0], min_name="min_size")  # fmt: skip
        run_node_rules(request, rules=(node_rule("efa-cdk:node-counts"),))
        _check_sizes(*sizes)

    if ok:
        check()
    else:
        with pytest.raises(EfaConfigError) as err:
            check()
        assert str(err.value).startswith(f"{key}=")
        assert err.value.code == "efa-cdk:eks-sizes"  # the id EKS's sizes have always had


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
    cluster = eks_cluster_with_kubectl(stack, vpc)
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
        machine_image=EfaMachineImage.eks_ami_type(eks_v1.NodegroupAmiType.AL2023_X86_64_NVIDIA),
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


@pytest.mark.parametrize(
    ("region", "registry"),
    [  # rows of the EKS user guide's "Amazon container image registries" table (issue 41 item 5)
        ("eu-south-1", "590381155156.dkr.ecr.eu-south-1.amazonaws.com"),
        ("me-south-1", "558608220178.dkr.ecr.me-south-1.amazonaws.com"),
        ("me-central-1", "759879836304.dkr.ecr.me-central-1.amazonaws.com"),
        ("il-central-1", "066635153087.dkr.ecr.il-central-1.amazonaws.com"),
        ("eu-central-2", "900612956339.dkr.ecr.eu-central-2.amazonaws.com"),
        ("eu-south-2", "455263428931.dkr.ecr.eu-south-2.amazonaws.com"),
        ("ca-west-1", "761377655185.dkr.ecr.ca-west-1.amazonaws.com"),
        ("cn-north-1", "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn"),
        ("us-gov-west-1", "013241004608.dkr.ecr.us-gov-west-1.amazonaws.com"),
        ("us-east-1", "602401143452.dkr.ecr.us-east-1.amazonaws.com"),
        ("xx-nowhere-1", None),  # a region the table does not list: the chart's default image
    ],
)
def test_the_efa_plugin_image_comes_from_the_registry_aws_lists_for_the_region(
    region: str, registry: str | None
) -> None:
    from efa_constructs.cdk.eks_charts import addon_registry

    assert addon_registry(region) == registry


def _docs_program(text: str, out: Path) -> dict[str, Any]:
    """docs/eks.md's aws_eks program: its template, and the EKS rules cdk-nag's AwsSolutions pack reports on
    it (its policy-validation plugin, the report as JSON: CDK's @aws-cdk/core:validationReportJson). The
    program's App is given the report's context and an output folder here; nothing else changes."""
    from aws_cdk import Validations
    from cdk_nag import AwsSolutionsChecks

    def run(app: str = "cdk.App()") -> dict[str, Any]:
        namespace: dict[str, Any] = {"__name__": "docs_eks"}
        program = text.replace("app.synth()", "pass").replace("app = cdk.App()", f"app = {app}")
        exec(compile(program, "docs/eks.md", "exec"), namespace)
        return namespace

    template = new_template(run()["stack"])
    report_json = {"@aws-cdk/core:validationReportJson": True}
    app = run(f"cdk.App(outdir={str(out)!r}, context={report_json!r})")["app"]
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with contextlib.suppress(RuntimeError):  # a finding fails the synth; the report names every one
        app.synth()
    report = (out / "policy-validation-report.json").read_text()
    return {"findings": sorted(set(re.findall(r"AwsSolutions-EKS[12]\b", report))), "template": template}


def test_the_docs_aws_eks_program_keeps_its_api_private_logs_its_control_plane_and_grants_a_pod_role(
    tmp_path: Path,
) -> None:
    """Issue 60 item 10: docs/eks.md's aws_eks program had its API endpoint open to 0.0.0.0/0 (cdk-nag
    AwsSolutions-EKS1), no control-plane logs (EKS2), and granted its bucket to the node role, which every
    pod on a node shares. Now: no EKS1 or EKS2 finding, and the bucket's grant is the trainer service
    account's pod role (EKS Pod Identity), not the node role's."""
    from tests.docs_blocks import blocks

    (block,) = [b for b in blocks() if b.page == "docs/eks.md" and b.lang == "python"]
    program = _docs_program(block.text, tmp_path)
    assert program["findings"] == []
    t = program["template"]
    (bucket,) = [k for k, v in t["Resources"].items() if v["Type"] == "AWS::S3::Bucket"]
    (node_role,) = [
        p["Properties"]["NodeRole"] for p in by_type(t, "AWS::EKS::Nodegroup")
    ]  # the node group's role (Fn::GetAtt)
    node_role_id = node_role["Fn::GetAtt"][0]
    (pod,) = by_type(t, "AWS::EKS::PodIdentityAssociation")
    assert pod["Properties"]["ServiceAccount"] == "trainer"
    pod_role_id = pod["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    granted = {
        role["Ref"]
        for p in by_type(t, "AWS::IAM::Policy")
        if bucket in json.dumps(p["Properties"]["PolicyDocument"])
        for role in p["Properties"]["Roles"]
    }
    assert granted == {pod_role_id} and node_role_id not in granted
