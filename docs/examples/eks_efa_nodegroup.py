#!/usr/bin/env python3
"""Example: EFA nodes in your own EKS cluster (aws-cdk-lib's ``aws_eks_v2``) with ``EfaNodegroup``.

Synthesize it offline (CI does, in tests/test_eks.py):

    npx cdk synth --app "scripts/cdk-app docs/examples/eks_efa_nodegroup.py" -c zones=us-east-1c,us-east-1d

The cluster's API endpoint answers the internet only from ``-c admin_cidr=<your address>/32``; without it,
only from inside the VPC (CDK's kubectl handler runs there either way). Control-plane logs go to
CloudWatch Logs. The pods' AWS access is a pod role (EKS Pod Identity, service account ``trainer``), not
the node role every pod on a node would share.

It needs ``aws-cdk.lambda-layer-kubectl-v35`` (the kubectl the cluster's Helm charts are installed
with): ``pip install 'efa-cdk[eks]'``. A pod asks for EFA devices with the ``vpc.amazonaws.com/efa``
resource; see the README's EKS section for a job and for teardown.
"""

from __future__ import annotations

import sys

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from constructs import Construct

try:  # kubectl for the cluster's Helm charts: efa-cdk's `eks` extra
    from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer
except ModuleNotFoundError:
    sys.exit("error: this example needs aws-cdk.lambda-layer-kubectl-v35: pip install 'efa-cdk[eks]'")

from efa_constructs.cdk import EfaNodegroup


class EksEfaStack(cdk.Stack):
    """A VPC, an EKS 1.35 cluster, and two trn1.32xlarge EFA nodes in one Availability Zone."""

    def __init__(
        self, scope: Construct, id_: str, *, zones: list[str], admin_cidr: str | None, **kwargs: object
    ) -> None:
        super().__init__(scope, id_, **kwargs)  # type: ignore[arg-type]
        # Stock cfn-lint warns on two things aws-cdk-lib itself writes here: W3005, the explicit
        # DependsOn its eks.Cluster and custom-resource providers add next to a Ref; W3010, the zones
        # this VPC names on purpose (EFA nodes live in one chosen zone).
        self.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005", "W3010"]}})
        # EKS's control plane needs subnets in two zones; the EFA nodes use the first one's.
        vpc = ec2.Vpc(self, "Vpc", availability_zones=zones, nat_gateways=1)
        cluster = eks.Cluster(
            self,
            "Cluster",
            version=eks.KubernetesVersion.V1_35,
            vpc=vpc,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,  # managed node groups, not Auto Mode
            default_capacity=0,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=KubectlV35Layer(self, "Kubectl")
            ),
            # The API from your address only (or from the VPC only); the kubectl handler is in the VPC.
            endpoint_access=eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(admin_cidr)
            if admin_cidr
            else eks.EndpointAccess.PRIVATE,
            cluster_logging=[
                eks.ClusterLoggingTypes.API,
                eks.ClusterLoggingTypes.AUDIT,
                eks.ClusterLoggingTypes.AUTHENTICATOR,
                eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
                eks.ClusterLoggingTypes.SCHEDULER,
            ],
        )
        subnet = vpc.select_subnets(
            subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, availability_zones=zones[:1]
        ).subnets[0]
        trainers = EfaNodegroup(
            self,
            "Trainers",
            cluster=cluster,
            instance_type=ec2.InstanceType("trn1.32xlarge"),
            subnet=subnet,
            min_size=0,
            desired_size=2,
            max_size=4,
        )
        # The pods' AWS access: a role for the `trainer` service account (EKS Pod Identity), not the node
        # role, which every pod on the node would share. (The node group is IGrantable too: its role.)
        trainer = cluster.add_service_account(
            "Trainer", name="trainer", identity_type=eks.IdentityType.POD_IDENTITY
        )
        checkpoints = s3.Bucket(self, "Checkpoints", enforce_ssl=True)
        checkpoints.grant_read_write(trainer)
        cdk.CfnOutput(self, "NodegroupName", value=trainers.nodegroup_name)


def build(app: cdk.App) -> cdk.App:
    """Add the example stack in the zones of the ``zones`` context key (two or more, comma-separated;
    the EFA nodes go in the first, which must offer trn1.32xlarge; default: us-east-1c,us-east-1d), its
    API endpoint open to ``admin_cidr`` (default: the VPC only)."""
    zones = str(app.node.try_get_context("zones") or "us-east-1c,us-east-1d").split(",")
    admin_cidr = app.node.try_get_context("admin_cidr")
    EksEfaStack(
        app, "EksEfaExample", zones=zones, admin_cidr=admin_cidr, env=cdk.Environment(region=zones[0][:-1])
    )
    return app


if __name__ == "__main__":
    build(cdk.App()).synth()
