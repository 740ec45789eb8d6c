"""AWS PCS rules that need no CDK: Slurm versions, cluster sizes and names, node counts.

Sources: the AWS PCS API reference (CreateCluster: scheduler versions, name) and user guide ("Cluster
size": instances per size; "Creating a queue in AWS PCS": queue names; capacity-blocks-nvidia-imex:
UltraServers), checked late 2026.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

from .capacity import Capacity, CapacityKind
from .errors import EfaConfigError, parse_choice

#: Slurm versions the PCS API reference lists (CreateCluster, SchedulerRequest version).
PCS_SLURM_VERSIONS = ("23.11", "24.05", "24.11", "25.05", "25.11")
DEFAULT_SLURM_VERSION = "25.11"


class PcsClusterSize(enum.Enum):
    """A PCS cluster's size: how many instances its controller manages (PCS user guide, "Cluster
    size"). It is fixed when the cluster is created (CloudFormation: createOnlyProperties)."""

    SMALL = "SMALL"  # up to 32 instances
    MEDIUM = "MEDIUM"  # up to 512
    LARGE = "LARGE"  # up to 2048

    @classmethod
    def parse(cls, value: str | PcsClusterSize) -> PcsClusterSize:
        """The member for a string such as ``"MEDIUM"`` (any case)."""
        return parse_choice(
            cls,
            value.upper() if isinstance(value, str) else value,
            what="pcs_size",
            why="not a PCS cluster size",
        )

    @property
    def instances(self) -> int:
        """The instances a cluster of this size manages."""
        return {"SMALL": 32, "MEDIUM": 512, "LARGE": 2048}[self.value]


_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{2,39}$")
_QUEUE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,24}$")
_ULTRASERVER_PREFIXES = ("p6e-gb200.", "p6e-gb300.")


def check_slurm_version(version: str, instance_type: str) -> None:
    """Refuse a Slurm version PCS does not run, or one an UltraServer type cannot use."""
    if version not in PCS_SLURM_VERSIONS:
        raise EfaConfigError(
            "slurm_version",
            code="efa-cdk:pcs-slurm-version",
            value=version,
            why="not a Slurm version AWS PCS runs",
            fix=f"use one of {', '.join(PCS_SLURM_VERSIONS)} (default {DEFAULT_SLURM_VERSION})",
        )
    if instance_type.startswith(_ULTRASERVER_PREFIXES) and tuple(map(int, version.split("."))) < (25, 5):
        raise EfaConfigError(
            "slurm_version",
            code="efa-cdk:pcs-ultraserver-slurm-version",
            value=version,
            why=f"{instance_type} (an UltraServer) needs Slurm 25.05 or later on PCS",
            fix="use slurm_version 25.05 or 25.11",
        )


def check_cluster_name(name: str) -> None:
    """PCS's cluster name rule: 3-40 letters, digits or '-', a letter first (the API's pattern; its other
    branch, ``pcs_`` and an id, is PCS's own cluster ids, which the characters here already exclude)."""
    if not _NAME.match(name):
        raise EfaConfigError(
            "cluster_name",
            code="efa-cdk:pcs-cluster-name-form",
            value=name,
            why="a PCS cluster name is 3-40 letters, digits or '-', starting with a letter",
            fix="pass e.g. trn1-training",
        )


def check_queue_name(name: str) -> None:
    """PCS's queue name rule (user guide, "Creating a queue in AWS PCS"): letters, digits and '-',
    starting with a letter, at most 25 characters. Slurm users type it (``sbatch -p``)."""
    if not _QUEUE_NAME.match(name):
        raise EfaConfigError(
            "queue_name",
            code="efa-cdk:pcs-queue-name-form",
            value=name,
            why="a PCS queue name is at most 25 letters, digits or '-', starting with a letter",
            fix="pass e.g. compute or trn1-train",
        )


