"""One table of the EFA_CDK_* settings (efa_constructs/core/settings.py), checked against every file
that writes or reads one: nothing written that no one reads, read that no one writes, or misspelt."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from efa_constructs.core.settings import KNOB, NODE, OTHER, SETTINGS, TOOL
from tests.helpers import ROOT

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

NAME = re.compile(r"EFA_CDK_[A-Z0-9_]+")
NODE_DIR = ROOT / "efa_constructs/node"
#: Not settings: the delimiters of the bootstrap's settings heredoc and of the EKS part's bootstrap heredoc.
NOT_SETTINGS = {"EFA_CDK_SETTINGS", "EFA_CDK_PART_END"}


def _names(files: list[Path]) -> set[str]:
    return {n for f in files for n in NAME.findall(f.read_text())} - NOT_SETTINGS


def _sides() -> tuple[set[str], set[str]]:
    written = [
        p
        for p in [*(ROOT / "efa_constructs").rglob("*.py"), *(ROOT / "stacks").rglob("*.py")]
        if NODE_DIR not in p.parents and p.name != "settings.py"
    ]
    read = [p for p in NODE_DIR.rglob("*") if p.suffix in (".sh", ".sbatch", ".py")]
    return _names(written), _names(read)


def test_every_setting_is_in_the_table_and_used_as_its_kind_says() -> None:
    written, read = _sides()
    assert (written | read) - set(SETTINGS) == set(), "add them to core/settings.py (or fix the spelling)"
    for name, (kind, _why) in SETTINGS.items():
        if kind == NODE:
            assert name in written and name in read, f"{name}: written by the constructs and read on the node"
        elif kind == KNOB:
            assert name in read and name not in written, f"{name}: a node-side knob, never written"
        elif kind == TOOL:
            assert name in written and name not in read, f"{name}: the command line's, never a node's"
        else:
            assert kind == OTHER and name in written, f"{name}: written for someone else"


def test_the_settings_a_node_gets_are_all_in_the_table() -> None:
    """What the renderer writes into a node's settings."""
    from efa_constructs.core import EfaUserData, instance_type, plan_layout

    it = instance_type("p4d.24xlarge")
    settings = EfaUserData().settings(it, plan_layout(it), "ubuntu")
    assert set(settings) <= set(SETTINGS)
