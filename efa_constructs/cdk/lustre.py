"""`EfaLustreFileSystem`: FSx for Lustre for EFA clusters, over TCP or over EFA, kept on stack deletion.

The rules FSx documents are in :mod:`efa_constructs.core.lustre`; the clients' side is the node software's
``lustre-client`` step (LNet over EFA, the mount, the proof that Lustre rides EFA).
"""

from __future__ import annotations

from typing import NamedTuple, cast

import jsii
from aws_cdk import Annotations, Names, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from constructs import Construct, IConstruct

from ..core.catalogue import InstanceType
from ..core.lustre import DEFAULT_THROUGHPUT, LustreSpec, efa_client_interfaces
from ..core.settings import NodeEnv
from .arguments import checked
from .security_group import keep_default_egress_closed

#: Where the nodes mount it (FSx for Lustre user guide, "mounting-ec2-instance": /fsx).
DEFAULT_MOUNT_DIR = "/fsx"


def lustre_group(scope: Construct, vpc: ec2.IVpc) -> ec2.SecurityGroup:
    """The file system's own group (``LustreSecurityGroup``): no default egress."""
    group = ec2.SecurityGroup(
        scope, "LustreSecurityGroup", vpc=vpc, allow_all_outbound=False, description="FSx for Lustre"
    )
    keep_default_egress_closed(group)
    return group


def lustre_file_system(
    scope: Construct,
    vpc: ec2.IVpc,
    subnet: ec2.ISubnet,
    group: ec2.ISecurityGroup,
    spec: LustreSpec,
    removal_policy: RemovalPolicy,
) -> fsx.LustreFileSystem:
    """The file system (``Lustre``): PERSISTENT_2 at `spec`'s size and tier, LZ4, EFA when `spec` says."""
    lustre = fsx.LustreFileSystem(
        scope,
        "Lustre",
        vpc=vpc,
        vpc_subnet=subnet,
        security_group=group,
        storage_capacity_gib=spec.capacity_gib,
        lustre_configuration=fsx.LustreConfiguration(
            deployment_type=fsx.LustreDeploymentType.PERSISTENT_2,
            per_unit_storage_throughput=spec.throughput,
            data_compression_type=fsx.LustreDataCompressionType.LZ4,
        ),
        # set for EFA only: a TCP file system made before keeps its version (a change replaces it)
        file_system_type_version=fsx.FileSystemTypeVersion.V_2_15 if spec.efa else None,
        removal_policy=removal_policy,
    )
    # said at every synth: no template can tell what is deployed, and the switch loses the data
    Annotations.of(lustre).add_info(
        f"FSx for Lustre {'with' if spec.efa else 'without'} EFA: EFA is set when the file system is "
        "created, so switching it later replaces the file system and its data (efa-cdk template-diff "
        "shows it as !!! STATEFUL REPLACED); back it up first (aws fsx create-backup)"
    )
    if spec.efa:
        # aws-cdk-lib's LustreFileSystem has neither property (its L1 has): EFA needs Lustre 2.15, a metadata
        # configuration (AUTOMATIC: IOPS follow the SSD capacity) and EfaEnabled (FSx for Lustre user guide,
        # "efa-file-systems", Considerations; CloudFormation, AWS::FSx::FileSystem LustreConfiguration)
        cfn = lustre.node.default_child
        assert isinstance(cfn, fsx.CfnFileSystem)
        cfn.add_property_override("LustreConfiguration.EfaEnabled", True)
        cfn.add_property_override("LustreConfiguration.MetadataConfiguration", {"Mode": "AUTOMATIC"})
        # FSx refuses to create an EFA-enabled file system whose group does not pass all traffic to itself
        everything = ec2.Port.all_traffic()
        group.add_ingress_rule(group, everything, "Lustre servers over EFA")
        group.add_egress_rule(group, everything, "Lustre servers over EFA")
    return lustre


