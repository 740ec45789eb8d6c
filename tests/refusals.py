"""Builders of the refusal matrix (tests/test_refusals_*.py, one file per module that owns the rules):
each builds one configuration in a fresh stack, as a user or `cdk synth -c ...` would, and
:func:`assert_refused` holds a refusal to the library's form (value, why, fix, stable id)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk import Environment
from aws_cdk import aws_ec2 as ec2

from efa_constructs import (
    EfaCluster,
    EfaLaunchTemplate,
    EfaNetwork,
    EfaSecurityGroup,
    NetworkInterfaceSpec,
)
from efa_constructs.core.errors import EfaConfigError
from stacks.cluster_stack import EfaClusterStack
from stacks.params import ClusterParams
from tests.helpers import isolated_vpc, new_app, pcs_image

S = NetworkInterfaceSpec


def ctx(**context: Any) -> Callable[[Any], Any]:
    """A ready cluster stack from context, as `cdk synth -c ...` builds it."""

    def build(_make: Any) -> Any:
        params = ClusterParams.from_context(context, default_instance_type="trn1.32xlarge")
        return EfaClusterStack(new_app(), "FromContext", params=params)

    return build


def cluster(
    *,
    vpc: Callable[[Any], Any] = isolated_vpc,
    env: Environment | None = None,
    per_stack: Callable[[Any], dict[str, Any]] = lambda _stack: {},
    **kwargs: Any,
) -> Callable[[Any], Any]:
    """An EfaCluster in a fresh stack: `vpc` builds its VPC, `per_stack` more props in the stack."""

    def build(make: Any) -> Any:
        stack = make(env=env) if env else make()
        props = {"instance_type": ec2.InstanceType("trn1.32xlarge"), **kwargs, **per_stack(stack)}
        return EfaCluster(stack, "C", vpc=vpc(stack), **props)

    return build


def network(**kwargs: Any) -> Callable[[Any], Any]:
    return lambda stack: EfaNetwork(stack, "N", **kwargs).vpc


def public_only_vpc(stack: Any) -> Any:
    public = ec2.SubnetConfiguration(name="Pub", subnet_type=ec2.SubnetType.PUBLIC)
    return ec2.Vpc(stack, "V", max_azs=1, subnet_configuration=[public])


def a_placement_group(stack: Any) -> dict[str, Any]:
    return {"placement_group": ec2.PlacementGroup(stack, "Pg")}


def template(**kwargs: Any) -> Callable[[Any], Any]:
    def build(make: Any) -> Any:
        stack = make()
        vpc = isolated_vpc(stack)
        sg = EfaSecurityGroup(stack, "Sg", vpc=vpc)
        return EfaLaunchTemplate(
            stack,
            "Lt",
            **{"instance_type": ec2.InstanceType("trn1.32xlarge"), "security_groups": [sg], **kwargs},
        )

    return build


def pcs_cluster(*, own_network: bool = False, **kwargs: Any) -> Callable[[Any], Any]:
    """An EfaPcsCluster in a fresh stack (of us-east-1), in a network of its own or one given."""
    from efa_constructs import EfaPcsCluster

    def build(make: Any) -> Any:
        stack = make(env=Environment(region="us-east-1"))
        network = {}
        if own_network:
            net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
            network = {"vpc": net.vpc, "subnet": net.private_subnet}
        return EfaPcsCluster(
            stack, "Pcs", instance_type=ec2.InstanceType("trn1.32xlarge"), machine_image=pcs_image(),
            **network, **kwargs,
        )  # fmt: skip

    return build


def pcluster(**kwargs: Any) -> Callable[[Any], Any]:
    """An EfaParallelCluster in a fresh stack, in a network given."""
    from efa_constructs import EfaParallelCluster

    def build(make: Any) -> Any:
        stack = make(env=Environment(region="us-east-1"))
        net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
        return EfaParallelCluster(
            stack, "Pc", vpc=net.vpc, head_node_subnet=net.public_subnet, compute_subnet=net.private_subnet,
            **{"instance_type": ec2.InstanceType("trn1.32xlarge"), **kwargs},
        )  # fmt: skip

    return build


def pcluster_head_in(zone: str) -> Callable[[Any], Any]:
    """An EfaParallelCluster whose head node subnet (imported, its zone known) is in `zone`; the
    compute subnet and so the EFS mount target in us-east-1c."""
    from efa_constructs import EfaParallelCluster

    def build(make: Any) -> Any:
        stack = make(env=Environment(region="us-east-1"))
        net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
        head = ec2.Subnet.from_subnet_attributes(stack, "Head", subnet_id="subnet-0123456789abcdef0",
                                                 availability_zone=zone)  # fmt: skip
        return EfaParallelCluster(
            stack, "Pc", instance_type=ec2.InstanceType("trn1.32xlarge"), vpc=net.vpc,
            head_node_subnet=head, compute_subnet=net.private_subnet,
        )  # fmt: skip

    return build


def pcs_unknown(**kwargs: Any) -> Callable[[Any], Any]:
    from efa_constructs import EfaPcsCluster

    return lambda make: EfaPcsCluster(
        make(), "P", instance_type=ec2.InstanceType("trn1.32xlarge"), machine_image=pcs_image(), **kwargs
    )


def nodegroup_with_vpc() -> Callable[[Any], Any]:
    from efa_constructs import EfaNodegroup

    def build(make: Any) -> Any:
        stack = make()
        vpc = ec2.Vpc(stack, "V", max_azs=1)
        return EfaNodegroup(stack, "N", vpc=vpc, instance_type=ec2.InstanceType("trn1.32xlarge"))  # type: ignore[call-arg]

    return build


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
    return lambda _make: fn(*args, **kwargs)


# (id, configuration, the key the message must start with, a phrase saying why)

#: One row: (id, the configuration, the key the message must start with, a phrase saying why, the id).
Row = tuple[str, Callable[[Any], Any], str, str, str]


def parametrize(rows: list[Row]) -> Any:
    """The rows as one parametrized test's cases, named by their ids."""
    return pytest.mark.parametrize(
        ("build", "key", "why", "code"), [r[1:] for r in rows], ids=[r[0] for r in rows]
    )


def assert_refused(make_stack: Any, build: Callable[[Any], Any], key: str, why: str, code: str) -> None:
    """The configuration fails at synth with one EfaConfigError naming the value, why, the fix and its id;
    a -c fix only where the configuration came from context."""
    with pytest.raises(EfaConfigError) as err:
        build(make_stack)
    message = str(err.value)
    assert message.startswith(f"{key}="), message
    assert why in message, message
    assert "Fix: " in message and len(err.value.fix) > 10
    assert err.value.code == code, message
    # issue 60: the error model renders every value (a CDK token by what it stands for, an object by its
    # kind): no refusal prints a token, an address or a number's token encoding
    assert not [leak for leak in ("${Token[", "TOKEN.", "object at 0x", "e+289") if leak in message], message
    if not build.__qualname__.startswith("ctx."):  # issue 41 item 14: -c fixes only for a ready stack
        assert " -c " not in message and "(-c " not in message, message
