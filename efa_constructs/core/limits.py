"""CloudFormation's per-template limits, as one pure function over a template.

:class:`efa_constructs.cdk.limits.CloudFormationLimits` runs it on every synthesized template.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: CloudFormation quotas (User Guide, "CloudFormation quotas"): per template.
MAX_RESOURCES = 500
MAX_OUTPUTS = 200
MAX_PARAMETERS = 200
#: The template body through S3, as `cdk deploy` uploads it: "1 MB" (CloudFormation quotas), held as the
#: 1,000,000 bytes AWS's own linter holds it to (aws-cloudformation/cfn-lint, its LIMITS: template body),
#: as aws-cdk-lib's own warning does (@aws-cdk/core:Stack.templateSize: "Template size exceeds limit").
MAX_TEMPLATE_BYTES = 1_000_000
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


def written_violations(path: Path) -> list[LimitViolation]:
    """The limits a template as written (a cloud assembly's ``<stack>.template.json``) exceeds: its
    bytes on disk and its sections, counted exactly."""
    return limit_violations(json.loads(path.read_text()), path.stat().st_size)
