"""The layout engine over every catalogued type, plus the exact layouts users know."""

from __future__ import annotations

from collections import Counter

import pytest

from efa_constructs.core.catalogue import InstanceType, all_instance_types, instance_type
from efa_constructs.core.errors import EfaConfigError
from efa_constructs.core.layout import (
    LayoutMode,
    NetworkInterfaceSpec,
    NicLayout,
    default_efa_count,
    layout_violations,
    plan_layout,
)

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

ALL = sorted(all_instance_types().values(), key=lambda t: t.name)
S = NetworkInterfaceSpec


def assert_hard_limits(it: InstanceType, layout: NicLayout) -> None:
    """EFA-FACTS section 2, checked here without the engine's own validator."""
    ifaces = layout.interfaces
    assert ifaces[0].network_card_index == 0
    assert ifaces[0].device_index == 0
    assert ifaces[0].interface_type in ("interface", "efa")  # never efa-only as primary
    assert len({(i.network_card_index, i.device_index) for i in ifaces}) == len(ifaces)
    efa_per_card = Counter(i.network_card_index for i in ifaces if i.interface_type in ("efa", "efa-only"))
    assert max(efa_per_card.values()) == 1
    assert 1 <= sum(efa_per_card.values()) <= it.max_efa_interfaces
    for i in ifaces:
        card = it.network_cards[i.network_card_index]
        assert i.device_index < card.max_interfaces, (it.name, i)
        assert i.interface_type in card.interface_types, (it.name, i)


@pytest.mark.parametrize("it", ALL, ids=lambda t: t.name)
def test_every_type_every_mode_obeys_the_hard_limits(it: InstanceType) -> None:
    for mode in LayoutMode:
        try:
            layout = plan_layout(it, mode)
        except EfaConfigError as err:
            # Only refusal allowed: legacy needs `efa` where a card takes only efa-only.
            assert mode is LayoutMode.LEGACY
            assert "efa-only" in str(err)
            continue
        assert_hard_limits(it, layout)
        assert layout_violations(it, layout.interfaces) == []
        assert layout.efa_count == default_efa_count(it)
        if mode is LayoutMode.RECOMMENDED:
            assert layout.ip_count == 1  # the "save IP" layout


@pytest.mark.parametrize("it", ALL, ids=lambda t: t.name)
def test_every_smaller_efa_count_is_honoured(it: InstanceType) -> None:
    for n in range(1, default_efa_count(it) + 1):
        layout = plan_layout(it, efa_count=n)
        assert layout.efa_count == n
        assert_hard_limits(it, layout)


def _triples(layout: NicLayout) -> list[tuple[int, int, str]]:
    return [(i.network_card_index, i.device_index, i.interface_type) for i in layout.interfaces]


def test_trn1_legacy_is_the_seed_guide_layout() -> None:
    assert _triples(plan_layout("trn1.32xlarge", "legacy")) == [(0, 0, "efa")] + [
        (c, 1, "efa") for c in range(1, 8)
    ]


def test_trn1_recommended_saves_ips() -> None:
    assert _triples(plan_layout("trn1.32xlarge")) == [(0, 0, "interface"), (0, 1, "efa-only")] + [
        (c, 0, "efa-only") for c in range(1, 8)
    ]


def test_p5_max_bandwidth_adds_ena_on_every_fourth_card() -> None:
    layout = plan_layout("p5.48xlarge", "max-bandwidth")
    assert layout.efa_count == 32
    enas = [i.network_card_index for i in layout.interfaces if i.interface_type == "interface"]
    assert enas == [0, 4, 8, 12, 16, 20, 24, 28]
    assert all(
        i.device_index == 1
        for i in layout.interfaces
        if i.interface_type == "interface" and i.network_card_index
    )


def test_p5_legacy_consumes_an_ip_per_efa() -> None:
    assert plan_layout("p5.48xlarge", "legacy").ip_count == 32


