"""The security diff's decisions at their edges, on templates and statements written by hand (no synth): which
ports a rule opens, which principal is outside the account, which statement took another's place, when a
condition counts as removed, how a group made elsewhere reads. The widenings on synthesized templates are
tests/test_pr_review.py's.

Expected values: EC2's API reference (``FromPort``/``ToPort``: -1 for all, 0-65535 for every TCP/UDP port),
IAM's policy grammar (an account principal is its 12-digit id or its root ARN; CDK writes the stack's own
account as ``${AWS::AccountId}``), CloudFormation's intrinsic functions (``Fn::ImportValue``).
"""

from __future__ import annotations

from typing import Any

import pytest

from efa_constructs.tools.security_diff import SecurityChanges, Statement, rules, show

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free


def _ingress(**props: Any) -> dict[str, Any]:
    return {"Resources": {"R": {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": props}}}


@pytest.mark.parametrize(
    ("protocol", "low", "high", "ports"),
    [("tcp", 0, 65535, "all ports"), ("tcp", -1, -1, "all ports"), ("udp", None, None, "all ports"),
     ("tcp", 0, 100, "0-100"), ("tcp", 1, 65535, "1-65535"), ("tcp", 22, 22, "22"),
     ("-1", 80, 80, "all ports")],
)  # fmt: skip
def test_a_rule_says_which_ports_it_opens(
    protocol: str, low: int | None, high: int | None, ports: str
) -> None:
    given = {"FromPort": low, "ToPort": high} if low is not None else {}
    (rule,) = rules(_ingress(GroupId={"Ref": "G"}, IpProtocol=protocol, CidrIp="10.0.0.0/8", **given))
    assert rule.ports == ports and rule.group == "{sg: G}"


def test_a_group_made_in_another_stack_reads_as_its_import() -> None:
    (rule,) = rules(
        _ingress(GroupId={"Fn::ImportValue": "Storage:Group"}, IpProtocol="tcp", FromPort=988, ToPort=988,
                 SourceSecurityGroupId={"Fn::ImportValue": "Cluster:Nodes"})
    )  # fmt: skip
    assert (rule.group, rule.peer) == ("{import: Storage:Group}", "{import: Cluster:Nodes}")
    (by_att,) = rules(_ingress(GroupId={"Fn::GetAtt": ["G", "GroupId"]}, IpProtocol="-1", CidrIp="0.0.0.0/0"))
    assert by_att.group == "{sg: G}" and by_att.widens() == ["ingress from the world (0.0.0.0/0, all ports)"]


@pytest.mark.parametrize(
    ("principal", "outside"),
    [("*", True), ("AWS: 123456789012", True), ("AWS: arn:aws:iam::123456789012:root", True),
     ("AWS: ${AWS::AccountId}", False), ("AWS: arn:${AWS::Partition}:iam::${AWS::AccountId}:root", False),
     ("Service: ec2.amazonaws.com", False), ("", False)],
)  # fmt: skip
def test_a_principal_outside_the_account_is_an_account_written_out_or_anyone(
    principal: str, outside: bool
) -> None:
    statement = Statement("Bucket:Policy", "Allow", ("s3:GetObject",), ("arn:b/*",), principal, "")
    assert any("a principal outside the account" in w for w in statement.widens()) is outside


def _s(
    actions: tuple[str, ...], resources: tuple[str, ...], principal: str = "AWS: a", condition: str = ""
) -> Statement:
    return Statement("Role:Policy", "Allow", actions, resources, principal, condition)


@pytest.mark.parametrize(
    ("new", "replaced"),
    [
        (_s(("s3:GetObject", "s3:PutObject"), ("arn:a",), "AWS: b"), True),  # the same resources
        (_s(("s3:GetObject",), ("arn:b",), "AWS: b"), True),  # the same actions
        (_s(("s3:GetObject", "s3:List*"), ("arn:b",), "AWS: a"), True),  # the same principal
        (_s(("s3:GetObject", "s3:List*"), ("arn:b",), "AWS: b"), False),  # nothing kept but an action
        (_s(("s3:PutObject",), ("arn:a",), "AWS: a"), False),  # no action in common
    ],
)
def test_a_statement_takes_the_place_of_one_that_shares_an_action_and_what_it_names(
    new: Statement, replaced: bool
) -> None:
    assert new.replaces(_s(("s3:GetObject",), ("arn:a",))) is replaced


def test_a_condition_is_removed_only_from_the_same_statement_and_only_when_fewer_remain() -> None:
    """A condition dropped from a statement that stays widens; a conditioned statement removed while another
    is added does not (it is a removal), nor does a condition changed for one of the same length."""
    kept = _s(("s3:GetObject",), ("arn:a",), condition="Bool: {aws:SecureTransport=true}")
    dropped = SecurityChanges([_s(("s3:GetObject",), ("arn:a",))], [kept], [], [])
    assert dropped.widenings() == [
        "Role:Policy: a condition removed (Bool: {aws:SecureTransport=true}) from s3:GetObject"
    ]
    unrelated = SecurityChanges([_s(("ec2:DescribeInstances",), ("arn:x",))], [kept], [], [])
    assert not [w for w in unrelated.widenings() if "condition removed" in w]
    changed = _s(("s3:GetObject",), ("arn:a",), condition="Bool: {aws:SecureTransport=fals}")
    assert len(changed.condition) == len(kept.condition)
    assert SecurityChanges([changed], [kept], [], []).widenings() == []


@pytest.mark.parametrize("which", range(4))
def test_any_one_change_makes_the_changes_not_empty(which: int) -> None:
    lists: list[list[Any]] = [[], [], [], []]
    lists[which].append(_s(("s3:GetObject",), ("arn:a",)))
    assert not SecurityChanges(*lists).empty
    assert SecurityChanges([], [], [], []).empty


def test_a_value_no_reader_form_fits_is_compact_json_in_one_order() -> None:
    """A join over a list made at deploy (Fn::Split...) reads as JSON, its keys sorted: the same value written
    in another order is the same statement, so no change is reported."""
    assert show({"Fn::Join": [",", {"b": 1, "a": 2}]}) == '{"Fn::Join":[",",{"a":2,"b":1}]}'
    assert show({"Fn::Join": [",", {"a": 2, "b": 1}]}) == show({"Fn::Join": [",", {"b": 1, "a": 2}]})
    assert show(None) == "null"
