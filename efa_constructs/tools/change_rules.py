"""Where each verdict of the template diff comes from: one register, each rule with its owner's source.

A changed property path (``("LustreConfiguration", "EfaEnabled")``) of a resource gets the most severe of:

1. the CloudFormation registry schema's ``createOnlyProperties`` (as cfn-lint ships the schemas), nested
   paths kept: ``/properties/AccessConfig/BootstrapClusterCreatorAdminPermissions`` replaces an EKS
   cluster, an ``AccessConfig.AuthenticationMode`` change does not;
2. what ``cdk diff`` itself reads (:data:`FLOOR_FILE`: the CloudFormation resource specification in
   ``@aws-cdk/aws-service-spec``; its "maybe" is an update that may replace, such as an instance's
   ``UserData``), so that this diff is never less severe than aws-cdk's own engine;
3. the service API's own shapes where the schema is silent: a member of botocore's Create shape that its
   Update shape lacks can change only with a new resource (:data:`API_SHAPES`);
4. what CloudFormation does under an ``UpdatePolicy`` (an Auto Scaling group replaced, or its nodes
   rolled) and what a service does behind an update CloudFormation makes in place (:data:`ROLLS`: an EKS
   managed node group's new launch-template version replaces every node);
5. the custom resources of known providers (:data:`PROVIDERS`: ParallelCluster, the ``aws_eks`` cluster).

A resource that reads another (``Ref``, ``Fn::GetAtt``) changes when that one is replaced, and when it is
updated in place only if the attribute it reads changes on an update (:func:`attribute_on_update`).
Removal and replacement honour ``DeletionPolicy`` and ``UpdateReplacePolicy`` (:func:`removal`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from .diff_model import Impact, Lit, Verdict, Why
from .template_paths import Path, show_path

#: What cdk diff reads, shipped with the package (scripts/replacement-floor writes it from the npm package).
FLOOR_FILE = "replacement_floor.json"
SCHEMA_SOURCE = (
    "CloudFormation registry schema of {type}: createOnlyProperties {pointer} (as cfn-lint ships it)"
)


@cache
def _schema(resource_type: str, region: str = "us-east-1") -> Mapping[str, Any]:
    """The registry schema of a type (cfn-lint's copy), or {} for a custom or unknown type."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    try:
        return PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, resource_type).schema  # type: ignore[no-any-return]
    except Exception:  # custom resources and unknown types: no schema
        return {}


def _pointer(pointer: str) -> Path:
    """``/properties/A/*/B`` as ``("A", "*", "B")``."""
    return tuple(pointer.split("/")[2:])


@cache
def create_only(resource_type: str, region: str = "us-east-1") -> tuple[tuple[Path, str], ...]:
    """Each create-only property path of a type with its source (the region's registry schema)."""
    pointers = _schema(resource_type, region).get("createOnlyProperties", [])
    return tuple(
        (_pointer(p), SCHEMA_SOURCE.format(type=resource_type, pointer=p))
        for p in pointers
        if p.startswith("/properties/")
    )


@cache
def _floor() -> dict[str, Any]:
    return json.loads(resources.files("efa_constructs.tools").joinpath(FLOOR_FILE).read_text())  # type: ignore[no-any-return]


def floor(resource_type: str) -> dict[str, str]:
    """cdk diff's own reading of a type's top-level properties: ``yes`` (replaces) or ``maybe``."""
    by = _floor()["types"].get(resource_type, {})
    return {**dict.fromkeys(by.get("maybe", []), "maybe"), **dict.fromkeys(by.get("yes", []), "yes")}


#: Nested configurations whose members the registry schema leaves updatable though the service's API can
#: set them only at creation: (type, property) -> (botocore service, its Create shape, its Update shape).
#: FSx's other configurations are left out: their Update shapes rename members (RouteTableIds is updated
#: through AddRouteTableIds/RemoveRouteTableIds), so a difference of names there is no create-only member.
API_SHAPES = {
    ("AWS::FSx::FileSystem", "LustreConfiguration"): (
        "fsx",
        "CreateFileSystemLustreConfiguration",
        "UpdateFileSystemLustreConfiguration",
    ),
}


