"""The register of node rules (``efa_constructs/core/node_rules.py``), rule by rule, in the pure core.

Each rule's own example breaks it here, on a request that passes every rule (the contract suite,
tests/test_contract.py, puts the same examples to every orchestrator); the boundaries come from the services'
rules (EC2's reservations, gp3's sizes, the counts of each service's API); a value known at deploy (None) is
never compared or printed.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import pytest

from efa_constructs import instance_type
from efa_constructs.core import Capacity
from efa_constructs.core.errors import EfaConfigError
from efa_constructs.core.lustre import LustreSpec
from efa_constructs.core.node_rules import (
    AT_DEPLOY,
    NODE_RULES,
    ORCHESTRATORS,
    LustreUse,
    NodeRequest,
    SubnetFact,
    check_capacity_fits,
    check_counts,
    node_rule,
    rules_table,
    run_node_rules,
)

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

RESERVATION = "cr-0123456789abcdef0"
TRN1 = instance_type("trn1.32xlarge")


def valid(orchestrator: str = "EfaPcsCluster", **fields: Any) -> NodeRequest:
    """A request every rule passes: 2 trn1 nodes of 0..2 in us-east-1a of us-east-1, a subnet of the VPC."""
    subnet = SubnetFact("subnet", "S/Vpc/nodes", owner="S/Vpc", vpc="S/Vpc")
    base = NodeRequest(orchestrator, TRN1, 2, "max_count", min_count=0, min_name="min_count",
                       zone="us-east-1a", region="us-east-1", subnets=(subnet,))  # fmt: skip
    return dataclasses.replace(base, **fields)


def example_request(rule_example: dict[str, object], orchestrator: str = "EfaPcsCluster") -> NodeRequest:
    """A rule's example (request fields; an instance type by name; words where the contract builds a
    construct) on the valid request."""
    fields: dict[str, Any] = dict(rule_example)
    if "instance_type" in fields:
        fields["instance_type"] = instance_type(str(fields["instance_type"]))
    if fields.get("subnets") == "of another VPC":
        fields["subnets"] = (SubnetFact("subnet", "S/Other/nodes", owner="S/Other", vpc="S/Vpc"),)
    if fields.get("lustre") == "over EFA":
        fields["lustre"] = LustreUse(LustreSpec(19200, 250, True), "us-east-1a")
    return valid(orchestrator, **fields)


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS)
def test_the_valid_request_passes_every_rule(orchestrator: str) -> None:
    run_node_rules(valid(orchestrator))


@pytest.mark.parametrize("rule", NODE_RULES, ids=[r.id for r in NODE_RULES])
def test_each_rule_refuses_its_own_example_with_an_id_it_declares(rule: Any) -> None:
    with pytest.raises(EfaConfigError) as err:
        rule.check(example_request(dict(rule.example)))
    assert err.value.code in (rule.ids or (rule.id,)), str(err.value)
    # ... and the register refuses it for every orchestrator in the rule's scope, under that one's id
    for orchestrator in rule.scope:
        with pytest.raises(EfaConfigError) as err:
            run_node_rules(example_request(dict(rule.example), orchestrator))
        assert err.value.code == rule.former.get(orchestrator, rule.id) or err.value.code in rule.ids


def test_every_rule_has_an_example_an_id_and_a_scope_of_known_orchestrators() -> None:
    ids = [r.id for r in NODE_RULES]
    assert len(ids) == len(set(ids))
    for rule in NODE_RULES:
        assert rule.example and rule.title and rule.scope, rule.id
        assert set(rule.scope) <= set(ORCHESTRATORS) and set(rule.former) <= set(rule.scope), rule.id
        assert not rule.ids or rule.id in rule.ids, rule.id


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
@pytest.mark.parametrize(
    ("count", "low", "refused_as"),
    [
        (1, 0, None), (2, 2, None), (0, 0, "max_count"), (2, 3, "max_count"), (2, -1, "min_count"),
        # known at deploy: never compared (the service refuses a bad one then)
        (None, 0, None), (None, 5, None), (2, None, None), (None, -1, "min_count"), (0, None, "max_count"),
        # whole numbers only (EC2 RunInstances' MinCount and MaxCount are Integers): a float, or a bool,
        # which Python counts as an int, from an untyped app
        (2.5, 0, "max_count"), (True, 0, "max_count"), (2, 0.5, "min_count"), (2, False, "min_count"),
    ],
)  # fmt: skip
def test_counts_at_their_edges(count: Any, low: Any, refused_as: str | None) -> None:
    request = valid(count=count, min_count=low)
    if refused_as is None:
        check_counts(request)
        return
    with pytest.raises(EfaConfigError) as err:
        check_counts(request)
    assert err.value.what == refused_as and err.value.code == "efa-cdk:node-counts"
    assert "e+" not in str(err.value) and "None" not in str(err.value), str(err.value)


def test_a_count_known_at_deploy_is_shown_as_such_never_as_a_number() -> None:
    with pytest.raises(EfaConfigError) as err:
        check_counts(valid(count=None, min_count=-1))
    assert "max_count (known at deploy)" in str(err.value) and repr(AT_DEPLOY) == "(known at deploy)"
    assert str(err.value).startswith("min_count=-1: ")  # the value refused alone, not a dict of both


def test_the_count_rule_keeps_each_orchestrators_id_and_words() -> None:
    """One rule, one function; each orchestrator's refusal keeps the id it had (users match on them)."""
    rule = node_rule("efa-cdk:node-counts")
    for orchestrator, former in rule.former.items():
        with pytest.raises(EfaConfigError) as err:
            run_node_rules(valid(orchestrator, count=0))
        assert err.value.code == former and orchestrator in str(err.value)
    with pytest.raises(EfaConfigError) as err:  # EfaCluster has no minimum: its message names none
        run_node_rules(valid("EfaCluster", count=0, min_count=0, min_name=None, count_name="node_count"))
    assert str(err.value).startswith("node_count=0: EfaCluster needs at least one node")


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"zone": "eu-west-1a"}, "efa-cdk:zone-outside-region"),
        ({"capacity": Capacity.reservation(RESERVATION, availability_zone="us-west-2a")},
         "efa-cdk:zone-outside-region"),
        ({"capacity": Capacity.reservation_group("arn:aws:resource-groups:eu-west-1:111122223333:group/g")},
         "efa-cdk:reservation-group-other-region"),
        # the stack's region known at deploy (an environment-agnostic stack): nothing to compare
        ({"region": None, "zone": "eu-west-1a"}, None),
        ({"capacity": Capacity.reservation_group("arn:aws:resource-groups:us-east-1:111122223333:group/g")},
         None),
        ({"zone": "us-east-1-bos-1a"}, None),  # a Local Zone's name starts with its region's
    ],
)  # fmt: skip
def test_the_region_rule(fields: dict[str, Any], code: str | None) -> None:
    refused_as(run_node_rules, valid(**fields), code)


