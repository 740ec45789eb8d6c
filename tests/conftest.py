"""Shared fixtures: one CDK App per session (each App start costs a Node process)."""

from __future__ import annotations

import json
import os
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