def admit_clients(
    lustre: fsx.LustreFileSystem, group: ec2.ISecurityGroup, clients: ec2.ISecurityGroup, efa: bool
) -> None:
    """Open `group` (the file system's) and `clients` to each other, and create the file system after the
    rules, which it checks at creation (ParallelCluster issue #6181): a file system and clients of one stack.

    Without EFA, Lustre's TCP ports both ways, to the clients and among the servers: ParallelCluster's
    ExistingFsxNetworkingValidator checks inbound AND outbound 988 and 1018-1023. With EFA, all traffic both
    ways (FSx for Lustre user guide, "limit-access-security-groups", EFA-enabled security groups; otherwise
    "Insufficient security group permissions to create an EFA-enabled file system": "cannot-create-fs")."""
    if efa:
        everything = ec2.Port.all_traffic()
        clients.connections.allow_to(group, everything, "Lustre over EFA and TCP")
        group.connections.allow_to(clients, everything, "Lustre over EFA and TCP to the cluster")
    else:
        for port in lustre_ports(efa):
            clients.connections.allow_to(group, port, "Lustre")
            group.add_egress_rule(clients, port, "Lustre to the cluster")
            group.add_ingress_rule(group, port, "Lustre servers")
            group.add_egress_rule(group, port, "Lustre servers")
    # the rules only: the groups themselves the file system already references
    for owner in (group, clients):
        for rule in owner.node.children:
            if isinstance(rule, (ec2.CfnSecurityGroupIngress, ec2.CfnSecurityGroupEgress)):
                lustre.node.add_dependency(rule)


def lustre_ports(efa: bool) -> list[ec2.Port]:
    """What Lustre uses: with EFA all traffic, else TCP 988 and 1018-1023 (FSx for Lustre user guide,
    "limit-access-security-groups")."""
    return [ec2.Port.all_traffic()] if efa else [ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023)]


def servers_rules(group: ec2.ISecurityGroup, efa: bool) -> None:
    """The servers' own rules among themselves on a file system's TCP ports (with EFA its group is open to
    itself from its creation: ``lustre_file_system``)."""
    if not efa:
        for port in lustre_ports(efa):
            group.add_ingress_rule(group, port, "Lustre servers")
            group.add_egress_rule(group, port, "Lustre servers")


def mutable(group: ec2.ISecurityGroup) -> bool:
    """Whether aws-cdk-lib writes rules on `group`: a group made in the app, or one imported with
    ``mutable=True`` (the default). An immutable import (``from_security_group_id(..., mutable=False)``:
    "the group is not to be changed") drops every rule added to it; no property says which it is, so a rule
    is added and taken away again (an imported group's rule is a construct of its own, under it)."""
    if isinstance(group, ec2.SecurityGroup):
        return True
    before = {c.node.id for c in group.node.children}
    group.add_ingress_rule(ec2.Peer.ipv4("192.0.2.1/32"), ec2.Port.tcp(9), "efa-cdk: is the group mutable")
    added = [c.node.id for c in group.node.children if c.node.id not in before]
    for child in added:
        group.node.try_remove_child(child)
    return bool(added)