@cache
def api_create_only(resource_type: str) -> tuple[tuple[Path, str], ...]:
    """Members the API sets only at creation (Create minus Update, botocore's models), as property paths
    of the type, each with its source; only members the registry schema's definition also has."""
    import botocore.session

    out: list[tuple[Path, str]] = []
    for (rtype, prop), (service, create, update) in API_SHAPES.items():
        if rtype != resource_type:
            continue
        model = botocore.session.get_session().get_service_model(service)
        members = set(model.shape_for(create).members) - set(model.shape_for(update).members)
        schema = _schema(resource_type)
        ref = schema.get("properties", {}).get(prop, {}).get("$ref", "").split("/")[-1]
        known = set(schema.get("definitions", {}).get(ref, {}).get("properties", {})) or members
        for member in sorted(members & known):
            why = f"botocore {service}: {create} has {member}, {update} has not"
            out.append(((prop, member), why))
    return tuple(out)


@dataclass(frozen=True)
class Provider:
    """A custom resource type of a known provider: the property paths whose change makes it create a new
    one (the old one deleted), those it refuses to update, what its loss loses, and the source."""

    replaces: tuple[Path, ...]
    refuses: tuple[Path, ...]
    lost: str
    source: str


PROVIDERS = {
    # aws-cdk, packages/@aws-cdk/custom-resource-handlers/lib/aws-eks/cluster-resource-handler/cluster.ts:
    # analyzeUpdate replaces on name, roleArn or resourcesVpcConfig's subnets or groups (onCreate: a new
    # cluster, the old one deleted) and throws on an encryptionConfig change
    "Custom::AWSCDK-EKS-Cluster": Provider(
        replaces=(
            ("Config", "name"),
            ("Config", "roleArn"),
            ("Config", "resourcesVpcConfig", "subnetIds"),
            ("Config", "resourcesVpcConfig", "securityGroupIds"),
        ),
        refuses=(("Config", "encryptionConfig"),),
        lost="the cluster's workloads and their state are lost",
        source="aws-cdk custom-resource-handlers aws-eks cluster-resource-handler/cluster.ts (analyzeUpdate)",
    ),
    # aws-parallelcluster cloudformation/custom_resource/cluster.yaml: "Cannot update the ClusterName" (its
    # integration test tests/integration-tests/tests/custom_resource expects that update to fail)
    "Custom::PclusterCluster": Provider(
        replaces=(),
        refuses=(("ClusterName",),),
        lost="the head node, Slurm's state and the compute fleet are lost",
        source="aws-parallelcluster cloudformation/custom_resource/cluster.yaml "
        "(Cannot update the ClusterName)",
    ),
}

#: What an Auto Scaling group's update policy acts on (CloudFormation template reference, "UpdatePolicy
#: attribute": AutoScalingReplacingUpdate and AutoScalingRollingUpdate replace the group, or only its
#: instances, when its launch configuration or template, VPCZoneIdentifier or placement group changes).
ASG_UPDATE_PROPERTIES = frozenset(
    {
        "LaunchConfigurationName",
        "LaunchTemplate",
        "MixedInstancesPolicy",
        "VPCZoneIdentifier",
        "PlacementGroup",
    }
)
ASG_SOURCE = "CloudFormation template reference, UpdatePolicy attribute ({policy})"

#: Updates CloudFormation makes in place while the service replaces every node: (type) -> (the top-level
#: properties, the source). Amazon EKS user guide, "Understand each phase of node updates" and the
#: UpdateNodegroupVersion API: a new launch-template version, release version or Kubernetes version
#: launches new nodes and drains and terminates the old ones.
ROLLS: dict[str, tuple[frozenset[str], str]] = {
    "AWS::EKS::Nodegroup": (
        frozenset({"LaunchTemplate", "ReleaseVersion", "Version"}),
        "Amazon EKS user guide, managed-node-update-behavior (UpdateNodegroupVersion replaces every node)",
    ),
}


def _covers(pattern: Path, path: Path) -> bool | None:
    """True when `path` lies inside `pattern` (``*`` matching any list index); None when `path` stops
    above it (a whole value replaced there, or an intrinsic function standing for it: it may hold it)."""
    for i, part in enumerate(pattern):
        if i >= len(path):
            return None
        if part != "*" and part != path[i] and str(part) != str(path[i]):
            return False
    return True


