"""The EFA instance catalogue: facts about every EFA-capable EC2 instance type.

The facts come from a generated, versioned data file shipped in this package
(``instance_types.json``), so synthesis never needs AWS credentials or network access.
``python -m efa_constructs catalogue refresh`` regenerates it (see :mod:`.generate`).
"""

from __future__ import annotations

import difflib
import enum
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ..errors import EfaConfigError

CATALOGUE_FILE = "instance_types.json"
SUPPLEMENTS_FILE = "supplements.json"

#: The interface types EC2 knows for a launch-template network interface.
INTERFACE = "interface"
EFA = "efa"
EFA_ONLY = "efa-only"
INTERFACE_TYPES = (INTERFACE, EFA, EFA_ONLY)


#: What can set a line rate (the lowest wins; the catalogue records which, per type), with a short
#: label for tables. AWS's EFA maximum for a type (p6e-gb200) is the fourth.
CARDS_SOURCE = "the EFA cards' peak bandwidth (DescribeInstanceTypes NetworkCards)"
API_PERFORMANCE = "the instance's network bandwidth (DescribeInstanceTypes NetworkPerformance)"
SPEC_BASELINE = "the instance's baseline network bandwidth (EC2 instance-type spec tables)"
LINE_RATE_LABELS = {CARDS_SOURCE: "cards", API_PERFORMANCE: "instance", SPEC_BASELINE: "baseline"}


class AcceleratorKind(enum.Enum):
    """The kind of accelerator an instance carries, which decides AMI, benchmark and MPI slots."""

    NVIDIA_GPU = "nvidia-gpu"
    NEURON = "neuron"  # AWS Trainium / Inferentia
    GAUDI = "gaudi"  # Habana Gaudi (dl1)
    OTHER = "other"  # Qualcomm AI100, FPGAs, media accelerators
    NONE = "none"


@dataclass(frozen=True)
class Accelerator:
    """Accelerators on one instance: kind, model name, device count and cores per device."""

    kind: AcceleratorKind
    name: str
    count: int
    cores_per_device: int = 1


@dataclass(frozen=True)
class NetworkCard:
    """One physical network card of an instance type."""

    index: int
    max_interfaces: int
    peak_bandwidth_gbps: float
    interface_types: frozenset[str]

    @property
    def accepts_efa(self) -> bool:
        """True when this card can carry an EFA (``efa`` or ``efa-only``)."""
        return EFA in self.interface_types or EFA_ONLY in self.interface_types


@dataclass(frozen=True)
class InstanceType:
    """Catalogue facts for one EFA-capable instance type."""

    name: str
    architecture: str
    vcpus: int
    physical_cores: int
    memory_mib: int
    max_efa_interfaces: int
    max_network_interfaces: int
    network_cards: tuple[NetworkCard, ...]
    accelerator: Accelerator
    rdma_read: bool
    rdma_write: bool
    mpi_slots: int
    #: Cards that carry an extra ENA interface in AWS's "max bandwidth" layout, when AWS
    #: documents a choice for this type; empty means "every EFA card that has room".
    max_bandwidth_ena_cards: tuple[int, ...] = ()
    source: str = ""
    #: The instance's documented network bandwidth, and which source gave it (the lower of the API's
    #: NetworkPerformance and the spec tables' baseline); no EFA traffic runs faster.
    network_bandwidth_gbps: float = 0.0
    network_bandwidth_source: str = ""
    #: Where AWS documents a lower EFA maximum than the cards and the instance add up to (p6e-gb200).
    efa_limit_gbps: float | None = None
    efa_limit_source: str = ""
    #: The AWS Nitro System version of the type's hosts (3 to 6), from the EC2 user guide's EFA tables
    #: (supplements.json); None for a type newer than those tables.
    nitro_version: int | None = None

    @property
    def family(self) -> str:
        """The part before the dot: ``trn1`` for ``trn1.32xlarge``."""
        return self.name.split(".", 1)[0]

    @property
    def efa_cards(self) -> tuple[NetworkCard, ...]:
        """Cards that accept an EFA, in index order."""
        return tuple(c for c in self.network_cards if c.accepts_efa)

    @property
    def efa_bandwidth_gbps(self) -> float:
        """Line rate over EFA when every EFA card carries one (see :meth:`line_rate`)."""
        return self._full_line_rate[0]

    @property
    def _full_line_rate(self) -> tuple[float, str]:
        """:meth:`line_rate` over the fastest EFA cards, as many as the type takes EFAs."""
        cards = sorted(self.efa_cards, key=lambda c: c.peak_bandwidth_gbps, reverse=True)
        return self.line_rate(sum(c.peak_bandwidth_gbps for c in cards[: self.max_efa_interfaces]))

    def line_rate(self, cards_gbps: float) -> tuple[float, str]:
        """The line rate EFA traffic can reach over cards adding up to `cards_gbps`, and what set it:
        the cards, the instance's documented bandwidth, or AWS's EFA maximum for the type, the lowest."""
        figures = [(cards_gbps, CARDS_SOURCE)]
        if self.network_bandwidth_gbps:
            figures.append((self.network_bandwidth_gbps, self.network_bandwidth_source))
        if self.efa_limit_gbps is not None:
            figures.append((self.efa_limit_gbps, self.efa_limit_source))
        return min(figures, key=lambda f: f[0])

    @property
    def line_rate_label(self) -> str:
        """Which figure sets :attr:`efa_bandwidth_gbps`: cards, instance, baseline or efa-max."""
        return LINE_RATE_LABELS.get(self._full_line_rate[1], "efa-max")

    def card(self, index: int) -> NetworkCard:
        """The card with this NetworkCardIndex."""
        return self.network_cards[index]

    @staticmethod
    def from_dict(name: str, raw: dict[str, Any]) -> InstanceType:
        """Build from one entry of ``instance_types.json``."""
        acc = raw["accelerator"]
        return InstanceType(
            name=name,
            architecture=raw["architecture"],
            vcpus=raw["vcpus"],
            physical_cores=raw["physical_cores"],
            memory_mib=raw["memory_mib"],
            max_efa_interfaces=raw["max_efa_interfaces"],
            max_network_interfaces=raw["max_network_interfaces"],
            network_cards=tuple(
                NetworkCard(
                    index=i,
                    max_interfaces=c["max_interfaces"],
                    peak_bandwidth_gbps=c["peak_gbps"],
                    interface_types=frozenset(c["interface_types"]),
                )
                for i, c in enumerate(raw["network_cards"])
            ),
            accelerator=Accelerator(
                kind=AcceleratorKind(acc["kind"]),
                name=acc.get("name", ""),
                count=acc.get("count", 0),
                cores_per_device=acc.get("cores_per_device", 1),
            ),
            rdma_read=raw["rdma_read"],
            rdma_write=raw["rdma_write"],
            mpi_slots=raw["mpi_slots"],
            max_bandwidth_ena_cards=tuple(raw.get("max_bandwidth_ena_cards", ())),
            source=raw.get("source", ""),
            network_bandwidth_gbps=raw.get("network_bandwidth_gbps", 0.0),
            network_bandwidth_source=raw.get("network_bandwidth_source", ""),
            efa_limit_gbps=raw.get("efa_limit_gbps"),
            efa_limit_source=raw.get("efa_limit_source", ""),
            nitro_version=raw.get("nitro_version"),
        )


