"""The checks run in the register's order (:class:`Preflight`), and the account-wide ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .aws_errors import _aws_call, _Denied, _unless
from .capacity import CapacityChecks
from .model import (
    ACCOUNT,
    BOOTSTRAP_VERSION_PARAMETER,
    FILE_SYSTEM,
    NODE_GROUP,
    QUALIFIER,
    Check,
    LustreAsk,
    NodeGroup,
    PreflightError,
)
from .network import NetworkChecks


class Preflight(CapacityChecks, NetworkChecks):
    """The checks of some node groups against one account and region (a boto3 session), run in the order
    of :data:`register.RULES`."""

    def run(
        self, groups: list[NodeGroup], bootstrap: Mapping[str, int], file_systems: Sequence[LustreAsk] = ()
    ) -> list[Check]:
        """Every check: `bootstrap` is the version each bootstrap parameter must hold (one per qualifier);
        `file_systems`, the FSx for Lustre file systems the stacks make."""
        from . import register  # the register names these methods: read at run time

        found: list[Check | None] = []
        for rule in register.RULES:
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
        from . import register

        found: list[Check | None] = []
        for where, item in items:
            for rule in (r for r in register.RULES if r.applies_to == kind):
                self.progress(f"checking {rule.id} of {where}")
                found.append(self._guard(f"{rule.id} [{where}]", lambda r=rule, i=item: r.check(self, i)))  # type: ignore[misc]
        return found

    def _guard(self, name: str, check: Callable[[], Check | None]) -> Check | None:
        try:
            found = check()
        except _Denied as denied:
            return Check(name, denied.check.status, denied.check.found, denied.check.fix)
        return None if found is None else Check(name, found.status, found.found, found.fix)

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
            "bootstrap",
            "ssm:GetParameter",
            lambda: ssm.get_parameter(Name=parameter),
            "ParameterNotFound",
        )
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
