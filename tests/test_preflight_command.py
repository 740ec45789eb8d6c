"""efa-cdk preflight, the command (efa_constructs/tools/preflight/command.py): without a cloud assembly it
says how to make one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from efa_constructs.tools import preflight
from tests.account import REGION

#: cdk_free: nothing here reaches aws-cdk-lib (tests/conftest.py checks), so the floor run leaves these out;
#: moto warns of what its CloudFormation skips
pytestmark = [pytest.mark.cdk_free, pytest.mark.filterwarnings("ignore:Tried to parse")]


def test_without_a_cloud_assembly_it_says_how_to_make_one(tmp_path: Path, capsys: Any) -> None:
    assert preflight.main([], tmp_path / "cdk.out", REGION, False) == 4
    assert "synthesize first (npx cdk synth" in capsys.readouterr().err
