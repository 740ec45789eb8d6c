"""The instance catalogue: reference facts, lookups, and that the shipped file is what the generator makes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from efa_constructs.core.catalogue import (
    AcceleratorKind,
    all_instance_types,
    catalogue_metadata,
    generate,
    instance_type,
)
from efa_constructs.core.errors import EfaConfigError

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

# (type, network cards, max EFA, EFA line rate Gbps) from EFA-FACTS section 3.
REFERENCE = [
    ("trn1.32xlarge", 8, 8, 800),
    ("trn1n.32xlarge", 16, 16, 1600),
    ("trn2.48xlarge", 16, 16, 3200),
    ("p3dn.24xlarge", 1, 1, 100),
    ("p4d.24xlarge", 4, 4, 400),
    ("p4de.24xlarge", 4, 4, 400),
    ("p5.48xlarge", 32, 32, 3200),
    ("p5e.48xlarge", 32, 32, 3200),
    ("p5en.48xlarge", 16, 16, 3200),
    ("p6-b200.48xlarge", 8, 8, 3200),
    ("dl1.24xlarge", 4, 4, 400),
    ("c5n.18xlarge", 1, 1, 100),
]


@pytest.mark.parametrize(("name", "cards", "max_efa", "gbps"), REFERENCE)
def test_reference_counts(name: str, cards: int, max_efa: int, gbps: int) -> None:
    it = instance_type(name)
    assert len(it.network_cards) == cards
    assert it.max_efa_interfaces == max_efa
    assert it.efa_bandwidth_gbps == gbps


def test_covers_every_efa_type_of_the_snapshot() -> None:
    answer, _ = generate.load_moto_snapshot()
    efa = {n for n, e in answer.items() if e["NetworkInfo"].get("EfaSupported")}
    assert len(efa) >= 300
    assert efa <= set(all_instance_types())
    assert catalogue_metadata()["type_count"] == len(all_instance_types())


def test_shipped_file_is_what_the_generator_makes() -> None:
    """Proves `catalogue refresh --offline` reproduces the shipped catalogue byte for byte."""
    answer, source = generate.load_moto_snapshot()
    shipped = (generate.HERE / "instance_types.json").read_text()
    assert generate.render(generate.build(answer, source)) == shipped


def test_types_the_snapshot_lacks_are_supplemented_with_their_source() -> None:
    for name in ("dl1.24xlarge", "p6e-gb200.36xlarge"):
        assert instance_type(name).source.startswith("supplements.json: ")


@pytest.mark.parametrize(
    ("name", "kind", "slots"),
    [
        ("trn1.32xlarge", AcceleratorKind.NEURON, 32),
        ("trn2.48xlarge", AcceleratorKind.NEURON, 64),
        ("p4d.24xlarge", AcceleratorKind.NVIDIA_GPU, 8),
        ("p5.48xlarge", AcceleratorKind.NVIDIA_GPU, 8),
        ("dl1.24xlarge", AcceleratorKind.GAUDI, 8),
        ("c5n.18xlarge", AcceleratorKind.NONE, 36),
        ("hpc7a.96xlarge", AcceleratorKind.NONE, 192),
    ],
)
def test_accelerators_and_mpi_slots(name: str, kind: AcceleratorKind, slots: int) -> None:
    it = instance_type(name)
    assert it.accelerator.kind is kind
    assert it.mpi_slots == slots


@pytest.mark.parametrize("name", ["p4d.24xlarge", "p5.48xlarge", "trn1.32xlarge", "trn2.48xlarge"])
def test_rdma_read_where_documented(name: str) -> None:
    assert instance_type(name).rdma_read


@pytest.mark.parametrize("name", ["p3dn.24xlarge", "g5.48xlarge", "c5n.18xlarge", "dl2q.24xlarge"])
def test_no_rdma_where_libfabric_would_abort(name: str) -> None:
    assert not instance_type(name).rdma_read


def test_per_card_facts_from_supplements() -> None:
    b300 = instance_type("p6-b300.48xlarge")
    assert not b300.card(0).accepts_efa
    assert all(c.accepts_efa for c in b300.network_cards[1:])
    gb = instance_type("p6e-gb200.36xlarge")
    assert gb.card(1).interface_types == {"efa-only"}
    assert gb.card(2).interface_types == {"interface", "efa"}
    i7 = instance_type("i7ie.48xlarge")  # 2 cards that both accept EFA, but one EFA in all
    assert len(i7.efa_cards) == 2
    assert i7.max_efa_interfaces == 1


def test_unknown_type_names_close_matches() -> None:
    with pytest.raises(EfaConfigError) as err:
        instance_type("trn1.32xlarg")
    assert "trn1.32xlarge" in str(err.value)
    assert "'trn1.32xlarg'" in str(err.value)


def test_type_without_efa_is_named_as_such() -> None:
    with pytest.raises(EfaConfigError, match="does not support EFA"):
        instance_type("t3.micro")


def test_generator_refuses_to_guess_which_cards_take_efa() -> None:
    """17 cards, 16 EFAs and no per-card InterfaceTypes: the generator must not infer which card lacks EFA."""
    answer, _ = generate.load_moto_snapshot()
    entry = json.loads(json.dumps(answer["p6-b300.48xlarge"]))
    for card in entry["NetworkInfo"]["NetworkCards"]:
        del card["InterfaceTypes"]
    with pytest.raises(generate.CatalogueGenerationError, match=r"p6-b300\.48xlarge"):
        generate.build({"p6-b300.48xlarge": entry}, "test")


def test_live_interface_types_win_over_supplements() -> None:
    answer, _ = generate.load_moto_snapshot()
    entry = json.loads(json.dumps(answer["p6-b300.48xlarge"]))
    for card in entry["NetworkInfo"]["NetworkCards"]:
        card["InterfaceTypes"] = ["interface", "efa-only", "secondary"]
    doc = generate.build({"p6e-gb200.36xlarge": entry}, "live")  # the supplement says card 0 is ENA-only
    assert doc["types"]["p6e-gb200.36xlarge"]["network_cards"][0]["interface_types"] == [
        "efa-only",
        "interface",
    ]


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("p6e-gb300.36xlarge", "p6e-gb300"),
        ("p6e-gb300.72xlarge", "p6e-gb300"),
        ("u7inh-32tb.480xlarge", "u7inh"),
        ("trn3.48xlarge", "trn3"),
        ("trn2-ac.24xlarge", "trn2-ac"),
        ("trn2u-ac.24xlarge", "trn2u-ac"),
    ],
)
def test_efa_families_without_sourced_card_facts_are_refused_naming_what_is_missing(
    name: str, family: str
) -> None:
    with pytest.raises(EfaConfigError) as err:
        instance_type(name)
    message = str(err.value)
    assert f"{family} supports EFA" in message and "network cards" in message
    assert "catalogue refresh --live" in err.value.fix


def test_a_refusal_says_what_is_known_of_the_cards() -> None:
    with pytest.raises(EfaConfigError) as err:
        instance_type("u7inh-32tb.480xlarge")
    assert "known: 2 network cards" in str(err.value) and "missing: interfaces per card" in str(err.value)


def test_the_catalogue_agrees_with_the_ec2_user_guide_network_cards_table() -> None:
    """Every multi-card type of the shipped catalogue is in the EC2 user guide's 'Network cards' table
    (supplements.json network_card_counts, with its source) with the same number of cards, and every
    type of that table is either in the catalogue or refused as an unsourced family."""
    table = json.loads((generate.HERE / "supplements.json").read_text(encoding="utf-8"))[
        "network_card_counts"
    ]["counts"]
    types = all_instance_types()
    multi_card = {name for name, t in types.items() if len(t.network_cards) > 1}
    assert multi_card <= set(table), sorted(multi_card - set(table))
    cards = {name: len(types[name].network_cards) for name in table if name in types}
    assert cards == {name: n for name, n in table.items() if name in types}
    for name in set(table) - set(types):
        with pytest.raises(EfaConfigError, match="supports EFA"):
            instance_type(name)


def test_a_misspelt_type_is_still_a_typo_not_an_unsourced_family() -> None:
    with pytest.raises(EfaConfigError, match="unknown type, or a typo"):
        instance_type("p6e-gb30.36xlarge")


# Issue 23 items 1-2: (type, line rate Gbps, what sets it). Figures from the EC2 user guide ('Maximize
# network bandwidth ... multiple network cards': p6e-gb200 EFA tops out at 1600 Gbps), the EC2 instance-type
# spec tables' network section and Karpenter's generated bandwidth table (zz_generated.bandwidth.go,
# 2026-08-21), as the issue quotes them; not from the catalogue under test.
DOCUMENTED_LINE_RATES = [
    ("p6e-gb200.36xlarge", 1600, "efa-max"),
    ("hpc8a.96xlarge", 300, "instance"),
    ("g6e.48xlarge", 400, "instance"),
    ("g6e.24xlarge", 200, "instance"),
    ("c6in.32xlarge", 200, "instance"),
    ("c6in.metal", 200, "instance"),
    ("m6in.32xlarge", 200, "instance"),
    ("m6idn.metal", 200, "instance"),
    ("r6in.32xlarge", 200, "instance"),
    ("r6idn.32xlarge", 200, "instance"),
    ("hpc6id.32xlarge", 200, "instance"),
    ("i8ge.48xlarge", 180, "baseline"),
    ("trn1.32xlarge", 800, "cards"),
    ("p5.48xlarge", 3200, "cards"),
]


@pytest.mark.parametrize(("name", "gbps", "label"), DOCUMENTED_LINE_RATES)
def test_a_line_rate_is_never_above_what_aws_documents(name: str, gbps: int, label: str) -> None:
    it = instance_type(name)
    assert (it.efa_bandwidth_gbps, it.line_rate_label) == (gbps, label)


def test_every_type_names_its_documented_bandwidth_and_no_line_rate_exceeds_it() -> None:
    for it in all_instance_types().values():
        assert it.network_bandwidth_gbps > 0 and it.network_bandwidth_source, it.name
        assert it.efa_bandwidth_gbps <= it.network_bandwidth_gbps, it.name


def test_p6e_gb200_card_0_and_interface_total_are_the_user_guides() -> None:
    """Card 0 is ENA up to 100 Gbps; 39 network interfaces in all (spec table). Any EFA count on the type
    is rated against 1600 Gbps, the 16-EFA layout (8 x 400 + 8 x 200 of card peaks) too."""
    from efa_constructs.core.layout import plan_layout

    gb = instance_type("p6e-gb200.36xlarge")
    assert (gb.card(0).peak_bandwidth_gbps, gb.max_network_interfaces) == (100, 39)
    assert plan_layout(gb, efa_count=16).efa_bandwidth_gbps == 1600
    assert plan_layout(gb, efa_count=4).efa_bandwidth_gbps == 1600
    assert "AWS's EFA maximum" in plan_layout(gb).line_rate_source


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("UnauthorizedOperation", "DescribeInstanceTypes in us-west-2 failed: UnauthorizedOperation: denied"),
        ("RequestLimitExceeded", "DescribeInstanceTypes in us-west-2 failed: RequestLimitExceeded: denied"),
    ],
)
def test_a_live_refresh_error_is_one_line_naming_the_region(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: str, says: str
) -> None:
    """The AWS error a user can hit, through botocore's own EC2 model (Stubber checks the request)."""
    import boto3
    from botocore.stub import Stubber

    from efa_constructs.__main__ import main

    client = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    stubber.add_client_error(
        "describe_instance_types",
        service_error_code=code,
        service_message="denied",
        expected_params={"Filters": [{"Name": "network-info.efa-supported", "Values": ["true"]}]},
    )
    stubber.activate()
    monkeypatch.setattr("efa_constructs.tools.catalogue_live.aws_client", lambda *_a, **_k: client)
    assert main(["catalogue", "refresh", "--live", "--region", "us-west-2", "--to", "/dev/null"]) == 4
    err = capsys.readouterr().err
    assert err.startswith(f"error: catalogue refresh: {says}") and err.count("\n") == 1, err
    assert "ec2:DescribeInstanceTypes" in err
    stubber.assert_no_pending_responses()


