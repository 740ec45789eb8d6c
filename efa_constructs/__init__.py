"""efa-cdk: AWS CDK constructs for EC2 clusters wired for Elastic Fabric Adapter (EFA).

Three layers, one folder each:

* :mod:`efa_constructs.core`: the pure core (instance catalogue, layout engine, capacity, node
  software builder, ParallelCluster config model, the checks). Plain Python: importing it never
  loads ``aws_cdk`` (no Node process).
* :mod:`efa_constructs.cdk`: the CDK constructs, which translate the core's decisions into
  CloudFormation. Importing them starts the CDK's Node process.
* ``efa_constructs/node``: the files that run on the nodes (boot steps, ParallelCluster hooks,
  Slurm job templates, the benchmark parser), shipped as package data.

Everything public is importable from here; the constructs load on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .core import (
    Benchmark,
    Capacity,
    ContainerRun,
    EfaConfigError,
    EfaInstaller,
    EfaUserData,
    InternetEgress,
    LayoutMode,
    NetworkInterfaceSpec,
    NicLayout,
    NodeGroup,
    PcsClusterSize,
    PublicIp,
    __version__,
    instance_type,
    plan_layout,
)

#: The constructs import aws_cdk (a Node process, seconds): loaded only when first used, so
#: `python -m efa_constructs layout ...` and the pure core stay fast.
_CONSTRUCTS = (
    "BenchmarkReport",
    "EfaCluster",
    "EfaLaunchTemplate",
    "EfaMachineImage",
    "EfaNetwork",
    "EfaNode",
    "EfaNodeGroup",
    "EfaNodegroup",
    "EfaParallelCluster",
    "EfaPcsCluster",
    "EfaSecurityGroup",
    "EfaSharedStorage",
    "ImageReadOnce",
    "NodePublicAddress",
    "NodeSoftwareInstallation",
    "OsFamily",
)

__all__ = [
    "Benchmark",
    # constructs (loaded on first use)
    "BenchmarkReport",
    "Capacity",
    "ContainerRun",
    "EfaCluster",
    "EfaConfigError",
    "EfaInstaller",
    "EfaLaunchTemplate",
    "EfaMachineImage",
    "EfaNetwork",
    "EfaNode",
    "EfaNodeGroup",
    "EfaNodegroup",
    "EfaParallelCluster",
    "EfaPcsCluster",
    "EfaSecurityGroup",
    "EfaSharedStorage",
    "EfaUserData",
    "ImageReadOnce",
    "InternetEgress",
    "LayoutMode",
    "NetworkInterfaceSpec",
    "NicLayout",
    "NodeGroup",
    "NodePublicAddress",
    "NodeSoftwareInstallation",
    "OsFamily",
    "PcsClusterSize",
    "PublicIp",
    "__version__",
    "instance_type",
    "plan_layout",
]

if TYPE_CHECKING:
    from .cdk import (
        BenchmarkReport,
        EfaCluster,
        EfaLaunchTemplate,
        EfaMachineImage,
        EfaNetwork,
        EfaNode,
        EfaNodeGroup,
        EfaParallelCluster,
        EfaSecurityGroup,
        EfaSharedStorage,
        ImageReadOnce,
        NodePublicAddress,
        NodeSoftwareInstallation,
        OsFamily,
    )


def __getattr__(name: str) -> Any:
    if name in _CONSTRUCTS:
        return getattr(import_module(".cdk", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
