"""Regenerate ``instance_types.json`` from DescribeInstanceTypes answers.

Two sources give the same API answer:

* ``live``: ``ec2.describe_instance_types`` through boto3, in the regions you name (needs
  credentials; read by ``efa_constructs.tools.catalogue_live``, with the commands' other AWS calls).
  The live answer wins over anything in ``supplements.json``.
* ``moto``: the credential-free snapshot of that answer shipped inside the ``moto`` package
  (``moto/ec2/resources/instance_types.json.gz``). Offline and repeatable.

Facts the API answer lacks (RDMA support, per-card interface types on older snapshots,
types the snapshot misses) come from ``supplements.json``, each with its source.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import (
    API_PERFORMANCE,
    CATALOGUE_FILE,
    EFA,
    EFA_ONLY,
    INTERFACE,
    INTERFACE_TYPES,
    SPEC_BASELINE,
    SUPPLEMENTS_FILE,
)

FORMAT_VERSION = 1
HERE = Path(__file__).parent


class CatalogueGenerationError(RuntimeError):
    """The API answer and the supplements cannot be turned into a sound catalogue."""


def load_moto_snapshot() -> tuple[dict[str, dict[str, Any]], str]:
    """The DescribeInstanceTypes snapshot that ships inside moto, and a label naming it."""
    try:
        import moto
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise CatalogueGenerationError(
            "offline refresh reads moto's snapshot: pip install 'efa-cdk[refresh]'"
        ) from exc
    path = Path(os.path.dirname(moto.__file__)) / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data: dict[str, dict[str, Any]] = json.load(fh)
    return data, f"moto {moto.__version__} DescribeInstanceTypes snapshot"


def _card_types(
    name: str, card: Mapping[str, Any], max_efa: int, n_cards: int, overrides: Mapping[str, list[str]]
) -> list[str]:
    if card.get("InterfaceTypes"):
        # Newer API versions say it per card; "secondary" is not an EFA layout concern.
        return sorted(t for t in card["InterfaceTypes"] if t in INTERFACE_TYPES)
    idx = str(card["NetworkCardIndex"])
    if idx in overrides:
        return sorted(overrides[idx])
    if overrides or max_efa >= n_cards:
        return sorted(INTERFACE_TYPES)
    raise CatalogueGenerationError(
        f"{name}: {n_cards} network cards but only {max_efa} EFA interfaces, and the API answer does "
        "not say which cards accept EFA; add the type to card_interface_types in supplements.json "
        "with its source, or refresh with --live from an API version that reports InterfaceTypes"
    )


#: DescribeInstanceTypes' NetworkPerformance: "100 Gigabit", "8x 100 Gigabit", "Up to 100 Gigabit".
_PERFORMANCE = re.compile(r"^(?:Up to )?(?:(?P<n>\d+)x )?(?P<gbps>[\d.]+) Gigabit$")


def _network_bandwidth(name: str, net: Mapping[str, Any], sup: Mapping[str, Any]) -> dict[str, Any]:
    """The instance's documented network bandwidth: the lower of the API's NetworkPerformance and the
    spec tables' baseline (supplements), naming which one it is."""
    figures = []
    match = _PERFORMANCE.match(net.get("NetworkPerformance") or "")
    if match:
        figures.append((int(match["n"] or 1) * float(match["gbps"]), API_PERFORMANCE))
    spec = sup["spec_bandwidth_gbps"]["types"].get(name)
    if spec is not None:
        figures.append((float(spec), SPEC_BASELINE))
    if not figures:
        raise CatalogueGenerationError(
            f"{name}: no documented network bandwidth (NetworkPerformance {net.get('NetworkPerformance')!r}, "
            "and not in spec_bandwidth_gbps of supplements.json): add it there with its source"
        )
    gbps, source = min(figures, key=lambda f: f[0])  # a tie names the API answer
    out: dict[str, Any] = {"network_bandwidth_gbps": gbps, "network_bandwidth_source": source}
    limit = sup["efa_limit_gbps"]["types"].get(name)
    if limit is not None:
        out["efa_limit_gbps"] = float(limit["gbps"])
        out["efa_limit_source"] = f"AWS's EFA maximum for the type ({limit['why']}; EC2 user guide)"
    return out


