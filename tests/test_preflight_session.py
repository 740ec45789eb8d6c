"""preflight's session, region and the assembly's templates (efa_constructs/tools/preflight/session.py): each
stack in its region, a broken or crafted template one line, CloudFormation's limits.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from efa_constructs.tools import preflight
from tests.account import (
    REGION,
    _assembly,
    _cli,
    _crafted,
)
from tests.helpers import cdk_json_context, moto_server

#: cdk_free: nothing here reaches aws-cdk-lib (tests/conftest.py checks), so the floor run leaves these out;
#: moto warns of what its CloudFormation skips
pytestmark = [pytest.mark.cdk_free, pytest.mark.filterwarnings("ignore:Tried to parse")]


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_each_stack_is_checked_in_the_region_it_was_synthesized_for(
    account: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 42: a stack synthesized for us-west-2 deploys there whatever the AWS configuration says,
    so preflight asks us-west-2 for it; an environment-agnostic stack is checked in --region."""
    import aws_cdk as cdk
    from aws_cdk import aws_sns as sns

    out = tmp_path / "cdk.out"
    app = cdk.App(outdir=str(out), context=cdk_json_context())
    west = cdk.Stack(app, "West", env=cdk.Environment(region="us-west-2"))
    anywhere = cdk.Stack(app, "Anywhere")
    for stack in (west, anywhere):
        sns.Topic(stack, "T")
    app.synth()
    for where in ("us-west-2", "eu-west-1"):
        ssm = account["session"].client("ssm", region_name=where)
        ssm.put_parameter(
            Name=preflight.BOOTSTRAP_VERSION_PARAMETER, Value="30", Type="String", Overwrite=True
        )
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the configuration names another region
    assert preflight.main([], out, "eu-west-1", True) == 0  # a WARN: exit 0
    body = json.loads(capsys.readouterr().out)
    assert body["regions"] == {"West": "us-west-2", "Anywhere": "eu-west-1"}
    (said,) = [c for c in body["checks"] if c["name"] == "region"]  # --region was not silently set aside
    assert said["status"] == "WARN" and "West was synthesized for us-west-2" in said["found"]
    creds = [c["found"] for c in body["checks"] if c["name"] == "credentials"]
    assert sorted(f.split(" in ")[1].split(" ")[0] for f in creds) == ["eu-west-1", "us-west-2"]


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_without_a_region_the_commands_use_the_stacks_or_name_the_flag(tmp_path: Path) -> None:
    """No region configured: an env-agnostic assembly is one line naming --region (was a botocore
    traceback); an assembly for one region is asked in that region (here: the endpoint refuses the
    made-up credentials, one line)."""
    _assembly(tmp_path, "unknown-region")
    no_aws = {"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
    for command in (["status", "S"], ["preflight"]):
        run = _cli(*command, cwd=tmp_path, env=no_aws)
        assert run.returncode == 4 and "Traceback" not in run.stderr, run.stderr
        assert run.stderr.strip().count("\n") == 0 and "pass --region REGION" in run.stderr, run.stderr
    other = tmp_path / "regional"
    other.mkdir()
    _assembly(other, "eu-west-1")
    with moto_server("cli") as env:
        moto = {**no_aws, **{k: v for k, v in env.items() if k != "AWS_DEFAULT_REGION"}}
        run = _cli("status", "S", cwd=other, env=moto)
    assert run.returncode == 4 and "Traceback" not in run.stderr, run.stderr
    assert "cloudformation:DescribeStacks" in run.stderr and "pass --region" not in run.stderr, run.stderr


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_aws_region_alone_is_a_region_as_the_refusal_says(tmp_path: Path) -> None:
    """The refusal says '(or set AWS_REGION)', and botocore reads only AWS_DEFAULT_REGION: with AWS_REGION
    alone (as the AWS CLI v2 and the CDK CLI take it), an env-agnostic assembly is asked in that region (here
    moto's endpoint answers, refusing nothing: the first check passes), not refused for no region."""
    _assembly(tmp_path, "unknown-region")
    no_aws = {"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
    with moto_server("cli") as env:
        moto = {**no_aws, **{k: v for k, v in env.items() if k != "AWS_DEFAULT_REGION"}, "AWS_REGION": REGION}
        run = _cli("preflight", cwd=tmp_path, env=moto)
    assert "pass --region" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert f"in {REGION} as" in run.stdout, run.stdout + run.stderr


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "no Resources object"),
        (json.dumps({"Resources": {"X": {"Type": "AWS::EC2::Instance", "Properties": [1]}}}),
         "not as synthesis writes it"),
        (None, "bytes: no synthesized template"),
    ],
)  # fmt: skip
def test_a_broken_template_in_the_assembly_is_one_line(tmp_path: Path, body: str | None, says: str) -> None:
    out = _assembly(tmp_path, "us-east-1")
    template = out / "S.template.json"
    if body is None:  # a huge file (sparse: no disk used)
        with template.open("wb") as f:
            f.truncate(17 * 1024 * 1024)
    else:
        template.write_text(body)
    run = _cli("preflight", cwd=tmp_path, env={"AWS_CONFIG_FILE": "/nonexistent"})
    assert run.returncode == 4 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().count("\n") == 0 and says in run.stderr, run.stderr


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_preflight_holds_each_written_template_to_cloudformations_limits(tmp_path: Path) -> None:
    """Issue 41 item 19, through the command line against the emulator: a template of 501 resources in
    the assembly is a FAIL naming the stack and the count (exit 1); one of 500 passes that check."""
    out = _assembly(tmp_path, "us-east-1")
    for count, rc in ((501, 1), (500, 0)):
        handles = {f"H{i}": {"Type": "AWS::CloudFormation::WaitConditionHandle"} for i in range(count)}
        (out / "S.template.json").write_text(json.dumps({"Resources": handles}))
        with moto_server("limits") as env:
            run = _cli("preflight", cwd=tmp_path, env=env)
        assert run.returncode == rc, run.stdout + run.stderr
        assert ("FAIL template: S: 501 resources; CloudFormation allows 500" in run.stdout) == (rc == 1), (
            run.stdout
        )


@pytest.mark.parametrize("crafted", ["outside", "link to /dev/zero", "fifo", "deep", "huge"])
def test_preflight_reads_a_crafted_assembly_in_one_line(tmp_path: Path, crafted: str) -> None:
    """Issue 53 item 16: a cdk.out someone else made (a pull request's) is read only as the CDK writes one:
    regular files inside it, bounded in size, any depth of JSON; each other case is one line, never a
    MemoryError (/dev/zero), a hang (a FIFO), a RecursionError (deep JSON) or a file read from outside."""

    from efa_constructs.tools.preflight import PreflightError, templates

    name = "../../../etc/hostname" if crafted == "outside" else "S.template.json"
    out = _crafted(tmp_path, name)
    target = out / "S.template.json"
    if crafted == "link to /dev/zero":
        target.symlink_to("/dev/zero")
    elif crafted == "fifo":
        os.mkfifo(target)
    elif crafted == "deep":
        target.write_text("[" * 100_000 + "]" * 100_000)
    elif crafted == "huge":
        with target.open("wb") as fh:
            fh.truncate(17 * 1024 * 1024)
    with pytest.raises(PreflightError) as err:
        templates(out, [])
    said = {
        "outside": "outside the assembly",
        "link to /dev/zero": "outside the assembly",
        "fifo": "a device, FIFO or folder",
        "deep": "nested too deeply",
        "huge": "over 16,777,216 bytes",
    }
    assert said[crafted] in str(err.value) and "\n" not in str(err.value), str(err.value)  # fmt: skip
