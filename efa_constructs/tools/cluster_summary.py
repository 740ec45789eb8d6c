"""What a template's cluster is, in the figures a reviewer weighs and cannot see in JSON: each group of
EFA nodes (how many, of which type, how many EFAs each, their line rate) and each shared file system
(size, throughput tier, EFA), read from the template alone; before and after a change, side by side.

Nodes come from ``AWS::EC2::Instance`` (counted per launch template), ``AWS::AutoScaling::AutoScalingGroup``,
``AWS::PCS::ComputeNodeGroup`` and ``AWS::EKS::Nodegroup`` with their launch template's interfaces (an
``efa`` or ``efa-only`` interface is one EFA), and from a ParallelCluster configuration in the template's
outputs (its queues' compute resources; ParallelCluster lays out one EFA per card itself). The line rate is
the catalogue's (:meth:`InstanceType.line_rate` over the cards that carry an EFA).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml

from ..core.catalogue import all_instance_types
from .security_diff import show

#: A node resource's type, as the summary names it.
NODE_KINDS = {
    "AWS::EC2::Instance": "instances",
    "AWS::AutoScaling::AutoScalingGroup": "Auto Scaling group",
    "AWS::PCS::ComputeNodeGroup": "PCS node group",
    "AWS::EKS::Nodegroup": "EKS node group",
}


def _template_of(kind: str, props: Mapping[str, Any]) -> str | None:
    """The logical id of the launch template a node resource launches from, when it names one here."""
    ref = {
        "AWS::EC2::Instance": props.get("LaunchTemplate", {}).get("LaunchTemplateId"),
        "AWS::AutoScaling::AutoScalingGroup": props.get("LaunchTemplate", {}).get("LaunchTemplateId")
        or props.get("MixedInstancesPolicy", {})
        .get("LaunchTemplate", {})
        .get("LaunchTemplateSpecification", {})
        .get("LaunchTemplateId"),
        "AWS::PCS::ComputeNodeGroup": props.get("CustomLaunchTemplate", {}).get("TemplateId"),
        "AWS::EKS::Nodegroup": props.get("LaunchTemplate", {}).get("Id"),
    }[kind]
    return ref.get("Ref") if isinstance(ref, Mapping) else None


def _count(kind: str, props: Mapping[str, Any]) -> str:
    """How many nodes a node resource runs: one instance, or the group's bounds (a parameter shown so)."""
    low, high = {
        "AWS::EC2::Instance": (1, 1),
        "AWS::AutoScaling::AutoScalingGroup": (props.get("MinSize"), props.get("MaxSize")),
        "AWS::PCS::ComputeNodeGroup": (
            props.get("ScalingConfiguration", {}).get("MinInstanceCount"),
            props.get("ScalingConfiguration", {}).get("MaxInstanceCount"),
        ),
        "AWS::EKS::Nodegroup": (
            props.get("ScalingConfig", {}).get("MinSize"),
            props.get("ScalingConfig", {}).get("MaxSize"),
        ),
    }[kind]
    return show(low) if show(low) == show(high) else f"{show(low)}-{show(high)}"


