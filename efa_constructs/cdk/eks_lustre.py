"""FSx for Lustre on EKS: the CSI driver's chart and a static PersistentVolume and claim per file system, once
per cluster (kubernetes-sigs/aws-fsx-csi-driver; the EKS guide "fsx-csi-tuning-efa").
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

from constructs import Construct

from ..core.errors import EfaConfigError
from .eks_cluster import AnyCluster, _check_kubectl, _per_cluster, eks_module
from .lustre import EfaLustreFileSystem

#: The FSx for Lustre CSI driver's Helm chart (kubernetes-sigs/aws-fsx-csi-driver: docs/install.md names the
#: repository; charts/aws-fsx-csi-driver/Chart.yaml 1.17.0, driver image v1.9.0, 2026-04-21). Its node plugin
#: mounts a PersistentVolume's file system as ``<dnsname>@tcp:/<mountname>`` (pkg/driver/node.go); over EFA
#: when the node's LNet has an efa network (EKS user guide, "fsx-csi-tuning-efa").
FSX_CSI_CHART = (
    "FsxCsiDriver",
    "https://kubernetes-sigs.github.io/aws-fsx-csi-driver",
    "aws-fsx-csi-driver",
    "1.17.0",
)


#: The driver a PersistentVolume names (the chart's csidriver.yaml; the static provisioning example).
FSX_CSI_DRIVER = "fsx.csi.aws.com"


#: A Kubernetes object's name: a DNS-1123 label (Kubernetes, "Object Names and IDs").
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _check_lustre(
    cluster: AnyCluster, module: ModuleType, lustre: EfaLustreFileSystem, claim: str, namespace: str
) -> None:
    """What a node group's mount of `lustre` needs on EKS: an AMI with what it asks, the kubectl provider, a
    claim name Kubernetes takes (the client rules, its zone among them, are the node rules')."""
    if lustre.spec.gds:
        raise EfaConfigError(
            "lustre",
            code="efa-cdk:eks-lustre-gds",
            value=lustre.node.path,
            why="the EKS-optimized AMIs carry no GPUDirect Storage driver or tools (the request for them, "
            "awslabs/amazon-eks-ami#2181, is open)",
            fix="give the node group a file system made with gds=False: its pods read and write over EFA",
        )
    what = "the FSx for Lustre CSI driver is a Helm chart and its volume a manifest"
    _check_kubectl(
        cluster, module, "lustre", what, "leave lustre out and mount it yourself", cluster.node.path
    )
    _check_claim(claim, namespace)


def _check_claim(claim: str, namespace: str) -> None:
    for which, name in (("lustre_claim", claim), ("lustre_namespace", namespace)):
        if not _DNS_LABEL.fullmatch(name):
            raise EfaConfigError(
                which,
                code="efa-cdk:eks-lustre-claim-name",
                value=name,
                why="a Kubernetes claim's name and namespace are DNS-1123 labels: at most 63 lowercase "
                "letters, digits and '-', starting and ending with a letter or digit",
                fix="pass a name like 'fsx' or 'training-data'",
            )


def lustre_volume_manifests(
    claim: str, namespace: str, capacity_gib: int, file_system_id: str, dns_name: str, mount_name: str
) -> list[dict[str, Any]]:
    """A file system made outside Kubernetes as a PersistentVolume of the FSx CSI driver, and the claim bound
    to it (static provisioning: the driver's examples/kubernetes/static_provisioning; EKS user guide,
    "fsx-csi-tuning-efa"). Retained: deleting the claim keeps the file system's data (the examples' Recycle is
    for volumes Kubernetes made); the claim and volume name each other, so no other claim takes it."""
    volume = f"efa-cdk-{namespace}-{claim}"  # volumes are cluster-wide, claims per namespace
    size = {"storage": f"{capacity_gib}Gi"}
    modes = ["ReadWriteMany"]
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {
                "capacity": size,
                "volumeMode": "Filesystem",
                "accessModes": modes,
                "mountOptions": ["flock"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "claimRef": {"namespace": namespace, "name": claim},
                "csi": {
                    "driver": FSX_CSI_DRIVER,
                    "volumeHandle": file_system_id,
                    "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {
                "accessModes": modes,
                "storageClassName": "",
                "resources": {"requests": size},
                "volumeName": volume,
            },
        },
    ]


class _LustreVolume(Construct):
    """The volume and claim of one file system on one cluster (``Resource``: the manifest)."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        cluster: AnyCluster,
        lustre: EfaLustreFileSystem,
        claim: str,
        namespace: str,
    ) -> None:
        super().__init__(scope, id_)
        self.file_system = lustre
        manifests = lustre_volume_manifests(
            claim,
            namespace,
            lustre.spec.capacity_gib,
            lustre.file_system_id,
            lustre.dns_name,
            lustre.mount_name,
        )
        eks_module(cluster).KubernetesManifest(self, "Resource", cluster=cluster, manifest=manifests)


def _lustre_volume(cluster: AnyCluster, lustre: EfaLustreFileSystem, claim: str, namespace: str) -> None:
    """The claim `namespace`/`claim` of `lustre` on `cluster`, made once (node groups share it); refused when
    the cluster's claim of that name is another file system's."""
    scope, id_ = _per_cluster(cluster, f"LustreVolume-{namespace}-{claim}")
    existing = scope.node.try_find_child(id_)
    if existing is None:
        _LustreVolume(scope, id_, cluster, lustre, claim, namespace)
    elif not isinstance(existing, _LustreVolume) or existing.file_system is not lustre:
        raise EfaConfigError(
            "lustre_claim",
            code="efa-cdk:eks-lustre-claim-taken",
            value=f"{namespace}/{claim}",
            why="the cluster already has a claim of that name for another file system "
            f"({getattr(existing, 'file_system', existing).node.path})",
            fix="give each file system its own lustre_claim",
        )
