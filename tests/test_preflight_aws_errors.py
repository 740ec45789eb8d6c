"""preflight's AWS error policy (efa_constructs/tools/preflight/aws_errors.py): a denied, throttled or
credential-less call is one line naming what to do; botocore's retries kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from efa_constructs.tools import preflight
from efa_constructs.tools.preflight import NodeGroup, Preflight
from tests.account import (
    REGION,
)

#: cdk_free: nothing here reaches aws-cdk-lib (tests/conftest.py checks), so the floor run leaves these out;
#: moto warns of what its CloudFormation skips
pytestmark = [pytest.mark.cdk_free, pytest.mark.filterwarnings("ignore:Tried to parse")]


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (
            "UnauthorizedOperation",
            "ec2:DescribeInstanceTypeOfferings was denied. Fix: allow ec2:DescribeInstanceTypeOfferings",
        ),
        ("RequestLimitExceeded", "ec2:DescribeInstanceTypeOfferings was throttled (RequestLimitExceeded)"),
    ],
)
def test_a_denied_or_throttled_call_is_one_line_naming_the_permission(
    account: dict[str, Any], code: str, says: str
) -> None:
    ec2 = account["session"].client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    stub.add_client_error("describe_instance_type_offerings", service_error_code=code, service_message="no")
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients["ec2"] = ec2
    group = NodeGroup("S", "Cluster", "trn1.32xlarge", 2, zone="us-east-1c")
    check = pf.guard("offered", lambda: pf.offered(group))  # as run() guards each check
    assert check is not None and check.status == "FAIL" and says in check.line(), check


def test_no_credentials_is_one_line_not_a_traceback(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    out = tmp_path / "cdk.out"
    out.mkdir()
    (out / "Trn1EfaCluster.template.json").write_text("{}")
    manifest = {"artifacts": {"Trn1EfaCluster": {"type": "aws:cloudformation:stack",
                              "properties": {"templateFile": "Trn1EfaCluster.template.json"}}}}  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert preflight.main(["Trn1EfaCluster"], out, REGION, False) == 4
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: preflight: ") and "credentials" in err


@pytest.fixture
def throttling_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """An endpoint that answers every call as EC2 does when it throttles (HTTP 503, RequestLimitExceeded:
    EC2 API reference, "Error codes"); the list holds each request's action, in order."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Throttle(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            seen.append(next(p.split("=", 1)[1] for p in body.split("&") if p.startswith("Action=")))
            answer = (
                b"<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded."
                b"</Message></Error></Errors><RequestID>1</RequestID></Response>"
            )
            self.send_response(503)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Throttle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for key, value in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")  # no profile's retry settings from this machine
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_port}")
    yield seen
    server.shutdown()


def test_a_throttled_call_is_retried_by_botocores_standard_mode_then_is_one_line(
    throttling_endpoint: list[str],
) -> None:
    """botocore's standard retry mode makes 3 attempts (botocore's "Retries" guide: max_attempts 3, where
    legacy mode made 5), whatever botocore's own default in the range this package accepts."""
    pf = Preflight(boto3.session.Session(region_name=REGION))
    group = NodeGroup("S", "Cluster", "trn1.32xlarge", 2, zone="us-east-1c")
    check = pf.guard("offered", lambda: pf.offered(group))
    assert check is not None and "was throttled (RequestLimitExceeded)" in check.line(), check
    assert throttling_endpoint == ["DescribeInstanceTypeOfferings"] * 3
    assert pf.client("ec2").meta.config.retries["mode"] == "standard"


def test_a_retry_mode_the_user_chose_is_kept(
    throttling_endpoint: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_RETRY_MODE", "legacy")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    session = boto3.session.Session(region_name=REGION)
    pf = Preflight(session)
    pf.guard("offered", lambda: pf.offered(NodeGroup("S", "Cluster", "trn1.32xlarge", 2, zone="us-east-1c")))
    assert throttling_endpoint == ["DescribeInstanceTypeOfferings"] * 2
    assert pf.client("ec2").meta.config.retries.get("mode", "legacy") == "legacy"
