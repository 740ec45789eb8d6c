"""aws-cdk's own engine as the floor (issue 58): ``@aws-cdk/cloudformation-diff`` (what ``cdk diff`` runs,
pinned in package-lock.json) over a corpus of template pairs, each resource's ``changeImpact`` against this
review's verdict. The review is never less severe; where it is more severe, its verdict names a source of its
own (a nested create-only path of the registry schema, botocore's Create-minus-Update shapes, a provider's
handler, EKS's or CloudFormation's documented behaviour, an attribute an update changes): the list is printed
(``pytest -s``) and each kind is pinned below with the source that makes it so.

The corpus: every pair of tests/test_review_verdicts.py, the ready stacks under each change docs/operate.md
and docs/context.md name (a resize, a larger root volume, another instance type, an image refresh, public
addresses, an Auto Scaling group resized and changed, a stack-wide tag, a file system grown, EFA on the file
system, a PCS cluster's size and node count), an app of two stacks (the file system in one, the nodes in the
other) and an EKS node group on a new launch-template version. Also the shipped floor table
(efa_constructs/tools/replacement_floor.json) is what scripts/replacement-floor writes today.
"""

from __future__ import annotations

import copy
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from efa_constructs.tools.diff_model import CFN_DIFF_NAMES, Impact
from efa_constructs.tools.template_diff import diff_templates
from tests import test_review_verdicts as v
from tests.conftest import FLOOR
from tests.helpers import ROOT, new_app, new_template, ready_cluster_template

#: cloudformation-diff's impacts as ours (WILL_IMPORT: nothing changes).
THEIRS = {name: impact for impact, name in CFN_DIFF_NAMES.items() if impact != Impact.ROLL} | {
    "WILL_IMPORT": Impact.NONE
}

#: Where this review is more severe than cdk diff, what makes it so: a phrase its verdict's source carries.
MORE_SEVERE_SOURCES = (
    "createOnlyProperties /properties/AccessConfig/",  # a nested create-only path (cdk diff reads top levels)
    "botocore fsx: CreateFileSystemLustreConfiguration",  # the API's Create minus Update
    "aws-cdk custom-resource-handlers aws-eks",  # the EKS v1 cluster's handler
    "aws-parallelcluster cloudformation/custom_resource",  # ParallelCluster's provider
    "managed-node-update-behavior",  # EKS replaces a node group's nodes on a new launch-template version
    "UpdatePolicy attribute",  # an Auto Scaling group's update policy
    "an update of LaunchTemplateData creates a new version",  # an attribute an update changes
    "DeletionPolicy",  # a policy's change, a removal's outcome
    "a custom resource's attributes are what its handler returns",
)


def _pairs() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """The hand-written pairs, in CloudFormation's shapes (tests/test_review_verdicts.py's)."""
    t, r = v._t, v._r
    pairs: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "pcluster-deleted": (t(Cluster=v.PCLUSTER), t()),
        "eks-v1-deleted": (t(Cluster=v.EKS_V1), t()),
        "lustre-grown": (v._lustre(1200), v._lustre(2400)),
        "lustre-tagged": (v._lustre(1200), v._lustre(1200, [{"Key": "team", "Value": "ml"}])),
        "retain-lowered": (t(Fs=v._fs("Retain", "Retain")), t(Fs=v._fs("Delete", "Delete"))),
        "retained-removed": (t(Fs=v._fs("Retain")), t()),
        "deleted": (t(Fs=v._fs(None)), t()),
        "nodegroup-version": (v._nodegroup("1"), v._nodegroup("2")),
        "nodegroup-resized": (v._nodegroup("1"), v._nodegroup("1", size=4)),
    }
    renamed = copy.deepcopy(v.PCLUSTER)
    renamed["Properties"]["ClusterName"] = "c-renamed"
    pairs["pcluster-renamed"] = (t(Cluster=v.PCLUSTER), t(Cluster=renamed))
    for key, value in (("name", "renamed"), ("encryptionConfig", [{"resources": ["secrets"]}])):
        changed = copy.deepcopy(v.EKS_V1)
        changed["Properties"]["Config"][key] = value
        pairs[f"eks-v1-{key}"] = (t(Cluster=v.EKS_V1), t(Cluster=changed))
    for key, value in (("AuthenticationMode", "API"), ("BootstrapClusterCreatorAdminPermissions", False)):
        changed = copy.deepcopy(v.EKS)
        changed["Properties"]["AccessConfig"][key] = value
        pairs[f"eks-{key}"] = (t(Cluster=v.EKS), t(Cluster=changed))
    moved = v._lustre(1200)
    moved["Resources"]["Fs"]["Properties"]["SubnetIds"] = ["subnet-2"]
    pairs["lustre-moved"] = (v._lustre(1200), moved)
    for member, old, new in (
        ("DriveCacheType", "NONE", "READ"),
        ("EfaEnabled", False, True),
        ("ImportPath", "s3://a", "s3://b"),
    ):
        pairs[f"lustre-{member}"] = tuple(  # type: ignore[assignment]
            t(Fs=r("AWS::FSx::FileSystem", FileSystemType="LUSTRE", LustreConfiguration={member: x}))
            for x in (old, new)
        )
    latest = {"Fn::GetAtt": ["Lt", "LatestVersionNumber"]}
    changed_lt = v._nodegroup(latest)
    changed_lt["Resources"]["Lt"]["Properties"]["LaunchTemplateData"]["InstanceType"] = "p5e.48xlarge"
    pairs["nodegroup-latest-version"] = (v._nodegroup(latest), changed_lt)
    return pairs


