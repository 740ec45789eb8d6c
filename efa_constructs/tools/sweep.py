"""``efa-cdk sweep STACK``: run a deployed cluster's benchmarks and fabric sweep again, now.

It sends the stack's Run Command document (the ``BenchmarkDocument`` output, made with the cluster's
monitoring) to the stack's instances (by the ``aws:cloudformation:stack-name`` tag CloudFormation and
Auto Scaling put on them; on every node but the leader the document does nothing), waits for it, and
reads the leader's newest results as ``efa-cdk status`` does: the fabric sweep's verdict, the slow
nodes and links named with their figures. A node it names fails its health checks from then on
(docs/operate.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .aws import aws_client
from .exits import Exit, emit
from .preflight import PreflightError
from .preflight.aws_errors import _aws_call
from .status import (
    _benchmarks,
    _newest_results,
    _pages,
    described_stack,
    from_account,
    render_benchmark,
    resources_by_type,
    stack_outputs,
)

#: Every call the command makes and the IAM action it needs.
PERMISSIONS = {
    "cloudformation:DescribeStacks": "the BenchmarkDocument output",
    "cloudformation:ListStackResources": "the results parameter",
    "ssm:SendCommand": "run the document on the stack's instances",
    "ssm:ListCommandInvocations": "wait for it",
    "ssm:GetParameter": "the leader's newest results",
}
#: Run Command's final invocation states (SSM API reference, CommandInvocation.Status).
DONE = frozenset({"Success", "Failed", "Cancelled", "TimedOut", "Undeliverable", "Terminated"})


def sweep(
    session: Any, stack: str, *, wait_seconds: float = 3600, pause: Callable[[float], None] = time.sleep
) -> dict[str, Any]:
    """Run the document, wait until every invocation is done, and return the command id, each instance's
    invocation state and the sweep's result (None when the leader kept none: fewer than 3 nodes)."""
    cfn = aws_client(session, "cloudformation")
    outputs = stack_outputs(described_stack(cfn, stack))
    document = outputs.get("BenchmarkDocument")
    if not document:
        raise PreflightError(
            f"{stack} has no BenchmarkDocument output (a cluster without monitoring): run "
            "sudo /opt/efa-cdk/bin/fabric-sweep.sh on its leader"
        )
    ssm = aws_client(session, "ssm")
    targets = [{"Key": "tag:aws:cloudformation:stack-name", "Values": [stack]}]
    sent = _aws_call(
        "sweep",
        "ssm:SendCommand",
        lambda: ssm.send_command(DocumentName=document, Targets=targets, Comment=f"efa-cdk sweep {stack}"),
    )
    command = sent["Command"]["CommandId"]
    deadline = time.monotonic() + wait_seconds
    while True:
        invocations = _aws_call(
            "sweep",
            "ssm:ListCommandInvocations",
            lambda: _pages(ssm, "list_command_invocations", "CommandInvocations", CommandId=command),
        )
        if invocations and all(i["Status"] in DONE for i in invocations):
            break
        if time.monotonic() > deadline:
            raise PreflightError(
                f"command {command} still runs after {wait_seconds:g} s: aws ssm list-command-invocations "
                f"--command-id {command}, then efa-cdk status {stack}"
            )
        pause(10)
    results = _benchmarks(outputs, _newest_results(session, resources_by_type(cfn, stack)))
    return {
        "command": command,
        "invocations": {i["InstanceId"]: i["Status"] for i in invocations},
        "sweep": next((r for r in results if r.get("benchmark") == "fabric-sweep"), None),
    }


def main(stack: str, region: str | None, as_json: bool) -> int:
    """The command line: 0 nothing named, 1 a node or link named (or the sweep failed), 4 could not run."""
    found = from_account("sweep", stack, region, lambda session: sweep(session, stack), as_json)
    if found is None:
        return Exit.CANNOT_RUN
    result = found["sweep"]
    states = ", ".join(sorted({s for s in found["invocations"].values()}))
    text = f"command {found['command']}: {len(found['invocations'])} instances ({states})\n" + (
        render_benchmark(result) if result else "fabric-sweep: no result kept (fewer than 3 nodes?)"
    )
    emit(found, text, as_json)
    return Exit.OK if result is not None and result.get("ok") else Exit.FOUND
