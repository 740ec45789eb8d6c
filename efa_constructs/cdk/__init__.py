"""The CDK constructs of efa-cdk. Importing this module loads ``aws_cdk`` (starts Node).

Each construct translates decisions of :mod:`efa_constructs.core` into CloudFormation; its main
child has the id ``Resource``. Construct ids are part of the public contract: renaming one
replaces the resource in a user's account (the snapshot tests show it).
"""

from __future__ import annotations

from .cluster import EfaCluster
from .eks import EfaNodegroup
from .launch_template import EfaLaunchTemplate
from .lustre import EfaLustreFileSystem
from .machine_image import EfaMachineImage, ImageReadOnce, OsFamily
from .network import EfaNetwork
from .node import EfaAutoScalingGroup, EfaNode, NodePublicAddress
from .node_software import BenchmarkReport, NodeSoftware, NodeSoftwareInstallation
from .options import (
    NodeOptions,
    NodeTemplateOptions,
    ParallelClusterOptions,
    PcsClusterOptions,
    StorageOptions,
)
from .parallel_cluster import EfaParallelCluster
from .pcs import EfaPcsCluster
from .security_group import EfaSecurityGroup, ssh_peer
from .storage import EfaSharedStorage

__all__ = [
    "BenchmarkReport",
    "EfaAutoScalingGroup",
    "EfaCluster",
    "EfaLaunchTemplate",
    "EfaLustreFileSystem",
    "EfaMachineImage",
    "EfaNetwork",
    "EfaNode",
    "EfaNodegroup",
    "EfaParallelCluster",
    "EfaPcsCluster",
    "EfaSecurityGroup",
    "EfaSharedStorage",
    "ImageReadOnce",
    "NodeOptions",
    "NodePublicAddress",
    "NodeSoftware",
    "NodeSoftwareInstallation",
    "NodeTemplateOptions",
    "OsFamily",
    "ParallelClusterOptions",
    "PcsClusterOptions",
    "StorageOptions",
    "ssh_peer",
]
