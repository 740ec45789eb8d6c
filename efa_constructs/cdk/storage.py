"""`EfaSharedStorage`: the cluster's shared file systems (EFS, FSx for Lustre), kept on stack deletion."""

from __future__ import annotations

from aws_cdk import Annotations, RemovalPolicy, Size, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from constructs import Construct

from ..core.errors import EfaConfigError
from .arguments import checked
from .security_group import keep_default_egress_closed


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
        fsx_lustre_capacity_gib: size of an FSx for Lustre file system (1200 or a multiple of
            2400). Default: none is created.
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
        if fsx_lustre_capacity_gib is not None and not (
            fsx_lustre_capacity_gib == 1200
            or (fsx_lustre_capacity_gib > 0 and fsx_lustre_capacity_gib % 2400 == 0)
        ):
            raise EfaConfigError(
                "fsx_lustre_capacity_gib",
                code="efa-cdk:fsx-capacity-size",
                value=fsx_lustre_capacity_gib,
                why="an FSx for Lustre (PERSISTENT_2) file system is 1200 GiB or a multiple of 2400 GiB",
                fix="use 1200, 2400, 4800, ...",
            )
        self.file_system = self._efs(vpc, subnet, clients, efs_throughput_mibps, removal_policy)
        self.lustre: fsx.LustreFileSystem | None = None
        if fsx_lustre_capacity_gib is not None:
            self.lustre = self._lustre(vpc, subnet, clients, fsx_lustre_capacity_gib, removal_policy)
            if removal_policy is RemovalPolicy.RETAIN:
                self._warn_lustre_blocks_deletion()

    def _warn_lustre_blocks_deletion(self) -> None:
        """EFS is kept alone (its mount targets go with the stack); a kept Lustre file system keeps
        its network interfaces in the subnet, so deleting the stack stops there. Say how to finish."""
        Annotations.of(self).add_warning_v2(
            "efa-cdk:fsx-blocks-stack-deletion",
            "The FSx for Lustre file system is kept when the stack is deleted, and its network interfaces "
            "stay in the subnet with its security group: `cdk destroy` then ends in DELETE_FAILED on "
            "those. To finish, keep them (aws cloudformation delete-stack --stack-name <stack> "
            "--retain-resources <the failed logical ids>), or back the file system up (aws fsx "
            "create-backup) and delete it (aws fsx delete-file-system) before `cdk destroy` again.",
        )

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
        capacity_gib: int,
        removal_policy: RemovalPolicy,
    ) -> fsx.LustreFileSystem:
        self.lustre_security_group = ec2.SecurityGroup(
            self, "LustreSecurityGroup", vpc=vpc, allow_all_outbound=False, description="FSx for Lustre"
        )
        # Both directions, clients and servers: ParallelCluster's ExistingFsxNetworkingValidator checks
        # inbound AND outbound 988 and 1018-1023.
        for port in (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023)):
            clients.connections.allow_to(self.lustre_security_group, port, "Lustre")
            self.lustre_security_group.add_egress_rule(clients, port, "Lustre to the cluster")
            self.lustre_security_group.add_ingress_rule(self.lustre_security_group, port, "Lustre servers")
            self.lustre_security_group.add_egress_rule(self.lustre_security_group, port, "Lustre servers")
        keep_default_egress_closed(self.lustre_security_group)
        lustre = fsx.LustreFileSystem(
            self,
            "Lustre",
            vpc=vpc,
            vpc_subnet=subnet,
            security_group=self.lustre_security_group,
            storage_capacity_gib=capacity_gib,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=fsx.LustreDeploymentType.PERSISTENT_2,
                per_unit_storage_throughput=250,
                data_compression_type=fsx.LustreDataCompressionType.LZ4,
            ),
            removal_policy=removal_policy,
        )
        # The file system checks its ports at creation (ParallelCluster issue #6181): its rules first
        # (the rules only: the groups themselves it already references).
        for group in (self.lustre_security_group, clients):
            for rule in group.node.children:
                if isinstance(rule, (ec2.CfnSecurityGroupIngress, ec2.CfnSecurityGroupEgress)):
                    lustre.node.add_dependency(rule)
        return lustre