def property_verdict(
    resource_type: str, resource: Mapping[str, Any], path: Path, region: str = "us-east-1"
) -> Verdict:
    """What a change at `path` of the resource's properties does to it, with the source."""
    where = Lit(show_path(path))
    found = Verdict(Impact.UPDATE, Why(where, " changed"), "CloudFormation: an update in place")
    provider = PROVIDERS.get(resource_type)
    if provider is not None:
        for pattern in provider.replaces:
            if _covers(pattern, path) is not False:
                found = found.worse(
                    Verdict(
                        Impact.REPLACE,
                        Why(where, " changed: its provider creates a new one"),
                        provider.source,
                    )
                )
        return found
    rules = [*create_only(resource_type, region), *api_create_only(resource_type)]
    for pattern, source in rules:
        covered = _covers(pattern, path)
        if covered:
            found = found.worse(Verdict(Impact.REPLACE, Why("create-only ", where, " changed"), source))
        elif covered is None:
            inner = Lit(show_path(pattern))
            why = Why(where, " changed, which may hold the create-only ", inner)
            found = found.worse(Verdict(Impact.MAY_REPLACE, why, source))
    top = str(path[0])
    floor_says = floor(resource_type).get(top)
    if floor_says:
        impact = Impact.REPLACE if floor_says == "yes" else Impact.MAY_REPLACE
        verb = "replaces" if floor_says == "yes" else "may replace"
        why = Why(where, f" changed, which cdk diff's specification says {verb} it")
        nested = [show_path(p) for p, _ in create_only(resource_type, region) if len(p) > 1 and p[0] == top]
        if nested and found.impact < impact:  # the sources disagree: said, and the more severe kept
            why = Why(why, " (the registry schema makes only ", *_listed(nested), " create-only)")
        found = found.worse(Verdict(impact, why, _floor()["source"]))
    return found.worse(_policy_verdict(resource_type, resource, top, where))


def _listed(names: list[str]) -> list[str | Why]:
    return [x for i, n in enumerate(names) for x in ([", ", Lit(n)] if i else [Lit(n)])]


def _policy_verdict(resource_type: str, resource: Mapping[str, Any], top: str, where: Lit) -> Verdict | None:
    """An update policy's or a service's replacement for a change of the top-level property `top`."""
    if resource_type == "AWS::AutoScaling::AutoScalingGroup" and top in ASG_UPDATE_PROPERTIES:
        policy = resource.get("UpdatePolicy") or {}
        if (policy.get("AutoScalingReplacingUpdate") or {}).get("WillReplace") in (True, "true"):
            why = Why(where, " changed under AutoScalingReplacingUpdate: a new group with new nodes")
            return Verdict(Impact.REPLACE, why, ASG_SOURCE.format(policy="AutoScalingReplacingUpdate"))
        if policy.get("AutoScalingRollingUpdate") is not None:
            why = Why(where, " changed under AutoScalingRollingUpdate: every node replaced, in batches")
            return Verdict(Impact.ROLL, why, ASG_SOURCE.format(policy="AutoScalingRollingUpdate"))
    rolls = ROLLS.get(resource_type)
    if rolls is not None and top in rolls[0]:
        why = Why(where, " changed: the service replaces every node (new nodes, the old drained)")
        return Verdict(Impact.ROLL, why, rolls[1])
    return None


def refusal(resource_type: str, path: Path) -> Verdict | None:
    """A change a known provider refuses to make (the deploy fails and rolls back), or None."""
    provider = PROVIDERS.get(resource_type)
    for pattern in provider.refuses if provider else ():
        if _covers(pattern, path) is not False:
            why = Why(Lit(show_path(path)), " changed: its provider refuses the update, the deploy fails")
            return Verdict(Impact.UPDATE, why, provider.source)  # type: ignore[union-attr]
    return None


#: Attributes read after an in-place update: (type, attribute) -> (whether an update changes it, source).
ATTRIBUTES: dict[tuple[str, str], tuple[bool, str]] = {
    ("AWS::EC2::LaunchTemplate", "LatestVersionNumber"): (
        True,
        "CloudFormation template reference, AWS::EC2::LaunchTemplate: "
        "an update of LaunchTemplateData creates a new version",
    ),
    **{
        ("AWS::FSx::FileSystem", attribute): (
            False,
            "botocore fsx: UpdateFileSystem has no member that sets it (assigned at creation)",
        )
        for attribute in ("DNSName", "LustreMountName", "ResourceARN", "RootVolumeId")
    },
    **{
        ("AWS::EC2::Instance", attribute): (
            False,
            "EC2 user guide, instance addressing: the private address and DNS name stay for the "
            "instance's life",
        )
        for attribute in ("PrivateIp", "PrivateDnsName", "VpcId", "AvailabilityZone")
    },
}


