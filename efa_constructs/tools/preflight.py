"""`efa-cdk preflight`: the synthesized stacks checked against the AWS account before `cdk deploy`.

Most first deploys of an EFA cluster fail on the account, not the template: a vCPU quota of 0 for the
family, a type not offered in the zone, a Capacity Block that has not started or holds too few
instances, a missing key pair, image or CDK bootstrap stack. Each check reads what the template asks
for (cdk.out) and what the account has (boto3), and says one line: PASS, WARN or FAIL, what it found
and the fix. The calls and the IAM permission each needs are in :data:`PERMISSIONS`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .assembly import AssemblyError, assembly_stacks, read_json
from .aws import aws_client, hint
from .exits import Exit, emit

#: Every call preflight makes and the IAM action it needs (an AccessDenied names it).
PERMISSIONS = {
    "sts:GetCallerIdentity": "credentials and account",
    "ssm:GetParameter": "the CDK bootstrap version, the default image's parameter",
    "ec2:DescribeInstanceTypeOfferings": "the zones that offer a type",
    "ec2:DescribeInstanceTypes": "EFA support, interfaces and network cards of a type; vCPUs",
    "ec2:DescribeInstances": "the vCPUs already running in a quota's family",
    "servicequotas:ListServiceQuotas": "the On-Demand vCPU quota of a family, the Elastic IP quota, FSx for "
    "Lustre's quotas",
    "ec2:DescribeCapacityReservations": "a reservation's state, zone, type, free count; unused ones (quota)",
    "ec2:DescribeKeyPairs": "a named key pair",
    "ec2:DescribeImages": "an image: exists, architecture, root snapshot size",
    "ec2:DescribeAddresses": "the Elastic IPs already allocated",
    "ec2:DescribeSubnets": "an existing subnet's zone and free addresses",
    "ec2:DescribeRouteTables": "an existing subnet's route out",
    "ec2:DescribeCapacityReservationTopology": "where a reservation's instances go, before launch",
    "fsx:DescribeFileSystems": "the FSx for Lustre storage already in the region",
}
#: The On-Demand vCPU quota (Service Quotas, service ec2) of an instance class, by the family's leading
#: letters, longest first (EC2 user guide, "On-Demand Instance quotas": one quota per class, in vCPUs;
#: u7i/u7in count against High Memory, L-43DA4232, and gr6 against G and VT, L-DB2E81BA, as issue 41
#: read there). A family whose letters match no class gets no quota (preflight says so), never Standard.
QUOTA_CLASSES = (
    ("trn", "Running On-Demand Trn instances"),
    ("inf", "Running On-Demand Inf instances"),
    ("dl", "Running On-Demand DL instances"),
    ("hpc", "Running On-Demand HPC instances"),
    ("gr", "Running On-Demand G and VT instances"),
    ("vt", "Running On-Demand G and VT instances"),
    ("p", "Running On-Demand P instances"),
    ("g", "Running On-Demand G and VT instances"),
    ("x", "Running On-Demand X instances"),
    ("f", "Running On-Demand F instances"),
    ("u", "Running On-Demand High Memory instances"),
)
#: The classes the Standard quota names: its families start with one of these letters (im4gn is I).
STANDARD_LETTERS = "acdhimrtz"
STANDARD_QUOTA = "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"
EIP_QUOTA = "EC2-VPC Elastic IPs"
#: The SSM parameter of the CDK bootstrap's version, for the default qualifier (CDK's bootstrap template).
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"


class PreflightError(Exception):
    """Preflight cannot run at all (no templates, no credentials, no network): one line."""


@dataclass(frozen=True)
class Check:
    """One check's verdict: PASS, WARN or FAIL, what it found, and the fix."""

    name: str
    status: str
    found: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.status:<4} {self.name}: {self.found}" + (f". Fix: {self.fix}" if self.fix else "")


@dataclass
class NodeGroup:
    """What one group of EFA nodes in a template asks of the account."""

    stack: str
    name: str  # the logical id that launches them
    instance_type: str
    count: int
    efa_interfaces: int = 0
    network_cards: int = 0
    zone: str | None = None
    subnet_id: str | None = None  # an existing subnet's id
    reservation_id: str | None = None
    capacity_block: bool = False
    key_name: str | None = None
    image_id: str | None = None
    image_parameter: str | None = None
    root_gib: int | None = None
    elastic_ips: int = 0
    interfaces_with_ip: int = 1
    subnet_from: str | None = None  # where the subnet comes from when the template cannot say (an import)


def quota_name(instance_type: str) -> str | None:
    """The On-Demand vCPU quota of the type's class: the longest class prefix of the family's leading
    letters (trn1n -> trn, p5en -> p, hpc7g -> hpc, gr6 -> gr, u7in -> u), else Standard for the
    Standard letters (im4gn -> i); None for a class this table does not know."""
    found = re.match(r"[a-z]+", instance_type.split(".")[0])
    letters = found.group(0) if found else ""
    for prefix, name in QUOTA_CLASSES:
        if letters.startswith(prefix):
            return name
    return STANDARD_QUOTA if letters[:1] and letters[0] in STANDARD_LETTERS else None


# --- what the templates ask for -----------------------------------------------------------------


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
        p.get("LaunchTemplate", {}).get("LaunchTemplateId"), 1, None, None, None,
    ),
    "AWS::AutoScaling::AutoScalingGroup": lambda p: (
        p.get("LaunchTemplate", {}).get("LaunchTemplateId"),
        int(p.get("DesiredCapacity") or p.get("MaxSize") or 0), None, None, p.get("VPCZoneIdentifier"),
    ),
    "AWS::PCS::ComputeNodeGroup": lambda p: (
        p.get("CustomLaunchTemplate", {}).get("TemplateId"),
        int(p.get("ScalingConfiguration", {}).get("MaxInstanceCount", 0)),
        (p.get("InstanceConfigs") or [{}])[0].get("InstanceType"), p.get("AmiId"), p.get("SubnetIds"),
    ),
    "AWS::EKS::Nodegroup": lambda p: (
        p.get("LaunchTemplate", {}).get("Id"), int(p.get("ScalingConfig", {}).get("MaxSize", 0)),
        None, None, p.get("Subnets"),
    ),
}  # fmt: skip


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


#: The first line of the ParallelCluster configuration efa-cdk writes (core/pcluster.py's to_yaml).
PCLUSTER_CONFIG_MARK = "# ParallelCluster "


def _flatten(value: Any) -> str | None:
    """A template string with its references written ``efa-cdk-ref:<LogicalId>`` (any other token
    ``efa-cdk-token``): a literal, or an Fn::Join of literals and tokens; None for anything else."""
    if isinstance(value, str):
        return value
    parts = value.get("Fn::Join") if isinstance(value, dict) else None
    if not (isinstance(parts, list) and len(parts) == 2 and parts[0] == "" and isinstance(parts[1], list)):
        return None
    return "".join(
        p if isinstance(p, str)
        else f"efa-cdk-ref:{p['Ref']}" if isinstance(p, dict) and isinstance(p.get("Ref"), str)
        else "efa-cdk-token"
        for p in parts[1]
    )  # fmt: skip


