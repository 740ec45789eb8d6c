"""CloudFormation's per-template limits, checked on the synthesized templates at synth time.

Every :class:`EfaCluster` registers :class:`CloudFormationLimits` (a CDK policy-validation plugin)
on its app once, so a template that CloudFormation would refuse fails ``cdk synth`` instead, with
the numbers and the fix. The checks themselves are one pure function over a template.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

#: CloudFormation quotas (User Guide, "CloudFormation quotas"): per template.
MAX_RESOURCES = 500
MAX_OUTPUTS = 200
MAX_PARAMETERS = 200
MAX_TEMPLATE_BYTES = 1_000_000  # template body uploaded through S3, as `cdk deploy` does
FIX = (
    "use node_group=asg (one Auto Scaling group: the template does not grow with node_count), "
    "or split the nodes across several stacks"
)


@dataclass(frozen=True)
class LimitViolation:
    """One exceeded limit: which, by how much, and the fix."""

    rule: str
    message: str
    fix: str = FIX


def limit_violations(template: Mapping[str, Any], size_bytes: int) -> list[LimitViolation]:
    """Every CloudFormation per-template limit this template exceeds."""
    out = []
    for rule, section, limit in (
        ("resources", "Resources", MAX_RESOURCES),
        ("outputs", "Outputs", MAX_OUTPUTS),
        ("parameters", "Parameters", MAX_PARAMETERS),
    ):
        count = len(template.get(section, {}))
        if count > limit:
            out.append(LimitViolation(rule, f"{count} {rule}; CloudFormation allows {limit} per template"))
    if size_bytes > MAX_TEMPLATE_BYTES:
        out.append(
            LimitViolation(
                "template-size",
                f"{size_bytes:,} bytes; CloudFormation allows {MAX_TEMPLATE_BYTES:,} per template",
            )
        )
    return out


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
        return "0.1.0"

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