def test_a_live_refresh_without_credentials_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    from efa_constructs.__main__ import main

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert main(["catalogue", "refresh", "--live", "--region", "eu-west-1", "--to", "/dev/null"]) == 4
    err = capsys.readouterr().err
    assert err == (
        "error: catalogue refresh: DescribeInstanceTypes in eu-west-1 failed: Unable to locate credentials "
        "(set AWS credentials, e.g. AWS_PROFILE, or refresh offline without --live)\n"
    )


@pytest.mark.parametrize(
    "name",
    ["u7ib-12tb.224xlarge", "u7inh-32tb.480xlarge", "m9g.metal-24xl", "m9gd.metal-24xl", "g4ad.xlarge",
     "p3.2xlarge", "i3.metal"],
)  # fmt: skip
def test_a_head_or_login_type_ec2s_model_names_is_taken(name: str) -> None:
    """Issue 53 item 8: types EC2's API model lists (botocore's InstanceType enum, the source) but moto's
    snapshot does not were refused as "not an EC2 instance type"; a typo still is."""
    import botocore.session

    from efa_constructs.core.catalogue import check_ec2_type

    assert name in botocore.session.get_session().get_service_model("ec2").shape_for("InstanceType").enum
    check_ec2_type(name, "head_node_instance_type")
    with pytest.raises(EfaConfigError) as err:
        check_ec2_type(name.replace(".", ".x"), "head_node_instance_type")
    assert err.value.code == "efa-cdk:not-an-ec2-instance-type"


