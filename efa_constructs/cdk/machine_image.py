"""Default AMIs per accelerator, resolved through SSM public parameters at deploy time.

Sources for the parameter names (checked late 2026):

* DLAMIs: AWS Deep Learning AMIs developer guide, "Finding the ID of a DLAMI": the name is
  ``/aws/service/deeplearning/ami/<x86_64|arm64>/<ami_type>/latest/ami-id``, where ami_type is the
  DLAMI's name without "Deep", "Learning" and "AMI" ("Deep Learning Base OSS Nvidia Driver GPU AMI
  (Ubuntu 22.04)" -> ``base-oss-nvidia-driver-gpu-ubuntu-22.04``). The release notes of each DLAMI
  list the instances it supports: the ARM64 Ubuntu 22.04 one lists G5g and P6e-GB200, the Ubuntu
  24.04 one adds P6e-GB300 (release notes 2026-09/10).
* Neuron DLAMI: AWS Neuron documentation, "Neuron DLAMI" SSM parameters
  (``/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id``).
* Amazon Linux 2023: aws-cdk-lib's ``MachineImage.latest_amazon_linux2023`` (the
  ``/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-<arch>`` parameter).

An SSM public parameter becomes a CloudFormation parameter of type
``AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>``: synthesis needs no credentials, and the
AMI id is resolved in the account and region of the deploy.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2

from ..core.catalogue import AcceleratorKind, InstanceType


class OsFamily(enum.Enum):
    """The distribution family of an image: decides library paths and the package manager."""

    AMAZON_LINUX_2023 = "al2023"
    UBUNTU = "ubuntu"


@dataclass(frozen=True)
class EfaMachineImage:
    """An AMI choice with what the launch template needs to know about it.

    Args:
        machine_image: the image.
        root_device_name: the AMI's root device (``/dev/xvda`` on Amazon Linux, ``/dev/sda1``
            on Ubuntu), so the root volume is resized instead of a second volume being added.
        os_family: the distribution family.
        efa_preinstalled: True on DLAMIs that ship the EFA software.
    """

    machine_image: ec2.IMachineImage
    root_device_name: str
    os_family: OsFamily
    efa_preinstalled: bool
    description: str

    @property
    def login_user(self) -> str:
        """The image's default login user (gets the cluster SSH key and the MPI hostfile)."""
        return "ubuntu" if self.os_family is OsFamily.UBUNTU else "ec2-user"

    @staticmethod
    def from_ssm_parameter(
        parameter_name: str, *, root_device_name: str, os_family: OsFamily, efa_preinstalled: bool
    ) -> EfaMachineImage:
        """An image whose id an SSM parameter holds (resolved at deploy, not at synth)."""
        return EfaMachineImage(
            ec2.MachineImage.from_ssm_parameter(parameter_name, os=ec2.OperatingSystemType.LINUX),
            root_device_name,
            os_family,
            efa_preinstalled,
            f"SSM {parameter_name}",
        )

    @staticmethod
    def neuron_dlami() -> EfaMachineImage:
        """Deep Learning AMI Neuron (Ubuntu 22.04): Neuron SDK, EFA and Open MPI preinstalled."""
        return EfaMachineImage.from_ssm_parameter(
            "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id",
            root_device_name="/dev/sda1",
            os_family=OsFamily.UBUNTU,
            efa_preinstalled=True,
        )

    @staticmethod
    def gpu_dlami(architecture: str) -> EfaMachineImage:
        """Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04): drivers, CUDA, EFA, aws-ofi-nccl."""
        return EfaMachineImage.from_ssm_parameter(
            f"/aws/service/deeplearning/ami/{architecture}/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
            root_device_name="/dev/sda1",
            os_family=OsFamily.UBUNTU,
            efa_preinstalled=True,
        )

    @staticmethod
    def amazon_linux_2023(architecture: str) -> EfaMachineImage:
        """The latest Amazon Linux 2023 AMI; EFA software is installed by the node's user data."""
        cpu = ec2.AmazonLinuxCpuType.ARM_64 if architecture == "arm64" else ec2.AmazonLinuxCpuType.X86_64
        return EfaMachineImage(
            ec2.MachineImage.latest_amazon_linux2023(cpu_type=cpu),
            "/dev/xvda",
            OsFamily.AMAZON_LINUX_2023,
            False,
            f"Amazon Linux 2023 ({architecture})",
        )

    @staticmethod
    def default_for(it: InstanceType) -> EfaMachineImage:
        """Neuron DLAMI for Trainium/Inferentia, GPU DLAMI for NVIDIA, Amazon Linux 2023 otherwise.

        Gaudi (dl1) gets Amazon Linux 2023 with the EFA installer; the Habana driver stack is the
        user's choice of AMI or container (see README).
        """
        if it.accelerator.kind is AcceleratorKind.NEURON:
            return EfaMachineImage.neuron_dlami()
        if it.accelerator.kind is AcceleratorKind.NVIDIA_GPU:
            return EfaMachineImage.gpu_dlami(it.architecture)
        return EfaMachineImage.amazon_linux_2023(it.architecture)
