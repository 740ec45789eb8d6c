"""`EfaNetwork` (cdk/network.py) on its own (the stacks' tests cover the network they build)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import assertions

from efa_constructs.core.errors import EfaConfigError

Match = assertions.Match


def test_network_refuses_a_zone_of_another_region(make_stack: Any) -> None:
    from aws_cdk import Environment

    from efa_constructs import EfaNetwork

    stack = make_stack(env=Environment(region="us-west-2"))
    with pytest.raises(
        EfaConfigError, match="availability_zone='us-east-1a': the stack deploys to us-west-2"
    ):
        EfaNetwork(stack, "Net", availability_zone="us-east-1a")


@pytest.mark.parametrize("zone", ["us-east-1c", None])
def test_a_zone_asked_for_stays_clean_under_stock_cfn_lint(make_stack: Any, zone: str | None) -> None:
    """A named zone is written on the subnets as a literal, which stock cfn-lint warns of (W3010): the
    network says on those subnets why it is pinned, so a user's own cfn-lint run stays clean; without a
    named zone nothing is pinned and nothing is suppressed."""
    from efa_constructs import EfaNetwork
    from tests.helpers import lint

    stack = make_stack(env={"region": "us-east-1"})
    EfaNetwork(stack, "Net", availability_zone=zone)
    template = assertions.Template.from_stack(stack).to_json()
    assert lint(template, stock=True) == []
    subnets = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::Subnet"]
    suppressed = [s for s in subnets if "W3010" in str(s.get("Metadata", {}).get("cfn-lint"))]
    assert len(suppressed) == (2 if zone else 0)
    for subnet in suppressed:
        del subnet["Metadata"]
    assert len(lint(template, stock=True)) == (2 if zone else 0)  # the finding it answers


def test_a_network_without_a_zone_says_it_takes_the_regions_first(make_stack: Any) -> None:
    """Issue 41 item 13: no availability_zone is no silent choice: the warning names what happens and
    how to choose (the README's own program builds such a network)."""
    from aws_cdk import assertions

    from efa_constructs import EfaNetwork

    stack = make_stack()
    EfaNetwork(stack, "Net")
    EfaNetwork(stack, "Pinned", availability_zone="us-east-1c")
    found = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("region's first Availability Zone")
    )
    assert [m.id.rsplit("/", 1)[-1] for m in found] == ["Net"], [m.id for m in found]
