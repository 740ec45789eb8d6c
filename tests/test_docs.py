"""The README and docs/*.md as a reader uses them: every snippet and command runs as printed (see
tests/docs_blocks.py for what each kind of block gets), every link resolves, the API reference is the
one the docstrings make, and the README stays a front door (under about 300 lines)."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FLOOR, background_result
from tests.docs_blocks import ACCOUNT, NOT_RUN, ON_CLUSTER, ROOT, Block, blocks, pages, synth_instead

CHECK = "tests/test_docs.py::test_every_shell_command_runs_as_printed"
BLOCKS = blocks()
PYTHON = [b for b in BLOCKS if b.kind == "python"]
ACCOUNT_BLOCKS = [b for b in BLOCKS if b.kind == "account"]
#: jsii's banner for Node 20: the project's commands silence it, so no command printed here shows it.
BANNER = "is end-of-life and not supported anymore"


#: The shell commands run in the project's own .venv (tests/docs_check.py): once, not again on the floor.
def ON_PROJECT_VENV(test: Any) -> Any:
    """Waits for tests/docs_check.py, which runs in the project's .venv: once, not again on the floor."""
    skip = pytest.mark.skipif(FLOOR, reason="the docs' shell commands run in the project's .venv")
    return pytest.mark.waits(skip(test))


@cache
def shell_records() -> list[dict[str, Any]]:
    run, _ = background_result(CHECK)
    assert run.returncode == 0, run.stderr[-3000:]
    records: list[dict[str, Any]] = json.loads(run.stdout.strip().splitlines()[-1])
    return records


@ON_PROJECT_VENV
def test_every_shell_command_runs_as_printed() -> None:
    """Each bash block that needs no account, run whole in a bare shell from a copy of the repository."""
    ran = [r for r in shell_records() if r["rc"] is not None]
    assert ran, "no shell block ran"
    failed = [
        f"{r['where']}: {r['printed']!r} exit {r['rc']}: {r['err'][-1500:]}" for r in ran if r["rc"] != 0
    ]
    assert not failed, "\n".join(failed)
    noisy = [r["where"] for r in ran if BANNER in r["out"] + r["err"]]
    assert not noisy, f"jsii's Node banner printed by {noisy}"
    shell = [b for b in BLOCKS if b.kind == "shell"]
    assert {r["where"] for r in ran} >= {b.where for b in shell if b.commands() != ["scripts/test"]}


@ON_PROJECT_VENV
def test_npx_cdk_works_in_a_plain_shell(ready_app: Any) -> None:
    """The README's `npx cdk synth` block, run in a bare shell (no virtual environment on PATH, nothing
    exported): cdk.json runs scripts/cdk-app, which finds the project's Python itself; no jsii banner in the
    user's way. The app the CLI runs holds the eight ready stacks, in the README's order."""
    npx = [
        r
        for r in shell_records()
        if r["where"].startswith("README.md") and "npx cdk synth" in r.get("ran", "")
    ]
    assert npx and all(r["rc"] == 0 and BANNER not in r["err"] for r in npx), npx
    assert [s.stack_name for s in ready_app.node.children if hasattr(s, "stack_name")] == [
        "Trn1EfaCluster",
        "Trn1nEfaCluster",
        "P4dEfaCluster",
        "P5EfaCluster",
        "P3dnEfaCluster",
        "Dl1EfaCluster",
        "Trn1ParallelCluster",
        "Trn1PcsCluster",
    ]


@ON_PROJECT_VENV
def test_what_the_shell_commands_say() -> None:
    by_printed = {r["printed"]: r for r in shell_records() if r["rc"] is not None}
    (synth,) = [r for p, r in by_printed.items() if p == "scripts/synth"]
    assert "wrote cdk.out/Trn1EfaCluster.template.json" in synth["out"]
    (layout,) = [r for p, r in by_printed.items() if p.startswith(".venv/bin/efa-cdk layout trn1.32xlarge")]
    assert layout["out"].startswith("trn1.32xlarge  layout=recommended  EFA=8")
    (diff,) = [r for p, r in by_printed.items() if "template-diff --base HEAD" in p]
    assert "STATEFUL" not in diff["out"]  # the same revision on both sides


@ON_PROJECT_VENV
def test_the_test_command_is_what_ci_runs() -> None:
    """`scripts/test` is the one printed command the docs tests do not run: it is this suite, and .ci/run
    runs it on a clean clone."""
    assert [r["where"] for r in shell_records() if r["rc"] is None] == ["README.md:19"]
    assert "\nscripts/test\n" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
