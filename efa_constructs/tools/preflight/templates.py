"""Node groups and file systems read from synthesized templates: the launch templates and what launches from
them (instances, Auto Scaling groups, PCS and EKS node groups), their zones and subnets through the
assembly's exports, the bootstrap version the stacks need.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from .model import BOOTSTRAP_VERSION_PARAMETER, LustreAsk, NodeGroup, PreflightError


def _literal(value: Any) -> str | None:
    return value if isinstance(value, str) and not value.startswith("{{") else None


def _ssm_name(value: Any, params: Mapping[str, Any], resources: Mapping[str, Any]) -> str | None:
    """The SSM parameter an ImageId resolves from: a {{resolve:ssm:...}} string, a parameter of type
    AWS::SSM::Parameter::Value<...> (its default), or efa-cdk's one-time image lookup
    (``Custom::EfaImageLookup``, whose GetParameter call names it)."""
    if isinstance(value, str):
        m = re.match(r"\{\{resolve:ssm:([^:}]+)", value)
        return m.group(1) if m else None
    ref = value.get("Ref") if isinstance(value, dict) else None
    if not isinstance(ref, str):
        return None
    if ref in params and str(params[ref].get("Type", "")).startswith("AWS::SSM::Parameter::Value"):
        default = params[ref].get("Default")
        return str(default) if default else None
    if ref in resources and resources[ref].get("Type") == "Custom::EfaImageLookup":
        m = re.search(r'Name\\?":\\?"(/[^"\\]+)', json.dumps(resources[ref].get("Properties", {})))
        return m.group(1) if m else None
    return None


#: What the assembly's stacks give others: ``export:<Export.Name>`` (read with Fn::ImportValue, CDK's
#: default cross-stack reference) and ``output:<stack>/<output>`` (read with Fn::GetStackOutput, CDK's
#: "weak" references, ``@aws-cdk/core:defaultCrossStackReferences``) -> (that template, the value).
Exports = Mapping[str, tuple[Mapping[str, Any], Any]]


def assembly_exports(templates: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[Mapping[str, Any], Any]]:
    """The outputs and exports of templates, by stack name: what another stack of the same assembly
    reads with Fn::ImportValue or Fn::GetStackOutput (a cross-stack reference)."""
    found = {}
    for stack, t in templates.items():
        for key, output in (t.get("Outputs") or {}).items():
            if not isinstance(output, dict):
                continue
            found[f"output:{stack}/{key}"] = (t, output.get("Value"))
            name = (output.get("Export") or {}).get("Name")
            if isinstance(name, str):
                found[f"export:{name}"] = (t, output.get("Value"))
    return found


def _reference(value: Any) -> str | None:
    """The :data:`Exports` key a cross-stack reference reads, or None for anything else."""
    if not isinstance(value, dict):
        return None
    if "Fn::ImportValue" in value:
        return f"export:{json.dumps(value['Fn::ImportValue']).strip(chr(34))}"
    read = value.get("Fn::GetStackOutput")
    if isinstance(read, dict):
        return f"output:{read.get('StackName')}/{read.get('OutputName')}"
    return None


def _zone(
    resources: Mapping[str, Any], subnet: Any, params: Mapping[str, Any], exports: Exports | None = None
) -> tuple[str | None, str | None]:
    """(zone, existing subnet id) of a subnet reference in a template; an import of another stack of
    the assembly is followed to that stack's subnet."""
    exported = (exports or {}).get(_reference(subnet) or "")
    if exported:
        other, value = exported
        return _zone(other.get("Resources", {}), value, other.get("Parameters", {}))
    if isinstance(subnet, str):
        return None, subnet
    if isinstance(subnet, dict) and "Ref" in subnet and subnet["Ref"] in resources:
        az = resources[subnet["Ref"]].get("Properties", {}).get("AvailabilityZone")
        if isinstance(az, str):
            return az, None
        if isinstance(az, dict) and "Ref" in az:
            default = params.get(az["Ref"], {}).get("Default")
            return (default if isinstance(default, str) else None), None
    return None, None


def _import_note(subnet: Any, exports: Exports | None) -> str | None:
    """For a subnet read from another stack the assembly does not hold: which stack and output."""
    key = _reference(subnet)
    if key is None or key in (exports or {}):
        return None
    kind, _, name = key.partition(":")
    return f"the {'export' if kind == 'export' else 'output'} {name} of a stack outside this assembly"


