"""One way to make the AWS clients the commands use (preflight, status, the live catalogue refresh).

Retries are botocore's own: its ``standard`` retry mode (exponential backoff with jitter, throttling and
transient errors retried, a retry quota; botocore's "Retries" guide), which newer botocore uses by default
and botocore up to the 1.40 line this package accepts did not (its default was ``legacy``). A mode the
user chose (``AWS_RETRY_MODE``, or ``retry_mode`` in the profile) is kept. No command retries by hand.
"""

from __future__ import annotations

import os
from typing import Any

#: The retry mode when the user chose none (botocore's "Retries" guide: legacy, standard, adaptive).
RETRY_MODE = "standard"


def aws_client(session: Any, service: str, region: str | None = None) -> Any:
    """A client of `service` from the boto3 `session`, in `region` (else the session's)."""
    from botocore.config import Config

    profile = getattr(session, "_session", None)  # boto3's botocore session: the profile's own settings
    chosen = os.environ.get("AWS_RETRY_MODE") or (
        profile.get_scoped_config().get("retry_mode") if profile is not None else None
    )
    config = None if chosen else Config(retries={"mode": RETRY_MODE})
    return session.client(service, region_name=region or session.region_name, config=config)


def hint(err: Exception) -> str:
    """What to do about an error botocore raises before AWS answers, by its kind (botocore.exceptions):
    credentials missing, no region, or AWS not reached (the network, the region's name, AWS_ENDPOINT_URL)."""
    from botocore import exceptions as e

    if isinstance(err, (e.NoCredentialsError, e.PartialCredentialsError, e.CredentialRetrievalError)):
        return "set AWS credentials, e.g. AWS_PROFILE"
    if isinstance(err, e.NoRegionError):
        return "set AWS_REGION or pass --region"
    if isinstance(err, (e.EndpointConnectionError, e.ConnectTimeoutError, e.ReadTimeoutError)):
        return "AWS could not be reached: check the network, the region's name and AWS_ENDPOINT_URL"
    return "check the AWS configuration (aws configure list)"