def _ready_pairs() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """The ready cluster stack under each change the docs name."""
    az = {"availability_zone": "us-east-1a"}

    def ready(**context: str) -> dict[str, Any]:
        return ready_cluster_template("Trn1EfaCluster", {**az, **context})

    base = ready()
    asg = ready(node_group="asg")
    pairs = {
        "ready-resized": (base, ready(node_count="3")),
        "ready-root-volume": (base, ready(root_volume_gib="300")),
        "ready-instance-type": (
            base,
            ready_cluster_template("Trn1EfaCluster", az, instance_type="trn1n.32xlarge"),
        ),
        "ready-ami-refresh": (base, ready(ami_refresh="2026-12-01")),
        "ready-public-ip": (base, ready(public_ip="all")),
        "ready-asg-resized": (asg, ready(node_group="asg", node_count="8")),
        "ready-asg-root-volume": (asg, ready(node_group="asg", root_volume_gib="300")),
        "ready-lustre-grown": (
            ready(fsx_lustre_capacity_gib="19200", fsx_lustre_efa="true"),
            ready(fsx_lustre_capacity_gib="38400", fsx_lustre_efa="true"),
        ),
        "ready-lustre-efa": (
            ready(fsx_lustre_capacity_gib="2400"),
            ready(fsx_lustre_capacity_gib="19200", fsx_lustre_efa="true"),
        ),
    }
    tagged = copy.deepcopy(base)
    for resource in tagged["Resources"].values():  # what Tags.of(stack).add writes on a tagged resource
        if isinstance(resource.get("Properties", {}).get("Tags"), list):
            resource["Properties"]["Tags"].append({"Key": "team", "Value": "ml"})
    pairs["ready-tagged"] = (base, tagged)
    return pairs


def _app_pairs() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """A user's app of two stacks (the file system apart from the nodes) and an EKS node group."""
    from aws_cdk import Stack
    from aws_cdk import aws_ec2 as ec2

    from efa_constructs import EfaCluster, EfaLustreFileSystem, EfaNodegroup
    from tests.helpers import eks_cluster_with_kubectl, isolated_vpc

    def two_stacks(capacity: int) -> dict[str, dict[str, Any]]:
        app = new_app()
        storage = Stack(app, "Storage")
        vpc = isolated_vpc(storage)
        fs = EfaLustreFileSystem(
            storage, "Fsx", vpc=vpc, subnet=vpc.isolated_subnets[0], capacity_gib=capacity
        )
        nodes = Stack(app, "Nodes")
        EfaCluster(
            nodes, "Cluster", vpc=vpc, instance_type=ec2.InstanceType("p5.48xlarge"), node_count=2,
            subnet=vpc.isolated_subnets[0], lustre=fs,
        )  # fmt: skip
        return {s.stack_name: new_template(s) for s in (storage, nodes)}

    def eks(instance: str) -> dict[str, Any]:
        stack = Stack(new_app(), "Eks")
        vpc = isolated_vpc(stack)
        cluster = eks_cluster_with_kubectl(stack, vpc)
        EfaNodegroup(
            stack, "Nodes", cluster=cluster, instance_type=ec2.InstanceType(instance),
            subnet=vpc.isolated_subnets[0], device_plugin=False,
        )  # fmt: skip
        return new_template(stack)

    small, large = two_stacks(1200), two_stacks(2400)
    return {
        "app-storage-grown": (small["Storage"], large["Storage"]),
        "app-nodes-beside-grown-storage": (small["Nodes"], large["Nodes"]),
        "eks-nodegroup-new-type": (eks("p5.48xlarge"), eks("p5e.48xlarge")),
    }


