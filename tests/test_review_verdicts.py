"""Issue 58, verdicts (points 2-7): what CloudFormation, a resource's provider and EKS do with a change, on
templates written in CloudFormation's shapes (no synth) and on the ready stacks. Each expected verdict names
its source:

* a deleted cluster of a known provider is a loss: ParallelCluster's ``Custom::PclusterCluster`` (head node,
  Slurm, fleet) and aws-cdk's ``Custom::AWSCDK-EKS-Cluster``; ParallelCluster's provider refuses a
  ClusterName change (aws-parallelcluster ``cloudformation/custom_resource/cluster.yaml``, its test expects
  "Cannot update the ClusterName"), aws-cdk's EKS handler replaces on name, role or subnets and refuses an
  encryption change (``cluster-resource-handler/cluster.ts``, analyzeUpdate);
* create-only paths stay nested: ``/properties/AccessConfig/BootstrapClusterCreatorAdminPermissions`` is the
  EKS cluster's, ``AuthenticationMode`` is updated in place (the AWS::EKS::Cluster registry schema);
* an attribute that no update changes is not a change: an FSx file system grows in place (FSx
  UpdateFileSystem) and its ``LustreMountName`` stays (botocore fsx: no Update member sets it);
* DeletionPolicy / UpdateReplacePolicy (CloudFormation template reference): Retain keeps a removed resource in
  the account (cloudformation-diff: WILL_ORPHAN), and a policy lowered to Delete is a change;
* an EKS managed node group's new launch-template version replaces every node (EKS user guide,
  managed-node-update-behavior);
* FSx for Lustre's create-only members are botocore's CreateFileSystemLustreConfiguration minus
  UpdateFileSystemLustreConfiguration.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from efa_constructs.tools.diff_render import render
from efa_constructs.tools.template_diff import DiffReport, diff_templates

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free


def _t(**resources: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": resources}


def _r(kind: str, **props: Any) -> dict[str, Any]:
    return {"Type": kind, "Properties": props}


# ---- 2. deleting a whole cluster is a loss; a name its provider cannot change fails the check ----

PCLUSTER = _r(
    "Custom::PclusterCluster",
    ServiceToken={"Fn::GetAtt": ["Provider", "Outputs.ServiceToken"]},
    ClusterName="c-training",
    ClusterConfiguration={"HeadNode": {"InstanceType": "c5.xlarge"}},
)
EKS_V1 = _r(
    "Custom::AWSCDK-EKS-Cluster",
    ServiceToken="arn:aws:lambda:us-east-1:111122223333:function:provider",
    Config={
        "name": "training",
        "roleArn": {"Fn::GetAtt": ["Role", "Arn"]},
        "resourcesVpcConfig": {"subnetIds": ["subnet-1"], "securityGroupIds": ["sg-1"]},
        "version": "1.33",
    },
)


@pytest.mark.parametrize("cluster", [PCLUSTER, EKS_V1], ids=["parallelcluster", "eks-v1"])
def test_deleting_a_cluster_of_a_known_provider_is_a_stateful_loss(cluster: dict[str, Any]) -> None:
    d = diff_templates(_t(Cluster=cluster), _t())
    assert d.stateful_losses == ["Cluster"]
    assert "!!! STATEFUL DELETED: Cluster" in render("S", d)
    assert DiffReport("main", "HEAD", {"S": d}).fails


def test_a_parallelcluster_name_change_is_refused_and_fails_the_check() -> None:
    new = copy.deepcopy(PCLUSTER)
    new["Properties"]["ClusterName"] = "c-renamed"
    d = diff_templates(_t(Cluster=PCLUSTER), _t(Cluster=new))
    assert "Cluster" in d.refused and "refuses" in d.refused["Cluster"]
    report = DiffReport("main", "HEAD", {"S": d})
    assert report.fails and "DEPLOY FAILS: Cluster" in report.text()
    assert "the deploy fails" in report.markdown()
    # a configuration change is ParallelCluster's own update: no refusal
    grown = copy.deepcopy(PCLUSTER)
    grown["Properties"]["ClusterConfiguration"]["HeadNode"]["InstanceType"] = "c5.2xlarge"
    d = diff_templates(_t(Cluster=PCLUSTER), _t(Cluster=grown))
    assert not d.refused and not d.stateful_losses and "Cluster" in d.modified


@pytest.mark.parametrize(
    ("path", "value", "verdict"),
    [
        (("name",), "renamed", "replaced"),
        (("roleArn",), {"Fn::GetAtt": ["Role2", "Arn"]}, "replaced"),
        (("resourcesVpcConfig", "subnetIds"), ["subnet-2"], "replaced"),
        (("encryptionConfig",), [{"resources": ["secrets"]}], "refused"),
        (("version",), "1.34", "updated"),
    ],
)
def test_the_eks_v1_cluster_follows_its_handlers_update_rules(
    path: tuple[str, ...], value: Any, verdict: str
) -> None:
    new = copy.deepcopy(EKS_V1)
    target = new["Properties"]["Config"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    d = diff_templates(_t(Cluster=EKS_V1), _t(Cluster=new))
    found = "replaced" if "Cluster" in d.replaced else "refused" if "Cluster" in d.refused else "updated"
    assert found == verdict, (d.replaced, d.refused)
    assert (d.stateful_losses == ["Cluster"]) is (verdict == "replaced")


# ---- 3. nested create-only paths ----

EKS = _r(
    "AWS::EKS::Cluster",
    Name="training",
    RoleArn="arn:aws:iam::111122223333:role/eks",
    ResourcesVpcConfig={"SubnetIds": ["subnet-1"]},
    AccessConfig={
        "AuthenticationMode": "API_AND_CONFIG_MAP",
        "BootstrapClusterCreatorAdminPermissions": True,
    },
)


def test_an_access_mode_change_updates_the_eks_cluster_and_the_bootstrap_flag_replaces_it() -> None:
    mode = copy.deepcopy(EKS)
    mode["Properties"]["AccessConfig"]["AuthenticationMode"] = "API"
    d = diff_templates(_t(Cluster=EKS), _t(Cluster=mode))
    assert (
        d.replaced == {}
        and d.stateful_losses == []
        and d.modified == {"Cluster": ["AccessConfig.AuthenticationMode"]}
    )
    bootstrap = copy.deepcopy(EKS)
    bootstrap["Properties"]["AccessConfig"]["BootstrapClusterCreatorAdminPermissions"] = False
    d = diff_templates(_t(Cluster=EKS), _t(Cluster=bootstrap))
    assert "AccessConfig.BootstrapClusterCreatorAdminPermissions" in d.replaced["Cluster"]
    assert "createOnlyProperties /properties/AccessConfig/BootstrapClusterCreatorAdminPermissions" in (
        d.verdicts["Cluster"].source
    )


# ---- 4. an attribute an update does not change is no change ----


def _lustre(capacity: int, tags: list[dict[str, str]] | None = None) -> dict[str, Any]:
    fs = _r(
        "AWS::FSx::FileSystem",
        FileSystemType="LUSTRE",
        StorageCapacity=capacity,
        SubnetIds=["subnet-1"],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
        **({"Tags": tags} if tags else {}),
    )
    mount = {
        "Fn::Join": [
            "",
            [
                "mount ",
                {"Fn::GetAtt": ["Fs", "DNSName"]},
                "@tcp:/",
                {"Fn::GetAtt": ["Fs", "LustreMountName"]},
            ],
        ]
    }
    template = _r("AWS::EC2::LaunchTemplate", LaunchTemplateData={"UserData": {"Fn::Base64": mount}})
    node = _r(
        "AWS::EC2::Instance",
        LaunchTemplate={
            "LaunchTemplateId": {"Ref": "Lt"},
            "Version": {"Fn::GetAtt": ["Lt", "LatestVersionNumber"]},
        },
    )
    return _t(Fs=fs, Lt=template, Node=node)


@pytest.mark.parametrize(
    "change",
    [{"capacity": 2400}, {"capacity": 1200, "tags": [{"Key": "team", "Value": "ml"}]}],
    ids=["grow", "tag"],
)
def test_growing_or_tagging_the_file_system_replaces_no_node(change: dict[str, Any]) -> None:
    d = diff_templates(_lustre(1200), _lustre(**change))
    assert set(d.modified) == {"Fs"} and d.replaced == {} and d.stateful_losses == []
    # the same file system replaced (a create-only change): its new name reaches every node through the
    # launch template's new version
    moved = _lustre(1200)
    moved["Resources"]["Fs"]["Properties"]["SubnetIds"] = ["subnet-2"]
    d = diff_templates(_lustre(1200), moved)
    assert set(d.replaced) == {"Fs", "Node"} and "Lt" in d.modified
    assert "reads `Lt.LatestVersionNumber`" not in d.replaced["Node"]  # text, not markup
    assert "LaunchTemplate.Version reads Lt.LatestVersionNumber, which changes" in d.replaced["Node"]


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_growing_a_ready_stacks_lustre_file_system_replaces_no_node() -> None:
    """The ready stack with FSx for Lustre over EFA, 19,200 GiB then 38,400 (FSx's EFA step at 250 MB/s/TiB):
    UpdateFileSystem grows it in place, and the nodes' launch template reads only its DNS and mount names."""
    from tests.test_lustre import _ready

    base = _ready(fsx_lustre_capacity_gib="19200", fsx_lustre_efa="true")
    grown = _ready(fsx_lustre_capacity_gib="38400", fsx_lustre_efa="true")
    d = diff_templates(base, grown)
    (fs,) = [k for k, v in base["Resources"].items() if v["Type"] == "AWS::FSx::FileSystem"]
    assert d.modified[fs] == ["StorageCapacity"] and d.stateful_losses == [] and d.replaced == {}
    assert [k for k in d.modified if base["Resources"][k]["Type"] == "AWS::EC2::LaunchTemplate"] == []


# ---- 5. DeletionPolicy and UpdateReplacePolicy ----


def _fs(deletion: str | None, replace: str | None = None) -> dict[str, Any]:
    fs = _r("AWS::FSx::FileSystem", FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=["subnet-1"])
    fs.update({k: v for k, v in (("DeletionPolicy", deletion), ("UpdateReplacePolicy", replace)) if v})
    return fs


def test_a_policy_lowered_from_retain_to_delete_is_a_change_and_said() -> None:
    d = diff_templates(_t(Fs=_fs("Retain", "Retain")), _t(Fs=_fs("Delete", "Delete")))
    assert not d.empty and d.modified == {"Fs": ["DeletionPolicy", "UpdateReplacePolicy"]}
    assert "DeletionPolicy Retain -> Delete" in str(d.unguarded["Fs"])
    comment = DiffReport("main", "HEAD", {"S": d}).markdown()
    assert "**protection removed**" in comment.split("<details>")[0]
    assert "No stack changes" not in comment


def test_a_retained_file_system_taken_out_is_kept_not_lost() -> None:
    d = diff_templates(_t(Fs=_fs("Retain")), _t())
    assert d.stateful_losses == [] and "Fs" in d.orphaned and d.verdicts["Fs"].impact.name == "ORPHAN"
    assert "kept outside the stack: Fs" in render("S", d)
    report = DiffReport("main", "HEAD", {"S": d})
    assert not report.fails and "**kept outside the stack**" in report.markdown()
    # without the policy it is deleted with its data
    assert diff_templates(_t(Fs=_fs(None)), _t()).stateful_losses == ["Fs"]
    # a snapshot policy deletes it too (keeping a snapshot): still a loss to the stack
    assert diff_templates(_t(Fs=_fs("Snapshot")), _t()).stateful_losses == ["Fs"]


def test_a_replacement_says_what_its_update_replace_policy_keeps() -> None:
    new = _fs("Retain", "Retain")
    new["Properties"]["SubnetIds"] = ["subnet-2"]
    d = diff_templates(_t(Fs=_fs("Retain", "Retain")), _t(Fs=new))
    assert (
        d.stateful_losses == ["Fs"]
        and "the old one is kept in the account (UpdateReplacePolicy Retain)" in (d.replaced["Fs"])
    )


# ---- 6. an EKS managed node group's new launch-template version rolls every node ----


def _nodegroup(version: Any, size: int = 2) -> dict[str, Any]:
    template = _r("AWS::EC2::LaunchTemplate", LaunchTemplateData={"InstanceType": "p5.48xlarge"})
    group = _r(
        "AWS::EKS::Nodegroup",
        ClusterName="training",
        NodeRole="arn:aws:iam::111122223333:role/nodes",
        Subnets=["subnet-1"],
        ScalingConfig={"MinSize": size, "MaxSize": size, "DesiredSize": size},
        LaunchTemplate={"Id": {"Ref": "Lt"}, "Version": version},
    )
    return _t(Lt=template, Nodes=group)


def test_a_node_groups_new_launch_template_version_replaces_every_node() -> None:
    d = diff_templates(_nodegroup("1"), _nodegroup("2"))
    assert (
        d.stateful_losses == ["Nodes"] and "Nodes" in d.rolled and "replaces every node" in d.rolled["Nodes"]
    )
    assert "managed-node-update-behavior" in d.verdicts["Nodes"].source
    assert "!!! STATEFUL NODES REPLACED: Nodes" in render("S", d)
    # the same through the template's latest version, which a launch-template change moves
    latest = {"Fn::GetAtt": ["Lt", "LatestVersionNumber"]}
    changed = _nodegroup(latest)
    changed["Resources"]["Lt"]["Properties"]["LaunchTemplateData"]["InstanceType"] = "p5e.48xlarge"
    d = diff_templates(_nodegroup(latest), changed)
    assert "Nodes" in d.rolled and "LaunchTemplateData.InstanceType changed" in d.rolled["Nodes"]
    # a resize is no roll
    assert diff_templates(_nodegroup("1"), _nodegroup("1", size=4)).stateful_losses == []


# ---- 7. FSx for Lustre's create-only members from botocore's shapes ----


@pytest.mark.parametrize(
    ("member", "old", "new"),
    [
        ("DriveCacheType", "NONE", "READ"),
        ("ExportPath", "s3://a/out", "s3://b/out"),
        ("ImportPath", "s3://a", "s3://b"),
        ("ImportedFileChunkSize", 1024, 2048),
        ("CopyTagsToBackups", False, True),
        ("EfaEnabled", False, True),
        ("DeploymentType", "PERSISTENT_1", "PERSISTENT_2"),
    ],
)
def test_each_lustre_member_the_api_sets_only_at_creation_replaces_the_file_system(
    member: str, old: Any, new: Any
) -> None:
    def fs(value: Any) -> dict[str, Any]:
        return _t(Fs=_r("AWS::FSx::FileSystem", FileSystemType="LUSTRE", LustreConfiguration={member: value}))

    d = diff_templates(fs(old), fs(new))
    assert d.stateful_losses == ["Fs"] and f"LustreConfiguration.{member}" in d.replaced["Fs"]
    assert f"CreateFileSystemLustreConfiguration has {member}" in d.verdicts["Fs"].source


@pytest.mark.parametrize(
    ("member", "old", "new"), [("AutoImportPolicy", "NONE", "NEW"), ("PerUnitStorageThroughput", 125, 250)]
)
def test_a_lustre_member_the_api_updates_is_an_update(member: str, old: Any, new: Any) -> None:
    def fs(value: Any) -> dict[str, Any]:
        return _t(Fs=_r("AWS::FSx::FileSystem", FileSystemType="LUSTRE", LustreConfiguration={member: value}))

    d = diff_templates(fs(old), fs(new))
    assert d.stateful_losses == [] and d.modified == {"Fs": [f"LustreConfiguration.{member}"]}