def test_p6_b300_card0_is_ena_only() -> None:
    layout = plan_layout("p6-b300.48xlarge")
    assert _triples(layout)[0] == (0, 0, "interface")
    assert {i.network_card_index for i in layout.interfaces if i.is_efa} == set(range(1, 17))


def test_p6e_gb200_uses_the_odd_efa_only_cards() -> None:
    assert [i.network_card_index for i in plan_layout("p6e-gb200.36xlarge").interfaces if i.is_efa] == list(
        range(1, 16, 2)
    )
    four = plan_layout("p6e-gb200.36xlarge", efa_count=4)
    assert [i.network_card_index for i in four.interfaces if i.is_efa] == [1, 5, 9, 13]
    sixteen = plan_layout("p6e-gb200.36xlarge", efa_count=16)
    assert {i.interface_type for i in sixteen.interfaces if i.network_card_index % 2 == 0 and i.is_efa} == {
        "efa"
    }
    with pytest.raises(EfaConfigError, match="recommended"):
        plan_layout("p6e-gb200.36xlarge", "legacy")


def test_p6e_gb200_takes_one_interface_on_an_odd_card_under_either_reading() -> None:
    """Issue 53 item 9: on the odd (EFA-only, 400 Gbps) cards one source says 2 interfaces, a ParallelCluster
    review (aws/aws-parallelcluster PR 6930) says 1. The catalogue keeps 1, so what the engine accepts works
    under both: every built-in layout puts one there; a custom layout with two is refused at synth."""
    from efa_constructs.core.layout import NetworkInterfaceSpec, NicLayout

    it = instance_type("p6e-gb200.36xlarge")
    assert [c.max_interfaces for c in it.network_cards if c.index % 2] == [1] * 8
    assert {c.max_interfaces for c in it.network_cards if not c.index % 2} == {2}
    for mode in ("recommended", "max-bandwidth"):
        odd = [
            i.network_card_index for i in plan_layout(it.name, mode).interfaces if i.network_card_index % 2
        ]
        assert len(odd) == len(set(odd))  # one interface a card
    two = [NetworkInterfaceSpec(0, 0, "interface"), NetworkInterfaceSpec(1, 0, "efa-only"),
           NetworkInterfaceSpec(1, 1, "efa-only")]  # fmt: skip
    with pytest.raises(EfaConfigError):
        NicLayout.custom(it, two)


