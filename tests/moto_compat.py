"""A copy of a synthesized template that moto's CloudFormation can create.

Shared by the in-process moto tests (tests/test_moto.py) and the one-machine cluster
(tests/e2e). moto needs these rewrites of a COPY of the template, each named here:
1. SSM-parameter defaults under /aws/... are reserved in moto: point them at test-owned parameters.
   Parameters with no default (AvailabilityZone, ImageId: `cdk deploy` asks for them) get values.
2. Custom resources run a Lambda from the bootstrap bucket, which moto cannot invoke: CDK's
   restrict-default-security-group resource set is dropped, and so are the one-time image lookups
   (Custom::EfaImageLookup, aws-cdk-lib's AwsCustomResource) and their Lambda, whose answer (an AMI
   id) becomes one of moto's AMIs.
3. moto models no placement groups, key pairs, wait conditions or FSx file systems in CloudFormation
   (UNMODELLED; moto 5.2.5's FSx backend has no CloudFormation handler): they are dropped, references to
   them become stand-in strings (which moto stores unchecked), DependsOn on them goes, and outputs of
   their attributes are dropped. moto also ignores CreationPolicy: nodes are "created"
   without their signals.
4. moto ignores LaunchTemplate on AWS::EC2::Instance and needs an ImageId on the instance.
5. AWS::SSM::Parameter's Tags are a map in CloudFormation; moto reads a Key/Value list.
6. AWS::KMS::Key's Tags are Key/Value in CloudFormation; moto's KMS reads TagKey/TagValue.
7. moto's EFS file system answers no Fn::GetAtt (its FileSystem has no get_cfn_attribute): its Arn is
   written out from the file system's Ref, as EFS forms it (arn:<partition>:elasticfilesystem:
   <region>:<account>:file-system/<id>).
"""

from __future__ import annotations

import copy
from typing import Any

UNMODELLED = (
    "AWS::EC2::PlacementGroup",
    "AWS::EC2::KeyPair",
    "AWS::CloudFormation::WaitCondition",
    "AWS::CloudFormation::WaitConditionHandle",
    "AWS::FSx::FileSystem",
)


def _efs_arn(node: Any, ref_id: str) -> Any:
    if isinstance(node, dict):
        if node.get("Fn::GetAtt") == [ref_id, "Arn"]:
            arn = "arn:${AWS::Partition}:elasticfilesystem:${AWS::Region}:${AWS::AccountId}:file-system/"
            return {"Fn::Sub": arn + "${" + ref_id + "}"}
        return {k: _efs_arn(v, ref_id) for k, v in node.items()}
    if isinstance(node, list):
        return [_efs_arn(v, ref_id) for v in node]
    return node


def _replace(node: Any, ref_id: str, value: str) -> Any:
    if isinstance(node, dict):
        if node.get("Ref") == ref_id or (node.get("Fn::GetAtt") or [None])[0] == ref_id:
            return value
        return {k: _replace(v, ref_id, value) for k, v in node.items()}
    if isinstance(node, list):
        return [_replace(v, ref_id, value) for v in node]
    return node


def moto_compatible(
    template: dict[str, Any], ami: str, ssm: Any, stand_ins: dict[str, str] | None = None
) -> dict[str, Any]:
    """The rewritten copy; `stand_ins` gives the value that replaces references to a dropped
    resource (by logical id) instead of "stand-in-<id>"."""
    t = copy.deepcopy(template)
    for name, param in t.get("Parameters", {}).items():  # (1)
        if param["Type"].startswith("AWS::SSM::Parameter::Value"):
            local = f"/efa-cdk-test/{name}"
            ssm.put_parameter(
                Name=local, Value=ami if "Image" in param["Type"] else "1", Type="String", Overwrite=True
            )
            param["Default"] = local
    for rid in [
        r
        for r, v in t["Resources"].items()  # (2)
        if v["Type"] in ("Custom::VpcRestrictDefaultSG", "Custom::EfaImageLookup")
        or r.startswith(
            ("CustomVpcRestrictDefaultSGCustomResourceProvider", "AWS679f53fac002430cb0da5b7982bd2287")
        )
        or (r.startswith("ImageLookup") and v["Type"] == "AWS::IAM::Policy")
    ]:
        del t["Resources"][rid]
        t = _replace(t, rid, ami)
    for rid in [r for r, v in t["Resources"].items() if v["Type"] in UNMODELLED]:  # (3)
        del t["Resources"][rid]
        value = (stand_ins or {}).get(rid, f"stand-in-{rid}")
        t = _replace(t, rid, value)
        t["Outputs"] = {k: v for k, v in t.get("Outputs", {}).items() if v["Value"] != value}
        for resource in t["Resources"].values():
            after = resource.get("DependsOn", [])
            after = [after] if isinstance(after, str) else after
            if rid in after:
                resource["DependsOn"] = [d for d in after if d != rid]
    for rid in [r for r, v in t["Resources"].items() if v["Type"] == "AWS::EFS::FileSystem"]:  # (7)
        t = _efs_arn(t, rid)
    for resource in t["Resources"].values():  # (4), (5)
        if resource["Type"] == "AWS::EC2::Instance":
            resource["Properties"]["ImageId"] = ami
        if resource["Type"] == "AWS::KMS::Key" and resource["Properties"].get("Tags"):  # (6)
            resource["Properties"]["Tags"] = [
                {"TagKey": t["Key"], "TagValue": t["Value"]} for t in resource["Properties"]["Tags"]
            ]
        if resource["Type"] == "AWS::SSM::Parameter" and isinstance(resource["Properties"].get("Tags"), dict):
            resource["Properties"]["Tags"] = [
                {"Key": k, "Value": v} for k, v in resource["Properties"]["Tags"].items()
            ]
    return t
