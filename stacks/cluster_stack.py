"""The ready cluster stacks: one stack class, one default instance type per stack name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Annotations, CfnOutput, Duration, Fn
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from efa_constructs.cdk import EfaCluster, EfaMachineImage, EfaNetwork, NodeSoftware, OsFamily, ssh_peer
from efa_constructs.cdk.lustre import EfaLustreFileSystem
from efa_constructs.core import EfaUserData, Layout, PublicIp, instance_type
from efa_constructs.core.benchmarks import signal_minutes_for
from efa_constructs.core.catalogue import CARDS_SOURCE, AcceleratorKind
from efa_constructs.core.containers import ContainerRun

from .base import ReadyStackBase
from .existing import (
    existing_key_pair,
    existing_network,
    image_id_parameter,
)
from .params import CLUSTER, ClusterParams, ready

#: The ready cluster stacks and the instance type each launches by default (of the one table).
READY_CLUSTERS = ready(CLUSTER)


def stack_context(all_context: Mapping[str, Any], stack_name: str) -> dict[str, Any]:
    """Context for one stack: ``key=value`` applies to every stack, ``Stack:key=value`` to one.

    CDK's own keys (feature flags ``@aws-cdk/...``, ``aws:cdk:...``) and other stacks' prefixed
    keys are left out; everything else is passed on, so a misspelt key is caught, not ignored.
    """
    ctx = {k: v for k, v in all_context.items() if not k.startswith("@") and ":" not in k}
    prefix = f"{stack_name}:"
    ctx.update({k[len(prefix) :]: v for k, v in all_context.items() if k.startswith(prefix)})
    return ctx


class EfaClusterStack(ReadyStackBase):
    """A VPC (or an existing one) and an :class:`EfaCluster`, with the nodes' IPs as outputs.

    Args:
        params: validated parameters (see :class:`ClusterParams`).
    """

    DESCRIBES = "EFA cluster of {node_count} x {instance_type}"

    def __init__(self, scope: Construct, id_: str, *, params: ClusterParams, **kwargs: Any) -> None:
        super().__init__(scope, id_, params=params, **kwargs)
        self.params: ClusterParams = params
        vpc, subnet, public_subnet = self._network(params)
        #: The FSx for Lustre file system the nodes mount (-c fsx_lustre_capacity_gib), or None.
        self.lustre = (
            None
            if params.fsx_lustre_capacity_gib is None
            else EfaLustreFileSystem(
                self,
                "Lustre",
                vpc=vpc,
                subnet=subnet,
                capacity_gib=params.fsx_lustre_capacity_gib,
                throughput=params.fsx_lustre_throughput,
                efa=params.fsx_lustre_efa,
                gds=params.fsx_lustre_gds,
            )
        )
        self.cluster = EfaCluster(
            self,
            "Cluster",
            vpc=vpc,
            subnet=subnet,
            machine_image=self._machine_image(params),
            node_count=params.node_count,
            nic_layout=Layout.mode(params.nic_layout, efa_count=params.efa_count),
            key_pair=existing_key_pair(self, params.key_pair),
            ssh_peers=[ssh_peer(c) for c in params.ssh_peers],
            internet_egress=params.internet_egress,
            root_volume_gib=params.root_volume_gib,
            public_ip=params.public_ip,
            public_subnet=public_subnet if params.public_ip is not PublicIp.NONE else None,
            node_software=NodeSoftware.efa(
                EfaUserData(
                    benchmarks=params.benchmarks,
                    strict_benchmarks=params.strict_benchmarks,
                    dcgm_diag_level=params.dcgm_diag_level,
                    signal_timeout_minutes=signal_minutes_for(params.dcgm_diag_level),
                )
            )
            if params.node_software
            else NodeSoftware.none(),
            node_group=params.node_group,
            **self.node_options(),
            monitoring=params.monitoring,
            alarm_email=params.alarm_email,
            sweep_interval=None if params.sweep_minutes is None else Duration.minutes(params.sweep_minutes),
            container=ContainerRun(params.container_image, params.container_ssh_port)
            if params.container_image
            else None,
            node_replacements=dict(params.node_replacements),
            lustre=self.lustre,
        )
        self._restate_warnings(params)
        self._outputs(params)

    def _restate_warnings(self, params: ClusterParams) -> None:
        """The construct's warnings that name its arguments, said once more in the context keys the user
        typed (the construct's own acknowledged, so each is said once)."""
        restated = {}
        if params.ssh_peers and not params.key_pair:
            restated["efa-cdk:ssh-without-key-pair"] = (
                f"-c ssh_peers={','.join(params.ssh_peers)} opens TCP 22 but no -c key_pair=<name> is given: "
                "your own SSH login needs one; without it only the cluster's own key, kept in SSM, logs in. "
                "Leave ssh_peers out to keep port 22 closed and use Session Manager."
            )
        if (
            params.container_image
            and not params.ami_id
            and self.cluster.instance_type.accelerator.kind is AcceleratorKind.GAUDI
        ):
            restated["efa-cdk:gaudi-image"] = (
                f"-c container_image on {params.instance_type} with the default image (Amazon Linux 2023, no "
                "Intel Gaudi driver or habana container runtime): the container step will stop the deploy. "
                "AWS publishes no current image for first-gen Gaudi (the Intel Gaudi Support Matrix lists it "
                "up to 1.21.0): pass one with the Intel Gaudi software, -c <Stack>:ami_id=ami-... "
                "-c <Stack>:ami_os=ubuntu."
            )
        for code, message in restated.items():
            Annotations.of(self.cluster).acknowledge_warning(
                code, "the ready stack says it in its context keys"
            )
            Annotations.of(self).add_warning_v2(code, message)

    def _network(self, params: ClusterParams) -> tuple[ec2.IVpc, ec2.ISubnet, ec2.ISubnet | None]:
        """The existing VPC and subnets named by the context, or a new :class:`EfaNetwork`."""
        self.network: EfaNetwork | None = None
        if not (params.vpc_id and params.subnet_id and params.availability_zone):
            self.network = EfaNetwork(self, "Network", availability_zone=self.zone())
            return self.network.vpc, self.network.private_subnet, self.network.public_subnet
        return existing_network(
            self,
            vpc_id=params.vpc_id,
            availability_zone=params.availability_zone,
            subnet_id=params.subnet_id,
            public_subnet_id=params.public_subnet_id,
        )

    def _machine_image(self, params: ClusterParams) -> EfaMachineImage:
        """ami_id; else the default image read once (ami_refresh re-reads it); for a type with no
        default image (p3dn), an ImageId parameter that `cdk deploy` asks for."""
        if params.ami_id:
            return EfaMachineImage.from_ami_id(params.ami_id, os_family=OsFamily.parse(params.ami_family))
        it = params.catalogue_entry or instance_type(params.instance_type)
        if not EfaMachineImage.has_default(it):
            return EfaMachineImage.from_ami_id(
                image_id_parameter(self, it.name), os_family=OsFamily.parse(params.ami_family)
            )
        return EfaMachineImage.default_for(it, refresh=params.ami_refresh)

    def _outputs(self, params: ClusterParams) -> None:
        layout = self.cluster.layout
        if self.cluster.auto_scaling_group is not None:
            CfnOutput(
                self,
                "NodeGroupName",
                value=self.cluster.auto_scaling_group.auto_scaling_group_name,
                description="The nodes' Auto Scaling group (aws autoscaling describe-auto-scaling-groups "
                "--auto-scaling-group-names <name>); node 0's ~/hostfile lists every node",
            )
        else:
            CfnOutput(
                self,
                "NodePrivateIps",
                value=Fn.join(",", self.cluster.private_ips),
                description="Primary private IP of each node, in node order",
            )
            CfnOutput(
                self,
                "NodeInstanceIds",
                value=Fn.join(",", [n.instance_id for n in self.cluster.nodes]),
                description="Instance id of each node (aws ssm start-session --target <id>)",
            )
        CfnOutput(
            self,
            "Layout",
            value=(
                f"{layout.instance_type.name} {params.nic_layout.value}: {layout.efa_count} EFA/node, "
                f"{layout.ip_count} IP/node, {layout.efa_bandwidth_gbps:g} Gbps EFA line rate"
                + ("" if layout.line_rate_source == CARDS_SOURCE else f" (set by {layout.line_rate_source})")
            ),
        )
        self.capacity_block_output()
        CfnOutput(
            self,
            "EfaLineRateGbps",
            value=f"{layout.efa_bandwidth_gbps:g}",
            description="The nodes' EFA line rate in Gbps (efa-cdk status holds the benchmarks to it)",
        )
        CfnOutput(self, "SecurityGroupId", value=self.cluster.security_group.security_group_id)
        if self.lustre is not None:
            fs = self.lustre
            kept = "The FSx for Lustre file system (kept when the stack is deleted)"
            CfnOutput(self, "LustreFileSystemId", value=fs.file_system_id, description=kept)
            CfnOutput(
                self,
                "LustreMount",
                value=f"{fs.dns_name}@tcp:/{fs.mount_name} at {self.lustre.mount_dir}"
                + (" over EFA" if self.lustre.spec.efa else " over TCP"),
                description="Where every node mounts it, and over what",
            )
        if params.public_ip is not PublicIp.NONE:
            CfnOutput(
                self,
                "NodePublicIps",
                value=Fn.join(",", [ip or "-" for ip in self.cluster.public_ips]),
                description="Elastic IP of each node, in node order ('-': none); SSH needs -c ssh_peers=...",
            )
        self.cluster.benchmark_output(self)
        if self.cluster.monitoring is not None:
            self.cluster.monitoring.add_outputs(self)
