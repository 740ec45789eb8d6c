"""The package as users install it: the built wheel in a fresh venv next to an aws-cdk-lib the project
does not pin, someone else's app (tests/user_app.py), the command from PATH (see packaging_check.py)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import tomllib

from tests.conftest import background_result
from tests.helpers import ROOT

pytestmark = pytest.mark.waits

CHECK = "tests/test_packaging.py::test_the_wheel_installs_beside_the_users_aws_cdk_lib_and_synthesizes"


@cache
def found() -> dict[str, Any]:
    run, _ = background_result(CHECK)
    assert run.returncode == 0, run.stderr[-3000:]
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def _resources() -> dict[str, Any]:
    res: dict[str, Any] = json.loads(Path(found()["template"]).read_text())["Resources"]
    return res


def test_the_wheel_installs_beside_the_users_aws_cdk_lib_and_synthesizes() -> None:
    """The app's own aws-cdk-lib (packaging_check.USER_CDK, not the project's pin) stays; every construct
    the user app composes is in its template."""
    from tests.packaging_check import USER_CDK

    pinned = [
        line
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.startswith("aws-cdk-lib==")
    ]
    assert pinned and f"aws-cdk-lib=={USER_CDK}" not in pinned[0]
    assert found()["venv"].endswith(f" {USER_CDK}"), found()["venv"]
    res = _resources()
    types = [r["Type"] for r in res.values()]
    for kind, count in {
        "AWS::EKS::Nodegroup": 2,  # aws_eks_v2 and aws_eks clusters
        "Custom::AWSCDK-EKS-HelmChart": 2,  # the EFA and accelerator device plugins (aws_eks cluster)
        "AWS::PCS::Cluster": 1,
        "AWS::EC2::Instance": 2,  # the EfaCluster's nodes
        "AWS::AutoScaling::AutoScalingGroup": 1,
    }.items():
        assert types.count(kind) == count, (kind, types.count(kind))
    (asg,) = [r for r in res.values() if r["Type"] == "AWS::AutoScaling::AutoScalingGroup"]
    lt = asg["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]
    assert lt.startswith("Lt") and res[lt]["Type"] == "AWS::EC2::LaunchTemplate"
    nics = res[lt]["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
    assert sum(n.get("InterfaceType") == "efa-only" for n in nics) == 4  # p4d: the catalogue shipped
    # the node software's scripts shipped too: the cluster's user data runs the bootstrap
    assert any(
        "EFA_CDK_STEPS=" in json.dumps(r) for r in res.values() if r["Type"] == "AWS::EC2::LaunchTemplate"
    )
    # the file system the app had before: admitted (a rule on its group), mounted by the PCS compute nodes
    assert any(r["Properties"].get("GroupId") == "sg-0fedcba9876543210" for r in res.values()
               if r["Type"] == "AWS::EC2::SecurityGroupIngress")  # fmt: skip
    assert any(
        "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com" in json.dumps(r)
        for r in res.values()
        if r["Type"] == "AWS::EC2::LaunchTemplate"
    )


def test_the_wheel_holds_the_package_its_data_and_its_types_and_nothing_else() -> None:
    files = found()["wheel_files"]
    for needed in (
        "efa_constructs/__init__.pyi",  # the public surface the type checkers read
        "efa_constructs/py.typed",
        "efa_constructs/core/catalogue/instance_types.json",
        "efa_constructs/node/boot/bootstrap.sh",
        "efa_constructs/node/bench_parse.py",
        "efa_constructs/node/eks/join-gate.sh",  # the EKS nodes' part (EfaNodegroup(lustre=))
        "efa_constructs/node/gds.py",
        "efa_constructs/tools/replacement_floor.json",  # the template diff's floor (cdk diff's own table)
        "efa_constructs/tools/pr-review.yml",
        "efa_constructs/tools/post_comment.py",  # written into the workflow's post step
    ):
        assert needed in files, needed
    assert not [f for f in files if f.split("/")[0] in {"tests", "stacks", "docs", "scripts"}]
    assert any(f.endswith("licenses/LICENSE") for f in files)


def test_the_distributions_pass_twine_check_and_show_an_index_page() -> None:
    rc, out = found()["twine"]
    assert rc == 0 and out.count("PASSED") == 2, out  # the wheel and the sdist
    meta = found()["metadata"]
    for field in (
        "Summary: AWS CDK constructs",
        "License-Expression: Apache-2.0",
        "Project-URL: EFA user guide, https://docs.aws.amazon.com/",
        "Classifier: Framework :: AWS CDK :: 2",
        "Classifier: Typing :: Typed",
        "Requires-Python: >=3.10",
        "Requires-Dist: aws-cdk-lib<3,>=2.270.0",
        "Description-Content-Type: text/markdown",
    ):
        assert field in meta, field
    requires = [line.split(";")[0] for line in meta.splitlines() if line.startswith("Requires-Dist")]
    assert requires and not [r for r in requires if "==" in r]  # ranges, no exact pin for a user to fight


def test_the_classifiers_are_pypis_own() -> None:
    import trove_classifiers

    classifiers = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["classifiers"]
    assert [c for c in classifiers if c not in trove_classifiers.classifiers] == []


def test_efa_cdk_runs_from_path() -> None:
    rc, out = found()["layout"]
    assert rc == 0 and out.startswith("trn1.32xlarge  layout=recommended  EFA=8"), out


def test_installed_template_diff_without_its_extra_refuses_in_one_line() -> None:
    rc, err = found()["template_diff"]
    assert rc == 4 and "\n" not in err, err
    assert (
        err.startswith("error: template-diff='cfn-lint not installed'")
        and "pip install 'efa-cdk[diff]'" in err
    )


def test_installed_catalogue_refresh_without_its_extra_refuses_in_one_line() -> None:
    rc, err = found()["refresh_without_extra"]
    assert rc == 4 and err == (
        "error: catalogue refresh: offline refresh reads moto's snapshot: pip install 'efa-cdk[refresh]'"
    ), err


def test_installed_preflight_without_its_extra_refuses_in_one_line() -> None:
    rc, err = found()["preflight_without_extra"]
    assert rc == 4 and err == "error: preflight calls AWS with boto3: pip install 'efa-cdk[account]'", err


def test_the_eks_example_names_its_extra_and_synthesizes_with_it() -> None:
    rc, err = found()["eks_without_extra"]
    assert rc == 1 and err == (
        "error: this example needs aws-cdk.lambda-layer-kubectl-v35: pip install 'efa-cdk[eks]'"
    ), err
    rc, err = found()["eks_with_extra"]
    assert rc == 0, err
    res = json.loads(Path(found()["eks_template"]).read_text())["Resources"]
    assert [r["Type"] for r in res.values()].count("AWS::EKS::Nodegroup") == 1


def test_a_separate_app_composes_the_cluster_with_cdk_grants_and_connections() -> None:
    """bucket.grant_read(cluster) and db.connections.allow_from(cluster, ...) work through CDK itself."""
    res = _resources()
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
    assert found()["lazy"] == "False True"


def test_aws_cdk_lib_owns_its_files_in_the_venv_the_tests_run_in() -> None:
    """scripts/setup leaves aws-cdk-lib's own aws_cdk/cloud_assembly_schema (the standalone
    aws-cdk.cloud-assembly-schema writes the same file, and a parallel install may land it last): checked
    here by the same script setup runs, so that fault reads as itself, not as jsii's "Unknown interface"
    in a dozen annotation tests."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "cdk_lib_owns_its_files.py")], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def test_a_file_another_package_overwrote_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check compares each file with aws-cdk-lib's RECORD: a changed byte is found and named."""
    import base64
    import hashlib
    import importlib.metadata
    import importlib.util

    spec = importlib.util.spec_from_file_location("owns", ROOT / "scripts" / "cdk_lib_owns_its_files.py")
    assert spec and spec.loader
    owns = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(owns)
    mine = tmp_path / "aws_cdk" / "cloud_assembly_schema" / "__init__.py"
    mine.parent.mkdir(parents=True)
    mine.write_text("aws-cdk-lib's copy\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(mine.read_bytes()).digest()).rstrip(b"=").decode()
    (tmp_path / "aws_cdk_lib-0.dist-info").mkdir()
    (tmp_path / "aws_cdk_lib-0.dist-info" / "METADATA").write_text("Name: aws-cdk-lib\nVersion: 0\n")
    (tmp_path / "aws_cdk_lib-0.dist-info" / "RECORD").write_text(
        f"aws_cdk/cloud_assembly_schema/__init__.py,sha256={digest},{len(mine.read_bytes())}\n"
    )
    fake = importlib.metadata.PathDistribution(tmp_path / "aws_cdk_lib-0.dist-info")
    monkeypatch.setattr(importlib.metadata, "distribution", lambda _name: fake)
    assert owns.overwritten() == []
    mine.write_text("the standalone package's copy\n")
    assert owns.overwritten() == ["aws_cdk/cloud_assembly_schema/__init__.py"]
