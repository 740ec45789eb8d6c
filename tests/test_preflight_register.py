"""preflight's register of checks (efa_constructs/tools/preflight/register.py): each check once, and run runs
what it holds.
"""

from __future__ import annotations

from typing import Any

import pytest

from efa_constructs.tools import preflight
from efa_constructs.tools.preflight import NodeGroup, Preflight

#: cdk_free: nothing here reaches aws-cdk-lib (tests/conftest.py checks), so the floor run leaves these out;
#: moto warns of what its CloudFormation skips
pytestmark = [pytest.mark.cdk_free, pytest.mark.filterwarnings("ignore:Tried to parse")]


def test_every_check_is_registered_once_and_preflight_runs_the_register(
    account: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The register is the one list of checks: each check method in it once, none outside it, and
    ``run`` runs what it holds, each line named by the rule's id."""
    methods = {  # the class's and its rooms' (the capacity and network checks, the calls' base)
        name
        for room in Preflight.__mro__[:-1]
        for name, value in vars(room).items()
        if callable(value) and not name.startswith("_") and name not in ("client", "guard")
    }
    registered = [rule.check.__name__ for rule in preflight.RULES]
    assert sorted(registered) == sorted(methods)
    assert len({rule.id for rule in preflight.RULES}) == len(preflight.RULES)
    ran: list[str] = []

    def probe(_pf: Preflight, g: NodeGroup) -> preflight.Check:
        ran.append(g.name)
        return preflight.Check("anything", "PASS", "seen")

    probe_rule = preflight.Rule(
        "probe", "a probe", preflight.NODE_GROUP, probe, asks="nothing", fails="never"
    )
    monkeypatch.setattr(preflight.register, "RULES", (probe_rule,))
    checks = preflight.register.run(
        Preflight(account["session"]), [NodeGroup("S", "Cluster", "trn1.32xlarge", 2)], {}
    )
    assert [c.name for c in checks] == ["probe [S/Cluster (2 x trn1.32xlarge)]"] and ran == ["Cluster"]