def rules_both_ways(
    lustre: EfaLustreFileSystem, clients: ec2.ISecurityGroup, *, on_file_systems_group: bool = True
) -> list[IConstruct]:
    """Lustre's ports between the file system's group and `clients`, both ways, as EC2 rules on the two
    groups' ids, made beside `clients` (in the nodes' stack: a file system in its own stack, or one that
    exists, is never changed and depends on nothing of theirs). Without `on_file_systems_group`, only the
    clients' group's own rules (the file system's group is not to be changed). Returns the rules."""
    scope = cast(Construct, clients)
    fs_group, client_group = lustre.security_group.security_group_id, clients.security_group_id
    name = f"Lustre{Names.unique_id(lustre)}"
    made: list[IConstruct] = []
    for port in lustre_ports(lustre.spec.efa):  # as EC2's rules write them (-1: every protocol, no ports)
        rule = port.to_rule_json()
        protocol, low, high = rule["ipProtocol"], rule.get("fromPort"), rule.get("toPort")
        suffix = "All" if low is None else str(low)
        for id_, group, peer, egress, what in (
            ("To", client_group, fs_group, True, "Lustre"),
            ("In", fs_group, client_group, False, "Lustre clients"),
            ("Out", fs_group, client_group, True, "Lustre to the clients"),
            ("From", client_group, fs_group, False, "Lustre servers"),
        ):
            if group is fs_group and not on_file_systems_group:
                continue
            rule_id = f"{name}{id_}{suffix}"
            if egress:
                made.append(
                    ec2.CfnSecurityGroupEgress(
                        scope,
                        rule_id,
                        group_id=group,
                        destination_security_group_id=peer,
                        description=what,
                        ip_protocol=protocol,
                        from_port=low,
                        to_port=high,
                    )
                )
            else:
                made.append(
                    ec2.CfnSecurityGroupIngress(
                        scope,
                        rule_id,
                        group_id=group,
                        source_security_group_id=peer,
                        description=what,
                        ip_protocol=protocol,
                        from_port=low,
                        to_port=high,
                    )
                )
    return made


def lustre_client_settings(
    file_system: EfaLustreFileSystem | fsx.LustreFileSystem,
    spec: LustreSpec,
    it: InstanceType,
    mount_dir: str = DEFAULT_MOUNT_DIR,
    *,
    efa_client: bool = True,
) -> NodeEnv:
    """What the node software's ``lustre-client`` step reads on a node of type `it`: the file system, where
    it mounts, the EFA interfaces LNet uses for it (0, TCP only, without EFA or when `efa_client` is
    False: a login or head node), and whether it sets up GPUDirect Storage (EFA clients only)."""
    interfaces = efa_client_interfaces(it) if spec.efa and efa_client else 0
    return {
        "EFA_CDK_LUSTRE_DNS": file_system.dns_name,
        "EFA_CDK_LUSTRE_MOUNT_NAME": file_system.mount_name,
        "EFA_CDK_LUSTRE_DIR": mount_dir,
        "EFA_CDK_LUSTRE_EFA_INTERFACES": str(interfaces),
        # only when asked: the settings of a file system without GDS stay as they were
        **({"EFA_CDK_LUSTRE_GDS": "1"} if spec.gds and interfaces else {}),
    }


def warn_lustre_blocks_deletion(scope: Construct) -> None:
    """A kept Lustre file system keeps its network interfaces in the subnet, so deleting the stack stops
    there (EFS is kept alone: its mount targets go with the stack). Say how to finish."""
    Annotations.of(scope).add_warning_v2(
        "efa-cdk:fsx-blocks-stack-deletion",
        "The FSx for Lustre file system is kept when the stack is deleted, and its network interfaces "
        "stay in the subnet with its security group: `cdk destroy` then ends in DELETE_FAILED on "
        "those. To finish, keep them (aws cloudformation delete-stack --stack-name <stack> "
        "--retain-resources <the failed logical ids>), or back the file system up (aws fsx "
        "create-backup) and delete it (aws fsx delete-file-system) before `cdk destroy` again.",
    )


