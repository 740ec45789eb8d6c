"""The EFA node base the four orchestrators compose: from one :class:`NodePlan`, the security group,
the placement group and the nodes' launch template.

:class:`EfaCluster`, :class:`EfaParallelCluster`, :class:`EfaPcsCluster` and :class:`EfaNodegroup` each
resolve their node once (``NodePlan.resolve``) and build these pieces here, so the EFA rules (the
self-referencing group on every interface, one cluster placement group On-Demand and none in a
reservation or Capacity Block, the layout, IMDS and volume settings) are wired on one path. What differs
between them is data: the subnet (none where the launcher sets it), the instance profile (none for PCS
and EKS), the extra groups (the EKS cluster's), the role, the image and the user data.

It is not a construct: the pieces are made in the orchestrator's own scope, at the ids they have always
had (``SecurityGroup``, ``PlacementGroup``, ``LaunchTemplate``...), so a construct between them would
move every logical id and replace every node of a deployed stack. Private to the package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from aws_cdk import Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from ..core.node_plan import NodePlan
from ..core.node_rules import LustreUse, NodeRequest, SubnetFact, run_node_rules
from ..core.options import InternetEgress
from ._shared import cluster_placement_group
from .launch_template import EfaLaunchTemplate, PlannedLaunchTemplate, TemplateWiring
from .machine_image import EfaMachineImage
from .security_group import EfaSecurityGroup

T = TypeVar("T")


def known(value: T) -> T | None:
    """The value, or None when it is an unresolved token (checked at deploy, not at synth)."""
    return None if Token.is_unresolved(value) else value


def subnet_fact(vpc: ec2.IVpc, subnet: ec2.ISubnet, what: str) -> SubnetFact:
    """What the subnet rule reads of `subnet` (the orchestrator's `what`): the VPC it was made under in this
    app (its construct path says which; an imported subnet's is not known at synth) and the nodes' VPC."""
    owner = next((s for s in reversed(subnet.node.scopes[:-1]) if hasattr(s, "select_subnets")), None)
    return SubnetFact(
        keyword=what,
        path=subnet.node.path,
        owner=owner.node.path if owner is not None else None,
        vpc=vpc.node.path if isinstance(vpc, Construct) else None,
    )


class EfaNodeBase:
    """The shared pieces of one orchestrator's EFA nodes, in `scope`.

    Attributes:
        plan: the resolved node.
        security_group: the :class:`EfaSecurityGroup` (``SecurityGroup``) on every interface.
        placement_group: the cluster placement group (``PlacementGroup``, made On-Demand), the one given,
            or None (a reservation or Capacity Block places the nodes, or ``use_placement_group=False``).
    """

    def __init__(
        self,
        scope: Construct,
        plan: NodePlan,
        *,
        orchestrator: str,
        vpc: ec2.IVpc,
        subnets: Mapping[str, ec2.ISubnet | None],
        count: int | None,
        count_name: str,
        min_count: int | None = None,
        min_name: str | None = None,
        availability_zone: str | None = None,
        lustre: LustreUse | None = None,
        placement_group: ec2.IPlacementGroup | None = None,
        use_placement_group: bool = True,
        ssh_peers: Sequence[ec2.IPeer] = (),
        internet_egress: InternetEgress = InternetEgress.WEB,
    ) -> None:
        """Run the register of node rules (``core/node_rules.NODE_RULES``) over what `orchestrator` (its class
        name) asks, in this one place, then make the groups. `subnets`: the nodes' subnets by the
        orchestrator's keyword for each (the first decides the nodes' zone, else `availability_zone`);
        `count`: the most nodes (`count_name` its keyword), `min_count`: those kept running (`min_name`; None
        where the orchestrator has no such option); `lustre`: the file system the nodes mount. A token reads
        as "known at deploy" (:func:`known`). The contract tests (tests/test_contract.py) put every rule to
        every orchestrator."""
        first = next((s for s in subnets.values() if s is not None), None)
        zone = (known(first.availability_zone) if first is not None else None) or availability_zone
        run_node_rules(
            NodeRequest(
                orchestrator=orchestrator,
                instance_type=plan.instance_type,
                count=known(count),
                count_name=count_name,
                capacity=plan.capacity,
                root_volume_gib=known(plan.root_volume_gib),
                min_count=known(min_count) if min_name else known(count),
                min_name=min_name,
                zone=zone,
                region=known(Stack.of(scope).region),
                subnets=tuple(subnet_fact(vpc, s, what) for what, s in subnets.items() if s is not None),
                lustre=lustre,
            )
        )
        self._scope, self.plan = scope, plan
        self.security_group = EfaSecurityGroup(
            scope, "SecurityGroup", vpc=vpc, ssh_peers=ssh_peers, internet_egress=internet_egress
        )
        self.placement_group = (
            cluster_placement_group(scope, placement_group, plan.capacity) if use_placement_group else None
        )

    def launch_template(
        self,
        id_: str,
        *,
        machine_image: EfaMachineImage,
        role: iam.IRole | None = None,
        user_data: ec2.UserData | None = None,
        subnet: ec2.ISubnet | None = None,
        key_pair: ec2.IKeyPair | None = None,
        instance_profile: bool = True,
        other_security_groups: Sequence[ec2.ISecurityGroup] = (),
    ) -> EfaLaunchTemplate:
        """The nodes' template (`id_` in the orchestrator's scope): the plan's layout with the EFA group
        (and `other_security_groups`) on every interface, in the placement group."""
        return PlannedLaunchTemplate(
            self._scope,
            id_,
            plan=self.plan,
            wiring=TemplateWiring(
                security_groups=(self.security_group, *other_security_groups),
                machine_image=machine_image,
                subnet=subnet,
                key_pair=key_pair,
                role=role,
                instance_profile=instance_profile,
                user_data=user_data,
                placement_group=self.placement_group,
            ),
        )