#: What launches nodes from a launch template, per resource type: (the template reference, how many
#: nodes at most, the type and image the launcher sets (PCS's), the subnets the launcher sets where the
#: template has none: an Auto Scaling group's, an EKS node group's).
_Launch = tuple[Any, int, Any, Any, Any]


LAUNCHERS: dict[str, Callable[[Mapping[str, Any]], _Launch]] = {
    "AWS::EC2::Instance": lambda p: (
        p.get("LaunchTemplate", {}).get("LaunchTemplateId"),
        1,
        None,
        None,
        None,
    ),
    "AWS::AutoScaling::AutoScalingGroup": lambda p: (
        p.get("LaunchTemplate", {}).get("LaunchTemplateId"),
        int(p.get("DesiredCapacity") or p.get("MaxSize") or 0),
        None,
        None,
        p.get("VPCZoneIdentifier"),
    ),
    "AWS::PCS::ComputeNodeGroup": lambda p: (
        p.get("CustomLaunchTemplate", {}).get("TemplateId"),
        int(p.get("ScalingConfiguration", {}).get("MaxInstanceCount", 0)),
        (p.get("InstanceConfigs") or [{}])[0].get("InstanceType"),
        p.get("AmiId"),
        p.get("SubnetIds"),
    ),
    "AWS::EKS::Nodegroup": lambda p: (
        p.get("LaunchTemplate", {}).get("Id"),
        int(p.get("ScalingConfig", {}).get("MaxSize", 0)),
        None,
        None,
        p.get("Subnets"),
    ),
}


def _launched(resources: Mapping[str, Any]) -> dict[str, tuple[int, str | None, Any, list[Any]]]:
    """Launch template logical id -> (nodes, the launcher's type, image and subnets)."""
    launched: dict[str, tuple[int, str | None, Any, list[Any]]] = {}
    for r in resources.values():
        read = LAUNCHERS.get(str(r.get("Type")))
        if read is None:
            continue
        ref, count, itype, image, subnets = read(r.get("Properties", {}))
        lt_id = ref.get("Ref") if isinstance(ref, dict) else None
        if isinstance(lt_id, str) and lt_id in resources:
            nodes = launched.get(lt_id, (0, None, None, []))[0] + count
            launched[lt_id] = (nodes, itype, image, subnets if isinstance(subnets, list) else [])
    return launched


def _template_group(
    stack: str,
    template: Mapping[str, Any],
    lt_id: str,
    launcher: tuple[str | None, Any, list[Any]],
    exports: Exports | None,
) -> NodeGroup | None:
    """The node group launch template `lt_id` makes (count 0), or None when it is no EFA group (a
    login node, a head node)."""
    resources, params = template.get("Resources", {}), template.get("Parameters", {})
    given_type, given_image, launcher_subnets = launcher
    data = resources[lt_id].get("Properties", {}).get("LaunchTemplateData", {})
    itype = given_type or _literal(data.get("InstanceType"))
    nics = data.get("NetworkInterfaces") or []
    efa = [n for n in nics if n.get("InterfaceType") in ("efa", "efa-only")]
    if not itype or not efa:
        return None
    # the template's subnet, else the group's (a template for an Auto Scaling group has none)
    subnet = next((n.get("SubnetId") for n in nics if n.get("SubnetId")), None)
    subnet = subnet if subnet is not None else next(iter(launcher_subnets), None)
    zone, subnet_id = _zone(resources, subnet, params, exports)
    target = data.get("CapacityReservationSpecification", {}).get("CapacityReservationTarget", {})
    image = given_image or data.get("ImageId")
    return NodeGroup(
        stack=stack,
        name=re.sub(r"(LaunchTemplate)?[0-9A-F]{8}$", "", lt_id) or lt_id,
        instance_type=itype,
        count=0,
        efa_interfaces=len(efa),
        network_cards=max(int(n.get("NetworkCardIndex", 0)) for n in nics) + 1,
        zone=zone,
        subnet_id=subnet_id,
        reservation_id=_literal(target.get("CapacityReservationId")),
        capacity_block=data.get("InstanceMarketOptions", {}).get("MarketType") == "capacity-block",
        key_name=_literal(data.get("KeyName")),
        image_id=_literal(image),
        image_parameter=_ssm_name(image, params, resources),
        root_gib=_root_gib(data),
        interfaces_with_ip=sum(1 for n in nics if n.get("InterfaceType") != "efa-only"),
        subnet_from=_import_note(subnet, exports),
        interfaces=len(nics),
        public_address=nics[0].get("AssociatePublicIpAddress") is True,
    )


