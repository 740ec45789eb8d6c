"""CloudFormation's per-template limits, checked on the synthesized templates at synth time.

Every :class:`EfaCluster` registers :class:`CloudFormationLimits` (a CDK policy-validation plugin)
on its app once, so a template that CloudFormation would refuse fails ``cdk synth`` instead, with
the numbers and the fix. The checks themselves are one pure function over a template
(:func:`efa_constructs.core.limits.limit_violations`).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsii
from aws_cdk import (
    IPolicyValidationContext,
    IPolicyValidationPlugin,
    PolicyValidationPluginReport,
    PolicyViolatingResource,
    PolicyViolation,
    Validations,
)
from constructs import Construct, IConstruct

from ..core import __version__
from ..core.limits import limit_violations


@jsii.implements(IPolicyValidationPlugin)
class CloudFormationLimits:
    """A CDK validation plugin that fails synthesis when a template exceeds CloudFormation's limits."""

    @property
    def name(self) -> str:
        """Shown in the validation report."""
        return "efa-cdk-cloudformation-limits"

    @property
    def rule_ids(self) -> list[str]:
        """The checks."""
        return ["resources", "outputs", "parameters", "template-size"]

    @property
    def version(self) -> str:
        """Plugin version (the package's)."""
        return __version__

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        """Check every template of the app."""
        violations = []
        for path in context.template_paths:
            text = Path(path).read_bytes()
            for v in limit_violations(json.loads(text), len(text)):
                violations.append(
                    PolicyViolation(
                        rule_name=v.rule,
                        description=f"{Path(path).name}: {v.message}",
                        fix=v.fix,
                        violating_resources=[
                            PolicyViolatingResource(
                                resource_logical_id=Path(path).name, template_path=path, locations=[v.rule]
                            )
                        ],
                    )
                )
        return PolicyValidationPluginReport(success=not violations, violations=violations)


def check_limits(scope: IConstruct) -> None:
    """Register :class:`CloudFormationLimits` on the app that holds `scope` (once per app)."""
    root = scope.node.root
    if root.node.try_find_child("EfaCdkLimits") is None:
        assert isinstance(root, Construct)
        Construct(root, "EfaCdkLimits")  # marker: registered
        Validations.of(root).add_plugins(CloudFormationLimits())
