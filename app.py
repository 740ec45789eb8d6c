#!/usr/bin/env python3
"""The efa-cdk app: ready EFA cluster stacks, parameterised through CDK context.

npx cdk synth Trn1EfaCluster -c node_count=4 -c availability_zone=us-east-1c
"""

import aws_cdk as cdk

from stacks.cluster_stack import READY_CLUSTERS, EfaClusterStack, stack_context
from stacks.parallel_cluster_stack import READY_PCLUSTERS, EfaParallelClusterStack
from stacks.params import ClusterParams, PclusterParams


def build(app: cdk.App) -> cdk.App:
    """Add every ready stack to `app`."""
    context = app.node.get_all_context()
    for name, default_type in READY_CLUSTERS.items():
        params = ClusterParams.from_context(stack_context(context, name), default_instance_type=default_type)
        EfaClusterStack(
            app,
            name,
            params=params,
            description=f"efa-cdk {name}: EFA cluster of {params.node_count} x {params.instance_type}",
        )
    for name, default_type in READY_PCLUSTERS.items():
        pparams = PclusterParams.from_context(
            stack_context(context, name), default_instance_type=default_type
        )
        EfaParallelClusterStack(
            app,
            name,
            params=pparams,
            description=f"efa-cdk {name}: ParallelCluster network, storage, config ({pparams.instance_type})",
        )
    return app


if __name__ == "__main__":
    build(cdk.App()).synth()
