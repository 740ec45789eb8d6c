"""The public surface as a user's type checker and interpreter see it.

The names are declared once, in efa_constructs/__init__.pyi; lazy_loader builds ``__all__`` and the
lazy loading from it. These tests run mypy --strict as a user would (over tests/user_app.py and over
every public name), in this environment and, through scripts/test-floor, on the lowest supported
aws-cdk-lib, so "typed" holds on every version the package admits.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import efa_constructs
from tests.conftest import FLOOR, PROJECT_MYPY, background_result
from tests.docs_blocks import blocks
from tests.helpers import ROOT

#: Misspelt or mistyped arguments in the user app: (what it says, what a user wrote instead, mypy's error).
WRONG = [
    ("node_count=2", "node_cont=2", 'Unexpected keyword argument "node_cont" for "EfaCluster"'),
    ("max_count=4,", "max_cuont=4,", 'Unexpected keyword argument "max_cuont" for "EfaPcsCluster"'),
    ("max_size=4,", 'max_size="4",', 'Argument "max_size" to "EfaNodegroup" has incompatible type "str"'),
    # node options, declared once (NodeOptions) and unpacked into each construct: checked at the call site too
    (
        "nic_layout=Layout.recommended(),",
        'nic_layout="recommended",',
        'Argument "nic_layout" to "EfaLaunchTemplate" has incompatible type "str"',
    ),
    (
        'capacity=Capacity.capacity_block("cr-0123456789abcdef0"),',
        'capacity="cr-0123456789abcdef0",',
        'Argument "capacity" to "EfaNodegroup" has incompatible type "str"',
    ),
    (
        'instance_type=ec2.InstanceType("trn1.32xlarge"),\n        machine_image=pcs_image,',
        "machine_image=pcs_image,",
        'Missing named argument "instance_type" for "EfaPcsCluster"',
    ),
    (
        "launch_template=lt,",
        "launch_template=sg,",
        'Argument "launch_template" to "AutoScalingGroup" has incompatible type "EfaSecurityGroup"',
    ),
]


@pytest.fixture(scope="module")
def mypy_output(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """One mypy --strict run (its cache shared with the project's own mypy step) over: the user app,
    a file revealing the type of every public name, one copy of the app per WRONG entry and each python
    snippet of the README and docs. Returns mypy's lines by file name."""
    tmp = tmp_path_factory.mktemp("mypy")
    names = efa_constructs.__all__
    (tmp / "reveal_names.py").write_text(
        "import efa_constructs\n" + "".join(f"reveal_type(efa_constructs.{n})\n" for n in names)
    )
    app = (ROOT / "tests" / "user_app.py").read_text()
    for i, (wrong, right, _) in enumerate(WRONG):
        assert app.count(wrong) == 1, wrong
        (tmp / f"user_app_wrong{i}.py").write_text(app.replace(wrong, right))
    for i, block in enumerate(b for b in blocks() if b.kind == "python"):
        (tmp / f"docs_snippet{i}.py").write_text(f"# {block.where}\n{block.text}")
    files = [ROOT / "tests" / "user_app.py", *sorted(tmp.glob("*.py"))]
    if not FLOOR:
        background_result(PROJECT_MYPY)  # the project's own run writes the cache this one reads: let it end
    # the floor's own cache: its run goes beside the main one, whose cache has the pinned aws-cdk-lib's types
    cache = ROOT / (".venv-floor/mypy_cache" if FLOOR else ".mypy_cache")
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), *map(str, files)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "error: Cannot find implementation or library stub" not in run.stdout, run.stdout
    out: dict[str, list[str]] = {f.name: [] for f in files}
    for line in run.stdout.splitlines():
        name = Path(line.split(":", 1)[0]).name
        if name in out:
            out[name].append(line)
    return out


@pytest.mark.waits
def test_the_project_passes_mypy_strict() -> None:
    """mypy --strict over pyproject.toml's files (the package, the ready stacks, app.py, the EKS example and
    tests/user_app.py), started at collection to run beside the in-process tests (tests/conftest.py)."""
    run, _ = background_result(PROJECT_MYPY)
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    assert run.stdout.startswith("Success: no issues found"), run.stdout[-2000:]


