"""Command line: ``python -m efa_constructs`` (or ``efa-cdk``).

    python -m efa_constructs layout trn1.32xlarge [--mode legacy] [--efa-count 4] [--output json]
    python -m efa_constructs types [p5 | p5.48xlarge] [--family p5] [--output json]
    python -m efa_constructs catalogue refresh [--live --region us-east-1 ...] [--to FILE] [--output json]
    python -m efa_constructs template-diff [--base main] [--head REV] [--app CMD] [-c key=value] [--strict]
                                           [--output json|markdown]
    python -m efa_constructs pr-review --base main [--head REV] [--post] [--allow-loss] [--comment-file F]
    python -m efa_constructs pr-review --write-workflow [PATH]
    python -m efa_constructs preflight [STACK ...] [--out cdk.out] [--output json]   (needs AWS credentials)
    python -m efa_constructs status STACK [--output json]                           (needs AWS credentials)
    python -m efa_constructs sweep STACK [--output json]                            (needs AWS credentials)

The layout and types commands are pure Python: no CDK, no Node, no AWS.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .core.catalogue import all_instance_types, catalogue_metadata
from .core.errors import EfaConfigError
from .core.layout import LayoutMode, plan_layout
from .tools.commands import Command, add_commands
from .tools.exits import Exit, emit, fail, table

#: What ``efa-cdk --help`` says first (plain text: the module's docstring is written for the API reference).
DESCRIPTION = (
    "efa-cdk: EFA clusters with AWS CDK. Instance layouts and the catalogue (no AWS), template diffs and "
    "the pull-request review, and a deployed cluster's preflight, status and sweep (an AWS account)."
)

#: Where ``pr-review --write-workflow`` writes the workflow (efa_constructs.tools.pr_review's, without
#: importing the diff's modules for every command).
WORKFLOW_PATH = ".github/workflows/efa-cdk-template-diff.yml"


def _layout(args: argparse.Namespace) -> int:
    layout = plan_layout(args.instance_type, args.mode, efa_count=args.efa_count)
    result = {
        "instance_type": layout.instance_type.name,
        "layout": layout.mode.value if layout.mode else "custom",
        "efa_count": layout.efa_count,
        "ip_count": layout.ip_count,
        "efa_line_rate_gbps": layout.efa_bandwidth_gbps,
        "line_rate_set_by": layout.line_rate_source,
        "interfaces": [
            {
                "network_card_index": i.network_card_index,
                "device_index": i.device_index,
                "interface_type": i.interface_type,
            }
            for i in layout.interfaces
        ],
    }
    emit(result, layout.table, args.output == "json")
    return Exit.OK


def _type_row(it: Any) -> dict[str, Any]:
    """One catalogued type as `types --output json` gives it."""
    acc = it.accelerator
    return {
        "instance_type": it.name,
        "network_cards": len(it.network_cards),
        "max_efa_interfaces": it.max_efa_interfaces,
        "efa_line_rate_gbps": it.efa_bandwidth_gbps,
        "line_rate_set_by": it.line_rate_label,
        "rdma_read": it.rdma_read,
        "mpi_slots": it.mpi_slots,
        "accelerator": None if acc.kind.value == "none" else {"count": acc.count, "name": acc.name},
    }


def _types(args: argparse.Namespace) -> int:
    asked = args.name or args.family or ""
    types = all_instance_types()
    if "." in asked:  # a type's name (p5.48xlarge), as a name or as --family: that type
        if asked.lower() not in types:
            raise EfaConfigError(
                "TYPE" if args.name else "--family",
                code="efa-cdk:cli-type-unknown",
                value=asked,
                why="no EFA-capable type of the catalogue has this name",
                fix="efa-cdk types lists them all; efa-cdk types p5 those of a family",
            )
        chosen = [types[asked.lower()]]
    else:
        family = asked.lower()
        chosen = [it for it in types.values() if it.family.startswith(family)]
    if not chosen:
        families = sorted({it.family for it in all_instance_types().values()})
        raise EfaConfigError(
            "--family",
            code="efa-cdk:cli-family-unknown",
            value=asked,
            why="no EFA-capable family starts with it",
            fix=f"use a family or its start, e.g. p6, trn (families: {', '.join(families)})",
        )
    one = "." in asked  # its layout is one command away
    emit(
        [_type_row(it) for it in chosen],
        lambda: (
            _types_text(chosen, bool(asked))
            + (f"\n# its layout: efa-cdk layout {chosen[0].name}" if one else "")
        ),
        args.output == "json",
    )
    return Exit.OK


def _types_text(chosen: list[Any], family: bool) -> str:
    """`types`' table: a header naming the catalogue's source, one row per type."""
    meta = catalogue_metadata()
    of = f"{len(chosen)} of the {meta['type_count']}" if family else f"{meta['type_count']}"
    head = f"{'type':<22} {'cards':>5} {'EFA':>4} {'EFA Gbps':>9} {'set by':>8} {'RDMA':>5} {'slots':>5}"
    lines = [
        f"# {of} EFA-capable types; source: {meta['source']}",
        "# EFA Gbps: the lowest of the EFA cards' peak sum (cards), the instance's network bandwidth "
        "(instance), its spec-table baseline (baseline) and AWS's EFA maximum for the type (efa-max)",
        f"{head}  accelerator",
    ]
    for it in chosen:
        acc = it.accelerator
        accel = "-" if acc.kind.value == "none" else f"{acc.count} x {acc.name}"
        lines.append(
            f"{it.name:<22} {len(it.network_cards):>5} {it.max_efa_interfaces:>4} "
            f"{it.efa_bandwidth_gbps:>9g} {it.line_rate_label:>8} {'yes' if it.rdma_read else 'no':>5} "
            f"{it.mpi_slots:>5}  {accel}"
        )
    return "\n".join(lines)


def _refresh(args: argparse.Namespace) -> int:
    from .core import catalogue
    from .core.catalogue import generate
    from .tools import catalogue_live

    try:
        answer, source = catalogue_live.load_live(args.region) if args.live else generate.load_moto_snapshot()
        doc = generate.build(answer, source)
    except generate.CatalogueGenerationError as err:
        print(f"error: catalogue refresh: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    path = generate.write(doc, Path(args.to) if args.to else None)
    catalogue.all_instance_types.cache_clear()
    emit(
        {"types": doc["type_count"], "path": str(path), "source": source},
        f"wrote {doc['type_count']} EFA-capable types to {path} (source: {source})",
        args.output == "json",
    )
    return Exit.OK


def _diff_report(args: argparse.Namespace) -> Any:
    """The template diff the revision flags ask for (template-diff's and pr-review's), or None when cfn-lint,
    which the diff needs, is missing (said on stderr)."""
    try:
        import cfnlint  # noqa: F401  (CloudFormation's resource schemas: which changes replace)
    except ModuleNotFoundError:
        missing = EfaConfigError(
            "template-diff",
            code="efa-cdk:cli-diff-extra-missing",
            value="cfn-lint not installed",
            why="the diff reads CloudFormation's resource schemas, which ship in cfn-lint",
            fix="pip install 'efa-cdk[diff]' (the project's own scripts/setup --dev installs it)",
        )
        print(f"error: {missing}", file=sys.stderr)
        return None
    from .tools.template_diff import run

    bad = [kv for kv in args.context if "=" not in kv]
    if bad:
        raise EfaConfigError(
            "context",
            code="efa-cdk:cli-context-not-key-value",
            value=bad[0],
            why="not of the form KEY=VALUE",
            fix="pass -c key=value, e.g. -c node_count=4",
        )
    context = dict(kv.split("=", 1) for kv in args.context)
    return run(
        args.base,
        args.head,
        context,
        app=args.app,
        findings=not args.no_findings,
        requirements=args.requirements,
        same_environment=args.same_environment,
    )


def _template_diff(args: argparse.Namespace) -> int:
    report = _diff_report(args)
    if report is None:
        return Exit.CANNOT_RUN
    if args.output == "markdown":
        print(report.markdown(), end="")
    else:
        emit(report.to_json(), report.text, args.output == "json")
    return Exit.STATEFUL_LOSS if report.fails and args.strict else Exit.OK


def _pr_review(args: argparse.Namespace) -> int:
    """`pr-review`: the comment (or, with --write-workflow, the workflow that runs it)."""
    if args.write_workflow:
        return _write_workflow(args)
    from .tools import pr_review

    # where to post is checked before the two synths, not after them
    pull = pr_review.PullRequest.from_environment() if args.post else None
    report = _diff_report(args)
    if report is None:
        return Exit.CANNOT_RUN
    verdict = Path(args.verdict_file) if args.verdict_file else None
    fails, line = pr_review.review(report, Path(args.comment_file), args.allow_loss, pull, verdict)
    print(line)
    return Exit.STATEFUL_LOSS if fails else Exit.OK


def _write_workflow(args: argparse.Namespace) -> Exit:
    """`pr-review --write-workflow [PATH]`: the GitHub Actions workflow, written where asked."""
    from .tools.pr_review import workflow

    path = Path(args.write_workflow)
    if path.exists() and not args.force:
        raise EfaConfigError(
            "--write-workflow",
            code="efa-cdk:pr-review-workflow-exists",
            value=str(path),
            why="a file is there, and writing would replace it",
            fix="pass --force to replace it, or another path",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(workflow())
    print(f"wrote {path}: commit it; pull requests then get the template diff as a comment")
    return Exit.OK


def _print_permissions(args: argparse.Namespace, permissions: dict[str, str]) -> Exit:
    """`--permissions` of a command that calls AWS: each IAM action it needs, and why."""
    text = "\n".join(f"{action:<40} {why}" for action, why in permissions.items())
    emit(permissions, text, args.output == "json")
    return Exit.OK


def _preflight(args: argparse.Namespace) -> int:
    from .tools import preflight

    if args.permissions:
        return _print_permissions(args, preflight.PERMISSIONS)
    if args.list_checks:
        rules = [{"id": r.id, "applies_to": r.applies_to, "title": r.title} for r in preflight.RULES]
        emit(rules, preflight.rules_text, args.output == "json")
        return Exit.OK
    return preflight.main(args.stacks, Path(args.out), args.region, args.output == "json")


def _status(args: argparse.Namespace) -> int:
    from .tools import status

    if args.permissions:
        return _print_permissions(args, status.PERMISSIONS)
    if not args.stack:
        return _usage(args, "status reads one deployed stack: name it (efa-cdk status Trn1EfaCluster)")
    return status.main(args.stack, args.region, args.output == "json", args.pcluster_name)


def _sweep(args: argparse.Namespace) -> int:
    from .tools import sweep

    if args.permissions:
        return _print_permissions(args, sweep.PERMISSIONS)
    if not args.stack:
        return _usage(args, "sweep runs on one deployed stack: name it (efa-cdk sweep Trn1EfaCluster)")
    return sweep.main(args.stack, args.region, args.output == "json")


def _usage(args: argparse.Namespace, message: str) -> Exit:
    """A command line that is wrong: the message, and the usage exit code (as argparse's own errors)."""
    _error(args, message, "usage")
    return Exit.USAGE


def _error(args: argparse.Namespace, message: str, kind: str) -> None:
    """An error of the command line `args` (:func:`fail`, as JSON too under ``--output json``)."""
    fail(message, kind, getattr(args, "output", None) == "json")


def _dashboard(_args: argparse.Namespace) -> int:
    from .core.monitoring import dashboard_body, dashboard_svg

    print(dashboard_svg(dashboard_body("EfaCdk/<stack>/<cluster>", "<region>", "<stack>/<cluster>")), end="")
    return Exit.OK


def _layout_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("instance_type", metavar="TYPE", help="an EFA-capable instance type, e.g. trn1.32xlarge")
    p.add_argument(
        "--mode",
        default=LayoutMode.RECOMMENDED.value,
        choices=[m.value for m in LayoutMode],
        help="recommended (default): AWS's per-type advice; max-bandwidth: an EFA on every card; legacy: "
        "efa on every card, card 0 at device index 0",
    )
    p.add_argument(
        "--efa-count", type=int, default=None, help="how many EFA interfaces (default: the mode's)"
    )


def _types_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "name",
        nargs="?",
        metavar="TYPE_OR_FAMILY",
        help="one type (p5.48xlarge), or the families starting with this (p5, P6, trn), any case",
    )
    p.add_argument("--family", help="only families starting with this, any case, e.g. p5 or P6 or trn")


