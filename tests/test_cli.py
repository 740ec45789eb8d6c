"""The command line (pure Python: no CDK import)."""

from __future__ import annotations

from pathlib import Path

import pytest

from efa_constructs.__main__ import main
from efa_constructs.core.catalogue import generate


def test_layout_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["layout", "trn1n.32xlarge", "--mode", "legacy"]) == 0
    out = capsys.readouterr().out
    assert "EFA=16  IPs/node=16" in out
    assert out.count(" efa ") == 16


def test_bad_type_exits_2_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["layout", "p5.48xlarg"]) == 2
    assert "p5.48xlarge" in capsys.readouterr().err


def test_types_lists_the_family(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["types", "--family", "p4d"]) == 0
    assert "p4d.24xlarge" in capsys.readouterr().out


def test_offline_refresh_writes_the_shipped_catalogue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cat.json"
    assert main(["catalogue", "refresh", "--output", str(out)]) == 0
    assert out.read_text() == (generate.HERE / "instance_types.json").read_text()


def test_template_diff_rejects_context_without_a_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["template-diff", "-c", "node_count"]) == 2
    assert "context='node_count': not of the form KEY=VALUE" in capsys.readouterr().err
