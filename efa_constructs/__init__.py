"""efa-cdk: AWS CDK constructs for EC2 clusters wired for Elastic Fabric Adapter (EFA).

Three layers, one folder each:

* :mod:`efa_constructs.core`: the pure core (instance catalogue, layout engine, capacity, node
  software builder, ParallelCluster config model, the checks). Plain Python: importing it never
  loads ``aws_cdk`` (no Node process).
* :mod:`efa_constructs.cdk`: the CDK constructs, which translate the core's decisions into
  CloudFormation. Importing them starts the CDK's Node process.
* ``efa_constructs/node``: the files that run on the nodes (boot steps, ParallelCluster hooks,
  Slurm job templates, the benchmark parser), shipped as package data.

Everything public is importable from here and loads on first use, so ``import efa_constructs`` and
the pure core stay fast (no Node process until a construct is touched). The public names are
declared once, in ``__init__.pyi`` beside this file: ``__all__``, the lazy loading and the types
all follow from it.
"""

import sys as _sys

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)


def _one_line_refusals() -> None:
    """An uncaught refusal is one line in every app that imports the library, not a traceback
    (``core.errors.one_line_or``; ``EFA_CDK_TRACEBACK=1`` keeps the traceback). The hook loads nothing until
    an exception reaches it, so ``import efa_constructs`` stays fast."""
    previous = _sys.excepthook
    if getattr(previous, "efa_cdk", False):
        return

    def hook(kind: type[BaseException], error: BaseException, trace: object) -> None:
        from .core.errors import one_line_or

        one_line_or(previous, kind, error, trace)

    hook.efa_cdk = True  # type: ignore[attr-defined]
    _sys.excepthook = hook  # type: ignore[assignment]


_one_line_refusals()
