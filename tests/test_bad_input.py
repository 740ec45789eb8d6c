"""What holds across every refusal: each has a stable id of its own (the matrix rows, in
tests/test_refusals_*.py by the module that owns each rule, raise only those), unresolved tokens
(CloudFormation parameters) are not rejected, a rejected configuration leaves no template behind,
and the refusals and warnings no one module owns.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import CfnParameter, Token
from aws_cdk import aws_ec2 as ec2

from efa_constructs import (
    EfaCluster,
    EfaLaunchTemplate,
    EfaSecurityGroup,
    Layout,
    LayoutMode,
    NodeSoftware,
    PublicIp,
)
from efa_constructs.cdk.security_group import ssh_peer
from efa_constructs.core.errors import EfaConfigError
from tests.conftest import background_result
from tests.helpers import isolated_vpc, new_app
from tests.refusals import (
    cluster,
    nodegroup_with_vpc,
    pcluster_head_in,
    pcs_unknown,
)

#: Which modules' rules each tests/test_refusals_<name>.py holds (path prefixes of the raising sites).
OWNERS = {
    "params": ("stacks/params.py", "stacks/parsers.py", "stacks/context_keys.py", "stacks/combinations.py"),
    "checks": (
        "efa_constructs/core/checks.py",
        "efa_constructs/core/node_rules.py",
        "efa_constructs/cdk/_shared.py",
        "efa_constructs/cdk/cluster.py",
        "efa_constructs/cdk/launch_template.py",
        "efa_constructs/cdk/parallel_cluster.py",
    ),
    "layout": ("efa_constructs/core/layout.py", "efa_constructs/core/catalogue"),
    "options": (
        "efa_constructs/core/options.py",
        "efa_constructs/core/capacity.py",
        "efa_constructs/cdk/network.py",
    ),
    "software": (
        "efa_constructs/core/software.py",
        "efa_constructs/core/benchmarks.py",
        "efa_constructs/core/containers.py",
        "efa_constructs/cdk/machine_image.py",
    ),
    "arguments": ("efa_constructs/cdk/arguments.py",),
    "storage": (
        "efa_constructs/core/lustre.py",
        "efa_constructs/cdk/storage.py",
        "efa_constructs/cdk/lustre.py",
    ),
}


def matrix_rows() -> list[Any]:
    """Every row of the refusal matrix, from each tests/test_refusals_*.py (each file is in OWNERS)."""
    from tests.helpers import ROOT

    files = sorted(path.stem for path in (ROOT / "tests").glob("test_refusals_*.py"))
    assert files == sorted(f"test_refusals_{name}" for name in OWNERS)
    return [row for name in OWNERS for row in importlib.import_module(f"tests.test_refusals_{name}").ROWS]


def test_every_refusal_has_a_stable_id_of_its_own() -> None:
    """Every EfaConfigError raised in the package and the ready stacks names its id as a literal
    (``code="efa-cdk:..."``, the form warnings' ids take); two sites share one only when they refuse the
    same thing. The two that pass an id on (a refusal re-raised for its stack, an enum's unknown choice)
    are the exceptions. Every id the matrix raises is one of them."""
    import ast
    import re

    from efa_constructs.core.errors import CODE_PATTERN
    from tests.helpers import ROOT

    sites: dict[str, list[str]] = {}
    for path in sorted([*(ROOT / "efa_constructs").rglob("*.py"), *(ROOT / "stacks").rglob("*.py")]):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            name = getattr(node, "func", None)
            if not (
                isinstance(node, ast.Call)
                and getattr(name, "id", getattr(name, "attr", "")) == "EfaConfigError"
            ):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            code = next((k.value for k in node.keywords if k.arg == "code"), None)
            assert code is not None, f"{where}: an EfaConfigError without code="
            if where.startswith("efa_constructs/core/errors.py"):
                continue  # in_stack passes self.code on; parse_choice names the enum's
            assert isinstance(code, ast.Constant) and re.match(CODE_PATTERN, code.value), where
            sites.setdefault(code.value, []).append(where)
    shared = {code: places for code, places in sites.items() if len(places) > 1}
    # a zone outside the stack's region: the network's own check and the node rules'
    assert shared.keys() == {"efa-cdk:zone-outside-region"}, shared
    import enum

    import efa_constructs

    kebab = [re.sub(r"(?<!^)(?=[A-Z])", "-", n).lower() for n in efa_constructs.__all__]
    enums = {
        f"efa-cdk:{k}-unknown"
        for n, k in zip(efa_constructs.__all__, kebab, strict=True)
        if isinstance(getattr(efa_constructs, n), type) and issubclass(getattr(efa_constructs, n), enum.Enum)
    }
    # The register of node rules raises each rule under the id an orchestrator has always given it
    # (NodeRule.former, issue 52): those ids are the register's, sited at its raise site.
    from efa_constructs.core.node_rules import NODE_RULES

    for rule in NODE_RULES:
        for former in rule.former.values():
            sites.setdefault(former, []).extend(sites[rule.id])
    assert {row[4] for row in matrix_rows()} <= sites.keys() | enums
    # each row sits in the file of the module that raises its id (an enum's unknown choice: the params')
    misplaced = [
        f"{name}: {row[0]} ({row[4]}, raised in {', '.join(sites.get(row[4], ['parse_choice']))})"
        for name, owners in OWNERS.items()
        for row in importlib.import_module(f"tests.test_refusals_{name}").ROWS
        if not any(site.startswith(owners) for site in sites.get(row[4], ["stacks/params.py"]))
    ]
    assert not misplaced, misplaced
    ids = [row[0] for row in matrix_rows()]
    assert len(ids) == len(set(ids)), "two rows share an id"


def test_a_refusal_keeps_its_id_when_the_app_names_the_stack() -> None:
    """The app re-raises a construct's refusal with the stack's name (in_stack): the id goes with it."""
    err = EfaConfigError("efa_count", code="efa-cdk:efa-count-range", value=9, why="why", fix="fix")
    assert err.in_stack("Trn1EfaCluster").code == "efa-cdk:efa-count-range"
    with pytest.raises(ValueError, match="efa-cdk:<lowercase-words>"):
        EfaConfigError("x", code="Efa-Count", value=1, why="w", fix="f")


def test_unresolved_tokens_are_not_rejected(make_stack: Any) -> None:
    stack = make_stack()
    size = CfnParameter(stack, "RootGiB", type="Number", default=300).value_as_number
    cidr = CfnParameter(stack, "SshCidr", default="10.0.0.0/8").value_as_string
    assert Token.is_unresolved(size) and Token.is_unresolved(cidr)
    vpc = isolated_vpc(stack)
    EfaCluster(
        stack,
        "C",
        vpc=vpc,
        instance_type=ec2.InstanceType("p4d.24xlarge"),
        root_volume_gib=size,
        ssh_peers=[ssh_peer(cidr)],
    )


def test_a_rejected_configuration_leaves_no_template(request: pytest.FixtureRequest) -> None:
    """app.py exits non-zero with the refusal, and writes no template (runs in the background)."""
    run, tmp = background_result(request.node.nodeid)
    assert run.returncode != 0
    assert "node_count=0: " in run.stderr and "EfaCluster needs at least one node" in run.stderr
    assert not list(tmp.glob("out/*.template.json"))


@pytest.mark.parametrize(
    ("build", "says"),
    [
        # issue 34 item 19: the argument meant, and values as the user wrote them
        (cluster(nodes=3), "nodes=3: EfaCluster has no argument 'nodes'. Fix: did you mean node_count?"),
        (cluster(node_cont=3), "Fix: did you mean node_count?"),
        (
            pcs_unknown(node_count=3),
            "node_count=3: EfaPcsCluster has no argument 'node_count'. Fix: did you "
            "mean max_count (min_count: the nodes PCS keeps running)?",
        ),
        (
            nodegroup_with_vpc(),
            "vpc=<Vpc Scratch/V>: EfaNodegroup has no argument 'vpc'. Fix: did you mean "
            "nothing: the nodes are in the cluster's VPC",
        ),
    ],
)
def test_an_unknown_argument_names_the_one_meant_and_shows_values_readably(
    make_stack: Any, build: Any, says: str
) -> None:
    with pytest.raises(EfaConfigError) as err:
        build(make_stack)
    assert str(err.value).startswith(says) or says in str(err.value), str(err.value)
    assert "object at 0x" not in str(err.value)


def test_values_in_messages_are_readable() -> None:
    from efa_constructs.core.errors import readable

    assert readable(LayoutMode.LEGACY) == "LayoutMode.LEGACY"
    assert readable({"min_size": 0, "max_size": 2}) == "min_size=0, max_size=2"
    assert readable(ec2.InstanceType("p5.48xlarge")) == "'p5.48xlarge'"
    assert readable("us-east-1") == "'us-east-1'"


# --- issue 34 item 18: groups without EFA's self rules, placement groups that are not cluster groups,
# multi-interface nodes in a public subnet without an address


def _template_with(groups: Callable[[Any, Any], list[Any]]) -> Any:
    from aws_cdk import Stack

    stack = Stack(new_app(), "Groups")
    vpc = isolated_vpc(stack)
    EfaLaunchTemplate(
        stack, "Lt", instance_type=ec2.InstanceType("trn1.32xlarge"), security_groups=groups(stack, vpc)
    )
    return stack


def _plain(stack: Any, vpc: Any, name: str, *, self_in: bool = True, self_out: bool = True) -> Any:
    # (CDK ignores egress rules of a group that allows all outbound; 0.0.0.0/0 does not carry EFA anyway)
    sg = ec2.SecurityGroup(stack, name, vpc=vpc, allow_all_outbound=not self_out)
    if self_in:
        sg.add_ingress_rule(sg, ec2.Port.all_traffic())
    if self_out:
        sg.add_egress_rule(sg, ec2.Port.all_traffic())
    return sg


@pytest.mark.parametrize(("self_in", "self_out"), [(True, False), (False, True), (False, False)])
def test_a_group_without_efas_self_rules_is_refused_at_synth(self_in: bool, self_out: bool) -> None:
    stack = _template_with(lambda s, v: [_plain(s, v, "Mine", self_in=self_in, self_out=self_out)])
    with pytest.raises(Exception) as err:  # CDK's validation error, with our one line in it
        stack.node.root.synth()
    text = str(err.value)
    assert "security_groups=['Groups/Mine']: no group of the EFA interfaces allows all traffic" in text
    assert "add group.add_ingress_rule(group, ec2.Port.all_traffic())" in text


def test_a_group_with_the_self_rules_or_an_imported_one_passes() -> None:
    _template_with(lambda s, v: [_plain(s, v, "Mine")]).node.root.synth()
    _template_with(lambda s, v: [EfaSecurityGroup(s, "Efa", vpc=v)]).node.root.synth()
    imported = lambda s, v: [ec2.SecurityGroup.from_security_group_id(s, "Theirs", "sg-0123456789abcdef0")]  # noqa: E731
    _template_with(imported).node.root.synth()  # its rules are not known here: not refused


def test_a_placement_group_that_is_not_a_cluster_group_is_warned_of() -> None:
    from aws_cdk import Stack, assertions

    stack = Stack(new_app(), "Spread")
    vpc = isolated_vpc(stack)
    for strategy in (ec2.PlacementGroupStrategy.SPREAD, ec2.PlacementGroupStrategy.CLUSTER):
        EfaLaunchTemplate(
            stack, f"Lt{strategy.name}", instance_type=ec2.InstanceType("trn1.32xlarge"),
            security_groups=[EfaSecurityGroup(stack, f"Sg{strategy.name}", vpc=vpc)],
            placement_group=ec2.PlacementGroup(stack, f"Pg{strategy.name}", strategy=strategy),
        )  # fmt: skip
    found = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("is a")
    )
    assert [w.id for w in found] == ["/Spread/LtSPREAD"]
    assert "is a SPREAD group" in str(found)


@pytest.mark.parametrize(
    ("itype", "layout", "public_ip", "warned"),
    [
        ("trn1.32xlarge", "recommended", "none", True),
        ("trn1.32xlarge", "recommended", "all", False),
        ("c5n.18xlarge", "recommended", "none", True),  # ENA + efa-only on its one card: two interfaces
        ("c5n.18xlarge", "legacy", "none", False),  # one efa interface: the subnet's public address
    ],
)
def test_multi_interface_nodes_in_a_public_subnet_without_an_address_are_warned_of(
    itype: str, layout: str, public_ip: str, warned: bool
) -> None:
    """They get no public address (EC2 assigns none to an instance launched with several interfaces), and
    a public subnet's route out needs one."""
    from aws_cdk import Stack, assertions

    stack = Stack(new_app(), "Public")
    public = ec2.SubnetConfiguration(name="pub", subnet_type=ec2.SubnetType.PUBLIC)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0, subnet_configuration=[public])
    EfaCluster(
        stack, "C", vpc=vpc, subnet=vpc.public_subnets[0], instance_type=ec2.InstanceType(itype),
        node_count=2, public_ip=PublicIp(public_ip), node_software=NodeSoftware.none(),
        nic_layout=Layout.mode(layout),
    )  # fmt: skip
    found = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("get no public address")
    )
    assert bool(found) is warned