def test_every_python_snippet_runs_as_printed(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A complete program each: run in this process (the one Node process) to its `app.synth()`."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(block.text, block.where, "exec"), namespace)
    templates = list(Path(namespace["app"].outdir).glob("*.template.json"))
    assert templates, f"{block.where} synthesized nothing"


def _aws_command_problems(command: str) -> list[str]:
    """An `aws SERVICE OPERATION --option ...` line against botocore's own service model."""
    import botocore.session
    from botocore import xform_name

    words = command.split()
    service, operation = words[1], words[2]
    session = botocore.session.get_session()
    if service not in session.get_available_services():
        return [f"aws {service}: no such service"]
    model = session.get_service_model(service)
    ops = {xform_name(op, "-"): op for op in model.operation_names}
    if operation not in ops:
        return [f"aws {service} {operation}: no such operation"]
    shape = model.operation_model(ops[operation]).input_shape
    members = {xform_name(m, "-") for m in (shape.members if shape else {})}
    options = {w[2:].split("=", 1)[0] for w in words[3:] if w.startswith("--")}
    unknown = options - members - {"region", "query", "output", "profile", "endpoint-url", "no-cli-pager"}
    return [f"aws {service} {operation}: no option --{o}" for o in sorted(unknown)]


@ON_PROJECT_VENV
@pytest.mark.parametrize("block", ACCOUNT_BLOCKS, ids=[b.where for b in ACCOUNT_BLOCKS])
def test_every_command_that_needs_an_account_is_checked(block: Block) -> None:
    """Not run (no account here), but checked: the deploys synthesize (tests/docs_check.py), the `aws`
    lines fit AWS's service models, efa-cdk's own lines parse, and the rest run on the cluster."""
    from efa_constructs.__main__ import build_parser

    problems = []
    for command in block.commands():
        words = command.split()
        if synth_instead(command):
            assert "<" not in command, f"{block.where}: a deploy line runs as printed: no placeholders"
        elif words[:3] == ["npx", "cdk", "bootstrap"]:
            assert re.fullmatch(r"aws://\d{12}/[a-z]{2}(-[a-z]+)+-\d", words[3]), command
        elif words[0] == "aws":
            problems += _aws_command_problems(command)
        elif words[:3] == [".venv/bin/python", "-m", "efa_constructs"]:
            with contextlib.redirect_stderr(None):
                build_parser().parse_args(shlex.split(command)[3:])
        elif words[0] not in ON_CLUSTER:
            problems.append(f"{words[0]}: neither run here nor a program of the cluster ({command})")
    assert not problems, f"{block.where}: {problems}"
    synthesized = [r for r in shell_records() if r["where"] == block.where]
    deploys = [c for c in block.commands() if synth_instead(c) and " destroy " not in c]
    assert len(synthesized) == len(deploys) and all(r["rc"] == 0 for r in synthesized), synthesized
    # a destroy names what a deploy of the block synthesized (the same stack, or the same --app)
    for destroy in (c for c in block.commands() if c.startswith("npx cdk destroy ")):
        assert _target(destroy) in {_target(d) for d in deploys}, f"{block.where}: {destroy}"


def _target(command: str) -> tuple[str, str]:
    """The app and stack a `npx cdk VERB ...` line names."""
    words = shlex.split(command)[3:]
    app = words[words.index("--app") + 1] if "--app" in words else "app.py"
    stacks = [
        w
        for i, w in enumerate(words)
        if not w.startswith("-") and (i == 0 or not words[i - 1].startswith("-"))
    ]
    return app, stacks[0] if stacks else "*"


def test_the_aws_check_catches_a_misspelt_option() -> None:
    assert _aws_command_problems("aws ssm start-session --target i-1") == []
    assert _aws_command_problems("aws ssm start-session --targets i-1") == [
        "aws ssm start-session: no option --targets"
    ]
    assert _aws_command_problems("aws ec2 describe-instance-type-offering") == [
        "aws ec2 describe-instance-type-offering: no such operation"
    ]


def test_blocks_not_run_name_the_test_that_covers_them() -> None:
    for block in (b for b in BLOCKS if b.kind == "not-run"):
        reason = block.text.lstrip().splitlines()[0][len(NOT_RUN) :]
        named = re.findall(r"tests/[\w/]+\.py", reason)
        assert named and all((ROOT / n).exists() for n in named), f"{block.where}: {reason}"


def test_account_blocks_say_so_on_their_first_line() -> None:
    """A deploy, an `aws` call or a node command outside an account block would be run by the tests."""
    for block in (b for b in BLOCKS if b.kind == "shell"):
        for command in block.commands():
            assert not synth_instead(command) and not command.startswith(("aws ", "sudo ", "sbatch ")), (
                f"{block.where}: {command!r} needs an account: start the block with {ACCOUNT!r}"
            )


def test_every_link_resolves() -> None:
    """Relative links (files, and #anchors of Markdown headings) from the README, docs and CONTRIBUTING."""
    broken = []
    for page in [*pages(), ROOT / "CONTRIBUTING.md"]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_the_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert readme.index("scripts/synth") < 1500 and readme.index("scripts/test") < 1500  # the two commands
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, f"the README links no docs/{page.name}"


@pytest.mark.skipif(FLOOR, reason="the reference is generated in the project's pinned environment")
def test_the_api_reference_is_what_the_docstrings_make(tmp_path: Path) -> None:
    """docs/api/ is pdoc's output over the public surface; regenerate with scripts/api-docs."""
    import pdoc
    import pdoc.render

    pdoc.render.configure(docformat="google", search=False, show_source=False)
    pdoc.pdoc("efa_constructs", output_directory=tmp_path)
    made = {p.name: p.read_text() for p in tmp_path.iterdir()}
    committed = {p.name: p.read_text() for p in (ROOT / "docs" / "api").iterdir()}
    assert sorted(made) == sorted(committed) == ["efa_constructs.html", "index.html"]
    stale = [name for name in made if made[name] != committed[name]]
    assert not stale, f"docs/api/{stale} is stale: run scripts/api-docs"
    for name in ("EfaCluster", "EfaNodegroup", "EfaPcsCluster", "EfaLaunchTemplate", "plan_layout"):
        assert f'id="{name}"' in made["efa_constructs.html"], name
