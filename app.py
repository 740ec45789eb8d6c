#!/usr/bin/env python3
"""The efa-cdk app: ready EFA cluster stacks, parameterised through CDK context.

npx cdk synth Trn1EfaCluster -c node_count=4 -c availability_zone=us-east-1c

A refused configuration prints one line (stack, key, value, why, fix) to stderr and exits 1.
"""

import sys
from pathlib import Path

import aws_cdk as cdk

from efa_constructs.core import EfaConfigError, refusals_in_one_line
from efa_constructs.core.limits import written_violations
from stacks.base import ReadyStackBase
from stacks.cluster_stack import EfaClusterStack, stack_context
from stacks.context_keys import CONTEXT_KEY_OF_OPTION, check_context_keys, plain_key_hint, renamed_keys
from stacks.parallel_cluster_stack import EfaParallelClusterStack
from stacks.params import CLUSTER, PARAMS, PCLUSTER, PCS, READY_STACKS
from stacks.pcs_stack import EfaPcsClusterStack

#: The stack class that builds each kind of ready stack (the table is stacks.params.READY_STACKS).
STACKS: dict[str, type[ReadyStackBase]] = {
    CLUSTER: EfaClusterStack,
    PCLUSTER: EfaParallelClusterStack,
    PCS: EfaPcsClusterStack,
}


def build(app: cdk.App) -> cdk.App:
    """Add every ready stack to `app`; a refusal names the stack it happened in."""
    context, renamed = renamed_keys(app.node.get_all_context())
    for warning in renamed:
        print(f"warning: {warning}", file=sys.stderr)
    check_context_keys(context, {r.name: r.kind for r in READY_STACKS})
    for ready in READY_STACKS:
        try:
            params = PARAMS[ready.kind].from_context(
                stack_context(context, ready.name), default_instance_type=ready.default_type
            )
            stack = STACKS[ready.kind]
            stack(app, ready.name, params=params, description=stack.describe(ready.name, params))
        except EfaConfigError as err:
            plain = {k: v for k, v in context.items() if ":" not in k}
            key = CONTEXT_KEY_OF_OPTION.get(err.what)  # the key the user typed, not the construct's option
            hint = plain_key_hint(plain, err)
            if not hint:
                raise err.in_stack(ready.name, what=key) from None
            # A plain key reaches every ready stack, the one the user synthesizes or not (the app cannot
            # know which: cdk synthesizes all, then selects): say so before naming the stack that refused.
            local = err.in_stack(ready.name, fix_suffix=hint, what=key)
            raise EfaConfigError(
                local.what,
                code=err.code,
                value=err.value,
                why=f"a plain -c key reaches every ready stack, and {ready.name} refuses it: {err.why}",
                fix=local.fix,
            ) from None
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