def _refs(config: Any) -> Any:
    """The configuration with each ``efa-cdk-ref:<id>`` string back as ``{"Ref": id}``."""
    if isinstance(config, dict):
        return {k: _refs(v) for k, v in config.items()}
    if isinstance(config, list):
        return [_refs(v) for v in config]
    if isinstance(config, str) and config.startswith("efa-cdk-ref:"):
        return {"Ref": config.removeprefix("efa-cdk-ref:")}
    return config


def parallelcluster_configs(
    stack: str, template: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[Check]]:
    """The ParallelCluster configurations a template holds (the cluster resource's, else the outputs
    efa-cdk writes with ``config_output``), and a WARN for one that could not be read."""
    import yaml

    resources: Mapping[str, Any] = template.get("Resources", {})
    found = [
        r.get("Properties", {}).get("ClusterConfiguration")
        for r in resources.values()
        if r.get("Type") == "Custom::PclusterCluster"
    ]
    configs = [c for c in found if isinstance(c, dict)]
    notes = []
    for name, output in template.get("Outputs", {}).items() if not configs else ():
        text = _flatten(output.get("Value"))
        if text is None or not text.startswith(PCLUSTER_CONFIG_MARK):
            continue
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as err:
            config, why = None, f"not YAML ({str(err).splitlines()[0]})"
        else:
            why = "no SlurmQueues"
        if isinstance(config, dict) and isinstance(config.get("Scheduling", {}).get("SlurmQueues"), list):
            configs.append(_refs(config))
        else:
            notes.append(Check(
                f"parallelcluster [{stack}/{name}]", "WARN",
                f"its ParallelCluster configuration could not be read ({why}): its queues were not checked",
                "pcluster create-cluster --dryrun true --cluster-configuration <it> validates it",
            ))  # fmt: skip
    return configs, notes


def _dig(value: Any, *keys: str) -> Any:
    """value[k1][k2]... where each level may be missing or null (a YAML key written empty)."""
    for key in keys:
        value = (value or {}).get(key) if isinstance(value or {}, dict) else None
    return value


def parallelcluster_groups(
    stack: str, template: Mapping[str, Any], configs: list[dict[str, Any]], exports: Exports | None = None
) -> list[NodeGroup]:
    """The EFA compute resources of ParallelCluster configurations as node groups: each queue's type,
    MaxCount, subnet, Capacity Reservation or Block, image and root volume (ParallelCluster lays out
    the interfaces itself: ``efa_interfaces`` 0)."""
    return [
        group
        for config in configs
        for queue in _dig(config, "Scheduling", "SlurmQueues") or []
        for group in _queue_groups(stack, template, config, queue, exports)
    ]


def _queue_groups(
    stack: str,
    template: Mapping[str, Any],
    config: dict[str, Any],
    queue: dict[str, Any],
    exports: Exports | None,
) -> list[NodeGroup]:
    """One Slurm queue's EFA compute resources as node groups (:func:`parallelcluster_groups`)."""
    subnet = (_dig(queue, "Networking", "SubnetIds") or [None])[0]
    zone, subnet_id = _zone(template.get("Resources", {}), subnet, template.get("Parameters", {}), exports)
    root = _dig(queue, "ComputeSettings", "LocalStorage", "RootVolume", "Size")
    groups = []
    for resource in queue.get("ComputeResources", []):
        itype = resource.get("InstanceType") or next(
            (i.get("InstanceType") for i in resource.get("Instances", [])), None
        )
        if not _dig(resource, "Efa", "Enabled") or not isinstance(itype, str):
            continue
        groups.append(NodeGroup(
            stack=stack, name=f"queue {queue.get('Name')}/{resource.get('Name')}",
            instance_type=itype, count=int(resource.get("MaxCount", 0)), zone=zone, subnet_id=subnet_id,
            reservation_id=_literal(_dig(resource, "CapacityReservationTarget", "CapacityReservationId")),
            capacity_block=queue.get("CapacityType") == "CAPACITY_BLOCK",
            key_name=_literal(_dig(config, "HeadNode", "Ssh", "KeyName")),
            image_id=_literal(_dig(queue, "Image", "CustomAmi") or _dig(config, "Image", "CustomAmi")),
            root_gib=int(root) if isinstance(root, int) else None,
            subnet_from=_import_note(subnet, exports),
        ))  # fmt: skip
    return groups


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


# --- the checks -----------------------------------------------------------------------------------


class _Denied(Exception):
    """A call's AWS error, as the check's one line."""

    def __init__(self, check: Check) -> None:
        self.check = check


def _failure(name: str, action: str, err: Exception) -> Exception:
    """What an AWS error means for a check: its FAIL line (denied, throttled, anything else), or, when
    the credentials themselves are the problem, preflight stops with one line."""
    from botocore.exceptions import ClientError

    if not isinstance(err, ClientError):
        return PreflightError(f"{action} could not be called: {err} ({hint(err)})")
    code = err.response.get("Error", {}).get("Code", "")
    message = err.response.get("Error", {}).get("Message", "")
    if code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"):
        return _Denied(Check(name, "FAIL", f"{action} was denied", f"allow {action} to these credentials"))
    # EC2 and most services say Throttling; Service Quotas says TooManyRequestsException
    if "Throttl" in code or code in ("RequestLimitExceeded", "TooManyRequestsException"):
        return _Denied(Check(name, "FAIL", f"{action} was throttled ({code})", "run preflight again later"))
    if code in ("ExpiredToken", "ExpiredTokenException", "RequestExpired", "InvalidClientTokenId"):
        return PreflightError(f"the AWS credentials are not valid ({code}): renew them (aws sso login, ...)")
    return _Denied(Check(name, "FAIL", f"{action}: {code}: {message}"))


def _unless(name: str, action: str, call: Callable[[], Any], *codes: str) -> tuple[Any, str | None]:
    """(the call's answer, None), or (None, the error code) when AWS answers one of `codes` (a missing
    parameter, key pair...: the check's own FAIL); any other error is the check's line (:func:`_failure`)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call(), None
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        if code in codes:
            return None, code
        raise _failure(name, action, err) from None
    except BotoCoreError as err:
        raise _failure(name, action, err) from None


def _aws_call(name: str, action: str, call: Callable[[], Any]) -> Any:
    """Run one AWS call; an error becomes the check's one line (:func:`_failure`)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call()
    except (ClientError, BotoCoreError) as err:
        raise _failure(name, action, err) from None


