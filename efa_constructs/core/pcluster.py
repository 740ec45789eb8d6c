"""A ParallelCluster 3.x configuration model in pure Python, rendered to the cluster YAML.

EFA settings come from the instance catalogue; every rule ParallelCluster would reject late (or
silently get wrong, like EFA across subnets) is checked when the model is built. Ids may be CDK
tokens: the stack renders the YAML into an output whose ids are resolved at deploy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .catalogue import InstanceType
from .catalogue import instance_type as lookup
from .errors import EfaConfigError
from .node_rules import AT_DEPLOY, NodeRequest, node_rule, run_node_rules
from .options import DEFAULT_MAX_COUNT, DEFAULT_MIN_COUNT
from .pcluster_rules import _check_name, _check_topology_tree, _check_unique

#: The ParallelCluster version the configuration targets (its header, the custom-resource provider's
#: template): 3.16.3, released 2026-11-17 (aws/aws-parallelcluster GitHub release v3.16.3; it pins EFA
#: installer 1.51.0, as this library does).
PCLUSTER_VERSION = "3.16.3"
#: The version whose schema the tests load configurations in: the newest on PyPI when last checked
#: (3.16.1 on 2026-11-23; 3.16.2 and 3.16.3 are GitHub releases whose notes change no configuration key).
PCLUSTER_SCHEMA_VERSION = "3.16.1"
#: The head node's type when none is given: it runs Slurm's controller, not the training.
DEFAULT_HEAD_NODE_TYPE = "c5.2xlarge"
#: Image.Os values ParallelCluster 3.16 accepts.
SUPPORTED_OS = ("alinux2023", "ubuntu2204", "ubuntu2404", "rhel8", "rhel9", "rocky8", "rocky9")
#: Values older versions accepted, with the version's reason for refusing them.
RETIRED_OS = {"alinux2": "Amazon Linux 2 is no longer supported", "centos7": "CentOS 7 reached end of life"}
_MOUNT = re.compile(r"^/[A-Za-z0-9_./-]+$")


@dataclass(frozen=True)
class ComputeResource:
    """Instances of one kind in a queue.

    Args:
        name: lowercase letters, digits and '-' (ParallelCluster names it in Slurm node names).
        instance_types: one type, or several (flexible compute) with the same EFA card layout.
        min_count: static nodes, always running. max_count: static + dynamic nodes; a string: a value known
            at deploy (a CloudFormation reference, with min_count 0), written into the configuration as is.
        efa: enable EFA. Default: when every type supports it (from the catalogue).
        capacity_reservation_id: an On-Demand Capacity Reservation or Capacity Block (``cr-...``).
        catalogue: the catalogue's records of `instance_types`, when the caller has them (used as given,
            as the constructs use a record passed as ``instance_type``); else each is looked up.
    """

    name: str
    instance_types: tuple[str, ...]
    min_count: int | str = DEFAULT_MIN_COUNT
    max_count: int | str = DEFAULT_MAX_COUNT
    efa: bool | None = None
    capacity_reservation_id: str | None = None
    catalogue: tuple[InstanceType, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_name("compute resource name", self.name)
        if not self.instance_types:
            raise EfaConfigError(
                "instance_types",
                code="efa-cdk:pcluster-compute-without-type",
                value=[],
                why="a compute resource needs an instance type",
                fix="pass one",
            )
        if self.catalogue and [t.name for t in self.catalogue] != list(self.instance_types):
            raise EfaConfigError(
                "catalogue",
                code="efa-cdk:pcluster-catalogue-of-other-types",
                value=[t.name for t in self.catalogue],
                why=f"the records are not those of instance_types {list(self.instance_types)}",
                fix="pass the records of instance_types, in their order (or none: they are looked up)",
            )
        types = self.types  # unknown / non-EFA types fail here
        self._check_counts(types[0])
        layouts = {(len(t.network_cards), t.max_efa_interfaces) for t in types}
        if self.efa_enabled and len(layouts) > 1:
            raise EfaConfigError(
                "instance_types",
                code="efa-cdk:pcluster-types-of-different-layouts",
                value=list(self.instance_types),
                why="an EFA compute resource launches one launch template; these types have different "
                "network cards / EFA counts "
                + ", ".join(f"{t.name}: {len(t.network_cards)}/{t.max_efa_interfaces}" for t in types),
                fix="put each card layout in its own compute resource",
            )

    def _check_counts(self, it: InstanceType) -> None:
        """The register's one count rule (``core/node_rules.py``); a MaxCount known at deploy goes with a
        MinCount of 0 (the dynamic nodes' names count MaxCount - MinCount)."""
        if isinstance(self.min_count, str) or (isinstance(self.max_count, str) and self.min_count != 0):
            shown = {
                k: AT_DEPLOY if isinstance(v, str) else v
                for k, v in (("MinCount", self.min_count), ("MaxCount", self.max_count))
            }
            raise EfaConfigError(
                "min_count" if isinstance(self.min_count, str) else "max_count",
                code="efa-cdk:pcluster-count-at-deploy",
                value=" ".join(f"{k}={v}" for k, v in shown.items()),
                why="ParallelCluster names the dynamic nodes [1-(MaxCount - MinCount)], which the "
                "configuration cannot compute from a value known at deploy",
                fix="set min_count=0 with a max_count known at deploy, or pass both as numbers",
            )
        counts = NodeRequest(
            "EfaParallelCluster",
            it,
            self.max_count if isinstance(self.max_count, int) else None,
            "max_count",
            min_count=int(self.min_count),
            min_name="min_count",
        )
        run_node_rules(counts, rules=(node_rule("efa-cdk:node-counts"),))

    @property
    def types(self) -> list[InstanceType]:
        """Catalogue entries of the instance types."""
        return list(self.catalogue) or [lookup(t) for t in self.instance_types]

    @property
    def efa_enabled(self) -> bool:
        """EFA is on unless switched off (every type here supports it: the catalogue checked)."""
        return True if self.efa is None else self.efa

    def slurm_nodes(self, queue: str) -> list[str]:
        """The Slurm node names ParallelCluster gives this resource's nodes in `queue`, as hostlist
        expressions: ``<queue>-st-<name>-[1-<MinCount>]`` for static nodes and
        ``<queue>-dy-<name>-[1-<MaxCount - MinCount>]`` for dynamic ones (ParallelCluster's cookbook,
        head_node_slurm/slurm/config_renderer.py, ``ComputeResourceRenderer._node_name``)."""
        dynamic = self.max_count - int(self.min_count) if isinstance(self.max_count, int) else self.max_count
        counts = (("st", self.min_count), ("dy", dynamic))
        return [f"{queue}-{kind}-{self.name}-[1-{n}]" for kind, n in counts if isinstance(n, str) or n > 0]

    def to_dict(self) -> dict[str, Any]:
        """The ParallelCluster ``ComputeResources`` entry."""
        out: dict[str, Any] = {"Name": self.name}
        if len(self.instance_types) == 1:
            out["InstanceType"] = self.instance_types[0]
        else:
            out["Instances"] = [{"InstanceType": t} for t in self.instance_types]
        out.update(MinCount=self.min_count, MaxCount=self.max_count, Efa={"Enabled": self.efa_enabled})
        if self.capacity_reservation_id:
            out["CapacityReservationTarget"] = {"CapacityReservationId": self.capacity_reservation_id}
        return out


@dataclass(frozen=True)
class SlurmQueue:
    """A Slurm partition: compute resources in ONE subnet, in a placement group when EFA is on.

    Args:
        name: queue (partition) name.
        subnet_ids: the compute subnet. Several are refused with EFA (EFA does not cross subnets).
        compute_resources: what the queue launches.
        use_placement_group: False writes ``PlacementGroup: {Enabled: false}`` (a Capacity Reservation
            made without a placement group, or a Capacity Block: EC2 places those instances).
            Default: True.
        placement_group: name of an existing cluster placement group; None lets ParallelCluster
            manage one (when EFA is on).
        security_group_ids: extra security groups on the compute nodes (the EFA group).
        on_node_configured: URL of a script every compute node runs at the end of its setup.
        on_node_configured_args: its arguments.
        on_node_start: URL of a script every compute node runs before ParallelCluster's own setup (its
            mounts among it: ParallelCluster user guide, "Custom bootstrap actions"). on_node_start_args: its
            arguments.
        s3_read: ``(bucket, key)`` pairs the compute nodes may read (the bootstrap script).
        capacity_type: ``ONDEMAND``, ``SPOT`` or ``CAPACITY_BLOCK``.
    """

    name: str
    subnet_ids: tuple[str, ...]
    compute_resources: tuple[ComputeResource, ...]
    placement_group: str | None = None
    use_placement_group: bool = True
    security_group_ids: tuple[str, ...] = ()
    on_node_configured: str | None = None
    on_node_configured_args: tuple[str, ...] = ()
    on_node_start: str | None = None
    on_node_start_args: tuple[str, ...] = ()
    s3_read: tuple[tuple[str, str], ...] = ()
    capacity_type: str = "ONDEMAND"

    def __post_init__(self) -> None:
        _check_name("queue name", self.name)
        if not self.compute_resources:
            raise EfaConfigError(
                "compute_resources",
                code="efa-cdk:pcluster-queue-without-compute",
                value=[],
                why="a queue needs a compute resource",
                fix="add one",
            )
        _check_unique(
            "compute_resources", [c.name for c in self.compute_resources], "names repeat in the queue"
        )
        if self.efa and len(self.subnet_ids) != 1:
            raise EfaConfigError(
                "subnet_ids",
                code="efa-cdk:pcluster-efa-queue-subnets",
                value=list(self.subnet_ids),
                why="EFA traffic stays inside one subnet (one AZ); a queue with EFA must have exactly one",
                fix="give the EFA queue one subnet, or make a queue per subnet",
            )
        if self.capacity_type not in ("ONDEMAND", "SPOT", "CAPACITY_BLOCK"):
            raise EfaConfigError(
                "capacity_type",
                code="efa-cdk:pcluster-capacity-type",
                value=self.capacity_type,
                why="not a ParallelCluster capacity type",
                fix="use ONDEMAND, SPOT or CAPACITY_BLOCK",
            )
        if self.capacity_type == "CAPACITY_BLOCK":
            for c in self.compute_resources:
                if not c.capacity_reservation_id or c.min_count != c.max_count:
                    raise EfaConfigError(
                        "capacity_type",
                        code="efa-cdk:pcluster-capacity-block-compute",
                        value=c.name,
                        why="a Capacity Block compute resource needs its reservation and only static nodes",
                        fix="set capacity_reservation_id and min_count == max_count (the block's size)",
                    )

    @property
    def slurm_nodes(self) -> list[str]:
        """The Slurm node names of the queue's compute resources (hostlist expressions)."""
        return [n for c in self.compute_resources for n in c.slurm_nodes(self.name)]

    @property
    def efa(self) -> bool:
        """True when any compute resource enables EFA."""
        return any(c.efa_enabled for c in self.compute_resources)

    def to_dict(self) -> dict[str, Any]:
        """The ``SlurmQueues`` entry."""
        networking: dict[str, Any] = {"SubnetIds": list(self.subnet_ids)}
        if self.security_group_ids:
            networking["AdditionalSecurityGroups"] = list(self.security_group_ids)
        if self.efa:
            pg: dict[str, Any] = {"Enabled": self.use_placement_group}
            if self.placement_group and self.use_placement_group:
                pg["Name"] = self.placement_group
            networking["PlacementGroup"] = pg
        out: dict[str, Any] = {
            "Name": self.name,
            "CapacityType": self.capacity_type,
            "Networking": networking,
            "ComputeResources": [c.to_dict() for c in self.compute_resources],
        }
        actions = {
            name: {"Script": script, **({"Args": list(args)} if args else {})}
            for name, script, args in (
                ("OnNodeStart", self.on_node_start, self.on_node_start_args),
                ("OnNodeConfigured", self.on_node_configured, self.on_node_configured_args),
            )
            if script
        }
        if actions:
            out["CustomActions"] = actions
        if self.s3_read:
            out["Iam"] = {"S3Access": [{"BucketName": b, "KeyName": k} for b, k in self.s3_read]}
        return out


@dataclass(frozen=True)
class SharedStorage:
    """An existing file system mounted on every node."""

    name: str
    mount_dir: str
    kind: str  # "Efs" or "FsxLustre"
    file_system_id: str

    def __post_init__(self) -> None:
        if self.kind not in ("Efs", "FsxLustre"):
            raise EfaConfigError(
                "kind",
                code="efa-cdk:pcluster-storage-kind",
                value=self.kind,
                why="not a storage type here",
                fix="use Efs or FsxLustre",
            )
        if not _MOUNT.match(self.mount_dir) or self.mount_dir in ("/", "/home", "/opt", "/etc", "/usr"):
            raise EfaConfigError(
                "mount_dir",
                code="efa-cdk:pcluster-mount-dir",
                value=self.mount_dir,
                why="not an absolute path ParallelCluster can mount over",
                fix="use a path of its own, e.g. /shared or /fsx",
            )

    def to_dict(self) -> dict[str, Any]:
        """The ``SharedStorage`` entry (existing file system, by id).

        EFS is mounted over TLS with IAM authorization: ParallelCluster mounts an existing EFS
        without IAM by default (an anonymous client), which a file-system policy that denies
        anonymous access (CDK's ``@aws-cdk/aws-efs:denyAnonymousAccess``, the EFS console's
        "prevent anonymous access") refuses.
        """
        if self.kind == "Efs":
            settings = {
                "EfsSettings": {
                    "FileSystemId": self.file_system_id,
                    "EncryptionInTransit": True,
                    "IamAuthorization": True,
                }
            }
        else:
            settings = {"FsxLustreSettings": {"FileSystemId": self.file_system_id}}
        return {"Name": self.name, "MountDir": self.mount_dir, "StorageType": self.kind, **settings}


@dataclass(frozen=True)
class ParallelClusterConfig:
    """A whole cluster configuration (HeadNode, Scheduling, SharedStorage, Image).

    Args:
        region: the region (``Region`` key).
        image_os: one of :data:`SUPPORTED_OS`.
        head_node_instance_type: the head node's type (no EFA needed).
        head_node_subnet_id: a public subnet (or private with a route to the internet).
        key_name: EC2 key pair for SSH to the head node.
        queues: the Slurm queues.
        shared_storage: mounted file systems.
        head_node_security_group_ids: extra groups on the head node.
        head_node_on_node_start: URL of a script the head node runs before ParallelCluster configures
            it (and starts slurmctld).
        head_node_on_node_start_args: its arguments.
        head_node_on_node_configured: URL of a script the head node runs at the end of its setup.
        head_node_on_node_configured_args: its arguments.
        head_node_s3_read: ``(bucket, key)`` pairs the head node may read.
        ssh_cidr: where SSH to the head node may come from (always written: ParallelCluster opens
            SSH to 0.0.0.0/0 when AllowedIps is missing; use the VPC's CIDR for "nowhere outside").
        head_node_policies: ARNs of IAM policies added to the head node's role.
        tags: ``(key, value)`` tags ParallelCluster puts on every resource it makes, its instances
            included (the cluster's ``Tags``).
        topology_tree: Slurm's ``topology/tree`` plugin (the head node writes topology.conf from EC2
            instance topology): ``CustomSlurmSettings: [{TopologyPlugin: topology/tree}]``. It needs
            ``head_node_on_node_start``: slurmctld stops at start when topology.conf cannot be read,
            and ParallelCluster starts slurmctld before OnNodeConfigured runs.
    """

    region: str
    image_os: str
    head_node_instance_type: str
    head_node_subnet_id: str
    key_name: str
    queues: tuple[SlurmQueue, ...]
    ssh_cidr: str
    shared_storage: tuple[SharedStorage, ...] = ()
    head_node_security_group_ids: tuple[str, ...] = ()
    head_node_on_node_start: str | None = None
    head_node_on_node_start_args: tuple[str, ...] = ()
    head_node_on_node_configured: str | None = None
    head_node_on_node_configured_args: tuple[str, ...] = ()
    head_node_s3_read: tuple[tuple[str, str], ...] = field(default=())
    head_node_policies: tuple[str, ...] = ()
    topology_tree: bool = False
    tags: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.image_os in RETIRED_OS:
            raise EfaConfigError(
                "image_os",
                code="efa-cdk:pcluster-image-os-retired",
                value=self.image_os,
                why=f"ParallelCluster {PCLUSTER_VERSION} refuses it: {RETIRED_OS[self.image_os]}",
                fix=f"use one of {', '.join(SUPPORTED_OS)}",
            )
        if self.image_os not in SUPPORTED_OS:
            raise EfaConfigError(
                "image_os",
                code="efa-cdk:pcluster-image-os-unknown",
                value=self.image_os,
                why="not an OS ParallelCluster offers",
                fix=f"use one of {', '.join(SUPPORTED_OS)}",
            )
        if not self.queues:
            raise EfaConfigError(
                "queues",
                code="efa-cdk:pcluster-without-queue",
                value=[],
                why="Slurm needs at least one queue",
                fix="add a queue",
            )
        _check_unique("queues", [q.name for q in self.queues], "queue names repeat")
        if self.topology_tree:
            _check_topology_tree(
                self.head_node_on_node_start,
                [t for q in self.queues for c in q.compute_resources for t in c.instance_types],
            )
        _check_unique(
            "shared_storage", [s.mount_dir for s in self.shared_storage], "two file systems share a mount_dir"
        )

    @property
    def slurm_nodes(self) -> list[str]:
        """Every Slurm node name of the cluster (hostlist expressions), queue by queue."""
        return [n for q in self.queues for n in q.slurm_nodes]

    def to_dict(self) -> dict[str, Any]:
        """The configuration as the dictionary ParallelCluster's schema loads."""
        ssh: dict[str, Any] = {"KeyName": self.key_name}
        # Always written: ParallelCluster opens SSH to 0.0.0.0/0 when AllowedIps is missing.
        ssh["AllowedIps"] = self.ssh_cidr
        head: dict[str, Any] = {
            "InstanceType": self.head_node_instance_type,
            "Networking": {"SubnetId": self.head_node_subnet_id},
            "Ssh": ssh,
            "LocalStorage": {"RootVolume": {"Encrypted": True}},
            "Imds": {"Secured": True},
        }
        if self.head_node_security_group_ids:
            head["Networking"]["AdditionalSecurityGroups"] = list(self.head_node_security_group_ids)
        actions = {
            "OnNodeStart": (self.head_node_on_node_start, self.head_node_on_node_start_args),
            "OnNodeConfigured": (self.head_node_on_node_configured, self.head_node_on_node_configured_args),
        }
        for event, (script, args) in actions.items():
            if script:
                action: dict[str, Any] = {"Script": script}
                if args:
                    action["Args"] = list(args)
                head.setdefault("CustomActions", {})[event] = action
        if self.head_node_s3_read:
            head["Iam"] = {"S3Access": [{"BucketName": b, "KeyName": k} for b, k in self.head_node_s3_read]}
        if self.head_node_policies:
            head.setdefault("Iam", {})["AdditionalIamPolicies"] = [
                {"Policy": a} for a in self.head_node_policies
            ]
        scheduling: dict[str, Any] = {"Scheduler": "slurm", "SlurmQueues": [q.to_dict() for q in self.queues]}
        if self.topology_tree:
            scheduling["SlurmSettings"] = {"CustomSlurmSettings": [{"TopologyPlugin": "topology/tree"}]}
        out: dict[str, Any] = {
            "Region": self.region,
            "Image": {"Os": self.image_os},
            "HeadNode": head,
            "Scheduling": scheduling,
        }
        if self.shared_storage:
            out["SharedStorage"] = [s.to_dict() for s in self.shared_storage]
        if self.tags:
            out["Tags"] = [{"Key": k, "Value": v} for k, v in self.tags]
        return out

    def to_yaml(self) -> str:
        """The cluster YAML for ``pcluster create-cluster --cluster-configuration``."""
        header = f"# ParallelCluster {PCLUSTER_VERSION} configuration, generated by efa-cdk\n"
        return header + yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False, width=1000)
