"""The AWS error policy: every AWS error a check meets is one line (AccessDenied names the permission; a
throttle, a region or an endpoint says what to do), never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..aws import hint
from .model import Check, PreflightError


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
