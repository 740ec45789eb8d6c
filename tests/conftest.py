"""Shared fixtures: one CDK App per session (each App start costs a Node process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
ROOT = Path(__file__).resolve().parent.parent


def cdk_json_context() -> dict[str, Any]:
    """cdk.json's feature flags: an App built in pytest does not read cdk.json by itself."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
    return context


def new_app(extra_context: dict[str, Any] | None = None) -> Any:
    """An App as `cdk synth` builds it, minus the bootstrap-version rule (snapshot churn)."""
    import aws_cdk as cdk

    return cdk.App(
        context={**cdk_json_context(), **(extra_context or {})},
        default_stack_synthesizer=cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False),
    )


def isolated_vpc(stack: Any) -> Any:
    """A one-AZ VPC with one isolated subnet: the cheapest VPC the constructs accept."""
    from aws_cdk import aws_ec2 as ec2

    return ec2.Vpc(
        stack,
        "Vpc",
        max_azs=1,
        nat_gateways=0,
        subnet_configuration=[ec2.SubnetConfiguration(name="P", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
    )


@pytest.fixture(scope="session")
def ready_app() -> Any:
    """The project's app.py, built once with default context."""
    import app as app_module

    return app_module.build(new_app())


@pytest.fixture(scope="session")
def templates(ready_app: Any) -> dict[str, dict[str, Any]]:
    """Synthesized template of every ready stack, by stack name."""
    assembly = ready_app.synth()
    return {s.stack_name: s.template for s in assembly.stacks}


@pytest.fixture(scope="session")
def make_stack() -> Iterator[Callable[..., Any]]:
    """A fresh stack in a fresh App: Apps are cheap, the one jsii Node process is shared."""
    import aws_cdk as cdk

    def make(**kwargs: Any) -> Any:
        return cdk.Stack(new_app(), "Scratch", **kwargs)

    yield make


# End-to-end checks that run in their own processes (each starts Node and synthesizes). They are
# started as soon as collection finishes, so they use the second core while the in-process tests
# run; the tests that own them wait for the result. Keyed by the owning test's node id.
BACKGROUND: dict[str, tuple[subprocess.Popen[str], Path]] = {}
BACKGROUND_COMMANDS: dict[str, list[str]] = {
    "tests/test_packaging.py::test_installed_package_synthesizes_in_a_separate_app": [
        sys.executable,
        str(ROOT / "tests" / "packaging_check.py"),
        "{tmp}",
    ],
    "tests/test_template_diff.py::test_command_synthesizes_two_revisions": [
        sys.executable,
        "-m",
        "efa_constructs",
        "template-diff",
        "--base",
        "HEAD",
        "--head",
        "HEAD~0",
        "--strict",
    ],
}


def _start_background(nodeid: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="efa-cdk-e2e-"))
    command = [c.format(tmp=tmp) for c in BACKGROUND_COMMANDS[nodeid]]
    proc = subprocess.Popen(command, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    BACKGROUND[nodeid] = (proc, tmp)


def pytest_collection_finish(session: pytest.Session) -> None:
    selected = {item.nodeid for item in session.items}
    for nodeid in BACKGROUND_COMMANDS:
        if nodeid in selected:
            _start_background(nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    for proc, _ in BACKGROUND.values():
        if proc.poll() is None:
            proc.kill()


def background_result(nodeid: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Wait for the background run this test owns (starting it now if it was not started)."""
    if nodeid not in BACKGROUND:
        _start_background(nodeid)
    proc, tmp = BACKGROUND[nodeid]
    out, err = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), tmp
