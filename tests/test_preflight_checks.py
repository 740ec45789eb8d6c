"""preflight's run over an emulated account (efa_constructs/tools/preflight/checks.py): a ready account
passes, a wrong one fails naming each problem and its fix, the bootstrap version of the stacks'
qualifier.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from efa_constructs.tools import preflight
from efa_constructs.tools.preflight import Preflight
from tests.account import (
    REGION,
    _ami,
    run,
    stubbed_quotas,
    synth,
)
from tests.helpers import cdk_json_context

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse")  # moto: what its CloudFormation skips


def test_a_ready_account_passes(
    account: dict[str, Any], tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    session = account["session"]
    session.client("ssm", region_name=REGION).put_parameter(
        Name=preflight.BOOTSTRAP_VERSION_PARAMETER, Value="30", Type="String", Overwrite=True
    )
    out = synth(tmp_path, availability_zone="us-east-1c", ami_id=_ami(session), ami_os="ubuntu")
    quotas, stub = stubbed_quotas(session, 1024)
    code, text, err = run(account, out, monkeypatch, capsys, quotas)
    assert code == 0, text + err
    lines = text.splitlines()
    assert all(line.startswith("PASS") for line in lines), text
    assert any("offered [" in line and "trn1.32xlarge is offered in us-east-1c" in line for line in lines)
    assert any("'Running On-Demand Trn instances' 1024 vCPUs: 0 run + 256 needed" in line for line in lines)
    assert any("bootstrap version 30 (>= 6)" in line for line in lines)
    stub.assert_no_pending_responses()


def test_the_bootstrap_check_reads_the_qualifier_the_stacks_were_synthesized_with(
    account: dict[str, Any], tmp_path: Path
) -> None:
    """A team's own qualifier (cdk.json's @aws-cdk/core:bootstrapQualifier, CDK's bootstrapping guide):
    the stacks read /cdk-bootstrap/<qualifier>/version, so that parameter is the one checked."""
    import aws_cdk as cdk

    from stacks.cluster_stack import EfaClusterStack
    from stacks.params import ClusterParams

    out = tmp_path / "cdk.out"
    app = cdk.App(
        outdir=str(out), context={**cdk_json_context(), "@aws-cdk/core:bootstrapQualifier": "team1"}
    )
    EfaClusterStack(
        app, "Trn1EfaCluster", params=ClusterParams.from_context({}, default_instance_type="trn1.32xlarge")
    )
    app.synth()
    need = preflight.bootstrap_required(preflight.templates(out, [])["Trn1EfaCluster"])
    assert need == ("/cdk-bootstrap/team1/version", 6)
    ssm = account["session"].client("ssm", region_name=REGION)
    ssm.put_parameter(Name=preflight.BOOTSTRAP_VERSION_PARAMETER, Value="30", Type="String", Overwrite=True)
    pf = Preflight(account["session"])
    (_, missing) = preflight.register.run(pf, [], dict([need]))
    assert missing.status == "FAIL" and "no /cdk-bootstrap/team1/version" in missing.found, missing
    assert "npx cdk bootstrap --qualifier team1 aws://" in missing.fix
    ssm.put_parameter(Name="/cdk-bootstrap/team1/version", Value="5", Type="String")
    (_, old) = preflight.register.run(pf, [], dict([need]))
    assert old.status == "FAIL" and "bootstrap version 5 (/cdk-bootstrap/team1/version)" in old.found
    ssm.put_parameter(Name="/cdk-bootstrap/team1/version", Value="30", Type="String", Overwrite=True)
    (_, ok) = preflight.register.run(pf, [], dict([need]))
    assert ok.status == "PASS", ok


def test_a_wrong_account_fails_naming_each_problem_and_its_fix(
    account: dict[str, Any], tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """Issue 35's account: no trn1 in the chosen zone, a quota of 0, a missing key pair, no bootstrap."""
    session = account["session"]
    session.client("ssm", region_name=REGION).delete_parameter(Name=preflight.BOOTSTRAP_VERSION_PARAMETER)
    out = synth(
        tmp_path, availability_zone="us-east-1a", key_pair="nobody", ami_id=_ami(session), ami_os="ubuntu"
    )
    quotas, _ = stubbed_quotas(session, 0)
    code, text, _ = run(account, out, monkeypatch, capsys, quotas, "--json")
    assert code == 1
    checks = {c["name"].split(" [")[0]: c for c in json.loads(text)["checks"]}
    assert checks["bootstrap"]["status"] == "FAIL" and "npx cdk bootstrap" in checks["bootstrap"]["fix"]
    assert checks["offered"]["status"] == "FAIL"
    assert checks["offered"]["found"] == "trn1.32xlarge is not offered in us-east-1a"
    assert "us-east-1b, us-east-1c, us-east-1f" in checks["offered"]["fix"]  # moto's offerings for trn1
    assert (
        checks["quota"]["status"] == "FAIL"
        and "0 vCPUs; 0 run, the cluster needs 256" in checks["quota"]["found"]
    )
    assert "--quota-code L-2C3B7624 --desired-value 256" in checks["quota"]["fix"]
    assert (
        checks["key pair"]["status"] == "FAIL" and "no key pair named nobody" in checks["key pair"]["found"]
    )
    assert checks["efa"]["status"] == "PASS"  # moto's DescribeInstanceTypes: 8 EFAs on 8 cards
