"""CloudFormation's per-template limits, checked at synth through the cluster's own node.

Every :class:`EfaCluster` adds :class:`CloudFormationLimits` to its own node's validations (it changes
nothing in the app around it): before anything is written, the stack the cluster is in is measured
(resources, outputs and parameters counted in the construct tree, the template's size estimated from
the resources' properties) and a stack CloudFormation would refuse fails ``cdk synth`` with the
numbers and the fix. The checks are one pure function (:func:`..core.limits.limit_violations`).
"""

from __future__ import annotations

import json

import jsii
from aws_cdk import CfnOutput, CfnParameter, CfnResource, Stack
from constructs import Construct, IConstruct, IValidation

from ..core.limits import limit_violations

#: What CDK adds when it writes a template and is not in the tree when validations run: the
#: BootstrapVersion parameter (the CDKMetadata resource is already there, when it is written at all), and
#: the JSON around each resource's properties (type, path metadata, DependsOn): counted so the estimate
#: errs high. Property overrides cannot be read from Python, so the estimate can still fall short:
#: ``efa-cdk preflight`` and the ready app measure the written templates themselves.
CDK_PARAMETERS, BYTES_PER_RESOURCE = 1, 200
#: How deep a resource's properties sit in the template (Resources > id > Properties > ...): CDK writes
#: templates indented one space a level (JSON.stringify(template, undefined, 1)).
PROPERTIES_DEPTH = 3


def _written_size(properties: object) -> int:
    """The bytes `properties` take in a template as CDK writes it (one space a level, from their depth)."""
    text = json.dumps(properties, indent=1, default=str)
    return len(text.encode()) + PROPERTIES_DEPTH * text.count("\n")


def _in_stack(stack: Stack) -> list[IConstruct]:
    """Every construct of `stack`, not those of its nested stacks (templates of their own). One
    ``find_all`` (a walk child by child costs a call into the CDK's Node process per construct)."""
    found = stack.node.find_all()[1:]  # the stack itself first
    nested = [c.node.path + "/" for c in found if isinstance(c, Stack)]
    if not nested:
        return list(found)
    return [c for c in found if not c.node.path.startswith(tuple(nested))]


@jsii.implements(IValidation)
class CloudFormationLimits:
    """A node validation: the stack holding `scope` stays within CloudFormation's per-template limits."""

    def __init__(self, scope: Construct) -> None:
        self.stack = Stack.of(scope)

    def validate(self) -> list[str]:
        """The exceeded limits, each with the fix (empty: none)."""
        constructs = _in_stack(self.stack)
        resources = [c for c in constructs if isinstance(c, CfnResource)]
        template = {
            "Resources": dict.fromkeys(range(len(resources))),
            "Outputs": dict.fromkeys(c.node.path for c in constructs if isinstance(c, CfnOutput)),
            "Parameters": dict.fromkeys(
                range(sum(isinstance(c, CfnParameter) for c in constructs) + CDK_PARAMETERS)
            ),
        }
        # one resolution of every resource's properties (not one per resource: each is a call into Node)
        properties = self.stack.resolve([r._cfn_properties for r in resources])
        size = sum(_written_size(p) + BYTES_PER_RESOURCE for p in properties)
        out = []
        for v in limit_violations(template, size):
            estimate = " (an estimate)" if v.rule == "template-size" else ""
            out.append(f"{self.stack.stack_name}: {v.message}{estimate}. Fix: {v.fix}")
        return out


def check_limits(scope: Construct) -> None:
    """Validate the limits of the stack holding `scope` through `scope`'s own node."""
    scope.node.add_validation(CloudFormationLimits(scope))
