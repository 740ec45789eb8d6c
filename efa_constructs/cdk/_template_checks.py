"""What a launch template is checked against once its app is built (validations and aspects): its placement
group's strategy, the Auto Scaling groups that launch from it, the zones of their subnets, and the EFA
security group's rules to itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

import jsii
from aws_cdk import Annotations, IAspect, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk.aws_autoscaling import CfnAutoScalingGroup
from constructs import Construct, IConstruct, IValidation

from ..core.errors import EfaConfigError


class _LaunchesATemplate(IConstruct, Protocol):
    """What the checks read of an EfaLaunchTemplate (launch_template.py, which imports this module: the
    dependency runs one way): a construct with its launch template."""

    @property
    def launch_template(self) -> ec2.ILaunchTemplate: ...


def _warn_unless_cluster_strategy(scope: Construct, group: ec2.IPlacementGroup | None) -> None:
    """EFA nodes belong in one cluster placement group (EC2 user guide, EFA: "launch the instances into
    a cluster placement group"): a spread or partition group made in the app is warned of (an imported
    group's strategy is unknown here)."""
    strategy = getattr(group, "strategy", None)
    if group is not None and strategy is not None and strategy != ec2.PlacementGroupStrategy.CLUSTER:
        Annotations.of(scope).add_warning_v2(
            "efa-cdk:placement-group-not-cluster",
            f"The placement group {group.node.path} is a {strategy.name} group: EFA nodes get the network "
            "latency they are for in a cluster placement group (EC2 user guide, EFA); leave "
            "placement_group unset (a cluster group is created) or make it with "
            "strategy=PlacementGroupStrategy.CLUSTER.",
        )


@jsii.implements(IAspect)
class _AutoScalingLaunches:
    """An aws-cdk-lib Auto Scaling group of the template's stack that launches this template is warned
    of when it spans several Availability Zones (EFA traffic does not cross zones: EC2 user guide, EFA
    limitations) or puts its nodes in no placement group (EC2 user guide, EFA: "launch the instances
    into a cluster placement group"). A group in another stack is not seen."""

    def __init__(self, template: _LaunchesATemplate, has_placement_group: bool) -> None:
        self.template, self.has_placement_group = template, has_placement_group

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, CfnAutoScalingGroup) or any(
            type(scope).__module__.startswith("efa_constructs.") for scope in node.node.scopes
        ):
            return  # not a group, or one of efa-cdk's own (EfaCluster places its group itself)
        stack = Stack.of(node)
        ref = json.dumps(stack.resolve(self.template.launch_template.launch_template_id))
        launches = [stack.resolve(node.launch_template), stack.resolve(node.mixed_instances_policy)]
        if ref not in json.dumps(launches):
            return
        subnets = stack.resolve(node.vpc_zone_identifier) or []
        zones = _zones_of(stack, subnets) if len(subnets) > 1 else set()
        if len(subnets) > 1 and (len(zones) > 1 or None in zones):
            where = (
                f"zones {', '.join(sorted(str(z) for z in zones))}"
                if None not in zones
                else "zones not known here"
            )
            Annotations.of(node).add_warning_v2(
                "efa-cdk:auto-scaling-group-spans-zones",
                f"This Auto Scaling group launches the EFA template {self.template.node.path} into "
                f"{len(subnets)} subnets ({where}): EFA traffic does not cross Availability Zones (EC2 user "
                "guide, EFA limitations), so nodes in different zones cannot reach each other over EFA. Give "
                "the group subnets of one zone (vpc_subnets=ec2.SubnetSelection(subnets=[subnet])).",
            )
        if not self.has_placement_group and not node.placement_group:
            Annotations.of(node).add_warning_v2(
                "efa-cdk:auto-scaling-group-without-placement-group",
                f"This Auto Scaling group launches the EFA template {self.template.node.path} in no "
                "placement group: EFA nodes get the latency they are for in a cluster placement group "
                "(EC2 user guide, EFA). Pass EfaLaunchTemplate a placement_group=ec2.PlacementGroup(..., "
                "strategy=PlacementGroupStrategy.CLUSTER).",
            )


