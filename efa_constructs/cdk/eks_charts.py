"""The Helm charts an EFA node group needs on its cluster (the EFA device plugin, the accelerators'), once per
cluster, and the registry tables EKS's add-on images come from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack, Token
from aws_cdk import aws_eks as eks_v1
from aws_cdk import aws_eks_v2 as eks

from ..core.catalogue import AcceleratorKind, all_instance_types
from .eks_cluster import AnyCluster, _per_cluster, eks_module

#: eks-charts' EFA device plugin (aws/eks-charts stable/aws-efa-k8s-device-plugin/Chart.yaml).
DEVICE_PLUGIN_CHART = "aws-efa-k8s-device-plugin"
DEVICE_PLUGIN_VERSION = "v0.5.30"
DEVICE_PLUGIN_REPOSITORY = "https://aws.github.io/eks-charts"


#: The extended resource a pod requests EFA devices with (the chart's README).
EFA_RESOURCE = "vpc.amazonaws.com/efa"


@dataclass(frozen=True)
class DevicePluginChart:
    """A device plugin's Helm chart, installed once per cluster (``<id>`` under the cluster)."""

    id: str
    repository: str
    chart: str
    version: str
    namespace: str
    values: Mapping[str, Any]


#: The accelerators' device plugins as the EKS user guide installs them ("Install Kubernetes device plugin
#: for GPUs": the NVIDIA chart 0.17.4 with GPU feature discovery into `nvidia`; the Neuron chart with the
#: node problem detector off). The guide leaves the Neuron chart unpinned: 1.10.0 is the tag helm pulled
#: from public.ecr.aws/neuron/neuron-helm-chart as the latest in September 2026 (device plugin 2.32.0.0).
#: Without it a pod asking for aws.amazon.com/neuron or nvidia.com/gpu stays Pending.
ACCELERATOR_PLUGINS = {
    AcceleratorKind.NEURON: DevicePluginChart(
        "NeuronDevicePlugin", "oci://public.ecr.aws/neuron/neuron-helm-chart", "neuron-helm-chart", "1.10.0",
        "kube-system", {"npd": {"enabled": False}},
    ),
    AcceleratorKind.NVIDIA_GPU: DevicePluginChart(
        "NvidiaDevicePlugin", "https://nvidia.github.io/k8s-device-plugin", "nvidia-device-plugin", "0.17.4",
        "nvidia", {"gfd": {"enabled": True}},
    ),
}  # fmt: skip


#: The registry of EKS's add-on images per region where it is not account 602401143452 (EKS user guide,
#: "View Amazon container image registries for Amazon EKS add-ons": its table, two stored copies read;
#: ap-southeast-5/6/7 from the newer one, the European, Middle East, Canada West, China and GovCloud
#: rows from the other, issue 41); the EFA device plugin's image is pulled from the cluster's own region,
#: so nodes reach it through the region's ECR endpoint.
_ADDON_REGISTRY_ACCOUNTS = {
    "af-south-1": "877085696533", "ap-east-1": "800184023465", "ap-southeast-3": "296578399912",
    "ap-south-2": "900889452093", "ap-southeast-4": "491585149902", "ap-southeast-5": "151610086707",
    "ap-southeast-6": "333609536671", "ap-southeast-7": "121268973566", "ca-west-1": "761377655185",
    "eu-central-2": "900612956339", "eu-south-1": "590381155156", "eu-south-2": "455263428931",
    "il-central-1": "066635153087", "me-south-1": "558608220178", "me-central-1": "759879836304",
    "cn-north-1": "918309763551", "cn-northwest-1": "961992271922", "us-gov-east-1": "151742754352",
    "us-gov-west-1": "013241004608",
}  # fmt: skip


#: Regions under 602401143452 on the same page (the Asia Pacific rows were read in its stored copy; the US,
#: Canada, South America and first European regions are the account's long-standing home, the chart's
#: default among them). A region in neither table keeps the chart's default image.
_ADDON_REGISTRY_DEFAULT_REGIONS = frozenset(
    {"us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1", "eu-west-1",
     "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1", "ap-south-1", "ap-northeast-1",
     "ap-northeast-2", "ap-northeast-3", "ap-southeast-1", "ap-southeast-2"}
)  # fmt: skip


def addon_registry(region: str) -> str | None:
    """EKS's add-on image registry in `region`, or None where the page lists none (the chart's default,
    us-west-2's, then applies)."""
    if region in _ADDON_REGISTRY_ACCOUNTS:
        suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"  # China's domain
        return f"{_ADDON_REGISTRY_ACCOUNTS[region]}.dkr.ecr.{region}.{suffix}"
    if region in _ADDON_REGISTRY_DEFAULT_REGIONS:
        return f"602401143452.dkr.ecr.{region}.amazonaws.com"
    return None


def cluster_chart(cluster: AnyCluster, spec: DevicePluginChart) -> eks.HelmChart | eks_v1.HelmChart:
    """The chart `spec` on `cluster`, created once (``<spec.id>`` under the cluster, or
    ``<cluster id><spec.id>`` beside an imported one) and shared by every node group of the cluster."""
    module = eks_module(cluster)
    scope, id_ = _per_cluster(cluster, spec.id)
    existing = scope.node.try_find_child(id_)
    if isinstance(existing, (eks.HelmChart, eks_v1.HelmChart)):
        return existing
    chart: eks.HelmChart | eks_v1.HelmChart = module.HelmChart(
        scope,
        id_,
        cluster=cluster,
        chart=spec.chart,
        repository=spec.repository,
        version=spec.version,
        namespace=spec.namespace,
        values=dict(spec.values),
    )
    return chart


def efa_device_plugin(cluster: AnyCluster) -> eks.HelmChart | eks_v1.HelmChart:
    """The EFA device plugin of `cluster` (``EfaDevicePlugin``), on every EFA type the catalogue knows
    instead of the chart's own list, its image from the cluster's region where EKS lists a registry."""
    values: dict[str, Any] = {
        "supportedInstanceLabels": {
            "keys": ["node.kubernetes.io/instance-type"],
            "values": sorted(all_instance_types()),
        },
        # A device plugin must run on every EFA node, tainted or not (GPU nodes often are).
        "tolerations": [{"operator": "Exists"}],
    }
    region = Stack.of(cluster).region
    registry = None if Token.is_unresolved(region) else addon_registry(region)
    if registry is not None:
        values["image"] = {"repository": f"{registry}/eks/aws-efa-k8s-device-plugin"}
    spec = DevicePluginChart(
        "EfaDevicePlugin",
        DEVICE_PLUGIN_REPOSITORY,
        DEVICE_PLUGIN_CHART,
        DEVICE_PLUGIN_VERSION,
        "kube-system",
        values,
    )
    return cluster_chart(cluster, spec)
