"""`EfaSecurityGroup` (cdk/security_group.py): EFA's self rules, no ingress from the world by default,
the egress choices, SSH from named sources only (the rules from the EC2 user guide's EFA security group).
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import assertions

from efa_constructs import (
    EfaSecurityGroup,
    InternetEgress,
)
from efa_constructs.cdk.security_group import ssh_peer
from efa_constructs.core.errors import EfaConfigError
from tests.helpers import isolated_vpc

Match = assertions.Match


def _sg_template(make_stack: Any, **kwargs: Any) -> assertions.Template:
    stack = make_stack()
    EfaSecurityGroup(stack, "Sg", vpc=isolated_vpc(stack), **kwargs)
    return assertions.Template.from_stack(stack)


def test_security_group_self_ingress_and_self_egress(make_stack: Any) -> None:
    t = _sg_template(make_stack)
    self_ref = {"Fn::GetAtt": [Match.string_like_regexp("^Sg"), "GroupId"]}
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"IpProtocol": "-1", "SourceSecurityGroupId": self_ref, "GroupId": self_ref},
    )
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"IpProtocol": "-1", "DestinationSecurityGroupId": self_ref, "GroupId": self_ref},
    )


def test_security_group_has_no_ingress_from_the_world_by_default(make_stack: Any) -> None:
    t = _sg_template(make_stack)
    sg = next(iter(t.find_resources("AWS::EC2::SecurityGroup").values()))
    assert "SecurityGroupIngress" not in sg["Properties"]
    assert len(t.find_resources("AWS::EC2::SecurityGroupIngress")) == 1  # only the self rule
    egress = sg["Properties"]["SecurityGroupEgress"]
    assert sorted((e["IpProtocol"], e.get("FromPort")) for e in egress) == [("tcp", 80), ("tcp", 443)]


def _egress(t: assertions.Template) -> tuple[list[Any], list[Any]]:
    sg = next(iter(t.find_resources("AWS::EC2::SecurityGroup").values()))
    separate = [r["Properties"] for r in t.find_resources("AWS::EC2::SecurityGroupEgress").values()]
    return sg["Properties"].get("SecurityGroupEgress", []), separate


def test_security_group_egress_all(make_stack: Any) -> None:
    inline, separate = _egress(_sg_template(make_stack, internet_egress=InternetEgress.ALL))
    assert inline == []  # no placeholder left behind
    assert sorted(
        (r["IpProtocol"], "DestinationSecurityGroupId" in r, r.get("CidrIp")) for r in separate
    ) == [("-1", False, "0.0.0.0/0"), ("-1", True, None)]


def test_security_group_egress_none_really_blocks_the_internet(make_stack: Any) -> None:
    """Without an inline egress rule EC2 keeps its default allow-all egress; the placeholder prevents that."""
    inline, separate = _egress(_sg_template(make_stack, internet_egress=InternetEgress.NONE))
    assert [r["CidrIp"] for r in inline] == ["255.255.255.255/32"]
    assert len(separate) == 1
    assert "DestinationSecurityGroupId" in separate[0]  # only the self rule EFA needs


def test_security_group_ssh_from_named_sources_only(make_stack: Any) -> None:
    t = _sg_template(make_stack, ssh_peers=[ssh_peer("203.0.113.0/24"), ssh_peer("pl-0123abcd")])
    sg = next(iter(t.find_resources("AWS::EC2::SecurityGroup").values()))
    ingress = sg["Properties"]["SecurityGroupIngress"] + [
        r["Properties"] for r in t.find_resources("AWS::EC2::SecurityGroupIngress").values()
    ]
    assert {(r.get("CidrIp"), r.get("SourcePrefixListId"), r.get("FromPort")) for r in ingress} == {
        ("203.0.113.0/24", None, 22),
        (None, "pl-0123abcd", 22),
        (None, None, None),
    }  # last: the self rule


@pytest.mark.parametrize("bad", ["10.0.0.1/8", "10.0.0.0/33", "my-laptop", "10.0.0.0/8;rm"])
def test_malformed_ssh_peers(bad: str) -> None:
    with pytest.raises(EfaConfigError) as err:
        ssh_peer(bad)
    assert repr(bad) in str(err.value)
    assert "Fix:" in str(err.value)
