"""efa-cdk: AWS CDK constructs for EC2 clusters wired for Elastic Fabric Adapter (EFA).

The pure core (no jsii, importable without Node): :mod:`.catalogue` (instance facts) and
:mod:`.layout` (which interface goes on which card). The constructs translate those decisions
into CloudFormation; importing them starts the CDK's Node process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import EfaConfigError

__version__ = "0.1.0"

# The constructs import aws_cdk (a Node process, seconds); load them only when first used so
# `python -m efa_constructs layout ...` and the pure core stay fast.
_LAZY = {
    "EfaSecurityGroup": ".security_group",
    "InternetEgress": ".security_group",
    "EfaLaunchTemplate": ".launch_template",
    "EfaMachineImage": ".machine_image",
    "EfaCluster": ".cluster",
    "PublicIp": ".cluster",
    "NodeGroup": ".cluster",
    "EfaNetwork": ".network",
}

__all__ = [
    "Benchmark",
    "Capacity",
    "EfaCluster",
    "EfaConfigError",
    "EfaInstaller",
    "EfaLaunchTemplate",
    "EfaMachineImage",
    "EfaNetwork",
    "EfaSecurityGroup",
    "EfaUserData",
    "InternetEgress",
    "LayoutMode",
    "NetworkInterfaceSpec",
    "NicLayout",
    "NodeGroup",
    "PublicIp",
    "instance_type",
    "plan_layout",
]

from .capacity import Capacity  # noqa: E402
from .catalogue import instance_type  # noqa: E402
from .layout import LayoutMode, NetworkInterfaceSpec, NicLayout, plan_layout  # noqa: E402
from .node_software import Benchmark, EfaInstaller, EfaUserData  # noqa: E402

if TYPE_CHECKING:
    from .cluster import EfaCluster, NodeGroup, PublicIp
    from .launch_template import EfaLaunchTemplate
    from .machine_image import EfaMachineImage
    from .network import EfaNetwork
    from .security_group import EfaSecurityGroup, InternetEgress


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