def _type_of(kind: str, props: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    if kind == "AWS::PCS::ComputeNodeGroup":
        return ", ".join(show(c.get("InstanceType")) for c in props.get("InstanceConfigs", []))
    if kind == "AWS::EKS::Nodegroup" and props.get("InstanceTypes"):
        return show(props["InstanceTypes"])
    return show(props.get("InstanceType") or data.get("InstanceType") or "?")


def _rate(type_name: str, cards: list[int] | None) -> str:
    """The line rate per node over the cards that carry an EFA (every EFA card: None), or '' unknown."""
    it = all_instance_types().get(type_name)
    if it is None:  # a type the catalogue has not (a login node's, a parameter): no figure
        return ""
    if cards is None:
        return f"{it.efa_bandwidth_gbps:g} Gbps"
    peak = sum(c.peak_bandwidth_gbps for c in it.network_cards if c.index in cards)
    return f"{it.line_rate(peak)[0]:g} Gbps" if peak else ""


def _efas(data: Mapping[str, Any]) -> tuple[int, list[int]]:
    """A launch template's EFA interfaces (``efa`` or ``efa-only``): how many, and their cards."""
    efa = [i for i in data.get("NetworkInterfaces", []) if i.get("InterfaceType") in ("efa", "efa-only")]
    return len(efa), sorted({int(i.get("NetworkCardIndex", 0)) for i in efa})


def _line(count: str, type_name: str, kind: str, efas: str, cards: list[int] | None) -> str:
    rate = _rate(type_name, cards)
    return f"{count} x {type_name} ({kind}), {efas}{', ' + rate + ' per node' if rate else ''}"


def node_groups(template: Mapping[str, Any]) -> dict[str, str]:
    """Each group of nodes with EFAs: its name (the launch template's or the resource's logical id) and
    one line (count x type, EFAs per node, line rate per node)."""
    resources = template.get("Resources", {})
    instances: dict[str, list[str]] = {}  # launch template -> the types of the instances launched from it
    out: dict[str, str] = {}
    for rid, r in resources.items():
        kind, props = r.get("Type", ""), r.get("Properties", {})
        lt = _template_of(kind, props) if kind in NODE_KINDS else None
        data = resources.get(lt or "", {}).get("Properties", {}).get("LaunchTemplateData", {})
        count, cards = _efas(data)
        if not count:
            continue
        if kind == "AWS::EC2::Instance":
            instances.setdefault(str(lt), []).append(_type_of(kind, props, data))
        else:
            out[rid] = _line(
                _count(kind, props),
                _type_of(kind, props, data),
                NODE_KINDS[kind],
                f"{count} EFAs each",
                cards,
            )
    for lt, types in instances.items():
        count, cards = _efas(resources[lt]["Properties"]["LaunchTemplateData"])
        out[lt] = _line(str(len(types)), types[0], "instances", f"{count} EFAs each", cards)
    out.update(dict(_parallelcluster_queues(template)))
    return out


def _parallelcluster_queues(template: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The EFA compute resources of a ParallelCluster configuration written in the outputs."""
    for name, output in template.get("Outputs", {}).items():
        text = show(output.get("Value", ""))
        if "Scheduling:" not in text or "SlurmQueues" not in text:
            continue
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        for queue in (config or {}).get("Scheduling", {}).get("SlurmQueues", []):
            for res in queue.get("ComputeResources", []):
                if not res.get("Efa", {}).get("Enabled"):
                    continue
                counts = f"{res.get('MinCount', 0)}-{res.get('MaxCount', '?')}"
                line = _line(
                    counts,
                    str(res.get("InstanceType", "?")),
                    "ParallelCluster queue",
                    "one EFA per EFA card",
                    None,
                )
                yield f"{name}: {queue.get('Name')}/{res.get('Name')}", line


def file_systems(template: Mapping[str, Any]) -> dict[str, str]:
    """Each shared file system: FSx for Lustre's size, tier and EFA; EFS's throughput mode."""
    out: dict[str, str] = {}
    for rid, r in template.get("Resources", {}).items():
        props = r.get("Properties", {})
        if r.get("Type") == "AWS::FSx::FileSystem":
            lustre = props.get("LustreConfiguration", {})
            tier = lustre.get("PerUnitStorageThroughput")
            out[rid] = (
                f"FSx for {show(props.get('FileSystemType', '?'))} {show(props.get('StorageCapacity'))} GiB"
                f"{f', {show(tier)} MB/s/TiB' if tier is not None else ''}"
                f"{', over EFA' if lustre.get('EfaEnabled') else ''}"
            )
        elif r.get("Type") == "AWS::EFS::FileSystem":
            mode = show(props.get("ThroughputMode", "bursting"))
            mibps = props.get("ProvisionedThroughputInMibps")
            out[rid] = f"EFS, {mode} throughput{f' ({show(mibps)} MiB/s)' if mibps is not None else ''}"
    return out


def summary(template: Mapping[str, Any]) -> dict[str, str]:
    """The cluster's figures: node groups, then file systems, by logical id."""
    return {**node_groups(template), **file_systems(template)}


def compare(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    read: Callable[[Mapping[str, Any]], dict[str, str]] = summary,
) -> list[tuple[str, str, str]]:
    """(name, before, after) for each node group and file system of either template ('' where it is
    not), or of what `read` reads (:func:`node_groups`, :func:`file_systems`): the ones that change, and
    the ones that stay, as the context of a change."""
    before, after = read(old), read(new)
    return [(k, before.get(k, ""), after.get(k, "")) for k in sorted(set(before) | set(after))]
