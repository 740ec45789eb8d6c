"""The EKS cluster an EFA node group joins, of either of aws-cdk-lib's modules (``aws_eks_v2`` or
``aws_eks``): its module, its security group, whether CDK can reach its Kubernetes API (kubectl), and
what is made once per cluster.
"""

from __future__ import annotations

from types import ModuleType

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks as eks_v1
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from ..core.errors import EfaConfigError

#: A cluster of either EKS module, and the enums and structs either module's node group takes.
#: (The ``Cluster`` classes are named too: neither has every property of its module's ``ICluster``,
#: e.g. ``aws_eks_v2.Cluster`` lacks ``kubectl_provider_options``, so mypy would refuse them as such.)
AnyCluster = eks.ICluster | eks.Cluster | eks_v1.ICluster | eks_v1.Cluster


AnyAmiType = eks.NodegroupAmiType | eks_v1.NodegroupAmiType


AnyTaint = eks.TaintSpec | eks_v1.TaintSpec


def eks_module(cluster: AnyCluster) -> ModuleType:
    """The aws-cdk-lib module `cluster` comes from: ``aws_eks_v2`` or ``aws_eks``.

    Told by the interface's own members (a cluster imported with ``from_cluster_attributes`` is a
    jsii proxy of no module): only ``aws_eks_v2`` clusters have ``kubectl_provider_options``, only
    ``aws_eks`` ones ``awscli_layer``."""
    if isinstance(cluster, eks.Cluster) or hasattr(cluster, "kubectl_provider_options"):
        return eks
    if isinstance(cluster, eks_v1.Cluster) or hasattr(cluster, "awscli_layer"):
        return eks_v1
    raise EfaConfigError(
        "cluster",
        code="efa-cdk:eks-not-a-cluster",
        value=type(cluster).__name__,
        why="it is not an EKS cluster of aws-cdk-lib's aws_eks_v2 or aws_eks module",
        fix="pass an aws_eks_v2.Cluster or aws_eks.Cluster, or one imported with from_cluster_attributes",
    )


def _cluster_security_group(cluster: AnyCluster) -> ec2.ISecurityGroup:
    """The cluster's security group, which every interface carries (an imported cluster must name it)."""
    try:
        return cluster.cluster_security_group
    except RuntimeError:  # aws-cdk-lib: ClusterSecurityGroupDefinedImported
        raise EfaConfigError(
            "cluster",
            code="efa-cdk:eks-imported-without-security-group",
            value=cluster.node.path,
            why="the imported cluster names no cluster security group, and EKS nodes whose launch template "
            "names security groups need it beside the EFA group (EKS user guide, 'Customize managed nodes "
            "with launch templates')",
            fix="import it with cluster_security_group_id=... (aws eks describe-cluster --query "
            "cluster.resourcesVpcConfig.clusterSecurityGroupId)",
        ) from None


def _kubectl_ready(cluster: AnyCluster, module: ModuleType) -> bool:
    """Whether CDK can install a Helm chart on `cluster`: an ``aws_eks`` Cluster always can (it makes its
    own kubectl handler); an imported one needs its kubectl role or provider; ``aws_eks_v2`` needs the
    kubectl provider, which is optional there."""
    if module is eks_v1:
        return isinstance(cluster, eks_v1.Cluster) or any(
            getattr(cluster, a, None) is not None for a in ("kubectl_provider", "kubectl_role")
        )
    return getattr(cluster, "kubectl_provider", None) is not None


def _check_kubectl(
    cluster: AnyCluster,
    module: ModuleType,
    which: str,
    what: str = "the device plugins are Helm charts",
    instead: str = "pass device_plugin=False and install the plugins yourself",
    value: object = True,
) -> None:
    """What this construct installs on the cluster (charts, manifests) goes through its kubectl provider."""
    if _kubectl_ready(cluster, module):
        return
    raise EfaConfigError(
        which,
        code="efa-cdk:eks-no-kubectl-provider",
        value=value,
        why=f"{what}, and the cluster {cluster.node.path} has no kubectl provider to install them with",
        fix=(
            "create the cluster with kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=...)"
            if module is eks
            else "import the cluster with kubectl_role_arn=... (or kubectl_provider=...)"
        )
        + f", or {instead}",
    )


def _per_cluster(cluster: AnyCluster, id_: str) -> tuple[Construct, str]:
    """Where a construct made once per cluster goes: `id_` under the cluster; an imported cluster is a jsii
    proxy Python cannot scope under: ``<cluster id><id_>`` beside it."""
    if isinstance(cluster, Construct):
        return cluster, id_
    return Stack.of(cluster), f"{cluster.node.id}{id_}"
