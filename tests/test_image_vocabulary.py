"""One image vocabulary: every orchestrator takes its image as ``machine_image`` (an
:class:`EfaMachineImage`), the old keywords (PCS's ``ami_id``/``ami_os``, ParallelCluster's ``image_os``,
EKS's ``ami_type``) still work for one minor release with a deprecation naming ``machine_image``, both
together are refused, and an image of another launcher is refused with how to write one for this
orchestrator (issue 52).

Expected values come from the launchers' own references: AWS::PCS::ComputeNodeGroup's ``AmiId`` (an AMI id),
ParallelCluster's ``Image.Os`` (its configuration reference: ubuntu2204, rhel9, ...), AWS::EKS::Nodegroup's
``AmiType`` (AL2023_x86_64_NEURON, ...; CDK spells the enum members in capitals).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk import Stack, assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks as eks_v1

from efa_constructs import (
    EfaCluster,
    EfaMachineImage,
    EfaNodegroup,
    EfaParallelCluster,
    EfaPcsCluster,
    OsFamily,
)
from efa_constructs.core.errors import EfaConfigError
from tests.helpers import isolated_vpc, new_app

AMI = "ami-0123456789abcdef0"
TRN1 = ec2.InstanceType("trn1.32xlarge")


def _pcs(stack: Stack, login_count: int = 0, **image: Any) -> Any:
    return EfaPcsCluster(
        stack, "Pcs", instance_type=TRN1, availability_zone="us-east-1c", login_count=login_count, **image
    )


def _pcluster(stack: Stack, **image: Any) -> Any:
    return EfaParallelCluster(stack, "Pc", instance_type=TRN1, availability_zone="us-east-1c", **image)


def _nodegroup(stack: Stack, **image: Any) -> Any:
    vpc = isolated_vpc(stack)
    cluster = eks_v1.Cluster.from_cluster_attributes(
        stack, "Eks", cluster_name="training", vpc=vpc, cluster_security_group_id="sg-0123456789abcdef0"
    )
    return EfaNodegroup(
        stack, "Ng", cluster=cluster, subnet=vpc.isolated_subnets[0], instance_type=TRN1, device_plugin=False,
        **image,
    )  # fmt: skip


def _cluster(stack: Stack, **image: Any) -> Any:
    return EfaCluster(stack, "C", instance_type=TRN1, node_count=2, vpc=isolated_vpc(stack), **image)


#: (orchestrator, its builder, the old keywords, the same image in the one vocabulary, where the launcher
#: reads the image in the template, the value it must read)
CASES = [
    (
        "EfaPcsCluster",
        _pcs,
        {"ami_id": AMI, "ami_os": OsFamily.UBUNTU},
        lambda: EfaMachineImage.from_ami_id(AMI, os_family=OsFamily.UBUNTU),
        lambda t, _: [g["Properties"]["AmiId"] for g in _of_type(t, "AWS::PCS::ComputeNodeGroup")],
        [AMI],
    ),
    (
        "EfaParallelCluster",
        _pcluster,
        {"image_os": "rhel9"},
        lambda: EfaMachineImage.parallel_cluster("rhel9"),
        lambda _, pc: pc.config.to_dict()["Image"],
        {"Os": "rhel9"},
    ),
    (
        "EfaNodegroup",
        _nodegroup,
        {"ami_type": eks_v1.NodegroupAmiType.AL2023_X86_64_NEURON},
        lambda: EfaMachineImage.eks_ami_type(eks_v1.NodegroupAmiType.AL2023_X86_64_NEURON),
        lambda t, _: [g["Properties"]["AmiType"] for g in _of_type(t, "AWS::EKS::Nodegroup")],
        ["AL2023_x86_64_NEURON"],
    ),
]


def _of_type(template: dict[str, Any], cfn_type: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == cfn_type]


def _built(build: Callable[..., Any], **image: Any) -> tuple[dict[str, Any], list[str], Any]:
    stack = Stack(new_app(), "S")
    construct = build(stack, **image)
    warnings = assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value())
    texts = [str(w.entry.data) for w in warnings]
    return assertions.Template.from_stack(stack).to_json(), texts, construct


@pytest.mark.parametrize(
    ("name", "build", "old", "new", "read", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_the_old_keywords_give_the_template_of_machine_image_with_a_deprecation_naming_it(
    name: str, build: Any, old: dict[str, Any], new: Any, read: Any, expected: Any
) -> None:
    by_old, old_warnings, _ = _built(build, **old)
    by_new, new_warnings, construct = _built(build, machine_image=new())
    assert read(by_new, construct) == expected
    assert by_old == by_new
    for keyword in old:
        said = [w for w in old_warnings if f"efa_constructs.{name}#{keyword}" in w]
        assert said and "machine_image=" in said[0], old_warnings
    assert not [w for w in new_warnings if "deprecated" in w], new_warnings


@pytest.mark.parametrize(
    ("name", "build", "old", "new", "read", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_an_old_keyword_beside_machine_image_is_refused(
    name: str, build: Any, old: dict[str, Any], new: Any, read: Any, expected: Any
) -> None:
    keyword = next(iter(old))
    with pytest.raises(EfaConfigError) as err:
        build(Stack(new_app(), "S"), machine_image=new(), **old)
    assert err.value.code == "efa-cdk:image-option-renamed-and-new"
    assert err.value.what == keyword and f"drop {' and '.join(old)}" in str(err.value)


@pytest.mark.parametrize(
    ("build", "image", "fix"),
    [
        (_cluster, lambda: EfaMachineImage.parallel_cluster(), "EfaMachineImage.from_ami_id("),
        (_cluster, lambda: EfaMachineImage.chosen_by_launcher("EKS's"), "EfaMachineImage.from_ami_id("),
        (_pcs, lambda: EfaMachineImage.eks_ami_type(eks_v1.NodegroupAmiType.AL2023_X86_64_NEURON),
         "EfaMachineImage.from_ami_id("),
        (_pcluster, lambda: EfaMachineImage.from_ami_id(AMI), "EfaMachineImage.parallel_cluster("),
        (_pcluster, lambda: EfaMachineImage.neuron_dlami(), "EfaMachineImage.parallel_cluster("),
        (_nodegroup, lambda: EfaMachineImage.from_ami_id(AMI), "EfaMachineImage.eks_ami_type("),
        (_nodegroup, lambda: EfaMachineImage.parallel_cluster(), "EfaMachineImage.eks_ami_type("),
    ],
    ids=["cluster-pcluster", "cluster-launcher", "pcs-eks", "pcluster-ami", "pcluster-ssm", "eks-ami",
         "eks-pcluster"],
)  # fmt: skip
def test_an_image_of_another_launcher_is_refused_with_how_to_write_one(
    build: Any, image: Any, fix: str
) -> None:
    """EfaCluster and PCS launch from an AMI id (no ImageId: the launch fails at deploy); ParallelCluster
    and EKS name their own images (an AMI id would be silently dropped)."""
    with pytest.raises(EfaConfigError) as err:
        build(Stack(new_app(), "S"), machine_image=image())
    assert err.value.code == "efa-cdk:image-of-another-launcher", str(err.value)
    assert f"machine_image={fix}" in str(err.value)


def test_pcs_without_an_image_is_refused_with_where_to_find_one() -> None:
    """AWS PCS publishes no image parameter (ORCHESTRATORS.md: sample AMIs aws-pcs-sample_ami-*, for
    demonstration; custom images from aws-hpc-recipes recipes/pcs/hpc_ready_ami)."""
    for image, code in (
        ({}, "pcs-image-missing"),
        ({"ami_os": OsFamily.UBUNTU}, "pcs-ami-os-without-ami-id"),
    ):
        with pytest.raises(EfaConfigError) as err:
            _pcs(Stack(new_app(), "S"), **image)
        assert err.value.code == f"efa-cdk:{code}"
        assert "machine_image=EfaMachineImage.from_ami_id(" in str(err.value)


def test_pcs_takes_an_image_read_once_from_ssm_for_both_node_groups() -> None:
    stack = Stack(new_app(), "S")
    image = EfaMachineImage.from_ssm_parameter(
        "/my/pcs/ami", os_family=OsFamily.AMAZON_LINUX_2023, efa_preinstalled=True
    )
    _pcs(stack, machine_image=image, login_count=1)
    t = assertions.Template.from_stack(stack).to_json()
    (lookup,) = [k for k, r in t["Resources"].items() if r["Type"] == "Custom::EfaImageLookup"]
    assert [g["Properties"]["AmiId"] for g in _of_type(t, "AWS::PCS::ComputeNodeGroup")] == [
        {"Ref": lookup}
    ] * 2


def test_an_eks_ami_type_is_an_enum_member_of_either_eks_module() -> None:
    from types import SimpleNamespace

    for wrong in ("AL2023_X86_64_NVIDIA", SimpleNamespace(name="AL2023_X86_64_NVIDIA"), OsFamily.UBUNTU):
        with pytest.raises(EfaConfigError) as err:
            EfaMachineImage.eks_ami_type(wrong)  # type: ignore[arg-type]
        assert err.value.code == "efa-cdk:eks-ami-type-form"


def test_an_image_a_launcher_names_has_no_ami_id() -> None:
    with pytest.raises(EfaConfigError) as err:
        EfaMachineImage.parallel_cluster().image_id(Stack(new_app(), "S"))
    assert err.value.code == "efa-cdk:image-without-id"
    assert EfaMachineImage.from_ami_id(AMI).image_id(Stack(new_app(), "T")) == AMI
