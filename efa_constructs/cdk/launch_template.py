"""`EfaLaunchTemplate`: a launch template with one EFA per network card, laid out by the engine.

CloudFormation's ``AWS::EC2::Instance.NetworkInterfaces`` has no NetworkCardIndex or
InterfaceType, so multi-card EFA nodes must launch from a launch template.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsii
from aws_cdk import Aspects, IStableStringProducer, Lazy, RemovalPolicy, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk.interfaces import ResourceEnvironment
from aws_cdk.interfaces import aws_ec2 as ec2_refs
from constructs import Construct
from typing_extensions import Unpack

from ..core.capacity import Capacity
from ..core.errors import EfaConfigError
from ..core.layout import NicLayout
from ..core.node_plan import NodePlan, PlannedNodes
from ..core.node_rules import check_root_volume_gib
from ..core.options import DEFAULT_ROOT_VOLUME_GIB
from ._shared import session_manager_role
from ._template_checks import _AutoScalingLaunches, _SelfRules, _warn_unless_cluster_strategy
from .arguments import checked
from .machine_image import EfaMachineImage
from .options import NodeTemplateOptions, plan_of


@jsii.implements(IStableStringProducer)
class _Generation:
    """The generation of a template's nodes, produced during synthesis (see
    :attr:`EfaLaunchTemplate.generation`)."""

    def __init__(self, template: EfaLaunchTemplate) -> None:
        self._template = template

    def produce(self) -> str:
        return self._template.synth_generation()


def _stable(value: object) -> object:
    """A dataclass as plain data that is the same in every process: sets sorted (a repr lists a
    frozenset in hash order, which differs from one Python process to the next), enums by value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _stable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset)):
        return sorted(_stable(v) for v in value)  # type: ignore[type-var]
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


def network_interfaces(
    layout: NicLayout,
    security_group_ids: Sequence[str],
    *,
    subnet_id: str | None = None,
    primary_network_interface_id: str | None = None,
) -> list[dict[str, Any]]:
    """The ``LaunchTemplateData.NetworkInterfaces`` list for a layout.

    Every interface carries the security groups (EFA needs the self-referencing group on each)
    and, when given, the one subnet (EFA traffic does not cross subnets' AZs). With
    ``primary_network_interface_id`` the card-0/DeviceIndex-0 entry attaches that pre-created
    ENI instead (the way to put an Elastic IP on a multi-interface node).
    """
    out: list[dict[str, Any]] = []
    for spec in layout.interfaces:
        entry: dict[str, Any] = {
            "NetworkCardIndex": spec.network_card_index,
            "DeviceIndex": spec.device_index,
        }
        if spec.is_primary and primary_network_interface_id is not None:
            entry["NetworkInterfaceId"] = primary_network_interface_id
            out.append(entry)
            continue
        if spec.interface_type != "interface":
            entry["InterfaceType"] = spec.interface_type
        entry["Groups"] = list(security_group_ids)
        if subnet_id is not None:
            entry["SubnetId"] = subnet_id
        entry["DeleteOnTermination"] = True
        out.append(entry)
    return out


@dataclass(frozen=True)
class TemplateWiring:
    """What a launcher wires to a node's template, beside its :class:`NodePlan`: the groups on every
    interface, the image, the subnet (None: the launcher's), the key, the role (None: one is made), an
    instance profile or not, the user data, the placement group, a pre-created primary interface.

    ``checks`` False for a copy (:meth:`EfaLaunchTemplate.with_primary_interface`): the synth-time checks
    of the groups' rules and of the placement group ran on the original (one per Elastic-IP node would
    repeat them, and the rule scan walks the whole stack: 40% of a 64-node public cluster's synthesis).
    """

    security_groups: tuple[ec2.ISecurityGroup, ...]
    machine_image: EfaMachineImage
    subnet: ec2.ISubnet | None = None
    key_pair: ec2.IKeyPair | None = None
    role: iam.IRole | None = None
    instance_profile: bool = True
    user_data: ec2.UserData | None = None
    placement_group: ec2.IPlacementGroup | None = None
    primary_network_interface_id: str | None = None
    checks: bool = True