def _accelerator(answer: Mapping[str, Any], neuron_lnc: Mapping[str, int]) -> dict[str, Any]:
    neuron = answer.get("NeuronInfo") or {}
    if neuron.get("NeuronDevices"):
        dev = neuron["NeuronDevices"][0]
        cores = dev["CoreInfo"]["Count"] // neuron_lnc.get(str(dev["CoreInfo"]["Version"]), 1)
        return {"kind": "neuron", "name": dev["Name"], "count": dev["Count"], "cores_per_device": cores}
    gpus = (answer.get("GpuInfo") or {}).get("Gpus") or []
    if gpus:
        gpu = gpus[0]
        kind = {"NVIDIA": "nvidia-gpu", "Habana": "gaudi"}.get(gpu["Manufacturer"], "other")
        return {"kind": kind, "name": gpu["Name"], "count": sum(g["Count"] for g in gpus)}
    for key, listkey in (
        ("InferenceAcceleratorInfo", "Accelerators"),
        ("FpgaInfo", "Fpgas"),
        ("MediaAcceleratorInfo", "Accelerators"),
    ):
        items = (answer.get(key) or {}).get(listkey) or []
        if items:
            return {"kind": "other", "name": items[0]["Name"], "count": sum(i["Count"] for i in items)}
    return {"kind": "none"}


def _mpi_slots(acc: Mapping[str, Any], physical_cores: int) -> int:
    """Ranks per node: GPUs, logical NeuronCores, Gaudi cards, else physical cores."""
    if acc["kind"] in ("nvidia-gpu", "gaudi"):
        return int(acc["count"])
    if acc["kind"] == "neuron":
        return int(acc["count"] * acc["cores_per_device"])
    return physical_cores


def _merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        out[key] = _merge(out.get(key) or {}, value) if isinstance(value, Mapping) else value
    return out


def convert(name: str, answer: Mapping[str, Any], sup: Mapping[str, Any], source: str) -> dict[str, Any]:
    """One DescribeInstanceTypes entry (+ supplements) -> one catalogue entry."""
    net = answer["NetworkInfo"]
    max_efa = net["EfaInfo"]["MaximumEfaInterfaces"]
    cards_raw = sorted(net["NetworkCards"], key=lambda c: c["NetworkCardIndex"])
    overrides = sup["card_interface_types"].get(name, {}).get("cards", {})
    peak = sup["card_peak_gbps"]["types"].get(name, {})
    cards = [
        {
            "max_interfaces": c["MaximumNetworkInterfaces"],
            "peak_gbps": peak.get(str(c["NetworkCardIndex"]), peak.get("*", c["PeakBandwidthInGbps"])),
            "interface_types": _card_types(name, c, max_efa, len(cards_raw), overrides),
        }
        for c in cards_raw
    ]
    if [c["NetworkCardIndex"] for c in cards_raw] != list(range(len(cards_raw))):
        raise CatalogueGenerationError(f"{name}: network card indexes are not 0..N-1")
    if not any(EFA in c["interface_types"] or EFA_ONLY in c["interface_types"] for c in cards):
        raise CatalogueGenerationError(f"{name}: no card accepts EFA")
    if INTERFACE not in cards[0]["interface_types"] and EFA not in cards[0]["interface_types"]:
        raise CatalogueGenerationError(f"{name}: card 0 cannot hold a primary interface")
    cpu = answer["VCpuInfo"]
    physical = cpu.get("DefaultCores", cpu["DefaultVCpus"])
    acc = _accelerator(answer, sup["neuron_logical_core_size"]["by_core_version"])
    family = name.split(".", 1)[0]
    archs = answer["ProcessorInfo"]["SupportedArchitectures"]
    entry: dict[str, Any] = {
        "architecture": "arm64" if "arm64" in archs else "x86_64",
        "vcpus": cpu["DefaultVCpus"],
        "physical_cores": physical,
        "memory_mib": answer["MemoryInfo"]["SizeInMiB"],
        "max_efa_interfaces": max_efa,
        "max_network_interfaces": net["MaximumNetworkInterfaces"],
        "network_cards": cards,
        "accelerator": acc,
        "rdma_read": family in sup["rdma"]["read"],
        "rdma_write": family in sup["rdma"]["write"],
        "mpi_slots": _mpi_slots(acc, physical),
        "source": source,
        **_network_bandwidth(name, net, sup),
    }
    ena_cards = sup["max_bandwidth_ena_cards"]["types"].get(name)
    if ena_cards:
        entry["max_bandwidth_ena_cards"] = ena_cards
    nitro = [int(v) for v, families in sup["nitro_version"]["by_version"].items() if family in families]
    if len(nitro) > 1:
        raise CatalogueGenerationError(f"{family}: in more than one Nitro version of supplements.json")
    if nitro:
        entry["nitro_version"] = nitro[0]
    return entry