def _read_json(filename: str) -> dict[str, Any]:
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@cache
def catalogue_metadata() -> dict[str, Any]:
    """The catalogue's header: format version, where the data came from, when."""
    return {k: v for k, v in _read_json(CATALOGUE_FILE).items() if k not in ("types", "other_type_names")}


@cache
def all_instance_types() -> dict[str, InstanceType]:
    """Every EFA-capable instance type in the shipped catalogue, by name."""
    raw = _read_json(CATALOGUE_FILE)["types"]
    return {name: InstanceType.from_dict(name, entry) for name, entry in raw.items()}


@cache
def _non_efa_types() -> frozenset[str]:
    return frozenset(_read_json(CATALOGUE_FILE).get("non_efa_types", ()))


@cache
def _other_type_names() -> frozenset[str]:
    """EC2 types its API model names that the catalogue's answer did not list (generate.model_type_names)."""
    return frozenset(_read_json(CATALOGUE_FILE).get("other_type_names", ()))


def check_ec2_type(name: str, key: str) -> None:
    """Refuse a name that is no EC2 instance type the catalogue knows, EFA-capable or not (a typo in a head
    or login node's type would otherwise fail only at deploy)."""
    known = set(all_instance_types()) | _non_efa_types() | _other_type_names()
    if name in known:
        return
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.7)
    raise EfaConfigError(
        key,
        code="efa-cdk:not-an-ec2-instance-type",
        value=name,
        why="not an EC2 instance type" + (f" (did you mean {', '.join(close)}?)" if close else ""),
        fix="pass a type EC2 offers, e.g. c7i.xlarge; if it is newer than the catalogue, refresh it with "
        "`python -m efa_constructs catalogue refresh --live`",
    )


def instance_type(name: str) -> InstanceType:
    """Look up an EFA-capable instance type.

    Raises:
        EfaConfigError: the type is unknown, or known but without EFA; the message names
            the closest EFA-capable types.
    """
    types = all_instance_types()
    if name in types:
        return types[name]
    close = difflib.get_close_matches(name, list(types), n=4, cutoff=0.6)
    hint = f"close EFA-capable types: {', '.join(close)}" if close else "see `python -m efa_constructs types`"
    supplements = _read_json(SUPPLEMENTS_FILE)
    unsourced = supplements["unsourced_families"]["families"]
    family = next((f for f in unsourced if name.startswith((f"{f}.", f"{f}-"))), None)
    if family is not None:
        cards = supplements["network_card_counts"]["counts"].get(name)
        per_card = "interfaces per card, which cards take efa or efa-only, bandwidth per card"
        known = (
            f"known: {cards} network cards (EC2 user guide, 'Network cards' table); missing: {per_card}, "
            "EFA interfaces in all"
            if cards
            else f"missing: how many network cards, {per_card}"
        )
        raise EfaConfigError(
            "instance_type",
            code="efa-cdk:instance-type-without-card-facts",
            value=name,
            why=f"{family} supports EFA ({unsourced[family]}), but its network card facts are in no "
            f"source this offline catalogue can cite, and a layout is never guessed; {known}",
            fix="with AWS credentials, in a region that offers the type: `python -m efa_constructs catalogue "
            "refresh --live --region <region>` (DescribeInstanceTypes answers the card facts), then retry",
        )
    if name in _non_efa_types():
        raise EfaConfigError(
            "instance_type",
            code="efa-cdk:instance-type-without-efa",
            value=name,
            why="this instance type exists but does not support EFA",
            fix=f"choose an EFA-capable type ({hint})",
        )
    raise EfaConfigError(
        "instance_type",
        code="efa-cdk:instance-type-unknown",
        value=name,
        why="not in the EFA instance catalogue (unknown type, or a typo)",
        fix=f"use an EFA-capable type ({hint}); if the type is new, refresh the catalogue with "
        "`python -m efa_constructs catalogue refresh --live`",
    )