class Preflight:
    """The checks of some node groups against one account and region (a boto3 session)."""

    def __init__(self, session: Any, progress: Callable[[str], None] = lambda _: None) -> None:
        self.session = session
        self.region: str = session.region_name or ""
        self.progress = progress
        self._clients: dict[str, Any] = {}
        self._types: dict[str, dict[str, Any]] = {}
        self._quotas: dict[str, dict[str, dict[str, Any]]] = {}

    def _quota(self, check: str, name: str, service: str = "ec2") -> dict[str, Any] | None:
        """The `service`'s quota named `name` (Service Quotas' list for the service, asked once)."""
        if service not in self._quotas:
            quotas = self.client("service-quotas")
            pages = _aws_call(
                check,
                "servicequotas:ListServiceQuotas",
                lambda: list(quotas.get_paginator("list_service_quotas").paginate(ServiceCode=service)),
            )
            self._quotas[service] = {q["QuotaName"]: q for page in pages for q in page["Quotas"]}
        return self._quotas[service].get(name)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = aws_client(self.session, service, self.region)
        return self._clients[service]

    def run(
        self, groups: list[NodeGroup], bootstrap: Mapping[str, int], file_systems: Sequence[LustreAsk] = ()
    ) -> list[Check]:
        """Every check: `bootstrap` is the version each bootstrap parameter must hold (one per qualifier);
        `file_systems`, the FSx for Lustre file systems the stacks make."""
        found: list[Check | None] = []
        for rule in RULES:
            if rule.applies_to == ACCOUNT:
                found.append(self._guard(rule.id, lambda r=rule: r.check(self)))  # type: ignore[misc]
            elif rule.applies_to == QUALIFIER:
                found += [
                    self._guard(rule.id, lambda r=rule, p=p, v=v: r.check(self, v, p))  # type: ignore[misc]
                    for p, v in bootstrap.items()
                ]
        found += self._each(
            NODE_GROUP, [(f"{g.stack}/{g.name} ({g.count} x {g.instance_type})", g) for g in groups]
        )
        found += self._each(
            FILE_SYSTEM,
            [
                (f"{f.stack}/{f.name} ({f.capacity_gib} GiB{', EFA' if f.efa else ''})", f)
                for f in file_systems
            ],
        )
        return [c for c in found if c is not None]

    def _each(self, kind: str, items: list[tuple[str, Any]]) -> list[Check | None]:
        """Every rule of `kind` for each (where, item), each line named ``<rule> [<where>]``."""
        found: list[Check | None] = []
        for where, item in items:
            for rule in (r for r in RULES if r.applies_to == kind):
                self.progress(f"checking {rule.id} of {where}")
                found.append(self._guard(f"{rule.id} [{where}]", lambda r=rule, i=item: r.check(self, i)))  # type: ignore[misc]
        return found

    def _guard(self, name: str, check: Callable[[], Check | None]) -> Check | None:
        try:
            found = check()
        except _Denied as denied:
            return Check(name, denied.check.status, denied.check.found, denied.check.fix)
        return None if found is None else Check(name, found.status, found.found, found.fix)

    # each check: None when it does not apply to the group

    def identity(self) -> Check:
        sts = self.client("sts")
        who = _aws_call("credentials", "sts:GetCallerIdentity", sts.get_caller_identity)
        if not self.region:
            raise PreflightError("no AWS region: set AWS_REGION (or --region)")
        return Check("credentials", "PASS", f"account {who['Account']} in {self.region} as {who['Arn']}")

    def bootstrap(self, required: int, parameter: str = BOOTSTRAP_VERSION_PARAMETER) -> Check:
        """The bootstrap stack's version parameter (of the stacks' qualifier) against the templates' rule."""
        ssm = self.client("ssm")
        answer, missing = _unless(
            "bootstrap", "ssm:GetParameter",
            lambda: ssm.get_parameter(Name=parameter), "ParameterNotFound",
        )  # fmt: skip
        qualifier = parameter.split("/")[2] if parameter.count("/") == 3 else None
        flag = f" --qualifier {qualifier}" if qualifier and parameter != BOOTSTRAP_VERSION_PARAMETER else ""
        if missing:
            return Check(
                "bootstrap",
                "FAIL",
                f"the CDK is not bootstrapped in {self.region} (no {parameter})",
                f"npx cdk bootstrap{flag} aws://<account>/{self.region}",
            )
        value = answer["Parameter"]["Value"]
        if int(value) < required:
            return Check(
                "bootstrap",
                "FAIL",
                f"bootstrap version {value} ({parameter}), the stacks need {required} or newer",
                f"npx cdk bootstrap{flag} aws://<account>/{self.region} (upgrades it)",
            )
        return Check("bootstrap", "PASS", f"bootstrap version {value} (>= {required})")

    def _type(self, itype: str) -> dict[str, Any]:
        if itype not in self._types:
            ec2 = self.client("ec2")
            answer = _aws_call(
                "efa", "ec2:DescribeInstanceTypes", lambda: ec2.describe_instance_types(InstanceTypes=[itype])
            )
            self._types[itype] = answer["InstanceTypes"][0] if answer["InstanceTypes"] else {}
        return self._types[itype]

    def offered(self, g: NodeGroup) -> Check:
        ec2 = self.client("ec2")
        answer = _aws_call(
            "offered",
            "ec2:DescribeInstanceTypeOfferings",
            lambda: ec2.describe_instance_type_offerings(
                LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": [g.instance_type]}],
            ),
        )
        zones = sorted(o["Location"] for o in answer["InstanceTypeOfferings"])
        if not zones:
            return Check(
                "offered",
                "FAIL",
                f"{g.instance_type} is offered in no zone of {self.region}",
                "choose a region that offers it (aws ec2 describe-instance-type-offerings --region ...)",
            )
        if g.zone is None and g.subnet_from:
            return Check(
                "offered", "WARN",
                f"the subnet comes from {g.subnet_from}: its zone is not known here; {g.instance_type} is "
                f"offered in {', '.join(zones)}", "make sure that subnet is in one of those zones",
            )  # fmt: skip
        if g.zone is None:
            return Check(
                "offered",
                "WARN",
                f"the zone is chosen at deploy; {g.instance_type} is offered in {', '.join(zones)}",
                f"pass -c availability_zone={zones[0]} (one of those)",
            )
        if g.zone not in zones:
            return Check(
                "offered",
                "FAIL",
                f"{g.instance_type} is not offered in {g.zone}",
                f"use a zone that offers it: {', '.join(zones)}",
            )
        return Check("offered", "PASS", f"{g.instance_type} is offered in {g.zone}")

    def efa(self, g: NodeGroup) -> Check:
        info = self._type(g.instance_type).get("NetworkInfo", {})
        if not info.get("EfaSupported"):
            return Check(
                "efa",
                "FAIL",
                f"EC2 says {g.instance_type} does not support EFA",
                "choose an EFA-capable type (efa-cdk types)",
            )
        most = int(info.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0))
        cards = len(info.get("NetworkCards", [])) or int(info.get("MaximumNetworkCards", 1))
        if g.efa_interfaces > most or g.network_cards > cards:
            return Check(
                "efa",
                "FAIL",
                f"the launch template asks {g.efa_interfaces} EFA interfaces on "
                f"{g.network_cards} cards; EC2 says {g.instance_type} takes {most} on {cards}",
                "refresh the catalogue (efa-cdk catalogue refresh --live) and synthesize again",
            )
        if not g.efa_interfaces:  # ParallelCluster lays out the interfaces itself
            return Check("efa", "PASS", f"EC2: {g.instance_type} takes EFA, at most {most} on {cards} cards")
        return Check(
            "efa",
            "PASS",
            f"{g.efa_interfaces} EFA interfaces on {g.network_cards} cards (EC2: at most {most} on {cards})",
        )

    def quota(self, g: NodeGroup) -> Check | None:
        if g.reservation_id or g.capacity_block:
            return None  # a reservation's instances count against it, not the On-Demand quota
        name = quota_name(g.instance_type)
        if name is None:
            return Check("quota", "WARN", f"no On-Demand quota class known for {g.instance_type}",
                         "check its quota in the Service Quotas console")  # fmt: skip
        found = self._quota("quota", name)
        if found is None:
            return Check(
                "quota",
                "WARN",
                f"no quota named '{name}' in {self.region}",
                "check the quota in the Service Quotas console",
            )
        vcpus = int(self._type(g.instance_type).get("VCpuInfo", {}).get("DefaultVCpus", 0))
        need = vcpus * g.count
        running, own = self._running_vcpus(name, g.stack)
        reserved, reserved_note = self._unused_reserved_vcpus(name)
        used = running + reserved
        limit = int(found["Value"])
        counted = f"{running} run" + (f" ({own} of them this stack's own nodes)" if own else "")
        counted += f" + {reserved} held by unused reservations" if reserved else reserved_note
        if used + need > limit:
            return Check(
                "quota",
                "FAIL",
                f"'{name}' is {limit} vCPUs; {counted}, the cluster needs {need}",
                f"request {used + need} or more: aws service-quotas request-service-quota-increase "
                f"--service-code ec2 --quota-code {found['QuotaCode']} --desired-value {used + need}",
            )
        return Check("quota", "PASS", f"'{name}' {limit} vCPUs: {counted} + {need} needed")

    def _unused_reserved_vcpus(self, name: str) -> tuple[int, str]:
        """The vCPUs active On-Demand Capacity Reservations hold unused in quota `name` (EC2 user guide,
        "On-Demand Instance quotas": they count against it), and a note when they could not be asked."""
        from botocore.exceptions import BotoCoreError, ClientError
        from botocore.parsers import ResponseParserError  # an endpoint that answers no EC2 XML

        if not hasattr(self, "_active_reservations"):  # asked once, for every group's quota
            ec2 = self.client("ec2")
            try:
                pages = ec2.get_paginator("describe_capacity_reservations").paginate(
                    Filters=[{"Name": "state", "Values": ["active"]}]
                )
                self._active_reservations: list[dict[str, Any]] | str = [
                    cr for page in pages for cr in page.get("CapacityReservations", [])
                ]
            except (ClientError, BotoCoreError, ResponseParserError) as err:
                self._active_reservations = (
                    getattr(err, "response", {}).get("Error", {}).get("Code", type(err).__name__)
                )
        if isinstance(self._active_reservations, str):
            said = self._active_reservations
            return 0, f" (unused reservations not counted: DescribeCapacityReservations said {said})"
        total = 0
        for cr in self._active_reservations:
            if quota_name(cr["InstanceType"]) == name:
                per = int(self._type(cr["InstanceType"]).get("VCpuInfo", {}).get("DefaultVCpus", 0))
                total += per * int(cr.get("AvailableInstanceCount", 0))
        return total, ""

    def _running_vcpus(self, name: str, stack: str) -> tuple[int, int]:
        """The vCPUs of running On-Demand instances in quota `name` (Spot instances count against the
        Spot quotas), and how many of them are `stack`'s own (an update replaces them)."""
        ec2 = self.client("ec2")
        pages = _aws_call(
            "quota",
            "ec2:DescribeInstances",
            lambda: list(
                ec2.get_paginator("describe_instances").paginate(
                    Filters=[{"Name": "instance-state-name", "Values": ["running"]}]
                )
            ),
        )
        total = own = 0
        for page in pages:
            for r in page["Reservations"]:
                for i in r["Instances"]:
                    if quota_name(i["InstanceType"]) != name or i.get("InstanceLifecycle") == "spot":
                        continue
                    vcpus = int(i.get("CpuOptions", {}).get("CoreCount", 0)) * int(
                        i.get("CpuOptions", {}).get("ThreadsPerCore", 1)
                    ) or int(self._type(i["InstanceType"]).get("VCpuInfo", {}).get("DefaultVCpus", 0))
                    total += vcpus
                    tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
                    if tags.get("aws:cloudformation:stack-name") == stack:
                        own += vcpus
        return total, own

    def capacity(self, g: NodeGroup) -> Check | None:
        if not g.reservation_id:
            return None
        ec2 = self.client("ec2")
        answer = _aws_call(
            "capacity",
            "ec2:DescribeCapacityReservations",
            lambda: ec2.describe_capacity_reservations(CapacityReservationIds=[g.reservation_id]),
        )
        (cr,) = answer["CapacityReservations"]
        what = "Capacity Block" if g.capacity_block else "reservation"
        problems = []
        if cr["InstanceType"] != g.instance_type:
            problems.append(f"it is for {cr['InstanceType']}, not {g.instance_type}")
        if g.zone and cr["AvailabilityZone"] != g.zone:
            problems.append(f"it is in {cr['AvailabilityZone']}, the nodes in {g.zone}")
        state = cr["State"]
        # EC2 API reference, CapacityReservation State: these still become (or are) active; the rest
        # (expired, cancelled, failed, payment-failed, unsupported) never launch a node
        if state not in ("active", "scheduled", "payment-pending", "pending", "assessing", "delayed"):
            problems.append(f"it is {state}")
        if int(cr.get("TotalInstanceCount", 0)) < g.count:
            problems.append(f"it holds {cr.get('TotalInstanceCount')} instances for {g.count} nodes")
        elif state == "active" and int(cr.get("AvailableInstanceCount", 0)) < g.count:
            problems.append(
                f"{cr.get('AvailableInstanceCount')} of its instances are free for {g.count} nodes"
            )
        if problems:
            return Check(
                "capacity",
                "FAIL",
                f"{what} {g.reservation_id}: {'; '.join(problems)}",
                "use a reservation of the type, in the nodes' zone, with an instance free per node "
                "(-c capacity_reservation=..., -c availability_zone=...)",
            )
        when = f", starts {cr['StartDate']}" if state == "scheduled" and cr.get("StartDate") else ""
        status = "WARN" if state != "active" else "PASS"
        fix = (
            "deploy once it is active (a Capacity Block's nodes launch only then)" if status == "WARN" else ""
        )
        return Check(
            "capacity",
            status,
            f"{what} {g.reservation_id}: {state}{when}, {cr['AvailabilityZone']}, "
            f"{cr.get('AvailableInstanceCount')} of {cr.get('TotalInstanceCount')} free",
            fix,
        )

    def key_pair(self, g: NodeGroup) -> Check | None:
        if not g.key_name:
            return None
        ec2 = self.client("ec2")
        _, missing = _unless(
            "key pair", "ec2:DescribeKeyPairs",
            lambda: ec2.describe_key_pairs(KeyNames=[g.key_name]), "InvalidKeyPair.NotFound",
        )  # fmt: skip
        if missing:
            return Check(
                "key pair",
                "FAIL",
                f"no key pair named {g.key_name} in {self.region}",
                f"import it (aws ec2 import-key-pair --key-name {g.key_name} ...) or drop -c key_pair",
            )
        return Check("key pair", "PASS", f"{g.key_name} exists")

    def _image_id(self, g: NodeGroup) -> str | Check | None:
        """The group's image id: the template's, or the SSM parameter's value (a FAIL when it is missing)."""
        if g.image_id is not None or not g.image_parameter:
            return g.image_id
        ssm = self.client("ssm")
        answer, missing = _unless(
            "image",
            "ssm:GetParameter",
            lambda: ssm.get_parameter(Name=g.image_parameter),
            "ParameterNotFound",
        )
        if missing:
            return Check(
                "image",
                "FAIL",
                f"the image parameter {g.image_parameter} does not exist in {self.region}",
                "pass -c ami_id=ami-... (an image with EFA for the type)",
            )
        return str(answer["Parameter"]["Value"])

    def image(self, g: NodeGroup) -> Check | None:
        image_id = self._image_id(g)
        if image_id is None or isinstance(image_id, Check):
            return image_id
        ec2 = self.client("ec2")
        answer, gone = _unless(
            "image", "ec2:DescribeImages", lambda: ec2.describe_images(ImageIds=[image_id]),
            "InvalidAMIID.NotFound", "InvalidAMIID.Unavailable", "InvalidAMIID.Malformed",
        )  # fmt: skip
        images = [] if gone else answer["Images"]
        if not images:
            return Check(
                "image", "FAIL", f"{image_id} does not exist in {self.region}", "pass an image of this region"
            )
        image = images[0]
        # EC2 API reference, Image: State is available, pending, failed, deregistered, ...; a launch needs
        # available. DeprecationTime: past it the image still launches but is no longer listed (EC2
        # user guide, "Deprecate an AMI"): a newer one exists.
        if image.get("State", "available") != "available":
            return Check(
                "image", "FAIL", f"{image_id} is {image['State']}, not available: nothing launches from it",
                "pass an available image (or leave ami_id out for the default image)",
            )  # fmt: skip
        deprecated = image.get("DeprecationTime")
        if deprecated and _past(deprecated):
            return Check(
                "image", "WARN", f"{image_id} is deprecated since {deprecated} (it launches, but it is old)",
                "pass a current image (or leave ami_id out for the default image)",
            )  # fmt: skip
        arch = self._type(g.instance_type).get("ProcessorInfo", {}).get("SupportedArchitectures", [])
        if arch and image.get("Architecture") not in arch:
            return Check(
                "image",
                "FAIL",
                f"{image_id} is {image.get('Architecture')}, {g.instance_type} runs {', '.join(arch)}",
                "pass an image of the type's architecture",
            )
        root = next(
            (
                m.get("Ebs", {}).get("VolumeSize")
                for m in image.get("BlockDeviceMappings", [])
                if m.get("DeviceName") == image.get("RootDeviceName")
            ),
            None,
        )
        if root and g.root_gib and int(root) > g.root_gib:
            return Check(
                "image",
                "FAIL",
                f"{image_id}'s root snapshot is {root} GiB, the root volume {g.root_gib} GiB",
                f"pass -c root_volume_gib={root} or more",
            )
        return Check("image", "PASS", f"{image_id} ({image.get('Architecture')}, root {root} GiB)")

    def elastic_ips(self, g: NodeGroup) -> Check | None:
        if not g.elastic_ips:
            return None
        found = self._quota("elastic ips", EIP_QUOTA)
        ec2 = self.client("ec2")
        used = len(_aws_call("elastic ips", "ec2:DescribeAddresses", ec2.describe_addresses)["Addresses"])
        limit = int(found["Value"]) if found else 5  # EC2's default: 5 per region
        if used + g.elastic_ips > limit:
            return Check(
                "elastic ips",
                "FAIL",
                f"{used} of {limit} Elastic IPs in use, the stack adds {g.elastic_ips}",
                "release unused addresses or request more (quota 'EC2-VPC Elastic IPs')",
            )
        return Check("elastic ips", "PASS", f"{used} of {limit} in use + {g.elastic_ips}")

    def subnet(self, g: NodeGroup) -> Check | None:
        if not g.subnet_id and g.subnet_from:
            return Check(
                "subnet", "WARN", f"the subnet comes from {g.subnet_from}: not checked (free addresses)",
                "run preflight on the assembly that exports it too",
            )  # fmt: skip
        if not g.subnet_id:
            return None
        ec2 = self.client("ec2")
        subnets = _aws_call(
            "subnet", "ec2:DescribeSubnets", lambda: ec2.describe_subnets(SubnetIds=[g.subnet_id])
        )["Subnets"]
        (s,) = subnets
        need = g.count * g.interfaces_with_ip
        if int(s["AvailableIpAddressCount"]) < need:
            return Check(
                "subnet",
                "FAIL",
                f"{g.subnet_id} has {s['AvailableIpAddressCount']} free addresses, the nodes take {need}",
                "use a larger subnet (-c subnet_id=...)",
            )
        return Check(
            "subnet",
            "PASS",
            f"{g.subnet_id} in {s['AvailabilityZone']}: {s['AvailableIpAddressCount']} free, {need} needed",
        )

    def placement(self, g: NodeGroup) -> Check | None:
        """Where EC2 will place a reservation's or Capacity Block's instances, reported before launch
        (DescribeCapacityReservationTopology, for the types that support it): information, or a WARN."""
        if not g.reservation_id:
            return None
        from botocore.exceptions import ClientError

        ec2 = self.client("ec2")
        call = getattr(ec2, "describe_capacity_reservation_topology", None)
        if call is None:  # a boto3 older than the API (2025)
            return Check("placement", "WARN", "this boto3 cannot ask DescribeCapacityReservationTopology",
                         "pip install -U boto3")  # fmt: skip
        try:
            answer = call(CapacityReservationIds=[g.reservation_id])
        except ClientError as err:  # information only: any answer but a refusal of the call is a WARN
            code = err.response.get("Error", {}).get("Code", "")
            line = _failure("placement", "ec2:DescribeCapacityReservationTopology", err)
            if isinstance(line, _Denied) and "denied" in line.check.found:
                raise line from None
            return Check("placement", "WARN", f"EC2 reports no topology for {g.reservation_id} ({code})")
        nodes = {tuple(t.get("NetworkNodes", [])) for t in answer.get("CapacityReservations", [])}
        if not nodes or nodes == {()}:
            return Check("placement", "WARN", f"EC2 reports no network nodes for {g.reservation_id} yet")
        shown = "; ".join(" > ".join(n) for n in sorted(nodes))
        return Check("placement", "PASS", f"{g.reservation_id} places its instances under {shown}")

    def route_out(self, g: NodeGroup) -> Check | None:
        """An existing subnet's route out (the node software fetches its scripts, the installer and the
        agent): a default route to a NAT or internet gateway, else a WARN naming what it then needs."""
        if not g.subnet_id:
            return None
        ec2 = self.client("ec2")
        own = _aws_call(
            "route out",
            "ec2:DescribeRouteTables",
            lambda: ec2.describe_route_tables(
                Filters=[{"Name": "association.subnet-id", "Values": [g.subnet_id]}]
            ),
        )["RouteTables"]
        if not own:  # the VPC's main route table
            vpc = _aws_call(
                "route out", "ec2:DescribeSubnets", lambda: ec2.describe_subnets(SubnetIds=[g.subnet_id])
            )["Subnets"][0]["VpcId"]
            own = _aws_call(
                "route out",
                "ec2:DescribeRouteTables",
                lambda: ec2.describe_route_tables(
                    Filters=[
                        {"Name": "vpc-id", "Values": [vpc]},
                        {"Name": "association.main", "Values": ["true"]},
                    ]
                ),
            )["RouteTables"]
        default = [
            r for t in own for r in t.get("Routes", []) if r.get("DestinationCidrBlock") == "0.0.0.0/0"
        ]
        if not default:
            return Check(
                "route out",
                "WARN",
                f"{g.subnet_id} has no default route",
                "the nodes then need VPC endpoints for S3, SSM, EC2 and CloudFormation, and an image with "
                "EFA",
            )
        route = default[0]  # a route table holds one route per destination
        target = next((str(route[k]) for k in ROUTE_TARGETS if route.get(k)), "(no target)")
        if route.get("State") == "blackhole":
            return Check(
                "route out", "WARN",
                f"{g.subnet_id}'s default route to {target} is a blackhole (its target is gone)",
                "point 0.0.0.0/0 at a NAT gateway (or add the VPC endpoints the nodes need)",
            )  # fmt: skip
        if route.get("VpcPeeringConnectionId"):
            return Check(
                "route out", "WARN",
                f"{g.subnet_id}'s default route goes to the peering connection {target}, which carries no "
                "traffic on to the internet (VPC peering guide: no edge-to-edge routing)",
                "route 0.0.0.0/0 to a NAT gateway",
            )  # fmt: skip
        if route.get("InstanceId") or route.get("NetworkInterfaceId"):
            return Check(
                "route out", "PASS",
                f"{g.subnet_id} routes out through {target}, an instance or appliance: it must forward "
                "(a NAT instance with its source/destination check off)",
            )  # fmt: skip
        return Check("route out", "PASS", f"{g.subnet_id} routes out through {target}")

    def lustre(self, fs: LustreAsk) -> Check:
        """The region's PERSISTENT_2 Lustre quotas (storage, file systems) hold the file system beside the
        ones there; one this stack already made counts once."""
        fsx = self.client("fsx")
        pages = _aws_call("lustre", "fsx:DescribeFileSystems",
                          lambda: list(fsx.get_paginator("describe_file_systems").paginate()))  # fmt: skip
        others = [
            f for page in pages for f in page["FileSystems"]
            if f.get("FileSystemType") == "LUSTRE"
            and (f.get("LustreConfiguration") or {}).get("DeploymentType") == "PERSISTENT_2"
            and not _made_by(f, fs.stack, fs.name)
        ]  # fmt: skip
        used = sum(int(f.get("StorageCapacity", 0)) for f in others)
        storage, count = (self._quota("lustre", n, "fsx") for n in (LUSTRE_STORAGE_QUOTA, LUSTRE_COUNT_QUOTA))
        if storage is None or count is None:
            missing = LUSTRE_STORAGE_QUOTA if storage is None else LUSTRE_COUNT_QUOTA
            return Check("lustre", "WARN", f"no FSx quota named '{missing}' in {self.region}",
                         "check FSx for Lustre's quotas in the Service Quotas console")  # fmt: skip
        for quota, have, need in ((storage, used, fs.capacity_gib), (count, len(others), 1)):
            if have + need > quota["Value"]:
                return Check(
                    "lustre", "FAIL",
                    f"'{quota['QuotaName']}' is {quota['Value']:g}; the region has {have}, this file system "
                    f"needs {need} more",
                    f"request {have + need} or more: aws service-quotas request-service-quota-increase "
                    f"--service-code fsx --quota-code {quota['QuotaCode']} --desired-value {have + need}",
                )  # fmt: skip
        return Check("lustre", "PASS", f"'{LUSTRE_STORAGE_QUOTA}' {storage['Value']:g} GiB: {used} GiB in "
                     f"{len(others)} file systems + {fs.capacity_gib} GiB")  # fmt: skip