def _zones_of(stack: Stack, subnets: list[Any]) -> set[str | None]:
    """The zones of resolved subnet ids: a subnet this stack makes by its AvailabilityZone (a name, or
    the region's n-th zone in an environment-agnostic stack), an imported one as None (not known here)."""
    made = {
        stack.resolve(c.logical_id): stack.resolve(c.availability_zone)
        for c in stack.node.find_all()
        if isinstance(c, ec2.CfnSubnet)
    }
    zones: set[str | None] = set()
    for s in subnets:
        zone = made.get(s.get("Ref")) if isinstance(s, dict) else None
        if isinstance(zone, dict) and "Fn::Select" in zone:  # {"Fn::Select": [i, {"Fn::GetAZs": ""}]}
            zone = f"the region's zone {zone['Fn::Select'][0] + 1}"
        zones.add(zone if isinstance(zone, str) else None)
    return zones


def _rule_ids(stack: Stack, group: ec2.SecurityGroup) -> tuple[set[str], set[str]]:
    """The groups `group` lets ALL traffic in from, and out to (inline rules and rule resources alike),
    as resolved JSON."""
    key = json.dumps(stack.resolve(group.security_group_id))
    cfn = group.node.default_child
    assert isinstance(cfn, ec2.CfnSecurityGroup)
    ins = {
        json.dumps(r.get("sourceSecurityGroupId"))
        for r in stack.resolve(cfn.security_group_ingress) or []
        if str(r.get("ipProtocol")) == "-1"
    }
    outs = {
        json.dumps(r.get("destinationSecurityGroupId"))
        for r in stack.resolve(cfn.security_group_egress) or []
        if str(r.get("ipProtocol")) == "-1"
    }
    for c in stack.node.find_all():
        if isinstance(c, ec2.CfnSecurityGroupIngress):
            into, peer = ins, c.source_security_group_id
        elif isinstance(c, ec2.CfnSecurityGroupEgress):
            into, peer = outs, c.destination_security_group_id
        else:
            continue
        if c.ip_protocol == "-1" and json.dumps(stack.resolve(c.group_id)) == key:
            into.add(json.dumps(stack.resolve(peer)))
    return ins, outs


@jsii.implements(IValidation)
class _SelfRules:
    """At synth, once every rule is added: EFA needs a group of the interfaces that allows ALL traffic in
    from and out to the interfaces' groups (EC2 user guide, "Prepare an EFA-enabled security group"; an
    all-traffic egress to 0.0.0.0/0 does not cover EFA, which is not IP). Checked when every group is
    made in this app; an imported group's rules are not known here."""

    def __init__(self, owner: Construct, groups: Sequence[ec2.ISecurityGroup]) -> None:
        self.owner, self.groups = owner, list(groups)

    def validate(self) -> list[str]:
        made = [g for g in self.groups if isinstance(g, ec2.SecurityGroup)]
        if len(made) < len(self.groups):
            return []
        stack = Stack.of(self.owner)
        ids = {json.dumps(stack.resolve(g.security_group_id)) for g in self.groups}
        for group in made:
            ins, outs = _rule_ids(stack, group)
            if ins & ids and outs & ids:
                return []
        return [
            str(
                EfaConfigError(
                    "security_groups",
                    code="efa-cdk:security-groups-without-self-rules",
                    value=[g.node.path for g in self.groups],
                    why="no group of the EFA interfaces allows all traffic in from and out to the group "
                    "itself, so EFA traffic would be dropped (an all-traffic egress to 0.0.0.0/0 does not "
                    "cover EFA, which is not IP)",
                    fix="pass an EfaSecurityGroup, or add group.add_ingress_rule(group, "
                    "ec2.Port.all_traffic()) and group.add_egress_rule(group, ec2.Port.all_traffic()) to a "
                    "group made with allow_all_outbound=False (CDK drops egress rules otherwise)",
                )
            )
        ]
