"""Run in aws-parallelcluster's own venv: validate configurations with ParallelCluster's schema.

Reads a JSON list of configurations on stdin; prints a JSON list: "OK" or the schema's error.
Loading is offline (marshmallow schema); ParallelCluster needs a region set to build it.
"""

import json
import os
import sys

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from pcluster.schemas.cluster_schema import ClusterSchema

results = []
for config in json.load(sys.stdin):
    try:
        ClusterSchema(cluster_name="efa-cdk-test").load(config)
        results.append("OK")
    except Exception as err:  # the schema's ValidationError, or anything it raises on bad input
        results.append(f"{type(err).__name__}: {err}")
print(json.dumps(results))