@jsii.implements(ec2.ILaunchTemplate, ec2.IConnectable, iam.IGrantable)
class EfaLaunchTemplate(PlannedNodes, Construct):
    """A launch template for EFA nodes.

    It is an ``ec2.ILaunchTemplate`` (aws-cdk-lib's Auto Scaling groups and other constructs that launch
    from a template take it; they launch its latest version), ``IConnectable`` (its security groups) and
    ``IGrantable`` (its instance role), so ``bucket.grant_read(template)`` and
    ``db.connections.allow_default_port_from(template)`` work.

    IMDSv2 is required, the root volume is an encrypted gp3 volume, and the network interfaces
    come from the layout engine with the security groups on every interface.

    Node options (:class:`NodeTemplateOptions`, each documented there): ``instance_type``, ``capacity``,
    ``placement_group`` (here by default none in the template), ``nic_layout``, ``root_volume_gib``,
    ``role`` (here by default :func:`session_manager_role`, Session Manager only).

    Args:
        security_groups: groups put on every interface; include an :class:`EfaSecurityGroup`.
        subnet: the one subnet all interfaces go in. Default: none in the template (the
            launcher, e.g. an Auto Scaling group, supplies it).
        machine_image: the AMI and its facts. Default: :meth:`EfaMachineImage.default_for`
            (Neuron DLAMI for trn/inf, GPU DLAMI for NVIDIA, Amazon Linux 2023 otherwise).
        key_pair: an EC2 key pair for SSH. Default: none (use SSM Session Manager).
        instance_profile: False: no IamInstanceProfile in the template, for launchers that set the
            role themselves (an EKS managed node group refuses a template with one; a PCS compute node
            group takes its own IamInstanceProfileArn). ``role`` is still the grant principal.
            Default: True (an instance profile of ``role``).
        user_data: the node's user data. Default: an empty Linux user data.
        primary_network_interface_id: a pre-created ENI for card 0 / DeviceIndex 0. Default: none.
        bridged_containers: True when containers on a bridge network (not the host's) must reach the
            instance metadata: IMDS hop limit 2. Such a container can then read the node role's
            credentials (which read the cluster SSH key). Default: False, hop limit 1: the node and
            host-networked containers (efa-cdk's container step) reach IMDS, bridged containers do not.
        instance_metadata_tags: False keeps the instance's tags out of its metadata, for launchers that
            tag instances with keys EC2 then refuses: with tags in the metadata, a key holding ``/`` or a
            space fails the launch (EC2 user guide, "View tags for your EC2 instances using instance
            metadata"), and EKS tags its nodes ``kubernetes.io/cluster/<name>``. efa-cdk's node software
            needs them. Default: True.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        security_groups: Sequence[ec2.ISecurityGroup],
        subnet: ec2.ISubnet | None = None,
        machine_image: EfaMachineImage | None = None,
        key_pair: ec2.IKeyPair | None = None,
        instance_profile: bool = True,
        user_data: ec2.UserData | None = None,
        primary_network_interface_id: str | None = None,
        bridged_containers: bool = False,
        instance_metadata_tags: bool = True,
        **node: Unpack[NodeTemplateOptions],
    ) -> None:
        """Create the template; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        plan = plan_of(
            node, bridged_containers=bridged_containers, instance_metadata_tags=instance_metadata_tags
        )
        wiring = TemplateWiring(
            security_groups=tuple(security_groups),
            machine_image=machine_image or EfaMachineImage.default_for(plan.instance_type),
            subnet=subnet,
            key_pair=key_pair,
            role=node.get("role"),
            instance_profile=instance_profile,
            user_data=user_data,
            placement_group=node.get("placement_group"),
            primary_network_interface_id=primary_network_interface_id,
        )
        self._build(plan, wiring)

    def _build(self, plan: NodePlan, wiring: TemplateWiring) -> None:
        """The template from a resolved plan and what the launcher wires to it (nothing resolved again)."""
        if not wiring.security_groups:
            raise EfaConfigError(
                "security_groups",
                code="efa-cdk:security-groups-empty",
                value=[],
                why="EFA interfaces need a security group that allows all traffic to and from itself",
                fix="pass an EfaSecurityGroup",
            )
        image, size = wiring.machine_image, plan.root_volume_gib
        check_root_volume_gib(None if Token.is_unresolved(size) else size)
        if not Token.is_unresolved(size) and size < image.min_root_volume_gib:
            raise EfaConfigError(
                "root_volume_gib",
                code="efa-cdk:root-volume-below-image",
                value=size,
                why=f"the image ({image.description}) needs a root volume of at least "
                f"{image.min_root_volume_gib} GiB: EC2 refuses one smaller than its snapshot",
                fix=f"use {image.min_root_volume_gib} GiB or more (the default is {DEFAULT_ROOT_VOLUME_GIB})",
            )
        #: The resolved node (type, layout, capacity, volume, metadata options) and its wiring: what a copy
        #: with another primary interface is made of (:meth:`with_primary_interface`).
        self.plan, self._wiring = plan, wiring
        self._synth_fingerprint: str | None = None
        self.machine_image: EfaMachineImage = image
        self.user_data: ec2.UserData = wiring.user_data or ec2.UserData.for_linux()
        self.role: iam.IRole = wiring.role or session_manager_role(
            self, "Role", f"EFA nodes ({plan.instance_type.name})"
        )
        self.security_groups: list[ec2.ISecurityGroup] = list(wiring.security_groups)
        self.launch_template: ec2.LaunchTemplate = self._create(plan, wiring)
        self._override_data(
            network_interfaces(
                plan.layout,
                [sg.security_group_id for sg in self.security_groups],
                subnet_id=wiring.subnet.subnet_id if wiring.subnet else None,
                primary_network_interface_id=wiring.primary_network_interface_id,
            ),
            plan.capacity,
        )
        self._connections = ec2.Connections(security_groups=self.security_groups)
        if wiring.checks:
            self.node.add_validation(_SelfRules(self, self.security_groups))
            _warn_unless_cluster_strategy(self, wiring.placement_group)
            Aspects.of(Stack.of(self)).add(_AutoScalingLaunches(self, wiring.placement_group is not None))

    def _create(self, plan: NodePlan, wiring: TemplateWiring) -> ec2.LaunchTemplate:
        """The template (``Resource``): IMDSv2 required, encrypted gp3 root volume, instance tags in IMDS."""
        return ec2.LaunchTemplate(
            self,
            "Resource",
            instance_type=ec2.InstanceType(plan.instance_type.name),
            machine_image=self.machine_image.machine_image,
            user_data=self.user_data,
            key_pair=wiring.key_pair,
            role=self.role if wiring.instance_profile else None,
            require_imdsv2=True,
            detailed_monitoring=True,
            # 1: the node and host-networked containers; a bridged container is one more hop away
            http_put_response_hop_limit=plan.hop_limit,
            # the node software reads its node index and logical id from them
            instance_metadata_tags=True if plan.instance_metadata_tags else None,
            placement_group=wiring.placement_group,
            block_devices=[
                ec2.BlockDevice(
                    device_name=self.machine_image.root_device_name,
                    volume=ec2.BlockDeviceVolume.ebs(
                        plan.root_volume_gib,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
        )

    def _override_data(self, interfaces: list[dict[str, Any]], capacity: Capacity) -> None:
        """Write what ec2.LaunchTemplate has no props for: the interfaces (NetworkCardIndex,
        InterfaceType) and the capacity reservation / market type."""
        cfn = self.launch_template.node.default_child
        assert isinstance(cfn, ec2.CfnLaunchTemplate)
        cfn.add_property_override("LaunchTemplateData.NetworkInterfaces", interfaces)
        self._interfaces = interfaces
        # EC2's simplified automatic recovery, stated (it is EC2's default where the type supports it:
        # EC2 API reference, ModifyInstanceMaintenanceOptions): a node whose hardware fails its system
        # status check comes back on other hardware. Instance-store types are not recovered by EC2.
        cfn.add_property_override("LaunchTemplateData.MaintenanceOptions.AutoRecovery", "default")
        for key, value in capacity.launch_template_data().items():
            cfn.add_property_override(f"LaunchTemplateData.{key}", value)

    @property
    def connections(self) -> ec2.Connections:
        """The security groups of every interface (``ec2.IConnectable``)."""
        return self._connections

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The instance role (``iam.IGrantable``): grants reach every node of this template."""
        return self.role

    def fingerprint(self) -> str:
        """SHA-256 of this template's content, resolved (image, user data, instance profile, volumes,
        metadata options, key, placement; the interfaces' layout and groups; the capacity): it changes
        when the template does, except for the pre-created primary interface and the subnet. Another
        role does not change it: the template names the instance profile, whose Roles CloudFormation
        updates in place (resource specification: Mutable), and running instances take the new role
        once IAM's change propagates (IAM API reference, AddRoleToInstanceProfile)."""
        stack = Stack.of(self)
        cfn = self.launch_template.node.default_child
        assert isinstance(cfn, ec2.CfnLaunchTemplate)
        parts = [
            # image, user data, instance profile, volumes, IMDS, key, placement
            stack.resolve(cfn.launch_template_data),
            _stable(self.layout),  # the interfaces (written as an override, like the capacity)
            [stack.resolve(sg.security_group_id) for sg in self.security_groups],
            _stable(self.capacity),
        ]
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()

    def synth_fingerprint(self) -> str:
        """:meth:`fingerprint` computed once, at its first use, and shared by every resource named
        after it (each Elastic IP interface of the cluster). Its first use is during synthesis, when
        the template is complete: resolving such a resource's logical id while the app is still being
        built would fix it early."""
        if self._synth_fingerprint is None:
            self._synth_fingerprint = self.fingerprint()
        return self._synth_fingerprint

    def synth_generation(self) -> str:
        """The nodes' generation (:attr:`generation`): :meth:`fingerprint` and the interfaces as written
        (their subnet too: a subnet change replaces every node), 16 hex digits."""
        interfaces = Stack.of(self).resolve(self._interfaces)
        parts = [self.synth_fingerprint(), interfaces]
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]

    def with_primary_interface(
        self, scope: Construct, id_: str, network_interface_id: str
    ) -> EfaLaunchTemplate:
        """The same template (the same plan: role, user data, layout...) attaching a pre-created ENI as
        card 0 / device 0. The copy repeats none of the original's synth checks."""
        wiring = dataclasses.replace(
            self._wiring,
            role=self.role,
            user_data=self.user_data,
            primary_network_interface_id=network_interface_id,
            checks=False,
        )
        return PlannedLaunchTemplate(scope, id_, plan=self.plan, wiring=wiring)

    @property
    def generation(self) -> str:
        """A name for the nodes this template launches (a token): the hash of the template's data as
        CloudFormation receives it. Anything that replaces every node launched from the template (the
        image, the user data and so the node software, the type, the layout) changes it; a replaced or
        added node of the same template keeps it. The node software tags explicit nodes with it, so a
        new generation of nodes forms a cluster of its own instead of joining the old one's."""
        return Lazy.string(_Generation(self))

    @property
    def launch_template_id(self) -> str:
        """The launch template's id."""
        return str(self.launch_template.launch_template_id)

    @property
    def latest_version_number(self) -> str:
        """The template's latest version number (a token)."""
        return self.launch_template.latest_version_number

    # ec2.ILaunchTemplate (an IResource), answered by the template inside.
    @property
    def version_number(self) -> str:
        """The version those who launch from this template use: the latest (``ILaunchTemplate``)."""
        return self.launch_template.latest_version_number

    @property
    def launch_template_ref(self) -> ec2_refs.LaunchTemplateReference:
        """A reference to the template (``ec2.ILaunchTemplateRef``, which ``ILaunchTemplate`` extends)."""
        return self.launch_template.launch_template_ref

    @property
    def launch_template_name(self) -> str | None:
        """The template's name (``ILaunchTemplate``)."""
        return self.launch_template.launch_template_name

    @property
    def stack(self) -> Stack:
        """The stack the template is in (``IResource``)."""
        return Stack.of(self)

    @property
    def env(self) -> ResourceEnvironment:
        """The template's account and region (``IResource``)."""
        return self.launch_template.env

    def apply_removal_policy(self, policy: RemovalPolicy) -> None:
        """Apply a removal policy to the template (``IResource``)."""
        self.launch_template.apply_removal_policy(policy)


class PlannedLaunchTemplate(EfaLaunchTemplate):
    """An :class:`EfaLaunchTemplate` built from a resolved :class:`NodePlan` (what the orchestrators and
    :meth:`EfaLaunchTemplate.with_primary_interface` make): the type, layout and image are not resolved
    again."""

    def __init__(self, scope: Construct, id_: str, *, plan: NodePlan, wiring: TemplateWiring) -> None:
        """The template of `plan`, wired as `wiring` says."""
        Construct.__init__(self, scope, id_)
        self._build(plan, wiring)