#: A route's target fields (EC2 API reference, Route), in the order one is named.
ROUTE_TARGETS = (
    "NatGatewayId", "GatewayId", "TransitGatewayId", "InstanceId", "NetworkInterfaceId",
    "VpcPeeringConnectionId", "CarrierGatewayId", "LocalGatewayId", "CoreNetworkArn",
)  # fmt: skip


#: What a rule is run for: once per account and region, once per bootstrap qualifier the stacks use,
#: once per node group of the stacks, or once per FSx file system they make.
ACCOUNT, QUALIFIER, NODE_GROUP, FILE_SYSTEM = (
    "account",
    "bootstrap qualifier",
    "node group",
    "FSx file system",
)


@dataclass(frozen=True)
class Rule:
    """One preflight check, registered once in :data:`RULES` (as cdk-nag registers each rule in its pack):
    its id (the name its lines carry), what it checks, what it runs for, the method that runs it (None
    when the rule does not apply to the group), what it asks AWS and when it fails (docs/deploy.md's
    table is :func:`rules_table`)."""

    id: str
    title: str
    applies_to: str
    check: Callable[..., Check | None]
    asks: str
    fails: str


#: Every check preflight runs, in the order it runs them (``efa-cdk preflight --list-checks``).
RULES = (
    Rule(
        "credentials",
        "the credentials work; the account and region they check",
        ACCOUNT,
        Preflight.identity,
        asks="sts:GetCallerIdentity",
        fails="no credentials, expired, no region",
    ),
    Rule(
        "bootstrap",
        "the CDK bootstrap stack is there and new enough for the templates",
        QUALIFIER,
        Preflight.bootstrap,
        asks=(
            "ssm:GetParameter `/cdk-bootstrap/<qualifier>/version` (the qualifier the templates were "
            "synthesized with; `hnb659fds` by default)"
        ),
        fails="not bootstrapped, or older than the templates' rule",
    ),
    Rule(
        "offered",
        "the subnet's zone offers the instance type",
        NODE_GROUP,
        Preflight.offered,
        asks="ec2:DescribeInstanceTypeOfferings",
        fails=(
            "the type is not offered in the zone (names the zones that offer it); WARN when the zone is "
            "chosen at deploy"
        ),
    ),
    Rule(
        "efa",
        "the type supports EFA with the interfaces and network cards the template asks",
        NODE_GROUP,
        Preflight.efa,
        asks="ec2:DescribeInstanceTypes",
        fails=(
            "EC2 says the type has no EFA, or fewer EFA interfaces or cards than the template asks (the "
            "offline catalogue drifted)"
        ),
    ),
    Rule(
        "quota",
        "the On-Demand vCPU quota of the type's class holds the nodes beside what runs",
        NODE_GROUP,
        Preflight.quota,
        asks="servicequotas:ListServiceQuotas, ec2:DescribeInstances",
        fails="the class's vCPU quota is below what runs plus the cluster (prints the increase request)",
    ),
    Rule(
        "capacity",
        "the reservation or Capacity Block is active, of the type, in the zone, with room",
        NODE_GROUP,
        Preflight.capacity,
        asks="ec2:DescribeCapacityReservations",
        fails=(
            "a reservation or Capacity Block of another type or zone, expired or cancelled, or with fewer "
            "instances than nodes; WARN while a block is scheduled"
        ),
    ),
    Rule(
        "placement",
        "where EC2 will place the reservation's instances, before launch",
        NODE_GROUP,
        Preflight.placement,
        asks="ec2:DescribeCapacityReservationTopology",
        fails=(
            "(information: the network nodes EC2 will place a reservation's instances under, before launch;"
            " WARN where the type or region reports none, or on any answer but a refusal of the call)"
        ),
    ),
    Rule(
        "key pair",
        "the named key pair exists",
        NODE_GROUP,
        Preflight.key_pair,
        asks="ec2:DescribeKeyPairs",
        fails="`-c key_pair` names none",
    ),
    Rule(
        "image",
        "the image is available and current, of the type's architecture, within the root volume",
        NODE_GROUP,
        Preflight.image,
        asks="ssm:GetParameter, ec2:DescribeImages",
        fails=(
            "the image or its SSM parameter does not exist, the image is not `available` (deregistered, "
            "failed), is of another architecture, or its root snapshot is larger than the root volume; WARN "
            "when it is deprecated"
        ),
    ),
    Rule(
        "elastic ips",
        "the Elastic IP quota holds the addresses the nodes get",
        NODE_GROUP,
        Preflight.elastic_ips,
        asks="servicequotas:ListServiceQuotas, ec2:DescribeAddresses",
        fails="the addresses in use plus the stack's are above the quota",
    ),
    Rule(
        "subnet",
        "an existing subnet has a free address for every interface",
        NODE_GROUP,
        Preflight.subnet,
        asks="ec2:DescribeSubnets",
        fails="an existing subnet has fewer free addresses than the nodes' interfaces take",
    ),
    Rule(
        "route out",
        "an existing subnet routes out to a NAT or internet gateway",
        NODE_GROUP,
        Preflight.route_out,
        asks="ec2:DescribeRouteTables",
        fails=(
            "(WARN) an existing subnet has no default route, a blackhole one (its target deleted), or one "
            "to a VPC peering connection (no edge-to-edge routing): the nodes then need VPC endpoints and "
            "an image with EFA. A route to an instance (a NAT instance) passes, with a note that it must "
            "forward"
        ),
    ),
    Rule(
        "lustre",
        "the region's FSx for Lustre (PERSISTENT_2) quotas hold the file system beside the ones there",
        FILE_SYSTEM,
        Preflight.lustre,
        asks="servicequotas:ListServiceQuotas (fsx), fsx:DescribeFileSystems",
        fails=(
            "the PERSISTENT_2 storage in the region plus the file system's is above its quota, or one more "
            "file system is (prints the increase request); its size against the EFA steps is refused at synth"
        ),
    ),
)