# Golden layouts of the newest families in the catalogue (moto 5.2.5's DescribeInstanceTypes snapshot:
# per-card MaximumNetworkInterfaces and EFA counts), in AWS's recommended layout ("Maximize network
# bandwidth on accelerated instances": ENA primary, efa-only on card 0 device 1, then efa-only at
# device 0 of every other EFA card).
GOLDEN = {
    "g7e.48xlarge": [(0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only"), (2, 0, "efa-only"),
                     (3, 0, "efa-only")],
    "hpc8a.96xlarge": [(0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only")],
    "trn2.48xlarge": [(0, 0, "interface"), (0, 1, "efa-only"), *[(c, 0, "efa-only") for c in range(1, 16)]],
    "trn2u.48xlarge": [(0, 0, "interface"), (0, 1, "efa-only"), *[(c, 0, "efa-only") for c in range(1, 16)]],
    "p6-b300.48xlarge": [(0, 0, "interface"), *[(c, 0, "efa-only") for c in range(1, 17)]],
    "p6e-gb200.36xlarge": [(0, 0, "interface"), *[(c, 0, "efa-only") for c in range(1, 16, 2)]],
}  # fmt: skip


@pytest.mark.parametrize("itype", list(GOLDEN))
def test_golden_layouts_of_the_newest_families(itype: str) -> None:
    assert _triples(plan_layout(itype)) == GOLDEN[itype]


def test_p6e_gb200_all_sixteen_efas_is_one_option_away() -> None:
    """AWS suggests efa-only on the odd cards (the default, 8 EFAs); ParallelCluster uses all 16
    cards (efa on the even ones): efa_count=16 gives that layout."""
    sixteen = _triples(plan_layout("p6e-gb200.36xlarge", efa_count=16))
    assert sixteen[1:] == [(c, 0, "efa-only" if c % 2 else "efa") for c in range(1, 17)]


def test_hpc6id_combines_ena_and_efa_on_card0() -> None:
    assert _triples(plan_layout("hpc6id.32xlarge")) == [(0, 0, "efa"), (1, 0, "efa-only")]


def test_i7ie_has_two_cards_but_one_efa() -> None:
    assert _triples(plan_layout("i7ie.48xlarge")) == [(0, 0, "interface"), (0, 1, "efa-only")]


@pytest.mark.parametrize("bad", [0, -1, 9, True, "8"])
def test_efa_count_out_of_range(bad: object) -> None:
    with pytest.raises(EfaConfigError) as err:
        plan_layout("trn1.32xlarge", efa_count=bad)  # type: ignore[arg-type]
    assert "between 1 and 8" in str(err.value)
    assert repr(bad) in str(err.value)


def test_unknown_mode() -> None:
    with pytest.raises(EfaConfigError, match="recommended, max-bandwidth, legacy"):
        plan_layout("trn1.32xlarge", "fastest")


# Custom layouts: every hard limit has its own message.
CUSTOM_BAD = [
    ([S(0, 0, "efa-only"), S(1, 0, "efa-only")], "cannot be efa-only"),
    ([S(0, 0, "interface"), S(0, 1, "efa-only"), S(0, 2, "efa")], "at most one EFA per network card"),
    ([S(0, 0, "interface"), S(1, 2, "efa-only")], "MaximumNetworkInterfaces (2)"),  # the eksctl p5 bug
    ([S(0, 0, "interface"), S(32, 0, "efa-only")], "network cards 0..31"),
    ([S(0, 0, "interface"), S(1, 0, "efx")], "unknown interface type 'efx'"),
    ([S(0, 0, "interface"), S(1, 0, "efa-only"), S(1, 0, "interface")], "share card 1 / DeviceIndex 0"),
    ([S(0, 0, "interface")], "no EFA interface at all"),
    ([S(1, 0, "efa-only")], "no primary interface"),
]


@pytest.mark.parametrize(("interfaces", "message"), CUSTOM_BAD)
def test_custom_layout_violations(interfaces: list[NetworkInterfaceSpec], message: str) -> None:
    with pytest.raises(EfaConfigError) as err:
        NicLayout.custom("p5.48xlarge", interfaces)
    assert message in str(err.value)
    assert "p5.48xlarge" in str(err.value)


def test_custom_layout_card_type_and_efa_limits() -> None:
    with pytest.raises(EfaConfigError, match=r"card 0 accepts \['interface'\], not 'efa'"):
        NicLayout.custom("p6-b300.48xlarge", [S(0, 0, "efa")])
    with pytest.raises(EfaConfigError, match="exceed MaximumEfaInterfaces=1"):
        NicLayout.custom("i7ie.48xlarge", [S(0, 0, "efa"), S(1, 0, "efa-only")])


def test_custom_layout_accepts_the_older_device_index_1_convention() -> None:
    layout = NicLayout.custom(
        "trn1.32xlarge", [S(0, 0, "interface")] + [S(c, 1, "efa-only") for c in range(1, 8)]
    )
    assert layout.efa_count == 7
    assert layout.mode is None


def test_table_is_readable() -> None:
    table = plan_layout("p4d.24xlarge").table()
    assert "p4d.24xlarge  layout=recommended  EFA=4  IPs/node=1  EFA line rate=400 Gbps" in table
    assert instance_type("p4d.24xlarge").card(3).peak_bandwidth_gbps == 100
