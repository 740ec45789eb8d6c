"""Default AMIs per accelerator: an SSM public parameter, read ONCE when the stack is created.

Sources for the parameter names (checked late 2026):

* DLAMIs: AWS Deep Learning AMIs developer guide, "Finding the ID of a DLAMI": the name is
  ``/aws/service/deeplearning/ami/<x86_64|arm64>/<ami_type>/latest/ami-id``, where ami_type is the
  DLAMI's name without "Deep", "Learning" and "AMI" ("Deep Learning Base OSS Nvidia Driver GPU AMI
  (Ubuntu 22.04)" -> ``base-oss-nvidia-driver-gpu-ubuntu-22.04``). The release notes of each DLAMI
  list the instances it supports. ARM64: the Ubuntu 22.04 image lists G5g and P6e-GB200 only since
  2026-07 (release notes 20260710 onwards); the Ubuntu 24.04 one lists G5g, P6e-GB200 and P6e-GB300
  (release notes 20260722, 20260918, 20260929), so arm64 gets 24.04.
* Pre-Turing NVIDIA GPUs (V100 on p3dn): the OSS-driver DLAMIs run NVIDIA's open kernel modules,
  which support Turing and later GPUs only (NVIDIA open-gpu-kernel-modules README). The last DLAMI
  whose release notes list P3dn is "Deep Learning Base Proprietary Nvidia Driver AMI (Amazon Linux 2)"
  (version 71.6, 2026-01-02), on an OS past its end of support (2026-06-30) and dropped by EFA
  installer 1.50.0. So there is no default image for them: :meth:`EfaMachineImage.default_for`
  refuses and names the fix (an image you maintain, :meth:`EfaMachineImage.from_ami_id`).
* Neuron DLAMI: AWS Neuron documentation, "Neuron DLAMI" SSM parameters
  (``/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id``).
* Amazon Linux 2023: ``/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-<arch>``, the image
  with the 6.1 kernel pinned. (aws-cdk-lib's ``MachineImage.latest_amazon_linux2023`` reads another
  parameter, ``al2023-ami-kernel-default-<arch>``: its ``AmazonLinux2023Kernel.DEFAULT``, in
  aws-ec2/lib/machine-image/amazon-linux-2023.ts.)

Why "read once": a ``.../latest/...`` parameter used as a CloudFormation parameter is resolved at
every deploy, so once AWS publishes a new image, ANY later deploy (a node_count change) changes
ImageId and replaces every node, which needs twice the capacity. :class:`ImageReadOnce` reads the
parameter with a CloudFormation custom resource (aws-cdk-lib's ``AwsCustomResource``, one
``ssm:GetParameter`` on that parameter only) when the stack is created, and keeps the answer until
``refresh`` changes. Synthesis needs no credentials; a refresh shows in the template diff as the
lookup being replaced and every node with it.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jsii
from aws_cdk import Aws, CustomResource, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import custom_resources as cr
from constructs import Construct

from ..core.catalogue import AcceleratorKind, InstanceType
from ..core.checks import AMI_ID_PATTERN, REFRESH_LABEL_PATTERN, has_default_image
from ..core.errors import EfaConfigError
from .acknowledgements import acknowledge, explain_cdk_lambda_lint

if TYPE_CHECKING:
    from .eks_cluster import AnyAmiType


class OsFamily(enum.Enum):
    """The distribution family of an image: decides the login user and the root device."""

    AMAZON_LINUX_2023 = "al2023"
    UBUNTU = "ubuntu"

    @staticmethod
    def parse(value: OsFamily | str) -> OsFamily:
        """An OsFamily from its value (``ubuntu``, ``al2023``); a clear error otherwise."""
        if isinstance(value, OsFamily):
            return value
        try:
            return OsFamily(value)
        except ValueError:
            raise EfaConfigError(
                "ami_os",
                code="efa-cdk:ami-os-unknown",
                value=value,
                why="not an OS family this library knows",
                fix="use ubuntu or al2023",
            ) from None

    @property
    def root_device_name(self) -> str:
        """The root device of the family's AMIs (so the root volume is resized, not added)."""
        return "/dev/sda1" if self is OsFamily.UBUNTU else "/dev/xvda"