def rules_table() -> str:
    """docs/deploy.md's table of the checks (Markdown), from :data:`RULES`."""
    rows = ["| check | what it asks AWS | fails when |", "| --- | --- | --- |"]
    return "\n".join(rows + [f"| {r.id} | {r.asks} | {r.fails} |" for r in RULES])


def rules_text() -> str:
    """The registered checks, one per line (``--list-checks``)."""
    return "\n".join(f"{r.id:<12} {r.applies_to:<20} {r.title}" for r in RULES)


def _past(when: str) -> bool:
    """An EC2 timestamp (ISO 8601, e.g. 2025-07-01T00:00:00.000Z) is before now."""
    from datetime import datetime, timezone

    try:
        return datetime.fromisoformat(when.replace("Z", "+00:00")) < datetime.now(timezone.utc)
    except ValueError:
        return False


# --- the command ----------------------------------------------------------------------------------


#: The largest template preflight reads: far past CloudFormation's own 1 MB (a template in S3), so only
#: something that is no synthesized stack is refused, before it is parsed.
MAX_TEMPLATE_BYTES = 16 * 1024 * 1024


def assembly_region(out: Path, stacks: Iterable[str]) -> str | None:
    """The region the cloud assembly's stacks `stacks` (every one when none is named) were synthesized
    for, when they name one and the same (manifest.json's ``aws://<account>/<region>``); else None."""
    try:
        found = assembly_stacks(out)
    except AssemblyError:
        return None
    wanted = set(stacks)
    regions = {s.environment.rsplit("/", 1)[-1] for name, s in found.items() if not wanted or name in wanted}
    return (
        regions.pop() if len(regions) == 1 and "unknown-region" not in regions and "" not in regions else None
    )