def attribute_on_update(resource_type: str, attribute: str) -> tuple[str, str]:
    """What an in-place update of a resource does to one of its attributes: ``changes``, ``may`` (nothing
    says whether it does) or ``kept``, with the source."""
    known = ATTRIBUTES.get((resource_type, attribute))
    if known is not None:
        return ("changes" if known[0] else "kept"), known[1]
    if resource_type.startswith("Custom::") or resource_type == "AWS::CloudFormation::CustomResource":
        return "changes", "CloudFormation: a custom resource's attributes are what its handler returns"
    identifiers = {_pointer(p)[0] for p in _schema(resource_type).get("primaryIdentifier", [])}
    if attribute in identifiers or attribute.endswith(("Id", "Arn")):
        return (
            "kept",
            "CloudFormation user guide, update behaviors: only a replacement gives a new physical id",
        )
    return "may", "no source says whether an update changes it"


#: DeletionPolicy values that keep a resource when the stack lets it go (CloudFormation template
#: reference, "DeletionPolicy attribute"); Snapshot keeps a final snapshot and deletes the resource.
KEEPS = frozenset({"Retain", "RetainExceptOnCreate"})
POLICY_SOURCE = "CloudFormation template reference, DeletionPolicy and UpdateReplacePolicy attributes"
#: Types whose DeletionPolicy defaults to Snapshot (same reference): RDS clusters (and RDS instances of no
#: cluster, below).
SNAPSHOT_DEFAULT = frozenset({"AWS::RDS::DBCluster"})


def deletion_policy(resource: Mapping[str, Any]) -> str:
    """The resource's DeletionPolicy, its default where the template writes none."""
    policy = resource.get("DeletionPolicy")
    if isinstance(policy, str):
        return policy
    rtype, props = resource.get("Type"), resource.get("Properties") or {}
    default_snapshot = rtype in SNAPSHOT_DEFAULT or (
        rtype == "AWS::RDS::DBInstance" and "DBClusterIdentifier" not in props
    )
    return "Snapshot" if default_snapshot else "Delete"


def removal(resource: Mapping[str, Any]) -> Verdict:
    """What taking a resource out of the template does: kept in the account (orphaned) or deleted."""
    policy = deletion_policy(resource)
    if policy in KEEPS:
        why = Why(f"removed from the stack; kept in the account (DeletionPolicy {policy})")
        return Verdict(Impact.ORPHAN, why, POLICY_SOURCE)
    kept = " (a final snapshot is kept)" if policy == "Snapshot" else ""
    return Verdict(Impact.DESTROY, Why(f"removed from the stack: deleted{kept}"), POLICY_SOURCE)


def replacement_keeps(resource: Mapping[str, Any]) -> str | None:
    """What a replacement keeps of the old resource (its UpdateReplacePolicy), or None (deleted)."""
    policy = resource.get("UpdateReplacePolicy")
    if policy in KEEPS:
        return f"the old one is kept in the account (UpdateReplacePolicy {policy}); the new one starts empty"
    if policy == "Snapshot":
        return "a snapshot of the old one is kept (UpdateReplacePolicy Snapshot); the new one starts empty"
    return None


def guard_lowered(before: Mapping[str, Any], after: Mapping[str, Any]) -> Why | None:
    """A DeletionPolicy or UpdateReplacePolicy that kept the resource and now lets it be deleted: the next
    removal or replacement destroys what it holds."""
    lowered = []
    for key, old, new in (
        ("DeletionPolicy", deletion_policy(before), deletion_policy(after)),
        (
            "UpdateReplacePolicy",
            before.get("UpdateReplacePolicy") or "Delete",
            after.get("UpdateReplacePolicy") or "Delete",
        ),
    ):
        if old in (*KEEPS, "Snapshot") and new not in (*KEEPS, "Snapshot"):
            lowered.append(Why(f"{key} {old} -> ", Lit(str(new))))
    if not lowered:
        return None
    parts: list[str | Why] = []
    for i, why in enumerate(lowered):
        parts += [", ", why] if i else [why]
    return Why(*parts, ": the next removal or replacement deletes it and what it holds")
