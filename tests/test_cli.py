"""The command line (pure Python: no CDK import)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from efa_constructs.__main__ import main
from efa_constructs.core.catalogue import generate
from efa_constructs.tools.exits import Exit

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free


def test_layout_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["layout", "trn1n.32xlarge", "--mode", "legacy"]) == 0
    out = capsys.readouterr().out
    assert "EFA=16  IPs/node=16" in out
    assert out.count(" efa ") == 16


def test_bad_type_exits_1_with_one_line_naming_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["layout", "p5.48xlarg"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: instance_type='p5.48xlarg'")
    assert "p5.48xlarge" in err


def test_types_lists_the_family(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["types", "--family", "p4d"]) == 0
    assert "p4d.24xlarge" in capsys.readouterr().out


@pytest.mark.parametrize("family", ["p6", "P6", "p6-"])
def test_types_matches_the_start_of_a_family_in_any_case(
    capsys: pytest.CaptureFixture[str], family: str
) -> None:
    assert main(["types", "--family", family]) == 0
    out = capsys.readouterr().out
    assert "p6-b200.48xlarge" in out and "p6-b300.48xlarge" in out and "p5.48xlarge" not in out


def test_types_with_no_match_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["types", "--family", "zz9"]) == 1
    err = capsys.readouterr().err
    assert "no EFA-capable family starts with it" in err and "trn1" in err


@pytest.mark.parametrize(
    "argv", [["types", "p5.48xlarge"], ["types", "--family", "p5.48xlarge"], ["types", "P5.48XLARGE"]]
)
def test_types_takes_a_type_name_as_a_user_would_type_it(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Issue 60 item 13: `efa-cdk types p5.48xlarge` was a usage error and `--family p5.48xlarge` found no
    family: a type's name shows that type, and where its layout is."""
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if not line.startswith(("#", "type "))]
    assert [r.split()[0] for r in rows] == ["p5.48xlarge"], out
    assert "# its layout: efa-cdk layout p5.48xlarge" in out
    assert main(["types", "p5"]) == 0 and "p5en.48xlarge" in capsys.readouterr().out  # a family's start
    assert main(["types", "p9.48xlarge"]) == 1
    assert "no EFA-capable type of the catalogue has this name" in capsys.readouterr().err


def test_every_command_and_argument_has_plain_help(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 60 item 13: --help showed the module docstring's RST markup, and layout's arguments, status's
    and sweep's STACK and dashboard had no help text."""
    from efa_constructs.__main__ import build_parser

    parser = build_parser()
    assert "``" not in parser.format_help()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subcommands.choices.items():
        assert sub.description, name
        assert "``" not in sub.format_help(), name
        for action in sub._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{name}: {action.dest}"


def test_offline_refresh_writes_the_shipped_catalogue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cat.json"
    assert main(["catalogue", "refresh", "--to", str(out)]) == 0
    assert out.read_text() == (generate.HERE / "instance_types.json").read_text()


def test_template_diff_rejects_context_without_a_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["template-diff", "-c", "node_count"]) == 1
    assert "context='node_count': not of the form KEY=VALUE" in capsys.readouterr().err