def test_elastic_ip_copies_of_a_template_are_not_checked_again() -> None:
    """An Elastic-IP node launches from a copy of the cluster's template (same groups, same placement):
    the checks run on the original once, not once more per copy (the warning is said once)."""
    from aws_cdk import Stack, assertions

    stack = Stack(new_app(), "Copies")
    public = ec2.SubnetConfiguration(name="pub", subnet_type=ec2.SubnetType.PUBLIC)
    private = ec2.SubnetConfiguration(name="priv", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=1, subnet_configuration=[public, private])
    spread = ec2.PlacementGroup(stack, "Spread", strategy=ec2.PlacementGroupStrategy.SPREAD)
    EfaCluster(
        stack, "C", vpc=vpc, instance_type=ec2.InstanceType("trn1.32xlarge"), node_count=3,
        public_ip=PublicIp.ALL, node_software=NodeSoftware.none(), placement_group=spread,
    )  # fmt: skip
    found = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("is a SPREAD group")
    )
    assert len(found) == 1, [w.id for w in found]
    stack.node.root.synth()  # the copies' groups are the original's: still checked, and they pass


def test_the_edges_a_replacement_accepts_synthesize() -> None:
    """The other side of the edges refused above: the last node's index and a 64-character label."""
    from aws_cdk import Stack, assertions

    stack = Stack(new_app(), "Edges")
    EfaCluster(
        stack, "C", vpc=isolated_vpc(stack), instance_type=ec2.InstanceType("c5n.18xlarge"), node_count=2,
        node_software=NodeSoftware.none(), node_replacements={1: "x" * 64},
    )  # fmt: skip
    ids = assertions.Template.from_stack(stack).find_resources("AWS::EC2::Instance")
    assert len(ids) == 2 and sum(i.startswith("CNode1") and "R" in i[6:] for i in ids) == 1


