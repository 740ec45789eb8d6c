"""The command line's model: each ``efa-cdk`` command one :class:`Command` row (its words, help, shared flag
sets, own arguments, run), the flag sets commands share declared once (:func:`shared_flags`), and the parser
made from the rows (:func:`add_commands`). efa_constructs/__main__.py holds the rows and the runs; every run
returns a member of the exit table (:mod:`.exits`) and prints through its one renderer.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


def shared_flags() -> dict[str, argparse.ArgumentParser]:
    """The flag sets commands share, each declared once: ``output`` (``--output text|json``, ``--json`` short
    for ``--output json``), ``markdown`` (the same with markdown), ``account`` (the region, ``--permissions``)
    and ``revisions`` (the two revisions and the app that template-diff and pr-review synthesize)."""
    shared = {
        name: argparse.ArgumentParser(add_help=False)
        for name in ("output", "markdown", "account", "revisions")
    }
    for name, forms in (("output", ("text", "json")), ("markdown", ("text", "json", "markdown"))):
        flags = shared[name]
        flags.add_argument(
            "--output", choices=forms, default="text", help=f"{' | '.join(forms)} (default text)"
        )
        flags.add_argument("--json", dest="output", action="store_const", const="json", help="--output json")
    account = shared["account"]
    account.add_argument(
        "--region",
        default=None,
        help="default: each stack's own region in the cloud assembly, else the AWS configuration's",
    )
    account.add_argument(
        "--permissions", action="store_true", help="list the IAM actions the command calls, and stop"
    )
    revisions = shared["revisions"]
    revisions.add_argument("--base", default="HEAD", help="base revision (default: HEAD)")
    revisions.add_argument("--head", default=None, help="head revision (default: the working tree)")
    revisions.add_argument(
        "--app",
        default=None,
        help="the command that synthesizes the app (default: each revision's cdk.json app, else app.py)",
    )
    revisions.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="CDK context for both synths (repeatable)",
    )
    revisions.add_argument(
        "--requirements",
        action="append",
        default=None,
        metavar="FILE",
        help="each revision's own dependency files, relative to the repository (repeatable; default: "
        "requirements.txt, else pyproject.toml, with constraints.txt beside either)",
    )
    revisions.add_argument(
        "--same-environment",
        action="store_true",
        help="synthesize both revisions with this Python instead of each with its own dependencies "
        "(a dependency change then does not show)",
    )
    revisions.add_argument(
        "--no-findings",
        action="store_true",
        help="skip the checks' new findings (cfn-lint on both revisions of each changed stack)",
    )
    return shared


def _no_args(_p: argparse.ArgumentParser) -> None:
    """A command with no arguments of its own."""


@dataclass(frozen=True)
class Command:
    """One efa-cdk command, as ParallelCluster's CLI models each as a class: its words (``catalogue
    refresh``), its help, the shared flag sets it takes (:func:`shared_flags`), its own arguments, and its
    run, which returns a member of the exit table and prints its result through :func:`emit`."""

    words: tuple[str, ...]
    help: str
    run: Callable[[argparse.Namespace], int]
    arguments: Callable[[argparse.ArgumentParser], None] = _no_args
    shares: tuple[str, ...] = ()


def add_commands(
    parser: argparse.ArgumentParser, commands: Sequence[Command], groups: Mapping[str, str]
) -> None:
    """Each command of `commands` as a subcommand of `parser` (a word of `groups` as a subcommand of its
    own, e.g. ``catalogue refresh``), with the flag sets it shares and its own arguments."""
    sub = parser.add_subparsers(dest="command", required=True)
    shared = shared_flags()
    made: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for command in commands:
        where = sub
        if len(command.words) > 1:
            group = command.words[0]
            if group not in made:
                help_ = groups[group]
                made[group] = sub.add_parser(
                    group, help=help_, description=help_[:1].upper() + help_[1:] + "."
                ).add_subparsers(dest="action", required=True)
            where = made[group]
        p = where.add_parser(
            command.words[-1],
            parents=[shared[s] for s in command.shares],
            help=command.help,
            description=command.help[:1].upper() + command.help[1:] + ".",  # what `efa-cdk CMD --help` says
        )
        command.arguments(p)
        p.set_defaults(func=command.run)
