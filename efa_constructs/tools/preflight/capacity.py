"""The checks of whether the account can launch the nodes: offered, EFA, quota, capacity."""

from __future__ import annotations

from typing import Any

from .aws_errors import _aws_call
from .base import PreflightBase
from .model import Check, NodeGroup, quota_name


class CapacityChecks(PreflightBase):
    """Can the account launch the nodes: the type offered in the zone, its EFA, the vCPU quota, the capacity
    reservation or Capacity Block."""

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
                "offered",
                "WARN",
                f"the subnet comes from {g.subnet_from}: its zone is not known here; {g.instance_type} is "
                f"offered in {', '.join(zones)}",
                "make sure that subnet is in one of those zones",
            )
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
            return Check(
                "quota",
                "WARN",
                f"no On-Demand quota class known for {g.instance_type}",
                "check its quota in the Service Quotas console",
            )
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
