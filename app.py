#!/usr/bin/env python3
"""The efa-cdk app: ready EFA cluster stacks, parameterised through CDK context.

npx cdk synth Trn1EfaCluster -c node_count=4 -c availability_zone=us-east-1c

A refused configuration prints one line (stack, key, value, why, fix) to stderr and exits 1.
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from efa_constructs.core import EfaConfigError, refusals_in_one_line
from efa_constructs.core.limits import written_violations
from stacks.cluster_stack import READY_CLUSTERS, EfaClusterStack, stack_context
from stacks.parallel_cluster_stack import READY_PCLUSTERS, EfaParallelClusterStack
from stacks.params import (
    CLUSTER,
    CONTEXT_KEY_OF_OPTION,
    PCLUSTER,
    PCS,
    ClusterParams,
    PclusterParams,
    PcsParams,
    check_context_keys,
    plain_key_hint,
)
from stacks.pcs_stack import READY_PCS, EfaPcsClusterStack


def build(app: cdk.App) -> cdk.App:
    """Add every ready stack to `app`; a refusal names the stack it happened in."""
    context = app.node.get_all_context()
    check_context_keys(
        context,
        {
            **dict.fromkeys(READY_CLUSTERS, CLUSTER),
            **dict.fromkeys(READY_PCLUSTERS, PCLUSTER),
            **dict.fromkeys(READY_PCS, PCS),
        },
    )

    def add(name: str, make: Callable[[dict[str, Any]], object]) -> None:
        ctx = stack_context(context, name)
        try:
            make(ctx)
        except EfaConfigError as err:
            plain = {k: v for k, v in context.items() if ":" not in k}
            key = CONTEXT_KEY_OF_OPTION.get(err.what)  # the key the user typed, not the construct's option
            raise err.in_stack(name, fix_suffix=plain_key_hint(plain, err), what=key) from None

    for name, default_type in READY_CLUSTERS.items():

        def cluster(ctx: dict[str, Any], name: str = name, default_type: str = default_type) -> object:
            params = ClusterParams.from_context(ctx, default_instance_type=default_type)
            description = f"efa-cdk {name}: EFA cluster of {params.node_count} x {params.instance_type}"
            return EfaClusterStack(app, name, params=params, description=description)

        add(name, cluster)
    for name, default_type in READY_PCLUSTERS.items():

        def pcluster(ctx: dict[str, Any], name: str = name, default_type: str = default_type) -> object:
            params = PclusterParams.from_context(ctx, default_instance_type=default_type)
            description = f"efa-cdk {name}: ParallelCluster network, storage, config ({params.instance_type})"
            return EfaParallelClusterStack(app, name, params=params, description=description)

        add(name, pcluster)
    for name, default_type in READY_PCS.items():

        def pcs(ctx: dict[str, Any], name: str = name, default_type: str = default_type) -> object:
            params = PcsParams.from_context(ctx, default_instance_type=default_type)
            description = f"efa-cdk {name}: AWS PCS Slurm cluster with EFA nodes ({params.instance_type})"
            return EfaPcsClusterStack(app, name, params=params, description=description)

        add(name, pcs)
    return app


def main(app: cdk.App | None = None) -> int:
    """Synthesize every ready stack; a refused configuration is one line on stderr and exit code 1.

    Default app: ``cdk.App()``, which reads the CLI's context and output directory.
    """
    try:
        with refusals_in_one_line():  # one line, also for a refusal raised during synthesis
            assembly = build(app or cdk.App()).synth()
    except SystemExit as stop:
        return int(stop.code or 0)
    # The construct's check estimates before writing; what CloudFormation takes is what was written.
    refused = [
        f"error: {stack.stack_name}: {v.message} (as written). Fix: {v.fix}"
        for stack in assembly.stacks
        for v in written_violations(Path(stack.template_full_path))
    ]
    for line in refused:
        print(line, file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
