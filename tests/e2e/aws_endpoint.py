"""The one-machine cluster's AWS: moto's server (EC2, SSM, S3, CloudFormation) plus the two things
moto 5.2.5 does not do, each recorded for the harness to check instead of acted on:

* CloudFormation ``SignalResource`` (moto has no such action): the signal is checked against the
  stack moto created (the stack and the logical id must exist, as CloudFormation checks) and
  appended to ``signals.jsonl``.
* A wait-condition handle (moto models no wait conditions): ``PUT /wait-condition/<id>`` stores the
  body in ``handles/<id>.json``, as CloudFormation keeps a handle's signal data.
* Every call a node signs (with :data:`NODE_KEY`) is appended to ``node-requests.jsonl`` as IAM sees it
  (service, operation, parameters): the harness authorizes each against the node role's policies
  (moto's own authorization checks actions only, against resource ``*``, so it refuses every
  statement scoped to an ARN).
* EC2 ``DescribeInstanceTopology`` (moto has no such action): an answer in the API's shape for the
  instances moto runs, with made-up network nodes (three layers, as on most EFA types: one spine,
  then a block and a leaf by launch order, two instances per leaf). It stands in for EC2's answer;
  the harness checks that the head node's topology.conf follows whatever it says.

Run inside the harness's AWS namespace: ``python -m tests.e2e.aws_endpoint HOST PORT STATE_DIR``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

ACCOUNT, REGION = "123456789012", "us-east-1"
StartResponse = Callable[..., Any]


def _xml_error(start: StartResponse, message: str) -> list[bytes]:
    body = (
        '<ErrorResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><Error>'
        f"<Type>Sender</Type><Code>ValidationError</Code><Message>{message}</Message></Error>"
        "<RequestId>e2e</RequestId></ErrorResponse>"
    )
    start("400 Bad Request", [("Content-Type", "text/xml")])
    return [body.encode()]


class Endpoint:
    """moto's WSGI app with SignalResource and wait-condition handles in front of it."""

    def __init__(self, state: Path) -> None:
        self.state = state
        (state / "handles").mkdir(parents=True, exist_ok=True)
        self.moto = DomainDispatcherApplication(create_backend_app)

    def __call__(self, environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/wait-condition/") and environ["REQUEST_METHOD"] == "PUT":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            json.loads(body)  # CloudFormation takes JSON only
            (self.state / "handles" / f"{path.rsplit('/', 1)[1]}.json").write_bytes(body)
            start("200 OK", [("Content-Length", "0")])
            return [b""]
        auth = environ.get("HTTP_AUTHORIZATION", "")
        if f"Credential={NODE_KEY}/" in auth:  # a node's call: kept for the harness to authorize
            raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = _Replay(raw)
            with (self.state / "node-requests.jsonl").open("a") as fh:
                fh.write(json.dumps(node_request(environ, auth, raw), sort_keys=True, default=str) + "\n")
        if environ["REQUEST_METHOD"] == "POST" and ("cloudformation" in auth or "/ec2/" in auth):
            raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
            answer = {"SignalResource": self._signal, "DescribeInstanceTopology": self._topology}.get(
                form.get("Action", "")
            )
            if answer is not None:
                return answer(form, start)
            environ["wsgi.input"] = _Replay(raw)
        return self.moto(environ, start)  # type: ignore[no-any-return]

    def _signal(self, form: dict[str, str], start: StartResponse) -> list[bytes]:
        from moto.cloudformation.models import cloudformation_backends

        backend = cloudformation_backends[ACCOUNT][REGION]
        stacks = [s for s in backend.stacks.values() if form["StackName"] in (s.name, s.stack_id)]
        if not stacks:
            return _xml_error(start, f"Stack {form['StackName']} does not exist")
        if form["LogicalResourceId"] not in stacks[0].template_dict["Resources"]:
            return _xml_error(start, f"Resource {form['LogicalResourceId']} does not exist in the stack")
        with (self.state / "signals.jsonl").open("a") as fh:
            fh.write(json.dumps(form, sort_keys=True) + "\n")
        start("200 OK", [("Content-Type", "text/xml")])
        return [
            b'<SignalResourceResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/">'
            b"<ResponseMetadata><RequestId>e2e</RequestId></ResponseMetadata></SignalResourceResponse>"
        ]

    def _topology(self, form: dict[str, str], start: StartResponse) -> list[bytes]:
        from moto.ec2.models import ec2_backends

        backend = ec2_backends[ACCOUNT][REGION]
        launched = sorted(
            (i for r in backend.reservations.values() for i in r.instances), key=lambda i: i.launch_time
        )
        order = {i.id: n for n, i in enumerate(launched)}
        asked = [v for k, v in sorted(form.items()) if k.startswith("InstanceId.")]
        items = []
        for iid in asked:
            if iid not in order:
                continue
            n = order[iid]
            nodes = "".join(
                f"<item>{x}</item>" for x in ("nn-spine-1", f"nn-block-{n // 4}", f"nn-leaf-{n // 2}")
            )
            items.append(
                f"<item><instanceId>{iid}</instanceId><instanceType>{launched[n].instance_type}</instanceType>"
                f"<networkNodeSet>{nodes}</networkNodeSet><availabilityZone>{REGION}a</availabilityZone></item>"
            )
        body = (
            '<DescribeInstanceTopologyResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>e2e</requestId><instanceSet>{''.join(items)}</instanceSet></DescribeInstanceTopologyResponse>"
        )
        start("200 OK", [("Content-Type", "text/xml")])
        return [body.encode()]


#: The access key the one-machine cluster's nodes sign with (the harness's own calls use another).
NODE_KEY = "e2e-node"


def node_request(environ: dict[str, Any], auth: str, raw: bytes) -> dict[str, Any]:
    """One node call as IAM sees it: the service (the signature's scope), the operation and its
    parameters, from whichever protocol the AWS CLI spoke (query, JSON, CBOR, S3's REST)."""
    import io

    from botocore.parsers import BaseCBORParser

    service = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/")[3]
    method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    source = environ.get("REMOTE_ADDR", "")
    if service == "s3":
        bucket, _, key = path.lstrip("/").partition("/")
        action = {"GET": "GetObject", "HEAD": "GetObject", "PUT": "PutObject"}.get(method, method)
        return {"service": "s3", "action": action, "params": {"Bucket": bucket, "Key": key}, "source": source}
    if target:  # JSON 1.1 (SSM): X-Amz-Target: AmazonSSM.GetParameter
        action, params = target.rsplit(".", 1)[1], json.loads(raw or b"{}")
    elif "/operation/" in path:  # Smithy RPC v2 CBOR (CloudWatch): /service/<name>/operation/<op>
        action, params = (
            path.rsplit("/", 1)[1],
            BaseCBORParser().parse_data_item(io.BytesIO(raw)) if raw else {},
        )
    else:  # query (EC2, CloudFormation, Auto Scaling)
        form = {k: v[0] for k, v in parse_qs(raw.decode() or environ.get("QUERY_STRING", "")).items()}
        action, params = form.pop("Action", ""), form
    return {"service": service, "action": action, "params": params, "source": source}


class _Replay:
    """A request body already read, readable again by moto."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self.data) if n is None or n < 0 else self.pos + n
        chunk, self.pos = self.data[self.pos : end], min(end, len(self.data))
        return chunk

    def readline(self, *_: Any) -> bytes:
        return self.read()


def main(host: str, port: int, state: str) -> None:
    """Serve until killed (the harness stops it by its PID)."""
    server = make_server(host, port, Endpoint(Path(state)), threaded=True, request_handler=MotoRequestHandler)
    Path(state, "ready").write_text(str(port))
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
