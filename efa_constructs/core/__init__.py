"""The pure core of efa-cdk: facts and decisions as plain Python (no CDK, no Node, no AWS).

Importing anything here never loads ``aws_cdk``; a test proves it. The constructs in
:mod:`efa_constructs.cdk` only translate these decisions into CloudFormation.
"""

from __future__ import annotations

from .benchmarks import Benchmark
from .capacity import Capacity, CapacityKind
from .catalogue import InstanceType, all_instance_types, instance_type
from .containers import ContainerRun
from .errors import EfaConfigError, refusals_in_one_line
from .layout import Layout, LayoutMode, NetworkInterfaceSpec, NicLayout, plan_layout
from .node_plan import NodePlan
from .options import InternetEgress, NodeGroup, PublicIp, parse_ssh_source
from .pcs import PcsClusterSize
from .software import EfaInstaller, EfaUserData

#: The package version: the one place it is written (pyproject.toml reads it from here).
__version__ = "0.2.0"

__all__ = [
    "Benchmark",
    "Capacity",
    "CapacityKind",
    "ContainerRun",
    "EfaConfigError",
    "EfaInstaller",
    "EfaUserData",
    "InstanceType",
    "InternetEgress",
    "Layout",
    "LayoutMode",
    "NetworkInterfaceSpec",
    "NicLayout",
    "NodeGroup",
    "NodePlan",
    "PcsClusterSize",
    "PublicIp",
    "__version__",
    "all_instance_types",
    "instance_type",
    "parse_ssh_source",
    "plan_layout",
    "refusals_in_one_line",
]