@jsii.implements(ec2.IMachineImage)
class ImageReadOnce:
    """The AMI id an SSM parameter holds when the stack is created, kept until ``refresh`` changes.

    One lookup per stack, parameter and refresh label (``ImageLookup<hash>`` at the stack's root,
    shared by every launch template that uses it).

    Args:
        parameter_name: the SSM parameter (an AWS public one, or your own).
        refresh: any label (a date, say); change it to read the parameter again on the next deploy,
            which replaces the nodes launched from it. Default: "".
    """

    def __init__(self, parameter_name: str, refresh: str = "") -> None:
        """Create the image; the arguments are described in the class docstring."""
        if not re.fullmatch(REFRESH_LABEL_PATTERN, refresh):
            raise EfaConfigError(
                "ami_refresh",
                code="efa-cdk:ami-refresh-label",
                value=refresh,
                why="the label becomes part of a CloudFormation logical id",
                fix="use up to 64 letters, digits, '.', '_' or '-' (a date such as 2026-11-22)",
            )
        self.parameter_name = parameter_name
        self.refresh = refresh

    def lookup(self, scope: Construct) -> cr.AwsCustomResource:
        """The stack's lookup for this parameter and label (created on first use)."""
        stack = Stack.of(scope)
        key = hashlib.sha256(f"{self.parameter_name}@{self.refresh}".encode()).hexdigest()[:8].upper()
        found = stack.node.try_find_child(f"ImageLookup{key}")
        if isinstance(found, cr.AwsCustomResource):
            return found
        lookup = cr.AwsCustomResource(
            stack,
            f"ImageLookup{key}",
            resource_type="Custom::EfaImageLookup",
            on_create=cr.AwsSdkCall(
                service="SSM",
                action="getParameter",
                parameters={"Name": self.parameter_name},
                physical_resource_id=cr.PhysicalResourceId.from_response("Parameter.Value"),
                output_paths=["Parameter.Value"],
            ),
            policy=cr.AwsCustomResourcePolicy.from_sdk_calls(
                resources=[f"arn:{Aws.PARTITION}:ssm:{Aws.REGION}::parameter{self.parameter_name}"]
                if self.parameter_name.startswith("/aws/")
                else [f"arn:{Aws.PARTITION}:ssm:{Aws.REGION}:{Aws.ACCOUNT_ID}:parameter{self.parameter_name}"]
            ),
            install_latest_aws_sdk=False,
        )
        acknowledge_lookup_provider(stack)
        return lookup

    def get_image(self, scope: Construct) -> ec2.MachineImageConfig:
        """The image config: the lookup's answer (``ec2.IMachineImage``).

        The AMI id is the lookup's physical id (``Ref``), not its response data (``GetAtt``): the
        lookup answers only on create, and an update of the resource (an aws-cdk-lib upgrade that
        rewrites its properties, say) keeps the physical id but returns no data, so a ``GetAtt`` would
        fail that update (aws-cdk-lib's AwsCustomResource handler: Update without a call keeps
        ``PhysicalResourceId`` and answers an empty ``Data``)."""
        resource = self.lookup(scope).node.default_child
        assert isinstance(resource, CustomResource)
        return ec2.MachineImageConfig(
            image_id=resource.ref,
            os_type=ec2.OperatingSystemType.LINUX,
            user_data=ec2.UserData.for_linux(),
        )


@jsii.implements(ec2.IMachineImage)
class _FixedImage:
    """One AMI id (a literal or a CloudFormation parameter's value), in every region."""

    def __init__(self, ami_id: str) -> None:
        self.ami_id = ami_id

    def get_image(self, scope: Construct) -> ec2.MachineImageConfig:
        return ec2.MachineImageConfig(
            image_id=self.ami_id, os_type=ec2.OperatingSystemType.LINUX, user_data=ec2.UserData.for_linux()
        )


