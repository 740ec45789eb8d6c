"""The network-interface layout engine: instance type + options -> ordered interfaces.

Pure Python, no jsii. Every decision is read from the catalogue's per-card facts (which
interface types a card accepts, how many interfaces it holds), so new instance types come out
right when the data says so, with no per-type branches here.

Modes (see docs/constructs.md, "Layouts"):

* ``RECOMMENDED`` (default): AWS's current "save IP" layout. Card 0 gets an ENA ``interface``
  at DeviceIndex 0 plus an ``efa-only`` at DeviceIndex 1 when card 0 carries EFA; every other
  EFA card gets an ``efa-only`` at DeviceIndex 0. One private IP per node.
* ``MAX_BANDWIDTH``: as above, plus an ENA ``interface`` at DeviceIndex 1 on the cards AWS names
  for the type (or every EFA card with room), for more IP bandwidth.
* ``LEGACY``: the layout of the seed guides, eksctl and Karpenter: ``efa`` at card 0 /
  DeviceIndex 0 and ``efa`` at DeviceIndex 1 on every other card. Each consumes an IP.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .catalogue import EFA, EFA_ONLY, INTERFACE, INTERFACE_TYPES, InstanceType, NetworkCard
from .catalogue import instance_type as lookup
from .errors import EfaConfigError, parse_choice


class LayoutMode(enum.Enum):
    """Which interface layout to build; see the module docstring."""

    RECOMMENDED = "recommended"
    MAX_BANDWIDTH = "max-bandwidth"
    LEGACY = "legacy"

    @classmethod
    def parse(cls, value: str | LayoutMode) -> LayoutMode:
        """Accept a mode or its string value; reject anything else with the valid choices."""
        return parse_choice(cls, value, what="nic_layout", why="not a known layout")


@dataclass(frozen=True, order=True)
class NetworkInterfaceSpec:
    """One interface of a node: where it sits and what type it is."""

    network_card_index: int
    device_index: int
    interface_type: str

    @property
    def is_efa(self) -> bool:
        """True for ``efa`` and ``efa-only`` interfaces."""
        return self.interface_type in (EFA, EFA_ONLY)

    @property
    def has_ip(self) -> bool:
        """``efa-only`` interfaces get no IP address; the others get one."""
        return self.interface_type != EFA_ONLY

    @property
    def is_primary(self) -> bool:
        """Card 0 / DeviceIndex 0 is the node's primary interface."""
        return self.network_card_index == 0 and self.device_index == 0


@dataclass(frozen=True)
class NicLayout:
    """A validated, ordered list of interfaces for one instance type."""

    instance_type: InstanceType
    mode: LayoutMode | None  # None for a custom layout
    interfaces: tuple[NetworkInterfaceSpec, ...]

    @property
    def efa_count(self) -> int:
        """EFA devices a node gets: what `/sys/class/infiniband` must list on the node."""
        return sum(1 for i in self.interfaces if i.is_efa)

    @property
    def ip_count(self) -> int:
        """Private IPv4 addresses each node consumes in its subnet."""
        return sum(1 for i in self.interfaces if i.has_ip)

    @property
    def primary(self) -> NetworkInterfaceSpec:
        """The card-0 / DeviceIndex-0 interface (where an Elastic IP goes)."""
        return self.interfaces[0]

    @property
    def efa_bandwidth_gbps(self) -> float:
        """The EFA line rate a node reaches, which benchmarks are rated against (:attr:`line_rate_source`)."""
        return self._line_rate[0]

    @property
    def line_rate_source(self) -> str:
        """What set :attr:`efa_bandwidth_gbps`: the EFA cards' peak bandwidth, the instance's documented
        bandwidth, or AWS's EFA maximum for the type, whichever is lowest."""
        return self._line_rate[1]

    @property
    def _line_rate(self) -> tuple[float, str]:
        it = self.instance_type
        cards = sum(it.card(i.network_card_index).peak_bandwidth_gbps for i in self.interfaces if i.is_efa)
        return it.line_rate(cards)

    def table(self) -> str:
        """A plain-text table of the layout, for the CLI and docs."""
        rows = [
            f"{self.instance_type.name}  layout={self.mode.value if self.mode else 'custom'}  "
            f"EFA={self.efa_count}  IPs/node={self.ip_count}  EFA line rate={self.efa_bandwidth_gbps:g} Gbps "
            f"(set by {self.line_rate_source})",
            "card  device  type       card Gbps",
        ]
        for i in self.interfaces:
            card = self.instance_type.card(i.network_card_index)
            rows.append(
                f"{i.network_card_index:>4}  {i.device_index:>6}  {i.interface_type:<9}  "
                f"{card.peak_bandwidth_gbps:g}"
            )
        return "\n".join(rows)

    @staticmethod
    def custom(instance_type: str | InstanceType, interfaces: Iterable[NetworkInterfaceSpec]) -> NicLayout:
        """A user-written layout, checked against every hard limit of the instance type."""
        it = lookup(instance_type) if isinstance(instance_type, str) else instance_type
        specs = tuple(sorted(interfaces))
        validate(it, specs)
        return NicLayout(it, None, specs)


