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