@pytest.fixture(scope="module")
def corpus() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    return {**_pairs(), **_ready_pairs(), **_app_pairs()}


@pytest.fixture(scope="module")
def cdk_diff(corpus: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, dict[str, str]]:
    """cloudformation-diff's impacts over the whole corpus: one Node start."""
    tmp = Path(tempfile.mkdtemp())
    (tmp / "pairs.json").write_text(json.dumps(corpus))
    done = subprocess.run(
        ["node", str(ROOT / "tests" / "cfn_diff_impacts.js"), str(tmp / "pairs.json"), str(tmp / "out.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads((tmp / "out.json").read_text())  # type: ignore[no-any-return]


def test_never_less_severe_than_cdk_diff_and_every_stricter_verdict_sourced(
    corpus: dict[str, tuple[dict[str, Any], dict[str, Any]]], cdk_diff: dict[str, dict[str, str]]
) -> None:
    weaker, stricter = [], []
    for name, (old, new) in corpus.items():
        d = diff_templates(old, new)
        for rid, theirs in cdk_diff[name].items():
            verdict = d.verdicts.get(rid)
            ours = verdict.impact if verdict else Impact.NONE
            if ours < THEIRS[theirs]:
                weaker.append((name, rid, theirs, ours.name))
            elif ours > THEIRS[theirs] and ours not in (Impact.CREATE, Impact.UPDATE):
                stricter.append((name, rid, theirs, ours.name, verdict.source if verdict else ""))
        for rid, verdict in d.verdicts.items():  # what cdk diff does not see change at all
            if rid not in cdk_diff[name] and verdict.impact > Impact.UPDATE:
                stricter.append((name, rid, "NO_CHANGE", verdict.impact.name, verdict.source))
    assert weaker == [], weaker
    print("\nwhere this review is more severe than cdk diff:")
    for row in stricter:
        print("  ", " | ".join(row))
    unsourced = [row for row in stricter if not any(s in row[4] for s in MORE_SEVERE_SOURCES)]
    assert unsourced == [], unsourced
    # the disagreements the issue names are among them, each for its reason
    kinds = {(name, theirs, ours) for name, _, theirs, ours, _ in stricter}
    assert ("lustre-EfaEnabled", "WILL_UPDATE", "REPLACE") in kinds
    assert ("eks-BootstrapClusterCreatorAdminPermissions", "WILL_UPDATE", "REPLACE") in kinds
    assert ("nodegroup-version", "WILL_UPDATE", "ROLL") in kinds
    assert ("ready-root-volume", "NO_CHANGE", "REPLACE") in kinds or (
        "ready-root-volume",
        "WILL_UPDATE",
        "REPLACE",
    ) in kinds
    assert ("eks-nodegroup-new-type", "NO_CHANGE", "ROLL") in kinds


def test_where_cdk_diff_and_this_review_agree_on_the_changes_that_matter(
    corpus: dict[str, tuple[dict[str, Any], dict[str, Any]]], cdk_diff: dict[str, dict[str, str]]
) -> None:
    """The orphan and the destroy are cdk diff's words too; a file system grown, a node group resized and the
    storage stack of a two-stack app grown replace nothing in either."""
    assert cdk_diff["retained-removed"] == {"Fs": "WILL_ORPHAN"} and cdk_diff["deleted"] == {
        "Fs": "WILL_DESTROY"
    }
    for name in ("lustre-grown", "nodegroup-resized", "app-storage-grown", "ready-lustre-grown"):
        old, new = corpus[name]
        assert diff_templates(old, new).stateful_losses == [], name
        assert not any(
            i in ("WILL_REPLACE", "MAY_REPLACE", "WILL_DESTROY") for i in cdk_diff[name].values()
        ), name
    assert cdk_diff["app-nodes-beside-grown-storage"] == {}  # the nodes' stack does not change


@pytest.mark.skipif(FLOOR, reason="the floor run has no node_modules of its own to read")
def test_the_shipped_floor_table_is_what_the_spec_says_today(tmp_path: Path) -> None:
    out = tmp_path / "floor.json"
    done = subprocess.run(
        [str(ROOT / "scripts" / "replacement-floor"), str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == (ROOT / "efa_constructs" / "tools" / "replacement_floor.json").read_text()
    table = json.loads(out.read_text())["types"]
    assert (
        "UserData" in table["AWS::EC2::Instance"]["maybe"]
        and "LaunchTemplate" in table["AWS::EC2::Instance"]["yes"]
    )