def _spread(cards: Sequence[NetworkCard], n: int) -> list[NetworkCard]:
    """n cards spread evenly over `cards` (all of them when n == len)."""
    return [cards[(i * len(cards)) // n] for i in range(n)]


def _choose_efa_cards(it: InstanceType, efa_count: int) -> list[NetworkCard]:
    # Cards that take efa-only are the dedicated EFA paths; use them first, spread evenly
    # when fewer are asked for (p6e-gb200: 4 EFAs -> cards 1, 5, 9, 13), then cards that
    # take only `efa`.
    dedicated = [c for c in it.efa_cards if EFA_ONLY in c.interface_types]
    others = [c for c in it.efa_cards if EFA_ONLY not in c.interface_types]
    if efa_count <= len(dedicated):
        chosen = _spread(dedicated, efa_count)
    else:
        chosen = dedicated + others[: efa_count - len(dedicated)]
    return sorted(chosen, key=lambda c: c.index)


def default_efa_count(it: InstanceType) -> int:
    """EFAs a node gets by default: one per dedicated EFA card, capped by the type's maximum."""
    dedicated = sum(1 for c in it.efa_cards if EFA_ONLY in c.interface_types)
    return min(it.max_efa_interfaces, dedicated or len(it.efa_cards))


def _efa_type(card: NetworkCard, prefer: str) -> str:
    if prefer in card.interface_types:
        return prefer
    return EFA if EFA in card.interface_types else EFA_ONLY


def plan_layout(
    instance_type: str | InstanceType,
    mode: LayoutMode | str = LayoutMode.RECOMMENDED,
    *,
    efa_count: int | None = None,
) -> NicLayout:
    """Plan the interfaces of one node.

    Args:
        instance_type: name or catalogue entry.
        mode: see :class:`LayoutMode`. Default: ``RECOMMENDED``.
        efa_count: EFAs per node. Default: one per dedicated EFA card, at most the type's
            ``MaximumEfaInterfaces`` (8 on trn1.32xlarge, 32 on p5.48xlarge).

    Raises:
        EfaConfigError: the request cannot be met on this type (the message says why and the fix).
    """
    it = lookup(instance_type) if isinstance(instance_type, str) else instance_type
    mode = LayoutMode.parse(mode)
    chosen = _choose_efa_cards(it, _efa_count(it, efa_count))
    specs = _legacy(it, chosen) if mode is LayoutMode.LEGACY else _efa_only(it, chosen)
    if mode is LayoutMode.MAX_BANDWIDTH:
        specs.extend(_extra_ena(it, specs))
    layout = NicLayout(it, mode, tuple(sorted(specs)))
    validate(it, layout.interfaces)
    return layout


def _efa_count(it: InstanceType, efa_count: int | None) -> int:
    """EFAs per node: `efa_count` when the type takes it, else the default; anything else refused."""
    limit = min(len(it.efa_cards), it.max_efa_interfaces)
    count = default_efa_count(it) if efa_count is None else efa_count
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= limit:
        raise EfaConfigError(
            "efa_count",
            code="efa-cdk:efa-count-range",
            value=efa_count,
            why=f"{it.name} takes 1 to {limit} EFA interfaces ({len(it.network_cards)} network cards, "
            f"{len(it.efa_cards)} accept EFA, MaximumEfaInterfaces={it.max_efa_interfaces})",
            fix=f"set efa_count between 1 and {limit}, or leave it unset",
        )
    return count


def _legacy(it: InstanceType, chosen: Sequence[NetworkCard]) -> list[NetworkInterfaceSpec]:
    """``efa`` on every chosen card (card 0 at DeviceIndex 0, the others at 1 where a card takes two), an
    ENA primary on card 0 when card 0 is not chosen."""
    specs = []
    for card in chosen if chosen[0].index == 0 else [it.card(0), *chosen]:
        wanted = INTERFACE if card.index == 0 and not (card.accepts_efa and card in chosen) else EFA
        if wanted not in card.interface_types:
            raise EfaConfigError(
                "nic_layout",
                code="efa-cdk:layout-legacy-card",
                value=LayoutMode.LEGACY.value,
                why=f"the legacy layout puts an `{wanted}` interface on card {card.index} of "
                f"{it.name}, which accepts only {sorted(card.interface_types)}",
                fix="use nic_layout='recommended' (AWS's current layout), which uses efa-only there",
            )
        device = 0 if card.index == 0 or card.max_interfaces == 1 else 1
        specs.append(NetworkInterfaceSpec(card.index, device, wanted))
    return specs


def _efa_only(it: InstanceType, chosen: Sequence[NetworkCard]) -> list[NetworkInterfaceSpec]:
    """An ENA primary and ``efa-only`` on every chosen card (card 0's at DeviceIndex 1); an ``efa`` primary
    where card 0 is chosen and cannot hold a second interface or an efa-only one."""
    card0 = it.card(0)
    primary_is_efa = (
        bool(chosen)
        and chosen[0].index == 0
        and (card0.max_interfaces < 2 or EFA_ONLY not in card0.interface_types)
    )
    specs = [NetworkInterfaceSpec(0, 0, EFA if primary_is_efa else INTERFACE)]
    for card in chosen:
        if card.index != 0:
            specs.append(NetworkInterfaceSpec(card.index, 0, _efa_type(card, EFA_ONLY)))
        elif not primary_is_efa:
            specs.append(NetworkInterfaceSpec(0, 1, EFA_ONLY))
    return specs


def _extra_ena(it: InstanceType, specs: Sequence[NetworkInterfaceSpec]) -> list[NetworkInterfaceSpec]:
    used = Counter(s.network_card_index for s in specs)
    efa_cards = {s.network_card_index for s in specs if s.is_efa and s.network_card_index != 0}
    wanted = it.max_bandwidth_ena_cards or tuple(sorted(efa_cards))
    extra = []
    for index in wanted:
        card = it.card(index)
        if used[index] < card.max_interfaces and INTERFACE in card.interface_types:
            device = max((s.device_index for s in specs if s.network_card_index == index), default=-1) + 1
            extra.append(NetworkInterfaceSpec(index, device, INTERFACE))
    return extra


def layout_violations(it: InstanceType, interfaces: Sequence[NetworkInterfaceSpec]) -> list[str]:
    """Every hard limit of EFA-FACTS section 2 that `interfaces` breaks on `it` (empty: valid)."""
    positions = Counter((i.network_card_index, i.device_index) for i in interfaces)
    problems = [
        f"{n} interfaces share card {c} / DeviceIndex {d}" for (c, d), n in positions.items() if n > 1
    ]
    for i in interfaces:
        problems += _interface_violations(it, i)
    primaries = [i for i in interfaces if i.is_primary]
    if not primaries:
        problems.append("no primary interface at card 0 / DeviceIndex 0")
    elif primaries[0].interface_type == EFA_ONLY:
        problems.append("the primary interface (card 0 / DeviceIndex 0) cannot be efa-only")
    return problems + _count_violations(it, interfaces)


def _interface_violations(it: InstanceType, i: NetworkInterfaceSpec) -> list[str]:
    """What one interface breaks: its type, its card, its DeviceIndex on the card."""
    where = f"card {i.network_card_index} / DeviceIndex {i.device_index}"
    if i.interface_type not in INTERFACE_TYPES:
        return [
            f"{where}: unknown interface type {i.interface_type!r} (use one of {', '.join(INTERFACE_TYPES)})"
        ]
    n_cards = len(it.network_cards)
    if not 0 <= i.network_card_index < n_cards:
        return [f"{where}: {it.name} has network cards 0..{n_cards - 1}"]
    card, problems = it.card(i.network_card_index), []
    if not 0 <= i.device_index < card.max_interfaces:
        problems.append(
            f"{where}: DeviceIndex must be below the card's MaximumNetworkInterfaces ({card.max_interfaces})"
        )
    if i.interface_type not in card.interface_types:
        problems.append(
            f"{where}: card {card.index} accepts {sorted(card.interface_types)}, not {i.interface_type!r}"
        )
    return problems


def _count_violations(it: InstanceType, interfaces: Sequence[NetworkInterfaceSpec]) -> list[str]:
    """What the layout's counts break: one EFA per card, at least one, the type's maxima."""
    efa_per_card = Counter(i.network_card_index for i in interfaces if i.is_efa)
    problems = [
        f"card {c} carries {n} EFAs; at most one EFA per network card"
        for c, n in sorted(efa_per_card.items())
        if n > 1
    ]
    total_efa = sum(efa_per_card.values())
    if total_efa == 0:
        problems.append("no EFA interface at all")
    if total_efa > it.max_efa_interfaces:
        problems.append(f"{total_efa} EFAs exceed MaximumEfaInterfaces={it.max_efa_interfaces}")
    if len(interfaces) > it.max_network_interfaces:
        problems.append(
            f"{len(interfaces)} interfaces exceed MaximumNetworkInterfaces={it.max_network_interfaces}"
        )
    return problems


def validate(it: InstanceType, interfaces: Sequence[NetworkInterfaceSpec]) -> None:
    """Raise :class:`EfaConfigError` listing every hard limit the layout breaks."""
    problems = layout_violations(it, interfaces)
    if problems:
        raise EfaConfigError(
            "nic_layout",
            code="efa-cdk:layout-invalid",
            value=[(i.network_card_index, i.device_index, i.interface_type) for i in interfaces],
            why=f"invalid on {it.name}: " + "; ".join(problems),
            fix="use plan_layout() (recommended, max-bandwidth or legacy) or correct the listed interfaces",
        )


class Layout:
    """Which interfaces an EFA node gets, as an option of a construct: a mode the engine lays out for the
    node's instance type (with how many EFAs), or a ready :class:`NicLayout`.

    One class with factory methods, like aws-cdk-lib's ``ec2.MachineImage``: ``Layout.recommended()``
    (the default), ``Layout.legacy(efa_count=4)``, ``Layout.max_bandwidth()``, ``Layout.mode("legacy")``
    (a mode read from text), ``Layout.custom(nic_layout)``. :meth:`resolve` lays it out for a type.
    """

    __slots__ = ("_custom", "_efa_count", "_mode")

    def __init__(self, mode: LayoutMode | None, efa_count: int | None, custom: NicLayout | None) -> None:
        """Use the factory methods."""
        self._mode, self._efa_count, self._custom = mode, efa_count, custom

    @staticmethod
    def recommended(efa_count: int | None = None) -> Layout:
        """AWS's current layout: an ENA primary interface, ``efa-only`` on every EFA card (one IP a node).

        Args:
            efa_count: EFAs per node. Default: one per dedicated EFA card, at most the type's maximum.
        """
        return Layout(LayoutMode.RECOMMENDED, efa_count, None)

    @staticmethod
    def max_bandwidth(efa_count: int | None = None) -> Layout:
        """As :meth:`recommended`, plus ENA interfaces on the cards AWS names, for more IP bandwidth."""
        return Layout(LayoutMode.MAX_BANDWIDTH, efa_count, None)

    @staticmethod
    def legacy(efa_count: int | None = None) -> Layout:
        """``efa`` on every card (card 0 at DeviceIndex 0, the others at 1): the seed guides', eksctl's
        and AWS PCS's layout. Every interface takes an IP."""
        return Layout(LayoutMode.LEGACY, efa_count, None)

    @staticmethod
    def mode(mode: LayoutMode | str, efa_count: int | None = None) -> Layout:
        """A mode given as a :class:`LayoutMode` or its text (``"recommended"``, ``"max-bandwidth"``,
        ``"legacy"``), e.g. read from CDK context; anything else is refused with the choices."""
        return Layout(LayoutMode.parse(mode), efa_count, None)

    @staticmethod
    def custom(layout: NicLayout) -> Layout:
        """A ready layout (:func:`plan_layout`, :meth:`NicLayout.custom`), for the node's own type."""
        if not isinstance(layout, NicLayout):
            raise EfaConfigError(
                "nic_layout",
                code="efa-cdk:layout-custom-type",
                value=layout,
                why="Layout.custom takes a NicLayout",
                fix="pass plan_layout(...) or NicLayout.custom(...), or use Layout.mode(...) for a mode",
            )
        return Layout(None, None, layout)

    @property
    def layout_mode(self) -> LayoutMode | None:
        """The mode, or None for a custom layout."""
        return self._mode if self._custom is None else self._custom.mode

    def resolve(self, instance_type: InstanceType) -> NicLayout:
        """The interfaces for `instance_type`: planned from the mode, or the custom layout checked to be
        for that type."""
        if self._custom is None:
            assert self._mode is not None
            return plan_layout(instance_type, self._mode, efa_count=self._efa_count)
        if self._custom.instance_type.name != instance_type.name:
            raise EfaConfigError(
                "nic_layout",
                code="efa-cdk:layout-other-instance-type",
                value=self._custom.instance_type.name,
                why=f"the layout was planned for another type than instance_type={instance_type.name!r}",
                fix="plan the layout for the same instance type",
            )
        return self._custom

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and (self._mode, self._efa_count, self._custom) == (
            other._mode,
            other._efa_count,
            other._custom,
        )

    def __hash__(self) -> int:
        return hash((self._mode, self._efa_count, self._custom))

    def __repr__(self) -> str:
        if self._custom is not None:
            it, n = self._custom.instance_type.name, len(self._custom.interfaces)
            return f"Layout.custom({it}, {n} interfaces)"
        count = "" if self._efa_count is None else f"efa_count={self._efa_count}"
        assert self._mode is not None
        return f"Layout.{self._mode.name.lower()}({count})"
