"""`EfaSharedStorage`: the cluster's shared file systems (EFS, FSx for Lustre), kept on stack deletion."""

from __future__ import annotations

from aws_cdk import Annotations, RemovalPolicy, Size, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct
from typing_extensions import Unpack

from ..core.errors import EfaConfigError
from ..core.lustre import DEFAULT_THROUGHPUT, LustreSpec
from ..core.node_rules import LustreUse
from ._node_base import known
from .arguments import checked
from .lustre import (
    DEFAULT_MOUNT_DIR,
    EfaLustreFileSystem,
    admit_clients,
    lustre_file_system,
    lustre_group,
    warn_lustre_blocks_deletion,
)
from .options import StorageOptions
from .security_group import keep_default_egress_closed

#: This construct's names of the Lustre options, in its refusals.
FSX_NAMES = ("fsx_lustre_capacity_gib", "fsx_lustre_throughput", "fsx_lustre_efa", "fsx_lustre_gds")


def made_lustre(storage: StorageOptions) -> LustreSpec | None:
    """The FSx for Lustre file system the storage options ask for (None: none), in their names."""
    gib = storage.get("fsx_lustre_capacity_gib")
    if gib is None:
        return None
    return LustreSpec(
        gib,
        storage.get("fsx_lustre_throughput", DEFAULT_THROUGHPUT),
        storage.get("fsx_lustre_efa", False),
        storage.get("fsx_lustre_gds", False),
        names=FSX_NAMES,
    )


def lustre_for_rules(given: EfaLustreFileSystem | None, storage: StorageOptions) -> LustreUse | None:
    """What the compute nodes mount, for the node rules (their head or login nodes mount it over TCP): the
    file system given (``lustre=``), or the one the storage options make (in the nodes' subnet); refused
    when both are asked for."""
    made = made_lustre(storage)
    if given is not None and made is not None:
        raise EfaConfigError(
            "lustre",
            code="efa-cdk:lustre-given-and-made",
            value=given.node.path,
            why="fsx_lustre_capacity_gib makes a file system at /fsx as well, and the nodes mount one FSx "
            "for Lustre file system per directory",
            fix="pass lustre or fsx_lustre_capacity_gib, not both",
        )
    if given is not None:
        return lustre_use(given)
    return None if made is None else LustreUse(made, None)


def admitted(lustre: EfaLustreFileSystem | None, clients: ec2.ISecurityGroup) -> list[IConstruct]:
    """`clients` admitted to `lustre` (:meth:`EfaLustreFileSystem.add_clients`, the one admission path):
    what the nodes are created after (the file system and the rules), none without a file system."""
    return lustre.add_clients(clients) if lustre is not None else []


def lustre_use(lustre: EfaLustreFileSystem | None, *, node_software: bool = True) -> LustreUse | None:
    """A file system given to an orchestrator, as the node rules read it."""
    if lustre is None:
        return None
    return LustreUse(lustre.spec, known(lustre.availability_zone), node_software=node_software)


