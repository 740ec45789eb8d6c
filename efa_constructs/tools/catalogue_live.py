"""The catalogue's live source: DescribeInstanceTypes in the regions asked, through the commands' one way
of making AWS clients (:mod:`.aws`); the catalogue itself (``core/catalogue/generate.py``) turns the answer
into ``instance_types.json``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.catalogue.generate import CatalogueGenerationError
from .aws import aws_client


def load_live(regions: Iterable[str]) -> tuple[dict[str, dict[str, Any]], str]:
    """EFA-capable types from live DescribeInstanceTypes in each region (needs credentials). An AWS
    error (no credentials, a denied call, an unknown region) is one line naming the region and the fix."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

    except ImportError as exc:
        raise CatalogueGenerationError(
            "live refresh calls EC2 with boto3: pip install 'efa-cdk[refresh]'"
        ) from exc

    regions = list(regions)
    answer: dict[str, dict[str, Any]] = {}
    for region in regions:
        try:
            ec2 = aws_client(boto3.session.Session(), "ec2", region)
            pages = ec2.get_paginator("describe_instance_types").paginate(
                Filters=[{"Name": "network-info.efa-supported", "Values": ["true"]}]
            )
            for page in pages:
                for it in page["InstanceTypes"]:
                    answer.setdefault(it["InstanceType"], it)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise CatalogueGenerationError(
                f"DescribeInstanceTypes in {region} failed: {error.get('Code')}: {error.get('Message')} "
                "(the refresh needs ec2:DescribeInstanceTypes in every region it asks)"
            ) from None
        except BotoCoreError as exc:
            raise CatalogueGenerationError(
                f"DescribeInstanceTypes in {region} failed: {exc} (set AWS credentials, e.g. AWS_PROFILE, "
                "or refresh offline without --live)"
            ) from None
    return answer, f"live DescribeInstanceTypes in {', '.join(regions)}"