def _root_gib(data: Mapping[str, Any]) -> int | None:
    """The root volume's size a launch template's data sets (its first block device), when a number."""
    root = next((m.get("Ebs", {}).get("VolumeSize") for m in data.get("BlockDeviceMappings", [])), None)
    return int(root) if isinstance(root, int) else None


def node_groups(stack: str, template: Mapping[str, Any], exports: Exports | None = None) -> list[NodeGroup]:
    """The EFA node groups of a synthesized template: explicit instances (by launch template), Auto
    Scaling groups, AWS PCS compute node groups and EKS managed node groups (:data:`LAUNCHERS`). A subnet
    imported from another stack (`exports`: :func:`assembly_exports`) is followed there. Groups of one
    type in one zone are one group; every Elastic IP of the stack is counted on the first."""
    resources: Mapping[str, Any] = template.get("Resources", {})
    groups: dict[tuple[str, str | None], NodeGroup] = {}
    for lt_id, (count, *launcher) in _launched(resources).items():
        found = _template_group(stack, template, lt_id, (launcher[0], launcher[1], launcher[2]), exports)
        if found is None:
            continue
        if not groups:
            found.elastic_ips = sum(1 for r in resources.values() if r.get("Type") == "AWS::EC2::EIP")
        groups.setdefault((found.instance_type, found.zone), found).count += count
    return list(groups.values())


def bootstrap_required(template: Mapping[str, Any]) -> tuple[str, int] | None:
    """The bootstrap version parameter the template reads (Parameters.BootstrapVersion's default names
    the qualifier: ``/cdk-bootstrap/<qualifier>/version``, as the synthesizer wrote it) and the lowest
    version its CheckBootstrapVersion rule accepts."""
    rule = json.dumps(template.get("Rules", {}).get("CheckBootstrapVersion", {}))
    refused = [int(v) for v in re.findall(r'"(\d+)"', rule)]
    if not refused:
        return None
    default = (template.get("Parameters", {}).get("BootstrapVersion") or {}).get("Default")
    return (default if isinstance(default, str) else BOOTSTRAP_VERSION_PARAMETER), max(refused) + 1


def lustre_file_systems(stack: str, template: Mapping[str, Any]) -> list[LustreAsk]:
    """The PERSISTENT_2 Lustre file systems `template` makes (their size known at synth)."""
    out = []
    for rid, r in template.get("Resources", {}).items():
        props = r.get("Properties") or {}
        lustre = props.get("LustreConfiguration") or {}
        if (
            r.get("Type") == "AWS::FSx::FileSystem"
            and props.get("FileSystemType") == "LUSTRE"
            and lustre.get("DeploymentType") == "PERSISTENT_2"
            and isinstance(props.get("StorageCapacity"), int)
        ):
            out.append(LustreAsk(stack, rid, props["StorageCapacity"], lustre.get("EfaEnabled") is True))
    return out


def _made_by(file_system: Mapping[str, Any], stack: str, logical_id: str) -> bool:
    """True when CloudFormation made `file_system` for `stack`'s resource `logical_id` (its tags say so:
    an update, not one more)."""
    tags = {t.get("Key"): t.get("Value") for t in file_system.get("Tags", [])}
    return (
        tags.get("aws:cloudformation:stack-name") == stack
        and tags.get("aws:cloudformation:logical-id") == logical_id
    )


def _node_groups_of(name: str, template: dict[str, Any], exports: Exports | None = None) -> list[NodeGroup]:
    """:func:`node_groups`, or one line when the template is not shaped as synthesis writes it."""
    try:
        return node_groups(name, template, exports)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as err:
        raise PreflightError(
            f"the template of {name} is not as synthesis writes it ({type(err).__name__}: {err}); "
            "synthesize again"
        ) from None
