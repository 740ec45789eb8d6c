# The public surface of efa_constructs, declared once. The package's __init__.py reads this file
# (lazy_loader.attach_stub) to build __all__ and the lazy loading; type checkers read it for the types.
# A name added here is public; tests/test_public_api.py proves each is typed and importable.
from .cdk import (
    BenchmarkReport as BenchmarkReport,
)
from .cdk import (
    EfaAutoScalingGroup as EfaAutoScalingGroup,
)
from .cdk import (
    EfaCluster as EfaCluster,
)
from .cdk import (
    EfaLaunchTemplate as EfaLaunchTemplate,
)
from .cdk import (
    EfaLustreFileSystem as EfaLustreFileSystem,
)
from .cdk import (
    EfaMachineImage as EfaMachineImage,
)
from .cdk import (
    EfaNetwork as EfaNetwork,
)
from .cdk import (
    EfaNode as EfaNode,
)
from .cdk import (
    EfaNodegroup as EfaNodegroup,
)
from .cdk import (
    EfaParallelCluster as EfaParallelCluster,
)
from .cdk import (
    EfaPcsCluster as EfaPcsCluster,
)
from .cdk import (
    EfaSecurityGroup as EfaSecurityGroup,
)
from .cdk import (
    EfaSharedStorage as EfaSharedStorage,
)
from .cdk import (
    ImageReadOnce as ImageReadOnce,
)
from .cdk import (
    NodeOptions as NodeOptions,
)
from .cdk import (
    NodePublicAddress as NodePublicAddress,
)
from .cdk import (
    NodeSoftware as NodeSoftware,
)
from .cdk import (
    NodeSoftwareInstallation as NodeSoftwareInstallation,
)
from .cdk import (
    NodeTemplateOptions as NodeTemplateOptions,
)
from .cdk import (
    OsFamily as OsFamily,
)
from .cdk import (
    ParallelClusterOptions as ParallelClusterOptions,
)
from .cdk import (
    PcsClusterOptions as PcsClusterOptions,
)
from .cdk import (
    StorageOptions as StorageOptions,
)
from .cdk import (
    ssh_peer as ssh_peer,
)
from .core import (
    Benchmark as Benchmark,
)
from .core import (
    Capacity as Capacity,
)
from .core import (
    CapacityKind as CapacityKind,
)
from .core import (
    ContainerRun as ContainerRun,
)
from .core import (
    EfaConfigError as EfaConfigError,
)
from .core import (
    EfaInstaller as EfaInstaller,
)
from .core import (
    EfaUserData as EfaUserData,
)
from .core import (
    InstanceType as InstanceType,
)
from .core import (
    InternetEgress as InternetEgress,
)
from .core import (
    Layout as Layout,
)
from .core import (
    LayoutMode as LayoutMode,
)
from .core import (
    NetworkInterfaceSpec as NetworkInterfaceSpec,
)
from .core import (
    NicLayout as NicLayout,
)
from .core import (
    NodeGroup as NodeGroup,
)
from .core import (
    NodePlan as NodePlan,
)
from .core import (
    PcsClusterSize as PcsClusterSize,
)
from .core import (
    PublicIp as PublicIp,
)
from .core import (
    __version__ as __version__,
)
from .core import (
    all_instance_types as all_instance_types,
)
from .core import (
    instance_type as instance_type,
)
from .core import (
    plan_layout as plan_layout,
)
from .core import (
    refusals_in_one_line as refusals_in_one_line,
)