class EfaSharedStorage(Construct):
    """EFS (Elastic throughput unless provisioned is asked for) and, optionally, FSx for Lustre,
    reachable from `clients`.

    Both are encrypted and RETAINED when the stack is deleted (data outlives the cluster); pass
    ``storage_removal_policy=RemovalPolicy.DESTROY`` to opt out. Each gets its own security group that
    admits only the client group, on the file system's ports. The nodes' LNet must be configured for EFA to
    use a file system that serves EFA (the Lustre client step).

    Storage options (:class:`StorageOptions`, each documented there): ``efs_throughput_mibps``,
    ``fsx_lustre_capacity_gib``, ``fsx_lustre_throughput``, ``fsx_lustre_efa``, ``fsx_lustre_gds``,
    ``storage_removal_policy``.

    Args:
        vpc: the VPC. subnet: the one subnet for mount targets / the Lustre file system.
        clients: the security group of the nodes that mount them.
        removal_policy: deprecated (0.x, for one minor release): ``storage_removal_policy``, the name every
            construct that makes storage takes; synthesis says so.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        clients: ec2.ISecurityGroup,
        removal_policy: RemovalPolicy | None = None,
        **storage: Unpack[StorageOptions],
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        removal = _removal_policy(self, removal_policy, storage)
        efs_throughput_mibps = storage.get("efs_throughput_mibps")
        if (
            efs_throughput_mibps is not None
            and not Token.is_unresolved(efs_throughput_mibps)
            and not 1 <= efs_throughput_mibps <= 10240
        ):
            raise EfaConfigError(
                "efs_throughput_mibps",
                code="efa-cdk:efs-throughput-range",
                value=efs_throughput_mibps,
                why="EFS provisioned throughput is 1-10240 MiB/s",
                fix="choose 1..10240 (the trn1 guide uses 1024)",
            )
        #: What FSx for Lustre file system is made (None: none), checked against FSx's rules.
        self.lustre_spec = made_lustre(storage)
        if self.lustre_spec is not None:
            self.lustre_spec.check()
        self.file_system = self._efs(vpc, subnet, clients, efs_throughput_mibps, removal)
        self.lustre: fsx.LustreFileSystem | None = None
        if self.lustre_spec is not None:
            self.lustre = self._lustre(vpc, subnet, clients, self.lustre_spec, removal)
            if removal is RemovalPolicy.RETAIN:
                warn_lustre_blocks_deletion(self)

    def _efs(
        self,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        clients: ec2.ISecurityGroup,
        throughput_mibps: int | None,
        removal_policy: RemovalPolicy,
    ) -> efs.FileSystem:
        self.efs_security_group = ec2.SecurityGroup(
            self,
            "EfsSecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description="EFS: NFS from the cluster",
        )
        # Both directions: ParallelCluster's EfsIdValidator checks inbound AND outbound 2049 rules.
        clients.connections.allow_to(self.efs_security_group, ec2.Port.tcp(2049), "NFS to EFS")
        self.efs_security_group.add_egress_rule(clients, ec2.Port.tcp(2049), "NFS replies to the cluster")
        keep_default_egress_closed(self.efs_security_group)
        if throughput_mibps is not None:
            Annotations.of(self).add_warning_v2(
                "efa-cdk:efs-provisioned-throughput",
                f"EFS provisioned throughput of {throughput_mibps} MiB/s is billed every hour whether used "
                "or not, and the file system is retained when the stack is deleted; leave it unset for "
                "Elastic throughput (billed by use)",
            )
        file_system = efs.FileSystem(
            self,
            "Efs",
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=[subnet]),
            security_group=self.efs_security_group,
            encrypted=True,
            throughput_mode=efs.ThroughputMode.ELASTIC
            if throughput_mibps is None
            else efs.ThroughputMode.PROVISIONED,
            provisioned_throughput_per_second=None
            if throughput_mibps is None
            else Size.mebibytes(throughput_mibps),
            performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
            removal_policy=removal_policy,
            enable_automatic_backups=True,
        )
        # Encryption in transit or no access: the clients mount with TLS (the EFS mount helper's `tls`;
        # ParallelCluster's EncryptionInTransit), and the policy refuses any other connection (Amazon EFS
        # user guide, "Encrypting data in transit": the aws:SecureTransport condition).
        file_system.add_to_resource_policy(
            iam.PolicyStatement(
                sid="DenyUnencryptedTransport",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["*"],
                conditions={"Bool": {"aws:SecureTransport": "false"}},
            )
        )
        return file_system

    def _lustre(
        self,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        clients: ec2.ISecurityGroup,
        spec: LustreSpec,
        removal_policy: RemovalPolicy,
    ) -> fsx.LustreFileSystem:
        self.lustre_security_group = lustre_group(self, vpc)
        lustre = lustre_file_system(self, vpc, subnet, self.lustre_security_group, spec, removal_policy)
        admit_clients(lustre, self.lustre_security_group, clients, spec.efa)
        return lustre


def _removal_policy(scope: Construct, old: RemovalPolicy | None, storage: StorageOptions) -> RemovalPolicy:
    """``storage_removal_policy``, or the deprecated ``removal_policy`` with a deprecation at synth; both
    refused (which one counts?)."""
    if old is None:
        return storage.get("storage_removal_policy", RemovalPolicy.RETAIN)
    if "storage_removal_policy" in storage:
        raise EfaConfigError(
            "removal_policy",
            code="efa-cdk:storage-option-renamed-and-new",
            value=old,
            why="removal_policy is the old name of storage_removal_policy, and storage_removal_policy is "
            "given too",
            fix="drop removal_policy",
        )
    Annotations.of(scope).add_deprecation(
        "efa_constructs.EfaSharedStorage#removal_policy",
        "write storage_removal_policy=..., the name every construct that makes storage takes",
    )
    return old


def lustre_in_use(
    given: EfaLustreFileSystem | None, storage: EfaSharedStorage
) -> tuple[EfaLustreFileSystem | fsx.LustreFileSystem, LustreSpec, str] | None:
    """The Lustre file system an orchestrator's nodes mount: the one given (``lustre=``) or the one its
    storage made; what it is, and where it mounts. None without one."""
    if given is not None:
        return given, given.spec, given.mount_dir
    if storage.lustre is not None and storage.lustre_spec is not None:
        return storage.lustre, storage.lustre_spec, DEFAULT_MOUNT_DIR
    return None
