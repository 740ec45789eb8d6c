"""`EfaSharedStorage`: the cluster's shared file systems (EFS, FSx for Lustre), kept on stack deletion."""

from __future__ import annotations

from aws_cdk import Annotations, RemovalPolicy, Size, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

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
from .security_group import keep_default_egress_closed

#: This construct's names of the Lustre options, in its refusals.
FSX_NAMES = ("fsx_lustre_capacity_gib", "fsx_lustre_throughput", "fsx_lustre_efa", "fsx_lustre_gds")


def lustre_for_rules(
    given: EfaLustreFileSystem | None, gib: int | None, throughput: int, efa: bool, gds: bool
) -> LustreUse | None:
    """What the compute nodes mount, for the node rules (their head or login nodes mount it over TCP): the
    file system given (``lustre=``), or the one the orchestrator makes, in EfaSharedStorage's names (in the
    nodes' subnet); refused when both are asked for."""
    if given is not None and gib is not None:
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
    return None if gib is None else LustreUse(LustreSpec(gib, throughput, efa, gds, names=FSX_NAMES), None)


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
    ``removal_policy=RemovalPolicy.DESTROY`` to opt out. Each gets its own security group that
    admits only the client group, on the file system's ports.

    Args:
        vpc: the VPC. subnet: the one subnet for mount targets / the Lustre file system.
        clients: the security group of the nodes that mount them.
        efs_throughput_mibps: EFS provisioned throughput in MiB/s. Default: none, Elastic throughput
            (billed by use). Provisioned throughput is billed every hour whether used or not, and the
            file system is retained after the stack is deleted: synthesis warns when it is set.
        fsx_lustre_capacity_gib: size of an FSx for Lustre file system (PERSISTENT_2, SSD): 1200 or a
            multiple of 2400; with EFA a multiple of the tier's step (``core.lustre.EFA_STEP_GIB``: 19200
            at 250 MB/s/TiB). Default: none is created.
        fsx_lustre_throughput: its throughput tier, MB/s per TiB: 125, 250, 500 or 1000. Default: 250.
        fsx_lustre_efa: serve EFA clients (``EfaEnabled``; Lustre 2.15, a metadata configuration, and a
            security group open to itself and the clients for all traffic, as FSx requires). Set at
            creation only: switching it replaces the file system (``template-diff`` says so). Default:
            False. The nodes' LNet must be configured for EFA to use it (the Lustre client step).
        fsx_lustre_gds: its EFA clients use GPUDirect Storage (P5, P5e, P5en, P6-B200, P6e-GB200; needs
            ``fsx_lustre_efa``): the client step loads the GDS driver and checks it with ``gdscheck``.
            Default: False.
        removal_policy: what deleting the stack does to the file systems. Default: RETAIN.
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
        efs_throughput_mibps: int | None = None,
        fsx_lustre_capacity_gib: int | None = None,
        fsx_lustre_throughput: int = DEFAULT_THROUGHPUT,
        fsx_lustre_efa: bool = False,
        fsx_lustre_gds: bool = False,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
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
        self.lustre_spec = (
            None
            if fsx_lustre_capacity_gib is None
            else LustreSpec(
                fsx_lustre_capacity_gib,
                fsx_lustre_throughput,
                fsx_lustre_efa,
                fsx_lustre_gds,
                names=FSX_NAMES,
            )
        )
        if self.lustre_spec is not None:
            self.lustre_spec.check()
        self.file_system = self._efs(vpc, subnet, clients, efs_throughput_mibps, removal_policy)
        self.lustre: fsx.LustreFileSystem | None = None
        if self.lustre_spec is not None:
            self.lustre = self._lustre(vpc, subnet, clients, self.lustre_spec, removal_policy)
            if removal_policy is RemovalPolicy.RETAIN:
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