def model_type_names() -> tuple[list[str], str]:
    """Every instance type name EC2's API model lists (its ``InstanceType`` enum, as botocore ships it), and a
    label naming it: a head or login node's type is checked against these as well as against the answer,
    which holds only the types offered in the region it came from (issue 53 item 8: u7ib-12tb.224xlarge,
    g4ad.*, p3.*, i3.metal were refused)."""
    try:
        import botocore
        import botocore.session
    except ImportError as exc:  # pragma: no cover - moto and boto3 bring it
        raise CatalogueGenerationError(
            "refresh reads botocore's EC2 model: pip install 'efa-cdk[refresh]'"
        ) from exc
    model = botocore.session.get_session().get_service_model("ec2")
    return list(model.shape_for("InstanceType").enum), f"botocore {botocore.__version__}'s EC2 model"


def build(
    answer: Mapping[str, Mapping[str, Any]],
    source: str,
    supplements: Mapping[str, Any] | None = None,
    model_names: tuple[list[str], str] | None = None,
) -> dict[str, Any]:
    """The whole catalogue document from an API answer (all instance types, EFA or not) and the names EC2's
    API model lists (default: :func:`model_type_names`)."""
    sup = supplements or json.loads((HERE / SUPPLEMENTS_FILE).read_text(encoding="utf-8"))
    merged: dict[str, tuple[dict[str, Any], str]] = {}
    for name, entry in answer.items():
        if entry.get("NetworkInfo", {}).get("EfaSupported"):
            patch = sup["patches"].get(name)
            merged[name] = (_merge(dict(entry), patch["answer"]) if patch else dict(entry), source)
    for name, extra in sup["extra_types"].items():
        if name not in merged:
            merged[name] = (extra["answer"], f"supplements.json: {extra['source']}")
    types = {name: convert(name, ans, sup, src) for name, (ans, src) in sorted(merged.items())}
    names, named_by = model_names or model_type_names()
    non_efa = sorted(n for n, e in answer.items() if not e.get("NetworkInfo", {}).get("EfaSupported"))
    return {
        "format_version": FORMAT_VERSION,
        "source": f"{source}; other type names from {named_by}",
        "type_count": len(types),
        "types": types,
        "non_efa_types": non_efa,
        # names EC2's model lists that the answer does not (types not offered where it came from): EC2 types,
        # of unknown EFA support, for the head and login nodes' type check alone
        "other_type_names": sorted(set(names) - set(types) - set(non_efa)),
    }


def render(doc: Mapping[str, Any]) -> str:
    """JSON with one instance type per line, so a refresh reads as a per-type diff."""
    lines = ["{"]
    for key in ("format_version", "source", "type_count"):
        lines.append(f"  {json.dumps(key)}: {json.dumps(doc[key])},")
    lines.append('  "types": {')
    items = list(doc["types"].items())
    for i, (name, entry) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"    {json.dumps(name)}: {json.dumps(entry, sort_keys=True)}{comma}")
    lines.append("  },")
    lines.append(f'  "non_efa_types": {json.dumps(doc["non_efa_types"])},')
    lines.append(f'  "other_type_names": {json.dumps(doc["other_type_names"])}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def write(doc: Mapping[str, Any], path: Path | None = None) -> Path:
    """Write the catalogue (default: the copy inside this package)."""
    target = path or HERE / CATALOGUE_FILE
    target.write_text(render(doc), encoding="utf-8")
    return target