@dataclass(frozen=True)
class EfaMachineImage:
    """An AMI choice with what the launch template needs to know about it.

    Args:
        machine_image: the image; None when the launcher names it (:meth:`chosen_by_launcher`), and
            the launch template then has no ImageId.
        root_device_name: the AMI's root device (``/dev/xvda`` on Amazon Linux, ``/dev/sda1``
            on Ubuntu), so the root volume is resized instead of a second volume being added.
        os_family: the distribution family.
        efa_preinstalled: True on DLAMIs that ship the EFA software.
        description: what the image is, for people.
        min_root_volume_gib: the smallest root volume the image fits in.
        launcher: the construct that names this image to its launcher (``EfaParallelCluster``:
            :meth:`parallel_cluster`, ``EfaNodegroup``: :meth:`eks_ami_type`); "" for an image any launch
            template takes.
        launcher_image: the launcher's name of the image (ParallelCluster's ``Image.Os``, an EKS AMI type).
    """

    machine_image: ec2.IMachineImage | None
    root_device_name: str
    os_family: OsFamily
    efa_preinstalled: bool
    description: str
    min_root_volume_gib: int = 8
    launcher: str = ""
    launcher_image: str = ""

    @property
    def parameter_name(self) -> str | None:
        """The SSM parameter the image is read from (whatever its refresh label); None for one AMI."""
        return self.machine_image.parameter_name if isinstance(self.machine_image, ImageReadOnce) else None

    def image_id(self, scope: Construct) -> str:
        """The AMI id as a template holds it (for an SSM parameter, the lookup's answer: a token); refused
        for an image a launcher names (no id here)."""
        if self.machine_image is None:
            raise EfaConfigError(
                "machine_image",
                code="efa-cdk:image-without-id",
                value=self.description,
                why="the launcher names this image: it has no AMI id here",
                fix="use EfaMachineImage.from_ami_id(...) or EfaMachineImage.from_ssm_parameter(...)",
            )
        return self.machine_image.get_image(scope).image_id

    @property
    def login_user(self) -> str:
        """The image's default login user (gets the cluster SSH key and the MPI hostfile)."""
        return "ubuntu" if self.os_family is OsFamily.UBUNTU else "ec2-user"

    @staticmethod
    def from_ssm_parameter(
        parameter_name: str,
        *,
        os_family: OsFamily,
        efa_preinstalled: bool,
        refresh: str = "",
        min_root_volume_gib: int = 8,
    ) -> EfaMachineImage:
        """The image an SSM parameter holds, read once at stack creation (see :class:`ImageReadOnce`)."""
        return EfaMachineImage(
            ImageReadOnce(parameter_name, refresh),
            os_family.root_device_name,
            os_family,
            efa_preinstalled,
            f"SSM {parameter_name}, read at create" + (f" (refresh {refresh})" if refresh else ""),
            min_root_volume_gib,
        )

    @staticmethod
    def from_ami_id(
        ami_id: str, *, os_family: OsFamily = OsFamily.UBUNTU, min_root_volume_gib: int = 8
    ) -> EfaMachineImage:
        """One AMI (``ami-...``, or a token such as a CfnParameter's value); the node software
        installs EFA on it unless it is there already."""
        if not Token.is_unresolved(ami_id) and not re.match(AMI_ID_PATTERN, ami_id):
            raise EfaConfigError(
                "ami_id",
                code="efa-cdk:ami-id-form",
                value=ami_id,
                why="an AMI id is 'ami-' and 8 or 17 hex digits",
                fix="copy the id from `aws ec2 describe-images` (in the region you deploy to)",
            )
        if not isinstance(os_family, OsFamily):
            raise EfaConfigError(
                "os_family",
                code="efa-cdk:os-family-type",
                value=os_family,
                why="EfaMachineImage.from_ami_id takes an OsFamily",
                fix="pass OsFamily.UBUNTU or OsFamily.AMAZON_LINUX_2023 (OsFamily.parse reads a string)",
            )
        family = os_family
        return EfaMachineImage(
            _FixedImage(ami_id), family.root_device_name, family, False, f"AMI {ami_id}", min_root_volume_gib
        )

    @staticmethod
    def chosen_by_launcher(
        description: str,
        *,
        os_family: OsFamily = OsFamily.AMAZON_LINUX_2023,
        efa_preinstalled: bool = True,
        min_root_volume_gib: int = 8,
    ) -> EfaMachineImage:
        """An image the launcher names, not the launch template: an EKS managed node group's AMI type,
        a PCS compute node group's AmiId. The template gets no ImageId (EKS merges its own bootstrap
        into the user data only then: EKS user guide, "Customize managed nodes with launch templates");
        the facts given here still decide the root device and the smallest root volume."""
        return EfaMachineImage(
            None, os_family.root_device_name, os_family, efa_preinstalled, description, min_root_volume_gib
        )

    @staticmethod
    def parallel_cluster(image_os: str = "ubuntu2204") -> EfaMachineImage:
        """ParallelCluster's own image of ``image_os`` (its ``Image.Os``: ubuntu2204, alinux2023, rhel9...),
        which ParallelCluster picks for the region and its version. For :class:`EfaParallelCluster`, which
        writes only the name: the OS family (Ubuntu for ubuntu*, else Amazon Linux's) decides nothing."""
        family = OsFamily.UBUNTU if image_os.startswith("ubuntu") else OsFamily.AMAZON_LINUX_2023
        image = EfaMachineImage.chosen_by_launcher(f"ParallelCluster's {image_os} image", os_family=family)
        return image._named("EfaParallelCluster", image_os)

    @staticmethod
    def eks_ami_type(ami_type: AnyAmiType) -> EfaMachineImage:
        """The EKS-optimized image of an AMI type (``NodegroupAmiType`` of ``aws_eks_v2`` or ``aws_eks``),
        which EKS picks for the cluster's Kubernetes version. For :class:`EfaNodegroup`."""
        from aws_cdk import aws_eks, aws_eks_v2  # loaded where EKS is used

        if not isinstance(ami_type, (aws_eks.NodegroupAmiType, aws_eks_v2.NodegroupAmiType)):
            raise EfaConfigError(
                "ami_type",
                code="efa-cdk:eks-ami-type-form",
                value=ami_type,
                why="EfaMachineImage.eks_ami_type takes an EKS AMI type",
                fix="pass a NodegroupAmiType member, e.g. aws_eks_v2.NodegroupAmiType.AL2023_X86_64_NVIDIA",
            )
        family = OsFamily.AMAZON_LINUX_2023
        image = EfaMachineImage.chosen_by_launcher(f"EKS AMI type {ami_type.name}", os_family=family)
        return image._named("EfaNodegroup", ami_type.name)

    def _named(self, launcher: str, launcher_image: str) -> EfaMachineImage:
        return dataclasses.replace(self, launcher=launcher, launcher_image=launcher_image)

    @staticmethod
    def neuron_dlami(refresh: str = "") -> EfaMachineImage:
        """Deep Learning AMI Neuron (Ubuntu 22.04): Neuron SDK, EFA and Open MPI preinstalled."""
        return EfaMachineImage.from_ssm_parameter(
            "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id",
            os_family=OsFamily.UBUNTU,
            efa_preinstalled=True,
            refresh=refresh,
            min_root_volume_gib=DLAMI_MIN_ROOT_GIB,
        )

    @staticmethod
    def gpu_dlami(architecture: str, refresh: str = "") -> EfaMachineImage:
        """Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04 on x86_64, 24.04 on arm64):
        drivers, CUDA, EFA, aws-ofi-nccl, nccl-tests."""
        ubuntu = "24.04" if architecture == "arm64" else "22.04"
        return EfaMachineImage.from_ssm_parameter(
            f"/aws/service/deeplearning/ami/{architecture}/base-oss-nvidia-driver-gpu-ubuntu-{ubuntu}/latest/ami-id",
            os_family=OsFamily.UBUNTU,
            efa_preinstalled=True,
            refresh=refresh,
            min_root_volume_gib=DLAMI_MIN_ROOT_GIB,
        )

    @staticmethod
    def amazon_linux_2023(architecture: str, refresh: str = "") -> EfaMachineImage:
        """The Amazon Linux 2023 AMI; EFA software is installed by the node's user data."""
        arch = "arm64" if architecture == "arm64" else "x86_64"
        return EfaMachineImage.from_ssm_parameter(
            f"/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-{arch}",
            os_family=OsFamily.AMAZON_LINUX_2023,
            efa_preinstalled=False,
            refresh=refresh,
        )

    @staticmethod
    def has_default(it: InstanceType) -> bool:
        """False for types no current AWS image supports (pre-Turing NVIDIA GPUs: p3dn)."""
        return has_default_image(it)

    @staticmethod
    def default_for(it: InstanceType, refresh: str = "") -> EfaMachineImage:
        """Neuron DLAMI for Trainium/Inferentia, GPU DLAMI for NVIDIA (Turing and later), Amazon
        Linux 2023 otherwise; refused for pre-Turing GPUs (see the module's sources).

        Gaudi (dl1) gets Amazon Linux 2023 with the EFA installer; the Habana driver stack is the
        user's choice of AMI or container (see docs/node-software.md, "Containers over EFA").
        """
        if not EfaMachineImage.has_default(it):
            raise EfaConfigError(
                "machine_image",
                code="efa-cdk:no-default-image",
                value=None,
                why=f"{it.name} carries NVIDIA {it.accelerator.name} GPUs (older than Turing): the current "
                "GPU DLAMIs' open NVIDIA driver does not run them, and the last DLAMI listing them "
                "(Base Proprietary Nvidia Driver, Amazon Linux 2) runs an OS past end of support",
                fix="launch an image you maintain with NVIDIA's proprietary driver: "
                "machine_image=EfaMachineImage.from_ami_id('ami-...', os_family=...)",
                context_fix="-c <Stack>:ami_id=ami-... and -c <Stack>:ami_os=ubuntu|al2023",
            )
        if it.accelerator.kind is AcceleratorKind.NEURON:
            return EfaMachineImage.neuron_dlami(refresh)
        if it.accelerator.kind is AcceleratorKind.NVIDIA_GPU:
            return EfaMachineImage.gpu_dlami(it.architecture, refresh)
        return EfaMachineImage.amazon_linux_2023(it.architecture, refresh)


#: The smallest root volume this library launches a DLAMI with. EC2 refuses a root volume smaller
#: than the image's snapshot (InvalidBlockDeviceMapping, "smaller than snapshot"); the DLAMI release
#: notes do not publish snapshot sizes, so this floor is the deploy review's figure (issue 11:
#: "DLAMIs need about 100 GB"), not a published one. The default (200 GiB) is above it.
DLAMI_MIN_ROOT_GIB = 100


def acknowledge_lookup_provider(stack: Stack) -> None:
    """cdk-nag's findings on aws-cdk-lib's AwsCustomResource Lambda (one per stack), acknowledged
    on that function only, with the reasons in :mod:`.acknowledgements`."""
    provider = stack.node.try_find_child("AWS" + cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace("-", ""))
    if provider is not None:
        acknowledge(
            provider,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "AwsSolutions-L1",
        )
        explain_cdk_lambda_lint(provider, "aws-cdk-lib's AwsCustomResource provider")
