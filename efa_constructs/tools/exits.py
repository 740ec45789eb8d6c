"""The exit codes of every ``efa-cdk`` command, in one table (``efa-cdk --help`` prints it), and the one
renderer of a command's result (:func:`emit`: JSON with ``--output json``, else its text) and of its error
(:func:`fail`).

A CI job or a script tells "the command found something" from "the command could not run" from "the
command line is wrong" by these alone; each command returns one of them, never a bare number.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Callable
from typing import Any


class Exit(enum.IntEnum):
    """An ``efa-cdk`` exit code (:data:`MEANING` says what each means)."""

    OK = 0
    FOUND = 1
    USAGE = 2
    STATEFUL_LOSS = 3
    CANNOT_RUN = 4


#: What each exit code means, written once.
MEANING = {
    Exit.OK: "done, and nothing found",
    Exit.FOUND: "the command found a problem (a preflight FAIL) or refused an input (error: ... names the "
    "fix); also when the reader of the output stopped early (| head)",
    Exit.USAGE: "the command line is wrong (an unknown flag, a missing argument)",
    Exit.STATEFUL_LOSS: "template-diff --strict, pr-review: a stateful resource (a node, a file system, an "
    "address) is deleted or replaced, or its nodes are, or a change cannot deploy (its provider refuses it)",
    Exit.CANNOT_RUN: "what the command needs is missing or refused it: its extra (boto3, cfn-lint), AWS "
    "credentials, a cloud assembly, or AWS's answer (denied, throttled, unreachable)",
}


def table() -> str:
    """The table ``efa-cdk --help`` ends with."""
    return "exit codes:\n" + "\n".join(f"  {e.value}  {MEANING[e]}" for e in Exit)


def emit(result: Any, text: str | Callable[[], str], as_json: bool) -> None:
    """A command's result on stdout: `result` as JSON (``--output json``), else `text` (or what it
    renders); every command prints through here, so the two forms never drift apart."""
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(text if isinstance(text, str) else text())


#: The kind of an error (:func:`fail`) that kept a command from running (it exits ``Exit.CANNOT_RUN``).
CANNOT_RUN_KIND = "cannot-run"


def fail(message: str, kind: str, as_json: bool) -> None:
    """A command's error: one line on stderr; with ``--output json`` also a JSON object on stdout, so a
    program that reads the output finds why (``{"error": {"kind": ..., "message": ...}}``)."""
    print(f"error: {message}", file=sys.stderr)
    if as_json:
        emit({"error": {"kind": kind, "message": message}}, "", as_json=True)
