"""The image each orchestrator launches, one row each: what kind of :class:`EfaMachineImage` it takes as
``machine_image``, how to write one, its default, and the keywords it took before (deprecated in 0.2.0).

Who launches the nodes decides the kind: EC2 from a launch template's ImageId (``EfaCluster``,
``EfaPcsCluster``: PCS's AmiId is an AMI id), or the launcher from its own name for an image
(ParallelCluster's ``Image.Os``, an EKS managed node group's ``AmiType``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations
from constructs import Construct

from ..core.catalogue import AcceleratorKind, InstanceType
from ..core.errors import EfaConfigError
from .machine_image import EfaMachineImage, OsFamily


@dataclass(frozen=True)
class ImageRule:
    """One orchestrator's image: the launcher that names it ("" for EC2 from an AMI id), what that is and how
    to write one (for refusals), the default for an instance type, and the image the old keywords describe."""

    launcher: str
    what: str
    how: str
    default: Callable[[InstanceType], EfaMachineImage]
    from_old: Callable[..., EfaMachineImage] | None = None


def _pcs_default(_: InstanceType) -> EfaMachineImage:
    raise EfaConfigError(
        "machine_image",
        code="efa-cdk:pcs-image-missing",
        value=None,
        why="AWS PCS has no default image: its nodes need the PCS agent, PCS's Slurm and the EFA software",
        fix="pass machine_image=EfaMachineImage.from_ami_id('ami-...', os_family=...) of such an image "
        "(AWS's aws-pcs-sample_ami-* AMIs, or one built with aws-hpc-recipes' recipes/pcs/hpc_ready_ami)",
    )


def _pcs_old(ami_id: str | None = None, ami_os: OsFamily | None = None) -> EfaMachineImage:
    if ami_id is None:
        raise EfaConfigError(
            "ami_os",
            code="efa-cdk:pcs-ami-os-without-ami-id",
            value=ami_os,
            why="it describes ami_id, and no image is given",
            fix="pass machine_image=EfaMachineImage.from_ami_id('ami-...', os_family=...)",
        )
    return EfaMachineImage.from_ami_id(ami_id, os_family=ami_os or OsFamily.AMAZON_LINUX_2023)


def accelerated_ami_type(it: InstanceType) -> Any:
    """The EKS-optimized Amazon Linux 2023 AMI type for the type's accelerator and architecture (an
    ``aws_eks_v2.NodegroupAmiType``; aws_eks loaded only where EKS is used)."""
    from aws_cdk import aws_eks_v2 as eks

    arm = it.architecture == "arm64"
    kind = it.accelerator.kind
    if kind is AcceleratorKind.NEURON and not arm:
        return eks.NodegroupAmiType.AL2023_X86_64_NEURON
    if kind is AcceleratorKind.NVIDIA_GPU:
        return eks.NodegroupAmiType.AL2023_ARM_64_NVIDIA if arm else eks.NodegroupAmiType.AL2023_X86_64_NVIDIA
    if kind is AcceleratorKind.NONE:
        return (
            eks.NodegroupAmiType.AL2023_ARM_64_STANDARD
            if arm
            else eks.NodegroupAmiType.AL2023_X86_64_STANDARD
        )
    raise EfaConfigError(
        "ami_type",
        code="efa-cdk:eks-no-ami-type-for-accelerator",
        value=None,
        why=f"{it.name} carries {it.accelerator.name or kind.value} accelerators, and no EKS-optimized AMI "
        "has their drivers",
        fix="pass machine_image=EfaMachineImage.eks_ami_type(...) of an AL2023 AMI type and install the "
        "drivers yourself, e.g. in user_data",
    )


def _eks_default(it: InstanceType) -> EfaMachineImage:
    return EfaMachineImage.eks_ami_type(accelerated_ami_type(it))


_EC2_WHAT = "an image EC2 launches (an AMI id or an SSM parameter)"
_EC2_HOW = "EfaMachineImage.from_ami_id('ami-...', os_family=...) or EfaMachineImage.from_ssm_parameter(...)"

#: The register: orchestrator -> its image rule.
IMAGE_RULES = {
    "EfaCluster": ImageRule("", _EC2_WHAT, _EC2_HOW, EfaMachineImage.default_for),
    "EfaPcsCluster": ImageRule("", _EC2_WHAT, _EC2_HOW, _pcs_default, _pcs_old),
    "EfaParallelCluster": ImageRule(
        launcher="EfaParallelCluster",
        what="one of ParallelCluster's own images (its Image.Os)",
        how="EfaMachineImage.parallel_cluster('ubuntu2204')",
        default=lambda _: EfaMachineImage.parallel_cluster(),
        from_old=lambda image_os: EfaMachineImage.parallel_cluster(image_os),
    ),
    "EfaNodegroup": ImageRule(
        launcher="EfaNodegroup",
        what="an EKS-optimized image by its AMI type (EKS launches the image; a custom AMI needs its own "
        "nodeadm bootstrap)",
        how="EfaMachineImage.eks_ami_type(aws_eks_v2.NodegroupAmiType.AL2023_X86_64_NVIDIA)",
        default=_eks_default,
        from_old=lambda ami_type: EfaMachineImage.eks_ami_type(ami_type),
    ),
}


def image_for(
    scope: Construct, orchestrator: str, it: InstanceType, machine_image: EfaMachineImage | None, **old: Any
) -> EfaMachineImage:
    """The image `orchestrator` launches for `it`: ``machine_image``, or the image its deprecated keywords
    (`old`, None when not given) describe, with a deprecation naming ``machine_image`` (both together are
    refused: which one counts?), or its default. An image of another launcher is refused with how to write
    one for this orchestrator."""
    rule = IMAGE_RULES[orchestrator]
    given = {name: value for name, value in old.items() if value is not None}
    if given and machine_image is not None:
        raise EfaConfigError(
            next(iter(given)),
            code="efa-cdk:image-option-renamed-and-new",
            value=next(iter(given.values())),
            why=f"{' and '.join(given)} name the image the old way, and machine_image is given too",
            fix=f"drop {' and '.join(given)}",
        )
    for name in given:
        Annotations.of(scope).add_deprecation(
            f"efa_constructs.{orchestrator}#{name}",
            "write machine_image=..., the image every construct takes",
        )
    if given and rule.from_old is not None:
        machine_image = rule.from_old(**given)
    image = machine_image or rule.default(it)
    if image.launcher != rule.launcher or (not rule.launcher and image.machine_image is None):
        raise EfaConfigError(
            "machine_image",
            code="efa-cdk:image-of-another-launcher",
            value=image.description,
            why=f"{orchestrator} launches {rule.what}",
            fix=f"pass machine_image={rule.how}",
        )
    return image