@pytest.mark.parametrize(
    ("name", "nitro"),
    # the EC2 user guide's EFA "Supported instance types" tables, one per Nitro version
    [("p3dn.24xlarge", 3), ("p4d.24xlarge", 3), ("dl1.24xlarge", 3), ("c5n.18xlarge", 3),
     ("trn1.32xlarge", 4), ("trn1n.32xlarge", 4), ("p5.48xlarge", 4), ("hpc7a.96xlarge", 4),
     ("p5en.48xlarge", 5), ("trn2.48xlarge", 5), ("p6e-gb200.36xlarge", 5), ("p6-b200.48xlarge", 6),
     ("p6-b300.48xlarge", 6), ("c9g.48xlarge", None)],
)  # fmt: skip
def test_each_type_carries_its_nitro_version_from_the_user_guides_efa_tables(
    name: str, nitro: int | None
) -> None:
    """Issue 53 item 6: FSx's EFA client rule reads it; c9g is newer than the tables (no version)."""
    assert instance_type(name).nitro_version == nitro


def test_the_generator_refuses_a_family_in_two_nitro_versions() -> None:
    answer, _ = generate.load_moto_snapshot()
    sup = json.loads((generate.HERE / "supplements.json").read_text())
    sup["nitro_version"]["by_version"]["6"].append("trn1")
    with pytest.raises(generate.CatalogueGenerationError, match="trn1: in more than one Nitro version"):
        generate.build({"trn1.32xlarge": answer["trn1.32xlarge"]}, "test", sup, ([], "none"))