def test_every_public_name_loads_and_is_declared_in_the_stub() -> None:
    stub = ast.parse((ROOT / "efa_constructs" / "__init__.pyi").read_text())
    declared = {a.asname or a.name for n in stub.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert sorted(declared) == sorted(efa_constructs.__all__)
    for name in efa_constructs.__all__:
        assert getattr(efa_constructs, name) is not None, name
    with pytest.raises(AttributeError, match="EfaClustr"):
        efa_constructs.EfaClustr  # type: ignore[attr-defined]  # noqa: B018


def test_no_two_public_names_differ_only_in_case() -> None:
    """Issue 36: `EfaNodeGroup` (an Auto Scaling group) and `EfaNodegroup` (EKS) differed by one capital;
    the Auto Scaling group is `EfaAutoScalingGroup` now. A user tabbing to a name must not get its twin."""
    import efa_constructs.cdk
    import efa_constructs.core

    for module in (efa_constructs, efa_constructs.cdk, efa_constructs.core):
        folded: dict[str, list[str]] = {}
        for name in module.__all__:
            folded.setdefault(name.lower(), []).append(name)
        assert [names for names in folded.values() if len(names) > 1] == [], module.__name__


#: The one kind of union a public construct takes: EfaNodegroup works with either EKS module, and the two
#: modules' clusters and AMI types share no base class (aws_eks_v2 and aws_eks are separate jsii modules).
EKS_MODULE_PAIRS = {("EfaNodegroup", "cluster"), ("EfaNodegroup", "ami_type")}


def test_no_public_construct_takes_a_union_typed_option() -> None:
    """Issue 36: options that were unions (`nic_layout: LayoutMode | NicLayout`, `node_software:
    EfaUserData | bool`) are classes with factory methods, as aws-cdk-lib's guidelines ask; `X | None`
    (optional) is not a union of choices. Seen failing on the old signatures."""
    import inspect
    import types
    import typing

    unions = set()
    for name in efa_constructs.__all__:
        obj = getattr(efa_constructs, name)
        if not inspect.isclass(obj) or "__init__" not in vars(obj):
            continue
        for option, hint in typing.get_type_hints(obj.__init__).items():
            choices = [a for a in typing.get_args(hint) if a is not type(None)]
            if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(choices) > 1:
                unions.add((name, option))
    assert unions == EKS_MODULE_PAIRS


def test_no_public_name_is_any_to_mypy(mypy_output: dict[str, list[str]]) -> None:
    """reveal_type of every name in __all__: each is a class, function or value of a real type."""
    names = efa_constructs.__all__
    revealed = [line for line in mypy_output["reveal_names.py"] if "Revealed type is" in line]
    assert len(revealed) == len(names), mypy_output["reveal_names.py"]
    untyped = [(n, line) for n, line in zip(names, revealed, strict=True) if '"Any"' in line]
    assert not untyped, untyped
    # the constructs are the classes themselves, with their signatures
    by_name = dict(zip(names, revealed, strict=True))
    assert (
        "def (scope: constructs.Construct, id_: str, *, cluster: aws_cdk.aws_eks_v2.ICluster"
        in by_name["EfaNodegroup"]
    )
    assert "-> efa_constructs.cdk.pcs.EfaPcsCluster" in by_name["EfaPcsCluster"]


def test_the_docs_python_snippets_type_check_strictly(mypy_output: dict[str, list[str]]) -> None:
    """What a user copies from the README and docs/ passes their mypy --strict as printed."""
    snippets = {k: v for k, v in mypy_output.items() if k.startswith("docs_snippet")}
    assert len(snippets) == len([b for b in blocks() if b.kind == "python"]) > 0
    assert not [line for lines in snippets.values() for line in lines], snippets


def test_the_user_app_type_checks_strictly(mypy_output: dict[str, list[str]]) -> None:
    """Every construct the docs show, composed with aws-cdk-lib's own: EfaLaunchTemplate is accepted as
    the ec2.ILaunchTemplate of an AutoScalingGroup, EfaNodegroup takes both EKS modules' clusters."""
    assert mypy_output["user_app.py"] == []


@pytest.mark.parametrize("case", range(len(WRONG)), ids=[w[1] for w in WRONG])
def test_a_wrong_argument_in_the_user_app_is_caught(mypy_output: dict[str, list[str]], case: int) -> None:
    errors = [line for line in mypy_output[f"user_app_wrong{case}.py"] if ": error: " in line]
    assert len(errors) == 1 and WRONG[case][2] in errors[0], errors


USER_REFUSED = """
import sys
import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from efa_constructs import EfaCluster, EfaNetwork, Layout, refusals_in_one_line

app = cdk.App(outdir=sys.argv[1])
with refusals_in_one_line():
    stack = cdk.Stack(app, "Refused")
    net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
    if sys.argv[2] == "build":  # refused while the app is built
        EfaCluster(stack, "C", vpc=net.vpc, instance_type=ec2.InstanceType("trn1.32xlarge"),
                   nic_layout=Layout.recommended(efa_count=9))
    else:  # refused while app.synth() runs (a lazy value: the refusal crosses the JavaScript side)
        from aws_cdk import CfnOutput, IStableStringProducer, Lazy
        import jsii
        from efa_constructs import EfaConfigError

        @jsii.implements(IStableStringProducer)
        class Refuses:
            def produce(self) -> str:
                raise EfaConfigError("late", code="efa-cdk:test-late", value=1, why="made up", fix="none")

        CfnOutput(stack, "Late", value=Lazy.string(Refuses()))
    app.synth()
"""


@pytest.mark.parametrize("when", ["build", "synth"])
def test_a_refusal_in_a_users_app_is_one_line(tmp_path: Path, when: str) -> None:
    """Issue 41 item 12: a user's own program (run as `cdk synth` runs it) with refusals_in_one_line():
    a refusal made while the app is built, and one raised during synthesis inside a CDK callback (which
    reaches Python as jsii's RuntimeError around a JavaScript stack), each end in one line and exit 1."""
    script = tmp_path / "app.py"
    script.write_text(USER_REFUSED)
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "out"), when],
                         capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    (line,) = run.stderr.strip().splitlines()
    want = "error: efa_count=9: " if when == "build" else "error: late=1: made up. Fix: none"
    assert line.startswith(want), line
