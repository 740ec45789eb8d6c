"""The base of the checks: one boto3 client per service, instance types, subnets and quotas asked once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..aws import aws_client
from .aws_errors import _aws_call


class PreflightBase:
    """What every check reads through: the session, its region, one client per service, the instance
    types, subnets and quotas asked once."""

    def __init__(self, session: Any, progress: Callable[[str], None] = lambda _: None) -> None:
        self.session = session
        self.region: str = session.region_name or ""
        self.progress = progress
        self._clients: dict[str, Any] = {}
        self._types: dict[str, dict[str, Any]] = {}
        self._quotas: dict[str, dict[str, dict[str, Any]]] = {}
        self._subnets: dict[str, dict[str, Any]] = {}

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

    def _type(self, itype: str) -> dict[str, Any]:
        if itype not in self._types:
            ec2 = self.client("ec2")
            answer = _aws_call(
                "efa", "ec2:DescribeInstanceTypes", lambda: ec2.describe_instance_types(InstanceTypes=[itype])
            )
            self._types[itype] = answer["InstanceTypes"][0] if answer["InstanceTypes"] else {}
        return self._types[itype]

    def _subnet(self, check: str, subnet_id: str) -> dict[str, Any]:
        """The subnet as DescribeSubnets answers it (asked once; `check` names the check a refusal fails)."""
        if subnet_id not in self._subnets:
            ec2 = self.client("ec2")
            answer = _aws_call(
                check, "ec2:DescribeSubnets", lambda: ec2.describe_subnets(SubnetIds=[subnet_id])
            )
            (self._subnets[subnet_id],) = answer["Subnets"]
        return self._subnets[subnet_id]
