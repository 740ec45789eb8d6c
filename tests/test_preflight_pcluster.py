"""preflight's ParallelCluster queues, read from the configuration a template writes
(efa_constructs/tools/preflight/pcluster.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.account import (
    run,
    stubbed_quotas,
)
from tests.helpers import cdk_json_context

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse")  # moto: what its CloudFormation skips


def test_parallelcluster_queues_are_checked_from_the_clusters_configuration(
    account: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 41 item 3: the queues of the configuration the stack writes (its output) are node groups:
    the queue's type in the queue's zone (moto offers trn1 in b, c and f only), its MaxCount against the
    quota; a configuration that cannot be read is a WARN saying the queues were not checked."""
    import aws_cdk as cdk

    from stacks.parallel_cluster_stack import EfaParallelClusterStack
    from stacks.params import PclusterParams

    out = tmp_path / "cdk.out"
    app = cdk.App(outdir=str(out), context=cdk_json_context())
    params = PclusterParams.from_context(
        {"availability_zone": "us-east-1a"}, default_instance_type="trn1.32xlarge"
    )
    EfaParallelClusterStack(app, "Trn1ParallelCluster", params=params)
    app.synth()
    quotas, _ = stubbed_quotas(account["session"], 0)
    code, text, err = run(
        account, out, monkeypatch, capsys, quotas, "--json", stacks=("Trn1ParallelCluster",)
    )
    assert code == 1, text + err
    checks = {c["name"]: c for c in json.loads(text)["checks"]}
    where = "[Trn1ParallelCluster/queue compute/trn1-32xlarge (2 x trn1.32xlarge)]"
    assert checks[f"offered {where}"]["found"] == "trn1.32xlarge is not offered in us-east-1a"
    assert "the cluster needs 256" in checks[f"quota {where}"]["found"]
    assert checks[f"efa {where}"]["status"] == "PASS"
    # the configuration's output cut short: said, not silently skipped
    path = out / "Trn1ParallelCluster.template.json"
    template = json.loads(path.read_text())
    template["Outputs"]["ParallelClusterConfig"]["Value"] = "# ParallelCluster 3.16.3\nScheduling: [unclosed"
    path.write_text(json.dumps(template))
    quotas, _ = stubbed_quotas(account["session"], 0, calls=0)
    code, text, err = run(
        account, out, monkeypatch, capsys, quotas, "--json", stacks=("Trn1ParallelCluster",)
    )
    (note,) = [c for c in json.loads(text)["checks"] if c["name"].startswith("parallelcluster")]
    assert note["status"] == "WARN" and "its queues were not checked" in note["found"], note
    assert not [c for c in json.loads(text)["checks"] if "queue compute" in c["name"]]
