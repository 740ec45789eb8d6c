"""What the account tests share: moto's server as the account (the ``account`` fixture), the ready
cluster synthesized into a cloud assembly, Service Quotas and Capacity Reservations answered through
botocore's own models where moto has none, and the command as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from efa_constructs.tools import preflight
from efa_constructs.tools.preflight import Preflight
from tests.helpers import cdk_json_context

REGION = "us-east-1"


def synth(tmp: Path, **context: str) -> Path:
    """Trn1EfaCluster synthesized into a cloud assembly, as `npx cdk synth` writes it."""
    import aws_cdk as cdk

    from stacks.cluster_stack import EfaClusterStack
    from stacks.params import ClusterParams

    out = tmp / "cdk.out"
    app = cdk.App(outdir=str(out), context=cdk_json_context())
    params = ClusterParams.from_context({"node_count": "2", **context}, default_instance_type="trn1.32xlarge")
    EfaClusterStack(app, "Trn1EfaCluster", params=params)
    app.synth()
    return out


def stubbed_quotas(session: Any, vcpus: float, *, calls: int = 1) -> tuple[Any, Stubber]:
    """Service Quotas' answer for EC2's Trn quota, `calls` times, checked against botocore's model."""
    client = session.client("service-quotas", region_name=REGION)
    stub = Stubber(client)
    quota = {
        "ServiceCode": "ec2",
        "QuotaCode": "L-2C3B7624",
        "QuotaName": "Running On-Demand Trn instances",
        "Value": vcpus,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }
    for _ in range(calls):
        stub.add_response("list_service_quotas", {"Quotas": [quota]}, {"ServiceCode": "ec2"})
    stub.activate()
    return client, stub


def answer_reservations(client: Any, reservations: list[dict[str, Any]]) -> None:
    """moto has no Capacity Reservations: the ec2 `client` answers DescribeCapacityReservations with
    `reservations`, the response checked against botocore's model of it (as Stubber checks), every other
    call still going to moto."""
    from botocore.awsrequest import AWSResponse
    from botocore.validate import ParamValidator

    operation = client.meta.service_model.operation_model("DescribeCapacityReservations")
    answer = {"CapacityReservations": reservations}
    report = ParamValidator().validate(answer, operation.output_shape)
    assert not report.has_errors(), report.generate_report()

    def respond(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        return AWSResponse("https://moto", 200, {}, None), answer

    client.meta.events.register("before-call.ec2.DescribeCapacityReservations", respond)


def run(
    account: dict[str, Any],
    out: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
    quotas: Any,
    *args: str,
    reservations: list[dict[str, Any]] | None = None,
    stacks: tuple[str, ...] = ("Trn1EfaCluster",),
) -> tuple[int, str, str]:
    """The command as a user runs it, with Service Quotas answered by the stub, and Capacity
    Reservations by `reservations` (default: none)."""
    real = Preflight.client

    def client(self: Preflight, service: str) -> Any:
        if service == "service-quotas":
            return quotas
        made = real(self, service)
        if service == "ec2" and not getattr(made, "_answers_reservations", False):
            answer_reservations(made, reservations or [])
            made._answers_reservations = True
        return made

    monkeypatch.setattr(Preflight, "client", client)
    code = preflight.main(list(stacks), out, None, "--json" in args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


#: Every class prefix of the catalogue's families and the quota EC2's user guide puts it under: a new
#: family in the catalogue must be added here (and to QUOTA_CLASSES), never fall into Standard unseen.
CLASS_OF_PREFIX = {"c": "Standard", "dl": "DL", "f": "F", "g": "G and VT", "gr": "G and VT",
                   "hpc": "HPC", "i": "Standard", "im": "Standard", "inf": "Inf", "m": "Standard",
                   "p": "P", "r": "Standard", "trn": "Trn", "u": "High Memory", "vt": "G and VT",
                   "x": "X"}  # fmt: skip


def _ami(session: Any) -> str:
    images = session.client("ec2", region_name=REGION).describe_images(Owners=["amazon"])["Images"]
    return next(i["ImageId"] for i in images if i.get("Architecture") == "x86_64")


def _reservation(**overrides: Any) -> dict[str, Any]:
    base = {
        "CapacityReservationId": "cr-0123456789abcdef0",
        "InstanceType": "trn1.32xlarge",
        "AvailabilityZone": "us-east-1c",
        "State": "active",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 2,
        "InstancePlatform": "Linux/UNIX",
    }
    return base | overrides


SUBNET = "subnet-0123456789abcdef0"


def _root(gib: int) -> dict[str, Any]:
    """An image's root device and its snapshot's size (EC2 API reference, Image.BlockDeviceMappings)."""
    return {"RootDeviceName": "/dev/sda1", "BlockDeviceMappings": [{"DeviceName": "/dev/sda1",
            "Ebs": {"VolumeSize": gib, "SnapshotId": "snap-0123456789abcdef0"}}]}  # fmt: skip


class _StubbedSession:
    """A boto3 session whose clients are botocore's Stubber-checked ones (each request and answer checked
    against AWS's service model), one per service."""

    def __init__(self) -> None:
        real = boto3.session.Session(region_name=REGION, aws_access_key_id="k", aws_secret_access_key="k")
        self.region_name = REGION
        self.clients = {s: real.client(s) for s in ("cloudformation", "cloudwatch", "ec2", "ssm")}
        self.stubs = {s: Stubber(c) for s, c in self.clients.items()}

    def client(self, service: str, **_: Any) -> Any:
        return self.clients[service]


def _cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """efa-cdk as a user runs it (python -m efa_constructs), in `cwd`, with `env` over a clean one."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "efa_constructs", *args], cwd=cwd,
                          env={**base, **env}, capture_output=True, text=True, timeout=120)  # fmt: skip


def _assembly(tmp_path: Path, region: str) -> Path:
    """A cloud assembly's manifest with one stack for `region` ('unknown-region': env-agnostic)."""
    out = tmp_path / "cdk.out"
    out.mkdir()
    manifest = {"artifacts": {"S": {"type": "aws:cloudformation:stack",
                                    "properties": {"templateFile": "S.template.json"},
                                    "environment": f"aws://unknown-account/{region}"}}}  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "S.template.json").write_text(json.dumps({"Resources": {}}))
    return out


def _fsx_quotas(client: Any, stub: Stubber, storage_gib: float, file_systems: float | None) -> None:
    """Service Quotas' answer for fsx (after ec2's), its shape checked against botocore's model: the
    PERSISTENT_2 Lustre quotas by the names and codes Service Quotas' default list records (the count quota
    left out when `file_systems` is None)."""
    quotas = [
        {"ServiceCode": "fsx", "QuotaCode": code, "QuotaName": name, "Value": value, "Unit": "None",
         "Adjustable": True, "GlobalQuota": False}
        for code, name, value in (
            ("L-8F1B9C74", preflight.LUSTRE_STORAGE_QUOTA, storage_gib),
            ("L-FD6F2F22", preflight.LUSTRE_COUNT_QUOTA, file_systems),
        )
        if value is not None
    ]  # fmt: skip
    stub.add_response("list_service_quotas", {"Quotas": quotas}, {"ServiceCode": "fsx"})


def _crafted(tmp_path: Path, template_file: str) -> Path:
    out = tmp_path / "cdk.out"
    out.mkdir()
    manifest = {"version": "48.0.0", "artifacts": {"S": {"type": "aws:cloudformation:stack",
                "environment": "aws://unknown-account/unknown-region",
                "properties": {"templateFile": template_file}}}}  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out