def _session(region: str) -> Any:
    import boto3

    return boto3.session.Session(region_name=region)


def stacks_by_region(out: Path, stacks: Iterable[str], region: str | None) -> dict[str, list[str]]:
    """The stacks grouped by the region each deploys to: the one it was synthesized for (the manifest's
    ``aws://<account>/<region>``), else `region` (--region), else the AWS configuration's; an
    environment-agnostic stack with neither is one line naming --region."""
    found = assembly_stacks(out)
    grouped: dict[str, list[str]] = {}
    fallback: str | None = None
    for name in stacks:
        own = found[name].environment.rsplit("/", 1)[-1] if name in found else ""
        if not own or own == "unknown-region":
            fallback = fallback or session_for(region, out, [name]).region_name
            own = str(fallback)
        grouped.setdefault(own, []).append(name)
    return grouped


def session_for(region: str | None, out: Path, stacks: Iterable[str]) -> Any:
    """A boto3 session in `region` (--region), else the region the stacks were synthesized for (the
    assembly's: where they deploy), else AWS_REGION, else the AWS configuration's (AWS_DEFAULT_REGION, the
    profile); with none, one line naming --region (a client made without a region fails deep in botocore).
    AWS_REGION is read here because botocore does not read it (only AWS_DEFAULT_REGION), while the AWS CLI
    v2 and the CDK CLI do, and the refusals tell users to set it."""
    import boto3

    chosen = region or assembly_region(out, stacks) or os.environ.get("AWS_REGION") or None
    session = boto3.session.Session(region_name=chosen) if chosen else boto3.session.Session()
    if session.region_name:
        return session
    raise PreflightError(
        "no AWS region: none is configured and the stacks are environment-agnostic; "
        "pass --region REGION (or set AWS_REGION)"
    )


