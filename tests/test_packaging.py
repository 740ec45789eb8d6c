"""The package installs from source and works in someone else's CDK app (see packaging_check.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import background_result


def test_installed_package_synthesizes_in_a_separate_app(request: pytest.FixtureRequest) -> None:
    run, _ = background_result(request.node.nodeid)
    assert run.returncode == 0, run.stderr[-3000:]
    template = json.loads(Path(run.stdout.strip().splitlines()[-1]).read_text())
    res = template["Resources"]
    for lt in (r for r in res.values() if r["Type"] == "AWS::EC2::LaunchTemplate"):
        nics = lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
        assert sum(n.get("InterfaceType") == "efa-only" for n in nics) == 4  # the catalogue shipped
    # the node software's scripts shipped too: the cluster's user data runs the bootstrap
    assert any(
        "EFA_CDK_STEPS=" in json.dumps(r) for r in res.values() if r["Type"] == "AWS::EC2::LaunchTemplate"
    )


def test_installed_template_diff_without_its_extra_refuses_in_one_line(
    request: pytest.FixtureRequest,
) -> None:
    run, _ = background_result(
        "tests/test_packaging.py::test_installed_package_synthesizes_in_a_separate_app"
    )
    (line,) = [x for x in run.stdout.splitlines() if x.startswith("template-diff exit")]
    assert line.startswith("template-diff exit 1: error: template-diff='cfn-lint not installed'"), line
    assert "pip install 'efa-cdk[diff]'" in line


def test_a_separate_app_composes_the_cluster_with_cdk_grants_and_connections(
    request: pytest.FixtureRequest,
) -> None:
    """bucket.grant_read(cluster) and db.connections.allow_from(cluster, ...) work through CDK itself."""
    run, _ = background_result(
        "tests/test_packaging.py::test_installed_package_synthesizes_in_a_separate_app"
    )
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads(Path(run.stdout.strip().splitlines()[-1]).read_text())["Resources"]
    role = next(
        k for k in res if k.startswith("TrainingLaunchTemplateRole") and res[k]["Type"] == "AWS::IAM::Role"
    )
    lt_role = next(k for k in res if k.startswith("LtRole") and res[k]["Type"] == "AWS::IAM::Role")
    data = next(k for k in res if k.startswith("TrainingData"))
    checkpoints = next(k for k in res if k.startswith("Checkpoints"))

    def granted(role_id: str, bucket_id: str, action: str) -> bool:
        for r in res.values():
            if r["Type"] != "AWS::IAM::Policy" or {"Ref": role_id} not in r["Properties"]["Roles"]:
                continue
            for st in r["Properties"]["PolicyDocument"]["Statement"]:
                actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                if action in actions and bucket_id in json.dumps(st["Resource"]):
                    return True
        return False

    assert granted(role, data, "s3:GetObject*") and not granted(role, checkpoints, "s3:GetObject*")
    assert granted(lt_role, checkpoints, "s3:PutObject") and not granted(lt_role, data, "s3:GetObject*")
    db = next(k for k in res if k.startswith("Database") and res[k]["Type"] == "AWS::EC2::SecurityGroup")
    cluster_sg = next(
        k
        for k in res
        if k.startswith("TrainingSecurityGroup") and res[k]["Type"] == "AWS::EC2::SecurityGroup"
    )
    rules = [r["Properties"] for r in res.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"]
    assert {
        "IpProtocol": "tcp",
        "FromPort": 5432,
        "ToPort": 5432,
        "Description": "training nodes to Postgres",
        "GroupId": {"Fn::GetAtt": [db, "GroupId"]},
        "SourceSecurityGroupId": {"Fn::GetAtt": [cluster_sg, "GroupId"]},
    } in rules


def test_the_package_loads_the_cdk_only_when_a_construct_is_used() -> None:
    run, _ = background_result(
        "tests/test_packaging.py::test_installed_package_synthesizes_in_a_separate_app"
    )
    assert "aws_cdk loaded: False True" in run.stdout.splitlines(), run.stdout