def test_template_diff_with_a_revision_that_does_not_exist_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["template-diff", "--base", "v0.0.0-no-such-tag"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: --base='v0.0.0-no-such-tag': not a commit of the git repository")


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_version_is_the_installed_distributions() -> None:
    """``efa-cdk --version``, run as a user runs it, says the version pip installed (the distribution's
    metadata, not the module the command reads it from)."""
    import importlib.metadata
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "efa_constructs", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == f"efa-cdk {importlib.metadata.version('efa-cdk')}\n"


def test_layout_and_types_print_json_with_output_json(capsys: pytest.CaptureFixture[str]) -> None:
    """``--output json`` (declared once for every command that prints a result; ``--json`` is short for it).
    Expected values: trn1.32xlarge has 8 EFA interfaces on 8 network cards and trn1n.32xlarge 16
    (EC2 user guide, EFA supported instance types; ../shared/EFA-FACTS.md)."""
    import json

    assert main(["layout", "trn1.32xlarge", "--output", "json"]) == 0
    layout = json.loads(capsys.readouterr().out)
    assert (layout["efa_count"], layout["ip_count"], layout["layout"]) == (8, 1, "recommended")
    assert {i["network_card_index"] for i in layout["interfaces"]} == set(range(8))
    assert main(["types", "--family", "trn1", "--json"]) == 0
    rows = {r["instance_type"]: r for r in json.loads(capsys.readouterr().out)}
    assert (
        rows["trn1.32xlarge"]["max_efa_interfaces"] == 8
        and rows["trn1n.32xlarge"]["max_efa_interfaces"] == 16
    )
    assert rows["trn1.32xlarge"]["accelerator"]["name"] == "Trainium"


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_a_reader_that_stops_early_is_no_traceback() -> None:
    """``efa-cdk types | head -1``: the pipe closes before the table ends; no BrokenPipeError traceback."""
    import subprocess
    import sys

    done = subprocess.run(
        f"{sys.executable} -m efa_constructs types | head -n1", shell=True, capture_output=True, text=True
    )
    assert done.stdout.startswith("# ") and "Traceback" not in done.stderr, done.stderr


# --- issue 42: one command model (exit codes in one table, --output json on every command)


def test_the_help_ends_with_the_exit_code_table_and_each_code_means_one_thing() -> None:
    """Exit 2 meant both "the command line is wrong" (argparse) and "preflight could not run"; now each code
    is one thing, written once (tools/exits.py), and --help shows them."""
    from efa_constructs.__main__ import build_parser
    from efa_constructs.tools.exits import MEANING, Exit

    text = build_parser().format_help()
    assert text.rstrip().endswith(f"  4  {MEANING[Exit.CANNOT_RUN]}")
    assert [int(line.split()[0]) for line in text.split("exit codes:\n", 1)[1].splitlines()] == [
        0,
        1,
        2,
        3,
        4,
    ]
    with pytest.raises(SystemExit) as usage:
        main(["preflight", "--no-such-flag"])
    assert usage.value.code == Exit.USAGE == 2


def _report() -> Any:
    """A diff of one stack whose node is replaced (a stateful loss) and whose output changed."""
    from efa_constructs.tools.template_diff import DiffReport, diff_templates

    def template(image: str, rate: str) -> dict[str, Any]:
        node = {"Type": "AWS::EC2::Instance", "Properties": {"ImageId": image}}
        return {"Resources": {"Node": node}, "Outputs": {"Rate": {"Value": rate}}}

    diff = diff_templates(template("ami-0123456789abcdef0", "400"), template("ami-0fedcba9876543210", "3200"))
    return DiffReport("main", None, {"Cluster": diff})


@pytest.mark.parametrize("strict", [False, True])
def test_template_diff_prints_json_from_the_same_result(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], strict: bool
) -> None:
    """ImageId is create-only for AWS::EC2::Instance in CloudFormation's schema: the node is replaced."""
    from efa_constructs.tools import template_diff

    monkeypatch.setattr(template_diff, "run", lambda *_a, **_k: _report())
    assert main(["template-diff", "--output", "json", *(["--strict"] if strict else [])]) == (
        3 if strict else 0
    )
    body = json.loads(capsys.readouterr().out)
    assert body["stateful_loss"] is True and body["base"] == "main" and body["head"] is None
    cluster = body["stacks"]["Cluster"]
    assert cluster["stateful_losses"] == ["Node"] and "ImageId" in cluster["replaced"]["Node"]
    assert cluster["outputs_changed"] == ["Rate"]
    assert main(["template-diff"]) == 0 and "! REPLACE Node (AWS::EC2::Instance)" in capsys.readouterr().out


