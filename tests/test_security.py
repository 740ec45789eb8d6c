"""cdk-nag (AwsSolutions pack, 3.x policy-validation plugin) and aws-cdk-lib's own CloudFormation validation
(schemas and rules; off elsewhere in the tests, tests/conftest.py says why) over every ready stack."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import CloudFormationValidatePlugin, Validations
from cdk_nag import AwsSolutionsChecks

import app as app_module
from efa_constructs.cdk.acknowledgements import REASONS
from efa_constructs.tools.assembly import VALIDATION_REPORT
from tests.helpers import ROOT, new_app

#: aws-cdk-lib's own validation (its plugin's name in the report): its errors fail synthesis with this flag
#: (cdk.json sets it too; here it does not depend on cdk.json)
CFN_VALIDATE = CloudFormationValidatePlugin.PLUGIN_NAME
AS_ERRORS = {"@aws-cdk/core:validateAgainstDefaultRules": True}


@functools.cache
def cfn_validate() -> CloudFormationValidatePlugin:
    """One instance for the module: its engine takes seconds to start."""
    return CloudFormationValidatePlugin()


def nag(
    context: dict[str, Any] | None = None, change: Callable[[cdk.App], None] | None = None
) -> dict[str, dict[str, Any]]:
    """Synthesize the whole app with cdk-nag and aws-cdk-lib's CloudFormation validation; raises on any
    unacknowledged finding of either (warnings of the second included). Templates by stack. `change`, given
    the app, alters it before synthesis."""
    app = app_module.build(new_app({**AS_ERRORS, **(context or {})}))
    if change:
        change(app)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app), cfn_validate())
    templates = {s.stack_name: s.template for s in app.synth().stacks}
    # the report is written when a plugin found anything (acknowledged findings and annotations included);
    # a plugin with nothing to say is left out of it (test_the_cloudformation_gate_can_fail: this one runs)
    written = Path(app.outdir) / VALIDATION_REPORT
    reports = json.loads(written.read_text())["pluginReports"] if written.exists() else []
    found = [
        f"{v['ruleName']}: {v['description']}"
        for report in reports
        if report["pluginName"] == CFN_VALIDATE
        for v in report["violations"]
    ]
    if found:
        raise RuntimeError(f"{CFN_VALIDATE}: {found}")
    return templates


def test_every_ready_stack_has_no_unacknowledged_finding() -> None:
    nag()


def test_the_gate_can_fail() -> None:
    """SSH from the whole internet, asked for explicitly, is reported (AwsSolutions-EC23)."""
    with pytest.raises(RuntimeError, match="AwsSolutions-EC23"):
        nag({"ssh_peers": "0.0.0.0/0"})


def bad_address(app: cdk.App) -> None:
    stack = app.node.find_child("Trn1EfaCluster")
    cdk.CfnResource(stack, "Bad", type="AWS::EC2::EIP", properties={"Domain": "nowhere"})


def test_the_cloudformation_gate_can_fail() -> None:
    """A value outside the schema's enum, a warning of aws-cdk-lib's validation, fails the check."""
    with pytest.raises(RuntimeError, match=r"W3030: Domain: 'nowhere' is not one of"):
        nag(change=bad_address)


def test_every_acknowledgement_has_a_reason_a_reviewer_can_judge() -> None:
    assert set(REASONS) == {
        "AwsSolutions-AS3",
        "AwsSolutions-EC29",
        "AwsSolutions-IAM4",
        "AwsSolutions-IAM5",
        "AwsSolutions-L1",
        "CloudFormation-Validate::F6101",
    }
    # every reason is used by an acknowledgement in the package, and every acknowledgement has one
    source = "\n".join(p.read_text() for p in (ROOT / "efa_constructs").rglob("*.py"))
    calls = re.findall(r'acknowledge\(\s*[\w.() ]+,((?:\s*"[^"]+",?)+)\s*\)', source)
    used = {f.split("[", 1)[0] for call in calls for f in re.findall(r'"([^"]+)"', call)}
    assert used == set(REASONS)


def test_auto_scaling_and_elastic_ip_variants_have_no_unacknowledged_finding() -> None:
    templates = nag(  # one app: Trn1 as a 16-node Auto Scaling group, P5 with an Elastic IP on every node
        {
            "Trn1EfaCluster:node_group": "asg",
            "Trn1EfaCluster:node_count": "16",
            "Trn1EfaCluster:benchmarks": "none",
            "P5EfaCluster:public_ip": "all",
        }
    )
    types = {name: [r["Type"] for r in t["Resources"].values()] for name, t in templates.items()}
    assert types["Trn1EfaCluster"].count("AWS::AutoScaling::AutoScalingGroup") == 1
    assert types["P5EfaCluster"].count("AWS::EC2::EIPAssociation") == 2  # one per node


def test_an_auto_scaling_stack_with_a_zone_has_no_unacknowledged_finding() -> None:
    """Issue 41 item 10: with a zone the stack's region is concrete, and cdk-nag names the group-health
    policy's resource with `aws` and the region written out: the acknowledgement follows (it was written
    with `<AWS::Partition>` and `<AWS::Region>` and matched only an env-agnostic stack)."""
    nag({"Trn1EfaCluster:node_group": "asg", "Trn1EfaCluster:availability_zone": "us-east-1a"})