def refused_as(check: Any, request: NodeRequest, code: str | None) -> EfaConfigError | None:
    """`check` passes `request` (`code` None), or refuses it under `code`; the refusal, for more asserts."""
    if code is None:
        check(request)
        return None
    with pytest.raises(EfaConfigError) as err:
        check(request)
    assert err.value.code == code
    return err.value


def test_a_rule_binds_only_its_scope() -> None:
    """ParallelCluster writes its nodes' template itself: the root volume rule does not bind it."""
    assert "EfaParallelCluster" not in node_rule("efa-cdk:root-volume-range").scope
    run_node_rules(valid("EfaParallelCluster", root_volume_gib=4))
    with pytest.raises(EfaConfigError):
        run_node_rules(valid("EfaCluster", root_volume_gib=4))


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_docs_table_is_the_registers() -> None:
    from tests.helpers import ROOT

    assert rules_table() in (ROOT / "docs" / "rules.md").read_text()
    # the command the docs name for the table prints it
    printed = subprocess.run(
        [sys.executable, "-m", "efa_constructs.core.node_rules"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert printed == rules_table()


@pytest.mark.parametrize(
    ("capacity", "count", "zone", "code"),
    [
        (Capacity.reservation(RESERVATION, instance_type="p5.48xlarge"), 2, "us-east-1a",
         "efa-cdk:capacity-other-instance-type"),
        (Capacity.reservation(RESERVATION, availability_zone="us-east-1b", instance_count=4), 2, "us-east-1a",
         "efa-cdk:capacity-other-zone"),
        (Capacity.reservation(RESERVATION, availability_zone="us-east-1a", instance_count=1), 2, "us-east-1a",
         "efa-cdk:capacity-too-small"),
        # the boundaries: exactly the count fits; an unknown zone or count (a token) is not checked at synth
        (Capacity.reservation(RESERVATION, availability_zone="us-east-1a", instance_count=2), 2, "us-east-1a",
         None),
        (Capacity.reservation(RESERVATION, availability_zone="us-east-1b", instance_count=4), 2, None, None),
        (Capacity.reservation(RESERVATION, instance_count=1), None, "us-east-1a", None),
        (Capacity.on_demand(), 1000, "us-east-1a", None),
    ],
)  # fmt: skip
def test_the_capacity_holds_the_type_zone_and_count(
    capacity: Capacity, count: int | None, zone: str | None, code: str | None
) -> None:
    request = NodeRequest("EfaPcsCluster", TRN1, count, "max_count", capacity=capacity, zone=zone)
    err = refused_as(check_capacity_fits, request, code)
    if code == "efa-cdk:capacity-too-small":  # the orchestrator's own keyword, in the message and the fix
        assert err is not None and err.what == "max_count" and "use max_count <= 1" in str(err)


@pytest.mark.parametrize(("size", "code"), [(8, None), (16384, None), (7, "efa-cdk:root-volume-range"),
                                            (16385, "efa-cdk:root-volume-range"), (None, None)])  # fmt: skip
def test_the_root_volume_at_its_edges(size: int | None, code: str | None) -> None:
    """gp3's largest volume is 16,384 GiB (EBS user guide, "Amazon EBS volume types"); below 8 GiB no
    Linux image's snapshot fits. Known at deploy (None): not compared."""
    refused_as(run_node_rules, valid("EfaCluster", root_volume_gib=size), code)
