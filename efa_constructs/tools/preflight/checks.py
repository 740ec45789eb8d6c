"""The checks run in the register's order (:class:`Preflight`), and the account-wide ones."""

from __future__ import annotations

from collections.abc import Callable

from .aws_errors import _aws_call, _Denied, _unless
from .capacity import CapacityChecks
from .model import (
    BOOTSTRAP_VERSION_PARAMETER,
    Check,
    PreflightError,
)
from .network import NetworkChecks


class Preflight(CapacityChecks, NetworkChecks):
    """The checks of some node groups against one account and region (a boto3 session). register.py names
    them and runs them in its order (:func:`register.run`): this module knows nothing of the register."""

    def guard(self, name: str, check: Callable[[], Check | None]) -> Check | None:
        """One check's answer under `name`; a refusal of its AWS call is the check's own line."""
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
