"""`EfaNodegroup`: an EKS managed node group of EFA nodes for your own EKS cluster.

It takes a cluster of either of aws-cdk-lib's EKS modules: ``aws_eks_v2`` (the newer one, whose
kubectl provider is optional) and ``aws_eks`` (the one most existing apps use). Both create the same
``AWS::EKS::Nodegroup``; the node group and the device plugin's Helm chart are made with the classes of
the cluster's own module.

The EFA layout, security group and placement group are the ones :class:`EfaCluster` uses; EKS
launches the nodes. Facts (checked late 2026; docs/eks.md compares with eksctl):

* A managed node group's launch template must not have SubnetId, IamInstanceProfile,
  RequestSpotInstances, HibernationOptions or TerminateInstances (EKS API reference,
  LaunchTemplateSpecification). The template gets none of them: the node group names the subnet and
  the role, and the interfaces carry no subnet.
* Without an ImageId in the template, EKS picks the image from the node group's AMI type and merges
  its bootstrap into the template's user data, which must then be MIME multi-part (EKS user guide,
  "Customize managed nodes with launch templates").
* Security groups in the template replace the cluster security group EKS would attach, so every
  interface carries the cluster's group next to the EFA group (same page).
* AMI types: ``AL2023_x86_64_NEURON`` (Trainium, Inferentia), ``AL2023_x86_64_NVIDIA`` /
  ``AL2023_ARM_64_NVIDIA`` (NVIDIA GPUs), ``AL2023_x86_64_STANDARD`` / ``AL2023_ARM_64_STANDARD``
  (EKS API reference, Nodegroup amiType; EKS user guide, "Create nodes with pre-built optimized
  images"). There is no Amazon Linux 2 AMI for Kubernetes 1.33 and later (EKS user guide,
  retrieve-ami-id), and no EKS AMI with Habana (Gaudi) or Qualcomm drivers: those types need an
  ``ami_type`` you choose.
* The EFA device plugin: eks-charts ``stable/aws-efa-k8s-device-plugin`` (chart v0.5.30, image
  v0.5.20; aws/eks-charts 5239609, 2026-08-03), resource ``vpc.amazonaws.com/efa``. Its DaemonSet
  runs only on the instance types listed in its ``supportedInstanceLabels`` value, a hand-kept list
  that lags new types; this construct passes the catalogue's EFA types instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import jsii
from aws_cdk import Annotations, Aws
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks as eks_v1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct
from typing_extensions import Unpack

from ..core.capacity import Capacity, CapacityKind
from ..core.catalogue import InstanceType
from ..core.catalogue import instance_type as lookup
from ..core.errors import EfaConfigError
from ..core.node_rules import AT_DEPLOY
from ..core.options import DEFAULT_MAX_COUNT, DEFAULT_MIN_COUNT
from ..core.settings import NodeEnv
from ..core.software import EfaUserData, eks_node_script
from ._node_base import EfaNodeBase
from ._node_base import known as _known
from ._shared import NodeScripts, shell_part
from .acknowledgements import acknowledge
from .arguments import checked
from .eks_charts import ACCELERATOR_PLUGINS, DevicePluginChart, cluster_chart, efa_device_plugin
from .eks_cluster import AnyAmiType, AnyCluster, AnyTaint, _check_kubectl, _cluster_security_group, eks_module
from .eks_lustre import FSX_CSI_CHART, _check_lustre, _lustre_volume
from .lustre import EfaLustreFileSystem
from .machine_image import EfaMachineImage
from .options import NodeTemplateOptions, plan_of
from .orchestrator_images import accelerated_ami_type, image_for
from .storage import admitted, lustre_use

#: The AWS managed policies of an EKS node role (EKS user guide, "Amazon EKS node IAM role"); the
#: CNI policy may instead go to the VPC CNI's own service account (same page), hence optional.
NODE_ROLE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")

CNI_POLICY = "AmazonEKS_CNI_Policy"


#: The AMI types this construct knows the disk layout of (Amazon Linux 2023: root /dev/xvda).
_AL2023_AMI_TYPES = frozenset(
    {
        eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
        eks.NodegroupAmiType.AL2023_ARM_64_STANDARD,
        eks.NodegroupAmiType.AL2023_X86_64_NVIDIA,
        eks.NodegroupAmiType.AL2023_ARM_64_NVIDIA,
        eks.NodegroupAmiType.AL2023_X86_64_NEURON,
    }
)


def capacity_type(module: ModuleType, capacity: Capacity) -> Any:
    """The node group's capacity type for a kind of capacity, in the cluster's module: CAPACITY_BLOCK
    for a Capacity Block (EKS user guide, Capacity Blocks for managed node groups); ON_DEMAND for
    On-Demand and for a Capacity Reservation or reservation group, which the launch template targets
    (aws-ia's EKS Blueprints, "EKS Cluster with On-demand Capacity Reservations": the reservation in a
    custom launch template of an On-Demand node group)."""
    types = module.CapacityType
    return types.CAPACITY_BLOCK if capacity.kind is CapacityKind.CAPACITY_BLOCK else types.ON_DEMAND


def _check_ami_type(ami_type: AnyAmiType, it: InstanceType) -> None:
    if ami_type.name not in {a.name for a in _AL2023_AMI_TYPES}:
        raise EfaConfigError(
            "ami_type",
            code="efa-cdk:eks-ami-type-not-al2023",
            value=ami_type.name,
            why="EfaNodegroup sizes the root volume of Amazon Linux 2023 images (/dev/xvda); other AMI "
            "types lay out their disks otherwise (Bottlerocket's data volume is /dev/xvdb), and Amazon "
            "Linux 2 has no EKS AMI for Kubernetes 1.33 and later",
            fix="use an AL2023 AMI type, e.g. " + accelerated_ami_type(lookup("p5.48xlarge")).name,
        )
    arm = "ARM_64" in ami_type.name
    if arm != (it.architecture == "arm64"):
        raise EfaConfigError(
            "ami_type",
            code="efa-cdk:eks-ami-type-architecture",
            value=ami_type.name,
            why=f"{it.name} is {it.architecture}, the AMI type is for {'arm64' if arm else 'x86_64'}",
            fix=f"use an AMI type for {it.architecture}",
        )


@jsii.implements(ec2.IConnectable, iam.IGrantable)
class EfaNodegroup(Construct):
    """An EKS managed node group of EFA nodes in one subnet, for an ``aws_eks_v2`` or ``aws_eks`` cluster.

    It creates an :class:`EfaSecurityGroup`, a cluster placement group (On-Demand), an
    :class:`EfaLaunchTemplate` with the catalogue's layout and no instance profile, subnet or image
    (EKS sets them), the node role, the managed node group (``Resource``) and, once per cluster, the
    EFA device plugin. It is ``IConnectable`` (the EFA and cluster groups of every interface) and
    ``IGrantable`` (the node role).

    Node options (:class:`NodeTemplateOptions`, each documented there): ``instance_type``, ``capacity``,
    ``placement_group``, ``nic_layout``, ``root_volume_gib``, ``role`` (here by default one with EKS's three
    node policies).

    Args:
        cluster: the EKS cluster: an ``aws_eks_v2.Cluster`` or an ``aws_eks.Cluster``, or one imported
            with ``from_cluster_attributes`` (give an imported ``aws_eks`` cluster its ``kubectl_role_arn``
            for the device plugin).
        subnet: the one subnet of the nodes (EFA traffic stays in one Availability Zone; pick one
            whose zone offers the type). A subnet of the cluster's VPC.
        min_size: Default: 0.
        max_size: Default: 2.
        desired_size: Default: ``min_size``.
        machine_image: an EKS-optimized image by its AMI type:
            ``EfaMachineImage.eks_ami_type(NodegroupAmiType.AL2023_...)`` (either EKS module's enum). Default:
            the AL2023 AMI type of the accelerator (Neuron, NVIDIA, or standard); refused for other
            accelerators, which need one you choose.
        ami_type: deprecated (0.2.0), the same as ``machine_image=EfaMachineImage.eks_ami_type(ami_type)``.
        user_data: extra MIME parts EKS merges with its bootstrap (e.g. a nodeadm ``NodeConfig``).
            Default: none.
        labels: Kubernetes labels of the nodes. Default: none.
        taints: Kubernetes taints of the nodes (the device plugin tolerates every taint). Default: none.
        device_plugin: install the EFA device plugin (Helm, through the cluster's kubectl provider),
            once per cluster. Default: True.
        accelerator_device_plugin: install the accelerator's device plugin once per cluster too, as the
            EKS user guide does: Neuron's chart for Trainium and Inferentia (``aws.amazon.com/neuron``),
            NVIDIA's for GPUs (``nvidia.com/gpu``); nothing for other accelerators. Default: as
            ``device_plugin``.
        cni_policy: attach ``AmazonEKS_CNI_Policy`` to a created node role. Default: True. The EKS user
            guide prefers it on the VPC CNI's service account (IRSA or Pod Identity): pass False when
            yours has it.
        lustre: an :class:`EfaLustreFileSystem` the pods mount, over EFA when it serves EFA. The node group
            is admitted to it (its EFA connections and zone checked); every node runs efa-cdk's
            ``lustre-client`` step from a user data part (added to `user_data` when given): the Lustre
            client, LNet over EFA, a mount at the file system's ``mount_dir`` and the proof that Lustre
            rides EFA; a node where that fails never joins the cluster (its reason on its console and in
            /var/log/efa-cdk.log). Once per cluster, the FSx for Lustre CSI driver (Helm) and a
            PersistentVolume with its claim (`lustre_claim` in `lustre_namespace`, ReadWriteMany, kept:
            reclaim policy Retain) that pods name. Needs the kubectl provider. Default: none.
        lustre_claim: the PersistentVolumeClaim's name. Default: ``fsx``.
        lustre_namespace: its namespace, which must exist. Default: ``default``.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: AnyCluster,
        subnet: ec2.ISubnet,
        min_size: int = DEFAULT_MIN_COUNT,
        max_size: int = DEFAULT_MAX_COUNT,
        desired_size: int | None = None,
        machine_image: EfaMachineImage | None = None,
        ami_type: AnyAmiType | None = None,
        user_data: ec2.MultipartUserData | None = None,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[AnyTaint] = (),
        device_plugin: bool = True,
        accelerator_device_plugin: bool | None = None,
        cni_policy: bool = True,
        lustre: EfaLustreFileSystem | None = None,
        lustre_claim: str = "fsx",
        lustre_namespace: str = "default",
        **node: Unpack[NodeTemplateOptions],
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        module = eks_module(cluster)
        # EKS's tag keys hold '/', which fails a launch with tags in the instance metadata
        self.plan = plan_of(node, instance_metadata_tags=False)
        it = self.plan.instance_type
        _check_sizes(min_size, max_size, desired_size)
        image = image_for(self, "EfaNodegroup", it, machine_image, ami_type=ami_type)
        #: The AMI type, as the cluster's module spells it.
        self.ami_type: AnyAmiType = getattr(module.NodegroupAmiType, image.launcher_image)
        _check_ami_type(self.ami_type, it)
        #: The nodes' image (EKS's, by its AMI type).
        self.machine_image = image
        wants_accelerator = device_plugin if accelerator_device_plugin is None else accelerator_device_plugin
        accelerator_chart = ACCELERATOR_PLUGINS.get(it.accelerator.kind) if wants_accelerator else None
        if device_plugin or accelerator_chart:
            _check_kubectl(cluster, module, "device_plugin" if device_plugin else "accelerator_device_plugin")
        base = EfaNodeBase(
            self,
            self.plan,
            orchestrator="EfaNodegroup",
            vpc=cluster.vpc,
            subnets={"subnet": subnet},
            count=max_size,
            count_name="max_size",
            min_count=min_size,
            min_name="min_size",
            lustre=lustre_use(lustre),
            placement_group=node.get("placement_group"),
        )
        self.security_group, self.placement_group = base.security_group, base.placement_group
        self.role: iam.IRole = node.get("role") or self._node_role(cni_policy)
        user_data = self._mount_lustre(cluster, module, lustre, lustre_claim, lustre_namespace, user_data)
        self.launch_template = base.launch_template(
            "LaunchTemplate",
            machine_image=image,
            role=self.role,
            instance_profile=False,
            user_data=user_data or ec2.MultipartUserData(),
            other_security_groups=[_cluster_security_group(cluster)],
        )
        if user_data is None:
            # No user data rather than an empty MIME document: EKS writes its own bootstrap.
            cfn = self.launch_template.launch_template.node.default_child
            assert isinstance(cfn, ec2.CfnLaunchTemplate)
            cfn.add_property_deletion_override("LaunchTemplateData.UserData")
        desired = min_size if desired_size is None else desired_size
        #: The managed node group: an ``aws_eks_v2.Nodegroup`` or ``aws_eks.Nodegroup``, as the cluster.
        self.nodegroup: eks.Nodegroup | eks_v1.Nodegroup = self._nodegroup(
            module, cluster, subnet, min_size, max_size, desired, labels, taints
        )
        self._warn_capacity_block(_known(desired))
        self.device_plugin = efa_device_plugin(cluster) if device_plugin else None
        #: The accelerator's device plugin (the cluster's one chart), or None.
        self.accelerator_device_plugin = (
            cluster_chart(cluster, accelerator_chart) if accelerator_chart is not None else None
        )
        #: The PersistentVolumeClaim pods mount the Lustre file system by (`lustre_claim`), or None.
        self.lustre_claim = self._serve_lustre(cluster, lustre, lustre_claim, lustre_namespace)

    def _mount_lustre(
        self,
        cluster: AnyCluster,
        module: ModuleType,
        lustre: EfaLustreFileSystem | None,
        claim: str,
        namespace: str,
        user_data: ec2.MultipartUserData | None,
    ) -> ec2.MultipartUserData | None:
        """The node group as `lustre`'s clients (its group admitted; what the node group is created after:
        the file system and the rules that let its nodes reach it) and the user data part that mounts it."""
        self._lustre_after = admitted(lustre, self.security_group)
        if lustre is None:
            return user_data
        _check_lustre(cluster, module, lustre, claim, namespace)
        return self._with_lustre_part(user_data, lustre)

    def _with_lustre_part(
        self, user_data: ec2.MultipartUserData | None, lustre: EfaLustreFileSystem
    ) -> ec2.MultipartUserData:
        """`user_data` (or a new one) with the part that runs the ``lustre-client`` step (the node scripts
        from S3, which the node role may read) and keeps the node out of the cluster when it fails
        (``node/eks/join-gate.sh``)."""
        scripts = NodeScripts(self, "NodeScripts", EfaUserData().stage())
        scripts.grant_read(self.role)
        settings: NodeEnv = {
            "EFA_CDK_REGION": Aws.REGION,
            "EFA_CDK_SCRIPTS_URL": scripts.url,
            "EFA_CDK_STEPS": "lustre-client",
            **lustre.client_settings(self.plan.instance_type),
        }
        parts = user_data or ec2.MultipartUserData()
        parts.add_part(ec2.MultipartBody.from_user_data(shell_part(eks_node_script(settings))))
        return parts

    def _serve_lustre(
        self, cluster: AnyCluster, lustre: EfaLustreFileSystem | None, claim: str, namespace: str
    ) -> str | None:
        """The cluster's side of `lustre`: the node group after the file system (its nodes mount it at
        boot), the CSI driver and the claim, each once per cluster; the claim's name (None without one)."""
        if lustre is None:
            return None
        for made in self._lustre_after:
            self.nodegroup.node.add_dependency(made)
        cluster_chart(cluster, DevicePluginChart(*FSX_CSI_CHART, "kube-system", {}))
        _lustre_volume(cluster, lustre, claim, namespace)
        return claim

    def _warn_capacity_block(self, desired: int | None) -> None:
        if self.plan.capacity.kind is CapacityKind.CAPACITY_BLOCK and (desired is None or desired > 0):
            Annotations.of(self).add_warning_v2(
                "efa-cdk:capacity-block-node-group-update",
                "A Capacity Block node group updates (a new launch template version, AMI release or "
                "Kubernetes version) only at desired size 0 (EKS user guide, Capacity Blocks for managed "
                f"node groups): deploy desired_size=0 first, then the change, then desired_size={desired}",
            )

    def _nodegroup(
        self,
        module: ModuleType,
        cluster: AnyCluster,
        subnet: ec2.ISubnet,
        min_size: int,
        max_size: int,
        desired: int,
        labels: Mapping[str, str] | None,
        taints: Sequence[AnyTaint],
    ) -> eks.Nodegroup | eks_v1.Nodegroup:
        """The managed node group (``Resource``), in the cluster's module, from the launch template."""
        nodegroup: eks.Nodegroup | eks_v1.Nodegroup = module.Nodegroup(
            self,
            "Resource",
            cluster=cluster,
            ami_type=self.ami_type,
            capacity_type=capacity_type(module, self.plan.capacity),
            launch_template_spec=module.LaunchTemplateSpec(
                id=self.launch_template.launch_template_id,
                version=self.launch_template.latest_version_number,
            ),
            node_role=self.role,
            subnets=ec2.SubnetSelection(subnets=[subnet]),
            min_size=min_size,
            max_size=max_size,
            desired_size=desired,
            labels=dict(labels or {}),
            taints=[
                module.TaintSpec(effect=getattr(module.TaintEffect, t.effect.name), key=t.key, value=t.value)
                if t.effect is not None
                else module.TaintSpec(key=t.key, value=t.value)
                for t in taints
            ]
            or None,
        )
        return nodegroup

    def _node_role(self, cni_policy: bool) -> iam.Role:
        policies = (*NODE_ROLE_POLICIES, CNI_POLICY) if cni_policy else NODE_ROLE_POLICIES
        role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(p) for p in policies],
            description="EKS EFA nodes: EKS's node policies",
        )
        acknowledge(
            role, *(f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{p}]" for p in policies)
        )
        return role

    @property
    def nodegroup_name(self) -> str:
        """The managed node group's name."""
        return self.nodegroup.nodegroup_name

    @property
    def connections(self) -> ec2.Connections:
        """The EFA group and the cluster group of every interface (``ec2.IConnectable``)."""
        return self.launch_template.connections

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The node role (``iam.IGrantable``)."""
        return self.role


def _check_sizes(min_size: int, max_size: int, desired_size: int | None) -> None:
    """The desired size between the two (the two themselves are the node rules': ``core/node_rules.py``);
    a size known at deploy is checked there, by EKS."""
    if desired_size is None:
        return
    lo, hi, desired = _known(min_size), _known(max_size), _known(desired_size)
    low, high = (AT_DEPLOY if v is None else v for v in (lo, hi))
    if desired is not None and ((lo is not None and desired < lo) or (hi is not None and desired > hi)):
        raise EfaConfigError(
            "desired_size",
            code="efa-cdk:eks-sizes",
            value=desired,
            why=f"an EKS node group's desired size is between min_size ({low}) and max_size ({high})",
            fix="set desired_size between them, or leave it out (it starts at min_size)",
        )
