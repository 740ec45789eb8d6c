"""Shared fixtures: one CDK App per session (each App start costs a Node process)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# aws-cdk-lib 2.270 and later check every synthesized template against CloudFormation's schemas and
# rules (AppProps.builtinCloudFormationValidation, on by default; "set CDK_VALIDATION=false in your
# environment" turns it off); cdk.json's @aws-cdk/core:validateAgainstDefaultRules makes its errors fail
# synthesis. It was half the CPU of each synthesis (tests/test_cluster.py and tests/test_launch_template.py:
# 34 CPU-seconds with it, 17 without; the in-process suite 816 and 701), so the tests run without it. It runs
# where it proves most: tests/test_security.py over every ready stack and its variants (warnings fail
# there too), and every command of the docs, run as printed in a bare shell (tests/docs_check.py) with
# cdk.json's flag.
os.environ.setdefault("CDK_VALIDATION", "false")

from tests.helpers import ROOT, new_app


@pytest.fixture(scope="session")
def ready_app() -> Any:
    """The project's app.py, built once with default context."""
    import app as app_module

    return app_module.build(new_app())


@pytest.fixture(scope="session")
def templates(ready_app: Any) -> dict[str, dict[str, Any]]:
    """Synthesized template of every ready stack, by stack name.

    As soon as they exist, cfn-lint starts on them in a process of its own (see :func:`lint_results`).
    """
    assembly = ready_app.synth()
    out = {s.stack_name: s.template for s in assembly.stacks}
    tmp = Path(tempfile.mkdtemp(prefix="efa-cdk-lint-"))
    (tmp / "templates.json").write_text(json.dumps(out))
    command = [sys.executable, str(ROOT / "tests" / "lint_check.py"), str(tmp / "templates.json")]
    BACKGROUND[LINT] = (
        subprocess.Popen(command, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE),
        tmp,
    )
    return out


LINT = "cfn-lint of the ready stacks"


@functools.cache
def lint_results() -> dict[str, list[str]]:
    """cfn-lint findings for every ready stack, from the background run the `templates` fixture started."""
    proc, _ = BACKGROUND[LINT]
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    findings: dict[str, list[str]] = json.loads(out)
    return findings


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
#: What each background run printed, once it ended (more than one test may wait for one run).
ENDED: dict[str, subprocess.CompletedProcess[str]] = {}
PROJECT_MYPY = "tests/test_public_api.py::test_the_project_passes_mypy_strict"
BACKGROUND_COMMANDS: dict[str, list[str]] = {
    "tests/test_packaging.py::test_the_wheel_installs_beside_the_users_aws_cdk_lib_and_synthesizes": [
        sys.executable,
        str(ROOT / "tests" / "packaging_check.py"),
        "{tmp}",
    ],
    "tests/test_template_diff.py::test_command_synthesizes_two_revisions": [
        sys.executable,
        str(ROOT / "tests" / "template_diff_check.py"),
        "{tmp}",
    ],
    "tests/test_pr_review.py::test_the_workflows_step_reviews_a_real_change_on_a_temporary_repository": [
        sys.executable,
        str(ROOT / "tests" / "pr_review_check.py"),
        "{tmp}",
    ],
    "tests/test_review_deps.py::test_an_aws_cdk_lib_bump_is_shown_with_what_it_changes": [
        sys.executable,
        str(ROOT / "tests" / "review_deps_check.py"),
        "{tmp}",
    ],
    # every shell command of the README and docs, as printed, in a bare shell (tests/docs_check.py)
    "tests/test_docs.py::test_every_shell_command_runs_as_printed": [
        sys.executable,
        str(ROOT / "tests" / "docs_check.py"),
        "{tmp}",
    ],
    # mypy --strict over pyproject.toml's files, beside the in-process tests (scripts/test runs ruff first):
    # its cache is the one tests/test_public_api.py's run reads, so that run waits for it
    PROJECT_MYPY: [sys.executable, "-m", "mypy"],
    # app.py with a refused value, as `cdk synth` runs it (CDK_OUTDIR / CDK_CONTEXT_JSON set by env)
    "tests/test_bad_input.py::test_a_rejected_configuration_leaves_no_template": [
        "env",
        "CDK_OUTDIR={tmp}/out",
        'CDK_CONTEXT_JSON={{"node_count": "0"}}',
        sys.executable,
        "app.py",
    ],
}