def _refresh_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--live", action="store_true", help="call DescribeInstanceTypes (needs AWS credentials)")
    p.add_argument(
        "--region",
        action="append",
        default=None,
        help="region(s) to ask with --live (repeatable; default us-east-1, us-west-2)",
    )
    p.add_argument("--to", metavar="FILE", help="write here instead of the packaged catalogue")


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {Exit.STATEFUL_LOSS.value} when a stateful resource is deleted or replaced",
    )


def _review_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--comment-file", default="efa-cdk-template-diff.md", help="where the comment is written")
    p.add_argument(
        "--verdict-file",
        default=None,
        metavar="FILE",
        help="also write the verdict here as JSON (fails, stateful losses, refused changes, widenings)",
    )
    p.add_argument("--post", action="store_true", help="post or update the comment (in GitHub Actions)")
    p.add_argument(
        "--allow-loss",
        action="store_true",
        help="a stateful loss does not fail the check (the workflow: the label efa-cdk:allow-stateful-loss)",
    )
    p.add_argument(
        "--write-workflow",
        nargs="?",
        const=WORKFLOW_PATH,
        metavar="PATH",
        help=f"write the GitHub Actions workflow instead (default {WORKFLOW_PATH})",
    )
    p.add_argument("--force", action="store_true", help="with --write-workflow: replace a file there")


