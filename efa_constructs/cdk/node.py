"""One EFA node (`EfaNode`), the Elastic IP of a node (`NodePublicAddress`), and the Auto Scaling
node group (`EfaAutoScalingGroup`): the three ways an :class:`EfaCluster` launches its instances."""

from __future__ import annotations

import hashlib

import jsii
from aws_cdk import (
    Annotations,
    Duration,
    IResolveContext,
    IStringProducer,
    Lazy,
    Stack,
    Tags,
)
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from .acknowledgements import acknowledge
from .arguments import checked
from .launch_template import EfaLaunchTemplate


@jsii.implements(IStringProducer)
class _Suffixed:
    """A logical id: the construct's own plus 8 hex digits of the launch template's fingerprint (and of
    the node's replacement label, when it has one)."""

    def __init__(self, logical_id: str, launch_template: EfaLaunchTemplate, replacement: str = "") -> None:
        self.logical_id = logical_id
        self.launch_template = launch_template
        self.replacement = replacement

    def produce(self, context: IResolveContext) -> str:
        fingerprint = self.launch_template.synth_fingerprint()[:8].upper()
        return f"{self.logical_id}{fingerprint}{_label_hash(self.replacement)}"


def _label_hash(label: str) -> str:
    """ "" for no label, else "R" and 8 hex digits of it: what a replacement label adds to logical ids."""
    return f"R{hashlib.sha256(label.encode()).hexdigest()[:8].upper()}" if label else ""


class NodePublicAddress(Construct):
    """An Elastic IP on a node's card-0 / DeviceIndex-0 interface.

    Multi-interface instances get no public IP, and EC2 associates an EIP with such an instance
    only through an interface id. So the interface is pre-created in the public subnet
    (``Interface<hash>``), the EIP (``Resource``) is associated with it (``Association``) before the
    node launches (its boot needs the route out), and the node launches from its own copy of the
    cluster's launch template (``LaunchTemplate``) that attaches that interface as card 0 / device 0.
    The EFA interfaces stay in the cluster's subnet.

    Replacement: a pre-created interface is still attached to the old instance while CloudFormation
    launches the new one, so the interface is replaced with the node. Its logical id ends in a hash
    of everything the node's launch template is made of (:meth:`EfaLaunchTemplate.fingerprint`, the
    pattern of aws-cdk-lib's ``Function.currentVersion``): whatever replaces the node creates a new
    interface, re-associates the (kept) Elastic IP with it, launches the new node on it, then
    deletes the old node and interface. A node-count change leaves it alone. A value that changes
    only at deploy (an ``ImageId`` CloudFormation parameter) is invisible to the hash: change the
    image of such nodes through the context (``ami_id``), not the parameter.

    Args:
        launch_template: the cluster's launch template (copied with the interface attached).
        subnet: the public subnet (same AZ as the nodes).
        security_group: the cluster's EFA security group.
        description: the interface's description.
        replacement: the node's replacement label (see :class:`EfaNode`). Default: none.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        launch_template: EfaLaunchTemplate,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
        description: str,
        replacement: str = "",
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        self.network_interface = ec2.CfnNetworkInterface(
            self,
            "Interface",
            subnet_id=subnet.subnet_id,
            group_set=[security_group.security_group_id],
            description=description,
        )
        self.network_interface.override_logical_id(
            Lazy.uncached_string(
                _Suffixed(
                    Stack.of(self).resolve(self.network_interface.logical_id), launch_template, replacement
                )
            )
        )
        self.eip = ec2.CfnEIP(self, "Resource", domain="vpc")
        self.association = ec2.CfnEIPAssociation(
            self,
            "Association",
            allocation_id=self.eip.attr_allocation_id,
            network_interface_id=self.network_interface.ref,
        )
        self.launch_template = launch_template.with_primary_interface(
            self, "LaunchTemplate", self.network_interface.ref
        )
        # An EIP association fails until the VPC's internet gateway is attached and routed.
        self.node.add_dependency(subnet.internet_connectivity_established)

    @property
    def public_ip(self) -> str:
        """The Elastic IP (a token)."""
        return self.eip.attr_public_ip


class EfaNode(Construct):
    """One instance (``Resource``) launched from an EFA launch template, tagged for the node software.

    Args:
        index: the node's index in its cluster (node 0 is the leader).
        launch_template: the template to launch from; the instance carries its generation
            (``efa-cdk:generation``, :attr:`EfaLaunchTemplate.generation`), which the node software reads.
        name: the instance's Name tag.
        public_subnet: give the node an Elastic IP (a :class:`NodePublicAddress`, ``PublicAddress``)
            with its card-0 interface in this subnet. Default: no public address.
        security_group: the EFA security group (for the public interface). Default: none.
        replacement: a label; set or changed, it gives the instance (and its Elastic IP interface) a
            new logical id, so the next deploy launches a new instance and deletes the old one.
            Default: none.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        index: int,
        launch_template: EfaLaunchTemplate,
        name: str,
        public_subnet: ec2.ISubnet | None = None,
        security_group: ec2.ISecurityGroup | None = None,
        replacement: str = "",
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        self.index = index
        generation = launch_template.generation  # the cluster template's, also under an Elastic IP copy
        self.public_address: NodePublicAddress | None = None
        if public_subnet is not None:
            assert security_group is not None, "a public interface needs the EFA security group"
            self.public_address = NodePublicAddress(
                self,
                "PublicAddress",
                launch_template=launch_template,
                subnet=public_subnet,
                security_group=security_group,
                description=f"{name}: card 0 / device 0, with an Elastic IP",
                replacement=replacement,
            )
            launch_template = self.public_address.launch_template
        self.instance = ec2.CfnInstance(
            self,
            "Resource",
            monitoring=True,
            launch_template=ec2.CfnInstance.LaunchTemplateSpecificationProperty(
                launch_template_id=launch_template.launch_template_id,
                version=launch_template.latest_version_number,
            ),
        )
        if replacement:
            self.instance.override_logical_id(
                Stack.of(self).resolve(self.instance.logical_id) + _label_hash(replacement)
            )
        if self.public_address is not None:  # boot with the Elastic IP in place: the software is fetched
            self.instance.add_resource_dependency(self.public_address.association)
            # Stated, not left to the chain through the node's launch template (updated in place when the
            # node is replaced): CloudFormation deletes a resource after those that depend on it, so the
            # old interface goes only once the old instance it is attached to has gone.
            self.instance.add_resource_dependency(self.public_address.network_interface)
        Tags.of(self.instance).add("Name", name)
        Tags.of(self.instance).add("efa-cdk:node-index", str(index))
        # the node software forms a new cluster when it changes, and a node of the same one joins
        Tags.of(self.instance).add("efa-cdk:generation", generation)
        Tags.of(self.instance).add("efa-cdk:logical-id", Stack.of(self).resolve(self.instance.logical_id))

    @property
    def instance_id(self) -> str:
        """The instance id (a token)."""
        return self.instance.ref

    @property
    def private_ip(self) -> str:
        """The primary private IP (a token)."""
        return self.instance.attr_private_ip