def test_a_head_node_in_the_compute_subnets_zone_is_accepted(make_stack: Any) -> None:
    """The edge of issue 41 item 13's head-node rule: the same zone as the EFS mount target passes."""
    pcluster_head_in("us-east-1c")(make_stack)


def test_a_construct_refusal_gains_its_context_fix_only_in_a_ready_stack(make_stack: Any) -> None:
    """Issue 41 item 14: in a user's app the fix names the construct's option; through the ready app
    (in_stack) the same refusal also names the -c key."""
    from aws_cdk import CfnParameter

    stack = make_stack()
    with pytest.raises(EfaConfigError) as err:
        EfaCluster(stack, "C", vpc=isolated_vpc(stack), instance_type=ec2.InstanceType("trn1.32xlarge"),
                   node_count=CfnParameter(stack, "Count", type="Number").value_as_number)  # fmt: skip
    assert "-c " not in str(err.value) and "node_group=NodeGroup.ASG" in str(err.value)
    assert "(-c node_group=asg)" in str(err.value.in_stack("Trn1EfaCluster"))


def test_a_refusal_says_a_token_by_what_it_stands_for_and_an_instance_type_by_its_name() -> None:
    """Issue 60 (the hidden matrix): a refusal printed a placement group as ${Token[TOKEN.1941]} and a
    reservation's type as <aws_cdk.aws_ec2.InstanceType object at 0x...>, twice in one line. The error model
    renders both itself, whatever a call site wrote: the placement group by the construct it reads, the
    type by its name, a number's token as known only at deploy."""
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2

    from efa_constructs import Capacity, EfaCluster
    from efa_constructs.core.errors import EfaConfigError
    from tests.helpers import isolated_vpc, new_app

    stack = cdk.Stack(new_app(), "S", env=cdk.Environment(region="us-east-1", account="123456789012"))
    group = ec2.PlacementGroup(stack, "Group")
    with pytest.raises(EfaConfigError) as err:
        block = Capacity.capacity_block("cr-0123456789abcdef0")
        EfaCluster(stack, "C", vpc=isolated_vpc(stack), instance_type=ec2.InstanceType("p5.48xlarge"),
                   capacity=block, placement_group=group)  # fmt: skip
    assert str(err.value).startswith("placement_group=<S/Group/Resource's GroupName, known at deploy>: ")
    declared = Capacity.reservation("cr-0123456789abcdef0", instance_type=ec2.InstanceType("p4d.24xlarge"))  # type: ignore[arg-type]
    with pytest.raises(EfaConfigError) as err:
        declared.check(instance_type="p5.48xlarge", availability_zone=None, node_count=2)
    assert "it reserves p4d.24xlarge, the cluster launches p5.48xlarge" in str(err.value)
    assert "set instance_type=p4d.24xlarge" in str(err.value)
    number = cdk.Token.as_number(cdk.Aws.ACCOUNT_ID)
    why = f"made from {ec2.InstanceType('p5.48xlarge')}"
    said = str(EfaConfigError("node_count", code="efa-cdk:example", value=number, why=why, fix="f"))
    assert said == "node_count=<a number known only at deploy>: made from <InstanceType>. Fix: f", said