@jsii.implements(ec2.IConnectable)
class EfaLustreFileSystem(Construct):
    """An FSx for Lustre file system (PERSISTENT_2, SSD) for EFA clusters: give it to ``EfaCluster(lustre=)``
    and every node mounts it, over EFA when `efa` is set.

    Encrypted, compressed (LZ4) and RETAINED when the stack is deleted (data outlives the cluster); pass
    ``removal_policy=RemovalPolicy.DESTROY`` to opt out. Its own security group admits the clients
    :meth:`add_clients` names: Lustre's TCP ports, or with EFA all traffic, as FSx requires.
    ``IConnectable`` (its group).

    Args:
        vpc: the VPC. subnet: its one subnet: with EFA, the clients' Availability Zone (FSx serves EFA
            clients in the file system's zone and VPC only: "efa-file-systems").
        capacity_gib: its size: 1200 or a multiple of 2400 GiB; with EFA a multiple of the tier's step
            (``core.lustre.EFA_STEP_GIB``: 19200 at 250 MB/s/TiB, 4800 at 1000). What it costs is the size
            times the tier's price (docs/storage.md).
        throughput: its tier, MB/s per TiB: 125, 250, 500 or 1000. Default: 250. With EFA it cannot change
            later.
        efa: serve EFA clients (``EfaEnabled``; Lustre 2.15 and a metadata configuration). Set at creation
            only: switching it replaces the file system, which ``efa-cdk template-diff`` reports. Default:
            False.
        gds: its EFA clients read and write with GPUDirect Storage: each loads the NVIDIA GDS driver
            (nvidia-fs 2.24.2 or later; built from NVIDIA's source at a pinned commit when the image has
            none) and passes ``gdscheck -p``. P5, P5e, P5en, P6-B200 and P6e-GB200 clients only; needs
            `efa`. Default: False.
        mount_dir: where the nodes mount it. Default: ``/fsx``.
        removal_policy: what deleting the stack does to it. Default: RETAIN.

    A file system made elsewhere (another stack, the console, ``aws fsx create-file-system``) is given to the
    same orchestrators with :meth:`from_file_system_attributes`.

    Attributes:
        file_system: the ``aws_fsx`` file system (``Lustre``): a ``LustreFileSystem``, or imported.
        security_group: its group (``LustreSecurityGroup``). spec: what was asked
        (:class:`~efa_constructs.core.lustre.LustreSpec`). file_system_id, dns_name, mount_name: where it is.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        capacity_gib: int,
        throughput: int = DEFAULT_THROUGHPUT,
        efa: bool = False,
        gds: bool = False,
        mount_dir: str = DEFAULT_MOUNT_DIR,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        self.spec = LustreSpec(capacity_gib, throughput, efa, gds)
        self.spec.check()
        self.mount_dir = mount_dir
        #: Its Availability Zone (its subnet's): EFA clients must be in it.
        self.availability_zone = subnet.availability_zone
        self.security_group: ec2.ISecurityGroup = lustre_group(self, vpc)
        made = lustre_file_system(self, vpc, subnet, self.security_group, self.spec, removal_policy)
        self.file_system: fsx.IFileSystem = made
        self.file_system_id, self.dns_name, self.mount_name = (
            made.file_system_id,
            made.dns_name,
            made.mount_name,
        )
        if removal_policy is RemovalPolicy.RETAIN:
            warn_lustre_blocks_deletion(self)

    @staticmethod
    def from_file_system_attributes(
        scope: Construct,
        id_: str,
        *,
        file_system_id: str,
        dns_name: str,
        mount_name: str,
        security_group: ec2.ISecurityGroup,
        availability_zone: str,
        capacity_gib: int,
        throughput: int = DEFAULT_THROUGHPUT,
        efa: bool = False,
        gds: bool = False,
        mount_dir: str = DEFAULT_MOUNT_DIR,
    ) -> EfaLustreFileSystem:
        """A file system that exists already (``aws fsx describe-file-systems`` has each attribute:
        ``FileSystemId``, ``DNSName``, ``LustreConfiguration.MountName``, its network interfaces' group,
        the subnet's zone, ``StorageCapacity``, ``PerUnitStorageThroughput``, ``EfaEnabled``). Nothing of it
        is created, changed or deleted: clients are admitted with rules between its group (imported mutable)
        and theirs only; the rules FSx documents are checked against what is given."""
        given = _Attributes(file_system_id, dns_name, mount_name, security_group, availability_zone)
        return _ExistingLustreFileSystem(
            scope, id_, given, LustreSpec(capacity_gib, throughput, efa, gds), mount_dir
        )

    @property
    def connections(self) -> ec2.Connections:
        """The file system's security group (``IConnectable``)."""
        return self.security_group.connections

    def add_clients(
        self, clients: ec2.ISecurityGroup, it: InstanceType | None = None, count: int = 0
    ) -> list[IConstruct]:
        """Let the nodes in group `clients` mount it: the groups opened to each other (Lustre's TCP ports,
        with EFA all traffic), the rules in the clients' stack when the file system is in another (the
        dependency runs one way: the clients' stack on the file system's). With `it`, `count` nodes of that
        type are checked against FSx's client rules first (the orchestrators check them in their rule
        register). Returns what the nodes must be created after (the file system and the rules)."""
        if it is not None:
            self.spec.check_clients(it, count)
        if Stack.of(self) is Stack.of(clients):
            assert isinstance(self.file_system, fsx.LustreFileSystem)
            admit_clients(self.file_system, self.security_group, clients, self.spec.efa)
            return [self.file_system]
        servers_rules(self.security_group, self.spec.efa)  # in the file system's stack, on its own group
        return [cast(IConstruct, self.file_system), *rules_both_ways(self, clients)]

    def client_settings(self, it: InstanceType) -> NodeEnv:
        """What the node software's ``lustre-client`` step reads on a node of type `it`."""
        return lustre_client_settings(self, self.spec, it, self.mount_dir)


class _Attributes(NamedTuple):
    """What :meth:`EfaLustreFileSystem.from_file_system_attributes` is told of a file system that exists."""

    file_system_id: str
    dns_name: str
    mount_name: str
    security_group: ec2.ISecurityGroup
    availability_zone: str


class _ExistingLustreFileSystem(EfaLustreFileSystem):
    """:meth:`EfaLustreFileSystem.from_file_system_attributes`: the same face, no resource of its own."""

    def __init__(
        self, scope: Construct, id_: str, given: _Attributes, spec: LustreSpec, mount_dir: str
    ) -> None:
        Construct.__init__(self, scope, id_)  # not EfaLustreFileSystem's: it creates the file system
        spec.check()
        self.spec, self.mount_dir, self.availability_zone = spec, mount_dir, given.availability_zone
        self.security_group = given.security_group
        self.file_system = fsx.LustreFileSystem.from_lustre_file_system_attributes(
            self,
            "Lustre",
            dns_name=given.dns_name,
            file_system_id=given.file_system_id,
            security_group=given.security_group,
        )
        self.file_system_id, self.dns_name, self.mount_name = (
            given.file_system_id,
            given.dns_name,
            given.mount_name,
        )

    def add_clients(
        self, clients: ec2.ISecurityGroup, it: InstanceType | None = None, count: int = 0
    ) -> list[IConstruct]:
        """The clients' rules only, both ways, written on the group ids in the clients' stack (an imported
        group drops egress rules, or all rules when immutable, in aws-cdk-lib's ``addEgressRule``); the
        servers' own rules are the file system's already (a second copy would fail the deploy as a
        duplicate)."""
        if it is not None:
            self.spec.check_clients(it, count)
        if mutable(self.security_group):
            return rules_both_ways(self, clients)
        ports = "all traffic (EFA)" if self.spec.efa else "TCP 988 and 1018-1023"
        Annotations.of(self).add_warning_v2(
            "efa-cdk:lustre-group-immutable",
            f"the file system's security group was imported with mutable=False, so efa-cdk writes no rule on "
            f"it; its clients ({cast(Construct, clients).node.path}) mount nothing until it allows {ports} "
            "in from their group and out to it (FSx for Lustre user guide, limit-access-security-groups): "
            "add those two rules to it yourself, or import it with mutable=True",
        )
        return rules_both_ways(self, clients, on_file_systems_group=False)