def _start_background(nodeid: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="efa-cdk-e2e-"))
    command = [c.format(tmp=tmp) for c in BACKGROUND_COMMANDS[nodeid]]
    proc = subprocess.Popen(command, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    BACKGROUND[nodeid] = (proc, tmp)


#: Set by scripts/test-floor: the run on the lowest aws-cdk-lib and constructs pyproject.toml admits.
FLOOR = os.environ.get("EFA_CDK_FLOOR") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that wait for a long background run (marked ``waits``) go last, so the in-process tests run
    meanwhile instead of waiting with them.

    On the floor run, leave out what checks the project's pinned environment rather than the library:
    the snapshots (made with constraints.txt's aws-cdk-lib) and the runs in other processes, which use
    the project's own .venv, not the one under test."""
    items.sort(key=lambda item: item.get_closest_marker("waits") is not None)  # stable: order kept
    if not FLOOR:
        return
    keep, drop = [], []
    for item in items:
        pinned = "snapshot" in getattr(item, "fixturenames", ()) or item.nodeid in BACKGROUND_COMMANDS
        (drop if pinned or cdk_free(item) or "tests/test_packaging.py" in item.nodeid else keep).append(item)
    items[:] = keep
    config.hook.pytest_deselected(items=drop)


def cdk_free(item: pytest.Item) -> bool:
    """Marked ``cdk_free`` (a module's ``pytestmark``), not ``cdk_free(False)`` on the test itself: its
    outcome cannot depend on the aws-cdk-lib it runs on."""
    mark = item.get_closest_marker("cdk_free")
    return mark is not None and (mark.args or (True,))[0] is True


class CdkReach:
    """What a test reached of aws-cdk-lib: calls into jsii's Node kernel made in this process, and processes
    started that run the project's Python or Node (a synth there uses the same aws-cdk-lib). A test marked
    ``cdk_free`` must reach neither: the floor run leaves it out, and this run fails it when the mark is wrong
    (see :func:`pytest_runtest_teardown`)."""

    calls: ClassVar[int] = 0
    started: ClassVar[list[str]] = []
    #: fixtures whose set-up called jsii: a test using one reaches aws-cdk-lib
    fixtures: ClassVar[set[str]] = set()
    at_setup: ClassVar[tuple[int, int]] = (0, 0)  # calls and processes when the running test's set-up began

    @classmethod
    def install(cls) -> None:
        from jsii._kernel.providers import process  # every kernel request goes through _NodeProcess.send

        if not hasattr(process, "_NodeProcess") or not hasattr(process._NodeProcess, "send"):
            raise pytest.UsageError(
                "jsii's _NodeProcess.send is gone: tests/conftest.py CdkReach cannot count"
            )
        send, popen = process._NodeProcess.send, subprocess.Popen.__init__

        def counted(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            # loading an assembly is what importing aws_cdk does, whichever test imports first: not a use
            cls.calls += type(request).__name__ != "LoadRequest"
            return send(self, request, *args, **kwargs)

        def watched(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
            argv = [args] if isinstance(args, (str, os.PathLike)) else list(args)
            program = str(argv[0]) if argv else ""
            if str(argv[-1]).endswith("jsii-runtime.js"):
                pass  # jsii's own kernel, started by the first import of aws_cdk: its calls are counted
            elif (
                program == sys.executable
                or Path(program).name in ("node", "npx", "cdk")
                or (program.startswith(str(ROOT)) and not program.startswith(str(ROOT / "efa_constructs")))
            ):
                cls.started.append(" ".join(map(str, argv))[:120])
            popen(self, args, *rest, **kwargs)

        process._NodeProcess.send = counted  # type: ignore[method-assign]
        subprocess.Popen.__init__ = watched  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    if not FLOOR and not config.option.collectonly:
        CdkReach.install()


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any]) -> Iterator[None]:
    before = CdkReach.calls
    yield
    if CdkReach.calls > before:
        CdkReach.fixtures.add(fixturedef.argname)


def pytest_runtest_setup(item: pytest.Item) -> None:
    CdkReach.at_setup = (CdkReach.calls, len(CdkReach.started))  # tests run one at a time


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """A test marked ``cdk_free`` that reached aws-cdk-lib is an error here: the floor would leave out a test
    whose outcome depends on the version it runs on."""
    if FLOOR or not cdk_free(item):
        return
    calls, started = CdkReach.at_setup
    fixtures = sorted(CdkReach.fixtures & set(getattr(item, "fixturenames", ())))
    reached = [f"{CdkReach.calls - calls} jsii calls"] if CdkReach.calls > calls else []
    reached += [f"fixture {f}" for f in fixtures] + [f"started {p}" for p in CdkReach.started[started:]]
    if reached:
        raise AssertionError(
            f"{item.nodeid} is marked cdk_free but reached aws-cdk-lib ({'; '.join(reached)}): the floor run "
            "(scripts/test-floor) leaves it out. Mark the test cdk_free(False), or drop its module's mark."
        )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--debian-needed",
        metavar="FILE",
        help="write to FILE the selected tests that run a Debian package's program (marked debian, and every "
        "one-machine cluster test): scripts/test installs the packages only when it is not empty",
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    needed = session.config.getoption("--debian-needed")
    if needed:
        Path(needed).write_text("".join(
            f"{item.nodeid}\n" for item in session.items
            if item.get_closest_marker("debian") or item.nodeid.startswith("tests/e2e/")
        ))  # fmt: skip
    if session.config.option.collectonly:
        return  # nothing runs: no background run either
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
    if nodeid not in ENDED:
        out, err = proc.communicate(timeout=600)
        ENDED[nodeid] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return ENDED[nodeid], tmp


@pytest.fixture(scope="module")
def account() -> Iterator[dict[str, Any]]:
    """moto's server on a free port, and credentials that reach only it (the account tests: tests/account.py
    and tests/test_preflight_*.py, tests/test_account.py), one per test module."""
    import boto3

    from tests.helpers import moto_server

    with moto_server("preflight") as env, pytest.MonkeyPatch.context() as mp:
        # moto's backends live in this process, shared by every server it starts: each module starts
        # from an empty account (moto's /moto-api/reset), whatever an earlier module made
        import urllib.request

        urllib.request.urlopen(
            urllib.request.Request(f"{env['AWS_ENDPOINT_URL']}/moto-api/reset", method="POST")
        )
        for k, v in env.items():
            mp.setenv(k, v)
        mp.delenv("AWS_PROFILE", raising=False)
        yield {"session": boto3.session.Session(region_name="us-east-1")}