def _read_template(path: Path, out: Path) -> dict[str, Any]:
    """One synthesized template of the assembly in `out`, or one line saying why it is none (assembly's
    one reader: a regular file inside the assembly, bounded, any depth)."""
    try:
        template = read_json(path, out, MAX_TEMPLATE_BYTES)
    except FileNotFoundError:
        raise PreflightError(f"{path} is missing: synthesize again") from None
    except AssemblyError as err:
        raise PreflightError(str(err)) from None
    if not isinstance(template, dict) or not isinstance(template.get("Resources", {}), dict):
        raise PreflightError(f"{path} is no CloudFormation template (no Resources object): synthesize again")
    return template


def templates(out: Path, stacks: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The synthesized templates of `stacks` (all of them when none is named) in the cloud assembly, as
    its manifest lists them (a nested stack's template is its parent's asset, no stack to check)."""
    if not out.is_dir():
        raise PreflightError(
            f"no cloud assembly at {out}: synthesize first (npx cdk synth, or scripts/synth)"
        )
    try:
        found = assembly_stacks(out)
    except AssemblyError as err:
        raise PreflightError(str(err)) from None
    names = list(stacks) or sorted(found)
    missing = [n for n in names if n not in found]
    if missing:
        raise PreflightError(
            f"no template for {', '.join(missing)} in {out} (it has {', '.join(sorted(found)) or 'no stack'})"
        )
    return {n: _read_template(found[n].template, out) for n in names}


def template_checks(out: Path, found: Mapping[str, Mapping[str, Any]]) -> list[Check]:
    """Each template (as :func:`templates` read it) against CloudFormation's per-template limits, its
    size the bytes written on disk."""
    from ..core.limits import limit_violations

    checks = []
    files = assembly_stacks(out)
    for name, template in found.items():
        size = files[name].template.stat().st_size
        checks += [
            Check("template", "FAIL", f"{name}: {v.message}", v.fix) for v in limit_violations(template, size)
        ]
    return checks


def _every_template(out: Path, found: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The templates of every stack of the assembly by name (those not asked for too: their outputs),
    each read once; one that cannot be read gives nothing."""
    every: dict[str, Mapping[str, Any]] = dict(found)
    for name, s in assembly_stacks(out).items():
        if name not in found:
            try:
                every[name] = _read_template(s.template, out)
            except (PreflightError, OSError):
                continue
    return every


@dataclass(frozen=True)
class LustreAsk:
    """An FSx for Lustre (PERSISTENT_2) file system a template makes."""

    stack: str
    name: str  # its logical id
    capacity_gib: int
    efa: bool = False


#: FSx's quotas for PERSISTENT_2 Lustre, by the names Service Quotas lists for the service code fsx (its
#: default list records them as L-8F1B9C74, 100,800 GiB, and L-FD6F2F22); looked up by name, so a renamed
#: quota is a WARN naming it, not a wrong answer.
LUSTRE_STORAGE_QUOTA = "Lustre Persistent_2 storage capacity"
LUSTRE_COUNT_QUOTA = "Lustre Persistent_2 file systems"


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


def _groups_of_assembly(
    out: Path, found: Mapping[str, dict[str, Any]]
) -> tuple[list[NodeGroup], list[Check]]:
    """Every node group of the stacks `found` (their launch templates and ParallelCluster queues, with
    subnets followed into the assembly's other stacks), and the notes on what could not be read."""
    exports = assembly_exports(_every_template(out, found))
    groups = [g for name, t in found.items() for g in _node_groups_of(name, t, exports)]
    notes: list[Check] = []
    for name, t in found.items():
        configs, unread = parallelcluster_configs(name, t)
        groups += parallelcluster_groups(name, t, configs, exports)
        notes += unread
    return groups, notes


def _bootstrap_of(found: Mapping[str, Mapping[str, Any]], names: Iterable[str]) -> dict[str, int]:
    """The bootstrap version each qualifier's parameter must hold for the stacks `names`."""
    required: dict[str, int] = {}
    for parameter, version in filter(None, (bootstrap_required(found[n]) for n in names)):
        required[parameter] = max(required.get(parameter, 0), version)
    return required


def _check_assembly(
    stacks: list[str], out: Path, region: str | None, as_json: bool
) -> tuple[list[Check], dict[str, list[str]]]:
    """Every check of the assembly's stacks (each in the region it deploys to), and those regions."""
    found = templates(out, stacks)
    progress = (lambda _: None) if as_json else (lambda m: print(f"... {m}", file=sys.stderr))
    groups, notes = _groups_of_assembly(out, found)
    checks = template_checks(out, found) + notes
    regions = stacks_by_region(out, found, region)
    checks += [
        Check("region", "WARN", f"{n} was synthesized for {r}: checked there, not in --region {region}",
              "synthesize it for the region you mean (env=...), or leave --region out")
        for r, names in regions.items() for n in names if region and r != region
    ]  # fmt: skip
    lustre = [f for name, t in found.items() for f in lustre_file_systems(name, t)]
    for where, names in regions.items():  # each stack is checked in the region it deploys to
        mine = [g for g in groups if g.stack in names]
        fss = [f for f in lustre if f.stack in names]
        checks += Preflight(_session(where), progress).run(mine, _bootstrap_of(found, names), fss)
    return checks, regions


def main(stacks: list[str], out: Path, region: str | None, as_json: bool) -> int:
    try:
        import boto3  # noqa: F401  (installed? the account extra)
    except ModuleNotFoundError:
        print("error: preflight calls AWS with boto3: pip install 'efa-cdk[account]'", file=sys.stderr)
        return Exit.CANNOT_RUN
    try:
        checks, regions = _check_assembly(stacks, out, region, as_json)
    except PreflightError as err:
        print(f"error: preflight: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    except Exception as err:  # botocore's NoCredentialsError and kin, raised before any call
        from botocore.exceptions import BotoCoreError

        if isinstance(err, BotoCoreError):
            print(f"error: preflight: {err} ({hint(err)})", file=sys.stderr)
            return Exit.CANNOT_RUN
        raise
    of_stack = {n: r for r, names in regions.items() for n in names}
    body = {"region": next(iter(regions), None), "regions": of_stack, "checks": [asdict(c) for c in checks]}
    emit(body, lambda: "\n".join(c.line() for c in checks), as_json)
    return Exit.FOUND if any(c.status == "FAIL" for c in checks) else Exit.OK
