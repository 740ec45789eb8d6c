"""The checks of what the nodes launch with and into: key pair, image, addresses, subnet, placement,
route, FSx."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .aws_errors import _aws_call, _Denied, _failure, _unless
from .base import PreflightBase
from .model import (
    EIP_QUOTA,
    LUSTRE_COUNT_QUOTA,
    LUSTRE_STORAGE_QUOTA,
    ROUTE_TARGETS,
    Check,
    LustreAsk,
    NodeGroup,
    _past,
)
from .templates import _made_by


def _tag(resource: Mapping[str, Any], key: str) -> Any:
    """A tag's value on an EC2 answer's resource (its Tags list), or None."""
    return next((t.get("Value") for t in resource.get("Tags") or [] if t.get("Key") == key), None)


class NetworkChecks(PreflightBase):
    """What the nodes launch with and into: key pair, image, Elastic IPs, subnet, placement group, the route
    out, and the FSx for Lustre quotas of a file system the stacks make."""

    def key_pair(self, g: NodeGroup) -> Check | None:
        if not g.key_name:
            return None
        ec2 = self.client("ec2")
        _, missing = _unless(
            "key pair",
            "ec2:DescribeKeyPairs",
            lambda: ec2.describe_key_pairs(KeyNames=[g.key_name]),
            "InvalidKeyPair.NotFound",
        )
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
            "image",
            "ec2:DescribeImages",
            lambda: ec2.describe_images(ImageIds=[image_id]),
            "InvalidAMIID.NotFound",
            "InvalidAMIID.Unavailable",
            "InvalidAMIID.Malformed",
        )
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
                "image",
                "FAIL",
                f"{image_id} is {image['State']}, not available: nothing launches from it",
                "pass an available image (or leave ami_id out for the default image)",
            )
        deprecated = image.get("DeprecationTime")
        if deprecated and _past(deprecated):
            return Check(
                "image",
                "WARN",
                f"{image_id} is deprecated since {deprecated} (it launches, but it is old)",
                "pass a current image (or leave ami_id out for the default image)",
            )
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
        addresses = _aws_call("elastic ips", "ec2:DescribeAddresses", ec2.describe_addresses)["Addresses"]
        # On an update the stack's own addresses are among them: CloudFormation tags what it makes with its
        # stack's name (aws:cloudformation:stack-name), and those are the ones the stack adds, not more.
        own = sum(1 for a in addresses if _tag(a, "aws:cloudformation:stack-name") == g.stack)
        used = len(addresses) - own
        limit = int(found["Value"]) if found else 5  # EC2's default: 5 per region
        kept = f" ({own} of them the stack's own)" if own else ""
        if used + g.elastic_ips > limit:
            return Check(
                "elastic ips",
                "FAIL",
                f"{used} of {limit} Elastic IPs in use by others{kept}, the stack needs {g.elastic_ips}",
                "release unused addresses or request more (quota 'EC2-VPC Elastic IPs')",
            )
        return Check("elastic ips", "PASS", f"{used} of {limit} in use by others{kept} + {g.elastic_ips}")

    def subnet(self, g: NodeGroup) -> Check | None:
        if not g.subnet_id and g.subnet_from:
            return Check(
                "subnet",
                "WARN",
                f"the subnet comes from {g.subnet_from}: not checked (free addresses)",
                "run preflight on the assembly that exports it too",
            )
        if not g.subnet_id:
            return None
        s = self._subnet("subnet", g.subnet_id)
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
            return Check(
                "placement",
                "WARN",
                "this boto3 cannot ask DescribeCapacityReservationTopology",
                "pip install -U boto3",
            )
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
        own = self._route_tables(g.subnet_id)
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
                "route out",
                "WARN",
                f"{g.subnet_id}'s default route to {target} is a blackhole (its target is gone)",
                "point 0.0.0.0/0 at a NAT gateway (or add the VPC endpoints the nodes need)",
            )
        if route.get("VpcPeeringConnectionId"):
            return Check(
                "route out",
                "WARN",
                f"{g.subnet_id}'s default route goes to the peering connection {target}, which carries no "
                "traffic on to the internet (VPC peering guide: no edge-to-edge routing)",
                "route 0.0.0.0/0 to a NAT gateway",
            )
        if str(route.get("GatewayId", "")).startswith("igw-"):
            return self._public_route(g, g.subnet_id, target)
        if route.get("InstanceId") or route.get("NetworkInterfaceId"):
            return Check(
                "route out",
                "PASS",
                f"{g.subnet_id} routes out through {target}, an instance or appliance: it must forward "
                "(a NAT instance with its source/destination check off)",
            )
        return Check("route out", "PASS", f"{g.subnet_id} routes out through {target}")

    def _route_tables(self, subnet_id: str) -> list[dict[str, Any]]:
        """The route tables a subnet uses: its own association, else the VPC's main route table."""
        ec2 = self.client("ec2")
        own = _aws_call(
            "route out",
            "ec2:DescribeRouteTables",
            lambda: ec2.describe_route_tables(
                Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}]
            ),
        )["RouteTables"]
        if own:
            return list(own)
        vpc = self._subnet("route out", subnet_id)["VpcId"]
        main = _aws_call(
            "route out",
            "ec2:DescribeRouteTables",
            lambda: ec2.describe_route_tables(
                Filters=[
                    {"Name": "vpc-id", "Values": [vpc]},
                    {"Name": "association.main", "Values": ["true"]},
                ]
            ),
        )["RouteTables"]
        return list(main)

    def _public_route(self, g: NodeGroup, subnet_id: str, gateway: str) -> Check:
        """A route to an internet gateway reaches the internet only from a public address. EC2 gives a node
        one from the subnet only when it launches with a single network interface at device index 0 (EC2
        user guide, "Assign a public IPv4 address during instance launch"; API reference,
        InstanceNetworkInterfaceSpecification.AssociatePublicIpAddress: one interface only), so a node with
        several needs an Elastic IP each."""
        if g.elastic_ips >= g.count:
            return Check(
                "route out", "PASS", f"{g.subnet_id} routes out through {gateway}, an Elastic IP a node"
            )
        fix = "use a private subnet whose default route goes to a NAT gateway (-c subnet_id=...)"
        if g.interfaces > 1:
            return Check(
                "route out",
                "FAIL",
                f"{g.subnet_id} routes out through the internet gateway {gateway}, but nodes with "
                f"{g.interfaces} network interfaces get no public address from a subnet and the stack gives "
                f"{g.elastic_ips} Elastic IPs for {g.count} nodes: they could not fetch their software",
                fix,
            )
        if g.public_address or self._subnet("route out", subnet_id).get("MapPublicIpOnLaunch"):
            return Check(
                "route out", "PASS", f"{g.subnet_id} routes out through {gateway}, a public address a node"
            )
        return Check(
            "route out",
            "FAIL",
            f"{g.subnet_id} routes out through the internet gateway {gateway}, but it gives no public "
            "address at launch (MapPublicIpOnLaunch false) and the nodes ask for none: they could not fetch "
            "their software",
            fix,
        )

    def lustre(self, fs: LustreAsk) -> Check:
        """The region's PERSISTENT_2 Lustre quotas (storage, file systems) hold the file system beside the
        ones there; one this stack already made counts once."""
        fsx = self.client("fsx")
        pages = _aws_call(
            "lustre",
            "fsx:DescribeFileSystems",
            lambda: list(fsx.get_paginator("describe_file_systems").paginate()),
        )
        others = [
            f
            for page in pages
            for f in page["FileSystems"]
            if f.get("FileSystemType") == "LUSTRE"
            and (f.get("LustreConfiguration") or {}).get("DeploymentType") == "PERSISTENT_2"
            and not _made_by(f, fs.stack, fs.name)
        ]
        used = sum(int(f.get("StorageCapacity", 0)) for f in others)
        storage, count = (self._quota("lustre", n, "fsx") for n in (LUSTRE_STORAGE_QUOTA, LUSTRE_COUNT_QUOTA))
        if storage is None or count is None:
            missing = LUSTRE_STORAGE_QUOTA if storage is None else LUSTRE_COUNT_QUOTA
            return Check(
                "lustre",
                "WARN",
                f"no FSx quota named '{missing}' in {self.region}",
                "check FSx for Lustre's quotas in the Service Quotas console",
            )
        for quota, have, need in ((storage, used, fs.capacity_gib), (count, len(others), 1)):
            if have + need > quota["Value"]:
                return Check(
                    "lustre",
                    "FAIL",
                    f"'{quota['QuotaName']}' is {quota['Value']:g}; the region has {have}, this file system "
                    f"needs {need} more",
                    f"request {have + need} or more: aws service-quotas request-service-quota-increase "
                    f"--service-code fsx --quota-code {quota['QuotaCode']} --desired-value {have + need}",
                )
        return Check(
            "lustre",
            "PASS",
            f"'{LUSTRE_STORAGE_QUOTA}' {storage['Value']:g} GiB: {used} GiB in "
            f"{len(others)} file systems + {fs.capacity_gib} GiB",
        )
