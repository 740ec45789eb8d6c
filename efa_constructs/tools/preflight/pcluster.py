"""ParallelCluster's compute queues, read from the configuration a template writes as an output."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import Check, NodeGroup
from .templates import Exports, _import_note, _literal, _zone

#: The first line of the ParallelCluster configuration efa-cdk writes (core/pcluster.py's to_yaml).
PCLUSTER_CONFIG_MARK = "# ParallelCluster "


def _flatten(value: Any) -> str | None:
    """A template string with its references written ``efa-cdk-ref:<LogicalId>`` (any other token
    ``efa-cdk-token``): a literal, or an Fn::Join of literals and tokens; None for anything else."""
    if isinstance(value, str):
        return value
    parts = value.get("Fn::Join") if isinstance(value, dict) else None
    if not (isinstance(parts, list) and len(parts) == 2 and parts[0] == "" and isinstance(parts[1], list)):
        return None
    return "".join(
        p
        if isinstance(p, str)
        else f"efa-cdk-ref:{p['Ref']}"
        if isinstance(p, dict) and isinstance(p.get("Ref"), str)
        else "efa-cdk-token"
        for p in parts[1]
    )


def _refs(config: Any) -> Any:
    """The configuration with each ``efa-cdk-ref:<id>`` string back as ``{"Ref": id}``."""
    if isinstance(config, dict):
        return {k: _refs(v) for k, v in config.items()}
    if isinstance(config, list):
        return [_refs(v) for v in config]
    if isinstance(config, str) and config.startswith("efa-cdk-ref:"):
        return {"Ref": config.removeprefix("efa-cdk-ref:")}
    return config


def parallelcluster_configs(
    stack: str, template: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[Check]]:
    """The ParallelCluster configurations a template holds (the cluster resource's, else the outputs
    efa-cdk writes with ``config_output``), and a WARN for one that could not be read."""
    import yaml

    resources: Mapping[str, Any] = template.get("Resources", {})
    found = [
        r.get("Properties", {}).get("ClusterConfiguration")
        for r in resources.values()
        if r.get("Type") == "Custom::PclusterCluster"
    ]
    configs = [c for c in found if isinstance(c, dict)]
    notes = []
    for name, output in template.get("Outputs", {}).items() if not configs else ():
        text = _flatten(output.get("Value"))
        if text is None or not text.startswith(PCLUSTER_CONFIG_MARK):
            continue
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as err:
            config, why = None, f"not YAML ({str(err).splitlines()[0]})"
        else:
            why = "no SlurmQueues"
        if isinstance(config, dict) and isinstance(config.get("Scheduling", {}).get("SlurmQueues"), list):
            configs.append(_refs(config))
        else:
            notes.append(
                Check(
                    f"parallelcluster [{stack}/{name}]",
                    "WARN",
                    f"its ParallelCluster configuration could not be read ({why}): "
                    "its queues were not checked",
                    "pcluster create-cluster --dryrun true --cluster-configuration <it> validates it",
                )
            )
    return configs, notes


def _dig(value: Any, *keys: str) -> Any:
    """value[k1][k2]... where each level may be missing or null (a YAML key written empty)."""
    for key in keys:
        value = (value or {}).get(key) if isinstance(value or {}, dict) else None
    return value


def parallelcluster_groups(
    stack: str, template: Mapping[str, Any], configs: list[dict[str, Any]], exports: Exports | None = None
) -> list[NodeGroup]:
    """The EFA compute resources of ParallelCluster configurations as node groups: each queue's type,
    MaxCount, subnet, Capacity Reservation or Block, image and root volume (ParallelCluster lays out
    the interfaces itself: ``efa_interfaces`` 0)."""
    return [
        group
        for config in configs
        for queue in _dig(config, "Scheduling", "SlurmQueues") or []
        for group in _queue_groups(stack, template, config, queue, exports)
    ]


def _queue_groups(
    stack: str,
    template: Mapping[str, Any],
    config: dict[str, Any],
    queue: dict[str, Any],
    exports: Exports | None,
) -> list[NodeGroup]:
    """One Slurm queue's EFA compute resources as node groups (:func:`parallelcluster_groups`)."""
    subnet = (_dig(queue, "Networking", "SubnetIds") or [None])[0]
    zone, subnet_id = _zone(template.get("Resources", {}), subnet, template.get("Parameters", {}), exports)
    root = _dig(queue, "ComputeSettings", "LocalStorage", "RootVolume", "Size")
    groups = []
    for resource in queue.get("ComputeResources", []):
        itype = resource.get("InstanceType") or next(
            (i.get("InstanceType") for i in resource.get("Instances", [])), None
        )
        if not _dig(resource, "Efa", "Enabled") or not isinstance(itype, str):
            continue
        groups.append(
            NodeGroup(
                stack=stack,
                name=f"queue {queue.get('Name')}/{resource.get('Name')}",
                instance_type=itype,
                count=int(resource.get("MaxCount", 0)),
                zone=zone,
                subnet_id=subnet_id,
                reservation_id=_literal(_dig(resource, "CapacityReservationTarget", "CapacityReservationId")),
                capacity_block=queue.get("CapacityType") == "CAPACITY_BLOCK",
                key_name=_literal(_dig(config, "HeadNode", "Ssh", "KeyName")),
                image_id=_literal(_dig(queue, "Image", "CustomAmi") or _dig(config, "Image", "CustomAmi")),
                root_gib=int(root) if isinstance(root, int) else None,
                subnet_from=_import_note(subnet, exports),
            )
        )
    return groups