def test_an_uncaught_refusal_in_a_users_app_is_one_line_without_asking(tmp_path: Path) -> None:
    """Issue 60 item 14: a refusal in a user's own app was an 8 to 28-line traceback unless the app used
    refusals_in_one_line(), which few snippets showed. `import efa_constructs` now makes an uncaught refusal
    one line on stderr (exit 1, as Python exits on any uncaught exception); EFA_CDK_TRACEBACK=1 keeps the
    traceback, and any other error keeps its own."""
    import os
    import subprocess
    import sys

    app = tmp_path / "app.py"
    app.write_text(
        "from efa_constructs import Layout, instance_type\n"
        "Layout.recommended(efa_count=99).resolve(instance_type('trn1.32xlarge'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "EFA_CDK_TRACEBACK"}
    run = subprocess.run([sys.executable, str(app)], capture_output=True, text=True, env=env)
    assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("error: efa_count=99: trn1.32xlarge takes 1 to 8 EFA interfaces"), run.stderr
    run = subprocess.run([sys.executable, str(app)], capture_output=True, text=True,
                         env={**env, "EFA_CDK_TRACEBACK": "1"})  # fmt: skip
    assert run.returncode == 1 and "Traceback (most recent call last)" in run.stderr
    app.write_text("import efa_constructs\nraise ValueError('not a refusal')\n")
    run = subprocess.run([sys.executable, str(app)], capture_output=True, text=True, env=env)
    assert "Traceback (most recent call last)" in run.stderr and "ValueError: not a refusal" in run.stderr