def test_catalogue_refresh_prints_json_and_takes_its_old_file_flag_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cat.json"
    assert main(["catalogue", "refresh", "--to", str(out), "--output", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["path"] == str(out) and body["types"] == json.loads(out.read_text())["type_count"]
    assert main(["catalogue", "refresh", "--output", str(tmp_path / "old.json")]) == 0
    err = capsys.readouterr().err
    assert "catalogue refresh --output FILE is now --to FILE" in err and (tmp_path / "old.json").exists()


def test_preflight_lists_its_registered_checks_without_aws(capsys: Any, monkeypatch: Any) -> None:
    """``--list-checks`` prints the register (text, or JSON), needing no credentials or assembly."""
    from efa_constructs.tools.preflight import RULES

    for key in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)
    assert main(["preflight", "--list-checks", "--output", "json", "--out", "/nonexistent"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in listed] == [r.id for r in RULES]
    assert {c["applies_to"] for c in listed} == {
        "account",
        "bootstrap qualifier",
        "node group",
        "FSx file system",
    }
    assert main(["preflight", "--list-checks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(RULES) and lines[0].startswith("credentials") and "quota" in lines[4]


def test_sweep_lists_its_permissions_without_a_stack_and_asks_for_one_otherwise(capsys: Any) -> None:
    from efa_constructs.tools.sweep import PERMISSIONS

    assert main(["sweep", "--permissions"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == list(PERMISSIONS)
    assert main(["sweep"]) == 2  # issue 53 item 19: a usage error, as the exit table says (it was 1)
    err = capsys.readouterr().err
    assert "sweep runs on one deployed stack" in err and "None" not in err


@pytest.mark.parametrize("command", ["status", "sweep"])
def test_a_command_without_its_stack_is_a_usage_error_and_says_so_in_json_too(
    command: str, capsys: Any
) -> None:
    """Issue 53 item 19: exit 2 (the table's usage error), no `STACK=None`, and with --output json an error
    object on stdout for the program reading it (stdout was empty)."""
    assert main([command, "--output", "json"]) == 2
    out, err = capsys.readouterr()
    body = json.loads(out)
    assert (
        body["error"]["kind"] == "usage" and f"efa-cdk {command} Trn1EfaCluster" in body["error"]["message"]
    )
    assert err.startswith("error: ") and "STACK=None" not in err


@pytest.mark.parametrize(
    "command", [["preflight"], ["status", "Trn1EfaCluster"], ["sweep", "Trn1EfaCluster"]]
)
def test_an_account_command_that_cannot_run_says_so_in_json_too(
    command: list[str], capsys: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    """Issue 53 item 19, for the commands that call AWS: no region configured (an empty AWS config, an
    assembly of environment-agnostic stacks) is the exit table's "could not run", one line on stderr, and
    with --output json an error object on stdout (it was empty)."""
    from tests.account import _assembly

    _assembly(tmp_path, "unknown-region")
    (tmp_path / "config").write_text("")
    monkeypatch.chdir(tmp_path)
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    assert main([*command, "--output", "json"]) == Exit.CANNOT_RUN
    out, err = capsys.readouterr()
    body = json.loads(out)["error"]
    assert body["kind"] == "cannot-run" and "no AWS region" in body["message"], body
    assert err.count("\n") == 1 and err.startswith(f"error: {command[0]}: no AWS region"), err


def test_a_refusal_under_json_output_is_an_error_object_with_its_id(capsys: Any) -> None:
    assert main(["layout", "m5.large", "--output", "json"]) == 1
    body = json.loads(capsys.readouterr().out)
    assert body["error"]["kind"].startswith("efa-cdk:") and "m5.large" in body["error"]["message"]


def test_an_unreachable_endpoint_is_not_called_a_credentials_problem() -> None:
    """Issue 53 item 19: each error botocore raises before AWS answers gets its own hint (botocore.exceptions'
    classes), through preflight's one error policy; an endpoint that does not answer was told to set
    credentials."""
    from botocore import exceptions as e

    from efa_constructs.tools.aws import hint
    from efa_constructs.tools.preflight import _failure

    unreachable = e.EndpointConnectionError(endpoint_url="https://ec2.us-east-1.amazonaws.com/")
    assert "could not be reached" in str(_failure("zone", "ec2:DescribeAvailabilityZones", unreachable))
    assert "credentials" not in hint(unreachable)
    assert hint(e.NoCredentialsError()) == "set AWS credentials, e.g. AWS_PROFILE"
    assert "AWS_REGION" in hint(e.NoRegionError())


def test_types_of_a_family_counts_the_family_not_the_catalogue(capsys: Any) -> None:
    """Issue 53 item 20: `types --family p5` said "305 EFA-capable types" above its five rows."""
    assert main(["types", "--family", "p5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith("p5")]
    assert lines[0].startswith(f"# {len(rows)} of the 305 EFA-capable types;"), lines[0]


def test_no_command_returns_a_bare_exit_number() -> None:
    """Issue 52: every command returns one of the exit table's members (tools/exits.Exit), never a number a
    reader must look up; each prints its result through the one renderer (tools/exits.emit)."""
    import ast

    from tests.helpers import ROOT

    files = [ROOT / "efa_constructs/__main__.py", *(ROOT / "efa_constructs/tools").glob("*.py")]
    bare = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            returns = ast.unparse(node.returns) if isinstance(node, ast.FunctionDef) and node.returns else ""
            if returns not in ("int", "Exit"):
                continue
            bare += [f"{path.name}:{r.lineno}" for r in ast.walk(node)
                     if isinstance(r, ast.Return) and isinstance(r.value, ast.Constant)]  # fmt: skip
        if path.name != "exits.py":  # emit's own home
            assert "print(json.dumps" not in path.read_text(), f"{path.name} prints JSON itself: use emit"
    assert not bare, bare


def test_permissions_are_a_shared_flag_and_answer_in_json(capsys: Any) -> None:
    """Issue 52: --permissions is declared once (the account commands' shared flags) and, as every result,
    rendered as JSON with --output json: the same actions as the text lists."""
    from efa_constructs.tools import preflight, status, sweep

    for command, module in (("preflight", preflight), ("status", status), ("sweep", sweep)):
        assert main([command, "--permissions", "--output", "json"]) == 0
        assert json.loads(capsys.readouterr().out) == module.PERMISSIONS, command


def test_every_command_is_one_row_of_the_command_table_and_shares_flags_declared_once() -> None:
    """Issue 52: each command is a row (words, help, shared flag sets, arguments, run) and the parser is made
    from the rows; the shared flags (--output, --region/--permissions, the revisions) are declared once."""
    import argparse

    from efa_constructs.__main__ import COMMANDS, build_parser
    from efa_constructs.tools.commands import shared_flags

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(dict.fromkeys(c.words[0] for c in COMMANDS))
    assert {s for c in COMMANDS for s in c.shares} == set(shared_flags())
    for command in COMMANDS:
        words = [*command.words, "--help"]
        options = sub.choices[command.words[0]]
        if len(command.words) > 1:
            inner = next(a for a in options._actions if isinstance(a, argparse._SubParsersAction))
            options = inner.choices[command.words[1]]
        flags = {o for a in options._actions for o in a.option_strings}
        assert ("--output" in flags) == bool({"output", "markdown"} & set(command.shares)), words
        assert ("--permissions" in flags) == ("account" in command.shares), words
        assert ("--base" in flags) == ("revisions" in command.shares), words