class EfaAutoScalingGroup(Construct):
    """A fixed-size Auto Scaling group of EFA nodes: aws-cdk-lib's ``AutoScalingGroup`` (``Resource``),
    min = max = desired = node_count, one subnet, launched from an :class:`EfaLaunchTemplate`.

    A launch-template change replaces the whole group (``UpdatePolicy.replacing_update()``), like explicit
    nodes; a node-count change resizes it in place. The template does not grow with the count. With a
    ``signal_timeout``, the stack waits for every node's signal (``Signals.wait_for_all``: each node signals
    once its EFA check passed, and one failed node fails the deploy).

    Args:
        vpc: the VPC of `subnet`.
        launch_template: the nodes' template (without a subnet: the group sets it).
        subnet: the one subnet (EFA traffic stays in one AZ).
        node_count: the group's fixed size.
        name: the instances' Name tag.
        signal_timeout: how long the stack waits for the nodes' signals. Default: no signals.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc: ec2.IVpc,
        launch_template: EfaLaunchTemplate,
        subnet: ec2.ISubnet,
        node_count: int,
        name: str,
        signal_timeout: Duration | None = None,
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        #: aws-cdk-lib's group.
        self.group = autoscaling.AutoScalingGroup(
            self,
            "Resource",
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=[subnet]),
            # aws-cdk-lib's own LaunchTemplate inside: the group's signals need the template's role, which
            # the group reads only from that class (any other: ProvidedLaunchTemplateExposeDefine)
            launch_template=launch_template.launch_template,
            min_capacity=node_count,
            max_capacity=node_count,
            desired_capacity=node_count,
            update_policy=autoscaling.UpdatePolicy.replacing_update(),
            signals=autoscaling.Signals.wait_for_all(timeout=signal_timeout, min_success_percentage=100)
            if signal_timeout is not None
            else None,
        )
        # The size is the cluster's, set on every deploy on purpose (aws-cdk-lib warns of exactly that).
        Annotations.of(self.group).acknowledge_warning(
            "@aws-cdk/aws-autoscaling:desiredCapacitySet",
            "efa-cdk: the group's size is the cluster's node_count, reset by each deploy on purpose",
        )
        cfn = self.group.node.default_child
        assert isinstance(cfn, autoscaling.CfnAutoScalingGroup)
        #: The group's CloudFormation resource.
        self.auto_scaling_group: autoscaling.CfnAutoScalingGroup = cfn
        acknowledge(cfn, "AwsSolutions-AS3")
        Tags.of(cfn).add("Name", name)
        Tags.of(cfn).add("efa-cdk:logical-id", Stack.of(self).resolve(cfn.logical_id))

    @property
    def auto_scaling_group_name(self) -> str:
        """The group's name (a token)."""
        return self.auto_scaling_group.ref