def check_node_counts(
    max_count: int | None,
    login_count: int,
    size: PcsClusterSize,
    capacity: Capacity,
    instance_type: str,
) -> None:
    """Refuse login nodes below zero, more instances than a cluster of `size` manages, and an UltraServer
    without a Capacity Block (the node group's own counts are the node rules': ``core/node_rules.py``;
    `max_count` None: known at deploy, where PCS refuses more than the cluster's size)."""
    if isinstance(login_count, bool) or not isinstance(login_count, int) or login_count < 0:
        raise EfaConfigError(
            "login_count",
            code="efa-cdk:pcs-counts",
            value=login_count,
            why="a cluster has zero or more login nodes",
            fix="set login_count to 0 (none) or more",
        )
    if max_count is not None and max_count + login_count > size.instances:
        bigger = next((s.value for s in PcsClusterSize if s.instances >= max_count + login_count), None)
        raise EfaConfigError(
            "max_count",
            code="efa-cdk:pcs-size-too-small",
            value=max_count,
            why=f"a {size.value} PCS cluster manages up to {size.instances} instances, and {max_count} "
            f"compute + {login_count} login nodes are more",
            fix=f"lower max_count, or create the cluster with size {bigger} (a new cluster)"
            if bigger
            else "lower max_count (a LARGE cluster manages 2048 instances)",
        )
    if instance_type.startswith(_ULTRASERVER_PREFIXES) and capacity.kind is not CapacityKind.CAPACITY_BLOCK:
        raise EfaConfigError(
            "capacity",
            code="efa-cdk:pcs-ultraserver-capacity-block",
            value=capacity.kind.value,
            why=f"{instance_type} (an UltraServer) launches on PCS from a Capacity Block only",
            fix="pass a Capacity Block (capacity=Capacity.capacity_block(...))",
            context_fix="-c capacity_block=cr-...",
        )


_USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


def check_user_names(users: Sequence[str]) -> None:
    """Local user names as useradd(8) takes them (the Linux default NAME_REGEX), for ``imds_users``."""
    for user in users:
        if not isinstance(user, str) or not _USER_NAME.match(user) or user == "root":
            raise EfaConfigError(
                "imds_users",
                code="efa-cdk:pcs-imds-user-name",
                value=user,
                why="not a local user name besides root (lower-case letters, digits, '_' or '-', a letter "
                "or '_' first, at most 32), and root may always reach instance metadata",
                fix="pass e.g. ['ec2-user'], or leave it empty",
            )


def pcs_cloud_config(
    file_system_id: str, imds_users: Sequence[str], shared_dir: str = "/shared"
) -> dict[str, Any]:
    """The cloud-config of every PCS node (login and compute): node/pcs/prep.sh written to
    /opt/efa-cdk/pcs/prep.sh; its instance-metadata rule (only `imds_users`) at every boot (bootcmd,
    which runs before write_files on the first boot, hence the test) and at first boot's end (runcmd,
    once the image's users exist); and the EFS at `shared_dir` over TLS, mode 1777 (runcmd). runcmd runs
    with the shell parts, before slurmd starts (PCS user guide, "Working with Amazon EC2 user data")."""
    prep = (resources.files("efa_constructs") / "node" / "pcs" / "prep.sh").read_text()
    path = "/opt/efa-cdk/pcs/prep.sh"
    users = " ".join(imds_users)
    return {
        "write_files": [{"path": path, "permissions": "0755", "owner": "root:root", "content": prep}],
        "bootcmd": [f"if [ -x {path} ]; then {path} imds {users}; else\n{_first_boot_lock(prep)}\nfi"],
        "runcmd": [[path, "imds", *imds_users], [path, "shared", file_system_id, shared_dir]],
    }


def _first_boot_lock(prep: str) -> str:
    """What bootcmd does on a first boot, when write_files has not yet written prep.sh:
    node/pcs/first-boot-lock.sh (it says why), with prep.sh's own nologin reason put in."""
    reason = next(line for line in prep.splitlines() if line.startswith("NOLOGIN_REASON="))
    lock = (resources.files("efa_constructs") / "node" / "pcs" / "first-boot-lock.sh").read_text()
    body = [line for line in lock.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return "\n".join(body).replace("@NOLOGIN_REASON@", reason.split("=", 1)[1])