def _preflight_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("stacks", nargs="*", metavar="STACK", help="stacks to check (default: every one in --out)")
    p.add_argument("--out", default="cdk.out", help="the cloud assembly (default: cdk.out)")
    p.add_argument("--list-checks", action="store_true", help="list the checks preflight runs, and stop")


def _status_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("stack", nargs="?", metavar="STACK", help="the deployed stack's name, e.g. Trn1EfaCluster")
    p.add_argument(
        "--pcluster-name", default=None, help="a ParallelCluster stack: the cluster's name in pcluster"
    )


def _stack_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("stack", nargs="?", metavar="STACK", help="the deployed stack's name, e.g. Trn1EfaCluster")


#: The help of a word that groups commands (``catalogue``).
GROUPS = {"catalogue": "manage the instance catalogue"}

#: Every command, in the order ``efa-cdk --help`` lists them.
COMMANDS = (
    Command(
        ("layout",),
        "show the network-interface layout of an instance type",
        _layout,
        _layout_args,
        ("output",),
    ),
    Command(
        ("types",), "list the EFA-capable instance types in the catalogue", _types, _types_args, ("output",)
    ),
    Command(
        ("catalogue", "refresh"),
        "regenerate instance_types.json (offline from moto's snapshot, "
        "or --live through DescribeInstanceTypes)",
        _refresh,
        _refresh_args,
        ("output",),
    ),
    Command(
        ("template-diff",),
        "synthesize two git revisions and diff the templates per stack",
        _template_diff,
        _diff_args,
        ("markdown", "revisions"),
    ),
    Command(
        ("pr-review",),
        "template-diff for a pull request: its comment, posted or updated (fails on a stateful loss)",
        _pr_review,
        _review_args,
        ("revisions",),
    ),
    Command(
        ("preflight",),
        "check the synthesized stacks against the AWS account before cdk deploy (quotas, zones, "
        "capacity, key pair, image, bootstrap)",
        _preflight,
        _preflight_args,
        ("output", "account"),
    ),
    Command(
        ("status",),
        "a deployed cluster from the account: nodes, benchmarks, alarms, changes",
        _status,
        _status_args,
        ("output", "account"),
    ),
    Command(
        ("sweep",),
        "run a deployed cluster's benchmarks and fabric sweep now, and show which node or link is slow",
        _sweep,
        _stack_arg,
        ("output", "account"),
    ),
    Command(("dashboard",), "print an SVG picture of a cluster's dashboard layout (no AWS)", _dashboard),
)


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser, from :data:`COMMANDS` (the docs' tests check the commands they print
    against it)."""
    from .core import __version__

    parser = argparse.ArgumentParser(
        prog="efa-cdk",
        description=DESCRIPTION,
        epilog=table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"efa-cdk {__version__}")
    add_commands(parser, COMMANDS, GROUPS)
    return parser


def _renamed(argv: list[str]) -> list[str]:
    """``catalogue refresh --output FILE`` (before --output text|json was common to every command) is
    taken as ``--to FILE``, with a warning naming the new flag."""
    if argv[:2] != ["catalogue", "refresh"]:
        return argv
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        if word == "--output" and out[i + 1] not in ("text", "json"):
            print(
                f"warning: catalogue refresh --output FILE is now --to FILE (read as --to {out[i + 1]})",
                file=sys.stderr,
            )
            out[i] = "--to"
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = build_parser().parse_args(_renamed(list(sys.argv[1:] if argv is None else argv)))
    if getattr(args, "region", None) is None and getattr(args, "live", False):
        args.region = ["us-east-1", "us-west-2"]
    try:
        return int(args.func(args))
    except EfaConfigError as err:
        _error(args, str(err), err.code)
        return Exit.FOUND
    except BrokenPipeError:  # the reader stopped (`| head`): no traceback (Python docs, signal: SIGPIPE)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.FOUND


if __name__ == "__main__":
    sys.exit(main())
