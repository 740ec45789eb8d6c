"""Mutation testing for this repository: does a small, realistic bug in the code fail a test?

    scripts/mutate                     the recorded mutants (tests/mutants.txt), each against its tests
    scripts/mutate --changed [BASE]    new mutants on the lines changed since BASE (default: main),
                                       Python and bash alike, each against the fast suite
    scripts/mutate --changed main --only efa_constructs/node/boot/health-check.sh \
        --tests "tests/test_monitoring.py"      the same, one file, against the tests that cover it
    scripts/mutate --list --changed    print the mutants it would try, run nothing

Each mutant is one textual change to one line of ``efa_constructs/`` (a comparison flipped, a bound
moved by one, ``and`` for ``or``, a numeric sort made textual...). The file is changed in place, the
tests run (``pytest -x -q``, stopping at the first failure), the file is restored, and the mutant is
KILLED (a test failed) or SURVIVED (every test passed: a bug the suite cannot see). The exit code is
the number of survivors (capped at 100).

Why our own: mutmut and its peers mutate Python only, and most of the node software is bash; they
also start one test process per mutant with no way to point a mutant at the tests that cover it,
which here means starting aws-cdk-lib's Node process for each of hundreds of mutants. This runner is
a table of operators and a loop; a recorded mutant names its tests.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "tests" / "mutants.txt"
FAST_SUITE = ["tests", "--ignore=tests/e2e", "-p", "no:cacheprovider"]

#: (pattern, replacement) per language: each match on a changed line is one mutant.
OPERATORS = {
    ".py": [
        (r" < ", " <= "), (r" <= ", " < "), (r" > ", " >= "), (r" >= ", " > "),
        (r" == ", " != "), (r" != ", " == "), (r"\band\b", "or"), (r"\bor\b", "and"),
        (r"\bnot ", ""), (r"\bTrue\b", "False"), (r"\bFalse\b", "True"),
        (r"(?<![\w.])(\d+)(?![\w.])", "<+1>"), (r"\bmin\(", "max("), (r"\bmax\(", "min("),
    ],
    ".sh": [
        (r" -eq ", " -ne "), (r" -ne ", " -eq "), (r" -lt ", " -le "), (r" -le ", " -lt "),
        (r" -gt ", " -ge "), (r" -ge ", " -gt "), (r" && ", " || "), (r" \|\| ", " && "),
        (r"(sort [^|)]*-k\d+,\d+)n", r"\1"), (r"\$\(\((.*) - (.*)\)\)", r"$((\2 - \1))"),
        (r"(?<![\w.$-])(\d+)(?![\w.])", "<+1>"), (r"\[ ! ", "[ "),
    ],
}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    """One change to one line, and the tests that should notice it."""

    path: str
    line: int  # 1-based
    old: str
    new: str
    tests: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.old.strip()!r} -> {self.new.strip()!r}"


def recorded() -> list[Mutant]:
    """tests/mutants.txt: blocks of `file`, `- old line`, `+ new line`, `tests: pytest args`."""
    out, block = [], {}
    for raw in [*CATALOGUE.read_text().splitlines(), ""]:
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if block:
                path, old = block["file"], block["-"]
                lines = (ROOT / path).read_text().splitlines()
                found = [i for i, text in enumerate(lines, 1) if text.strip() == old.strip()]
                if len(found) != 1:
                    sys.exit(f"mutants.txt: {path} has {len(found)} lines {old.strip()!r} (want exactly 1)")
                indent = lines[found[0] - 1][: len(lines[found[0] - 1]) - len(lines[found[0] - 1].lstrip())]
                new = indent + block["+"].strip()
                tests = tuple(shlex.split(block["tests"]))
                out.append(Mutant(path, found[0], lines[found[0] - 1], new, tests))
            block = {}
            continue
        key, _, value = raw.partition(" ")
        block[key.rstrip(":")] = value
    return out


def changed(base: str) -> list[Mutant]:
    """Operator mutants on the lines of efa_constructs/ changed since `base` (and not committed)."""
    diff = subprocess.run(
        ["git", "diff", "-U0", base, "--", "efa_constructs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    out, path = [], None
    for text in diff.splitlines():
        if text.startswith("+++ "):
            path = text[6:] if text != "+++ /dev/null" else None
        elif text.startswith("@@") and path and Path(path).suffix in OPERATORS:
            start, _, count = re.search(r"\+(\d+)(?:,(\d+))?", text).group(0)[1:].partition(",")  # type: ignore[union-attr]
            lines = (ROOT / path).read_text().splitlines()
            prose = _docstring_lines(lines) if path.endswith(".py") else set()
            for n in range(int(start), int(start) + int(count or 1)):
                if n in prose:
                    continue
                out += [
                    Mutant(path, n, lines[n - 1], new)
                    for new in line_mutants(Path(path).suffix, lines[n - 1])
                ]
    return out


def _docstring_lines(lines: list[str]) -> set[int]:
    """Line numbers (1-based) inside triple-quoted strings: prose, not logic."""
    inside, out = False, set()
    for n, line in enumerate(lines, 1):
        if inside or '"""' in line:
            out.add(n)
        if line.count('"""') % 2:
            inside = not inside
    return out


def line_mutants(suffix: str, line: str) -> list[str]:
    """Every mutant of one line of a .py or .sh file (none for comments, docstrings, string contents)."""
    if line.lstrip().startswith("#") or '"""' in line:
        return []
    out = []
    for pattern, repl in OPERATORS[suffix]:
        for m in re.finditer(pattern, line):
            before, after = line[: m.start()], line[m.end() :]
            if any(before.count(q) % 2 and after.count(q) % 2 for q in "\"'"):
                continue  # between quotes on this line: text, not logic
            if re.search(r"(^|\s)#", before) and not any(before.count(q) % 2 for q in "\"'"):
                continue  # in a trailing comment
            if repl == "<+1>":
                new = line[: m.start(1)] + str(int(m.group(1)) + 1) + line[m.end(1) :]
            else:
                new = line[: m.start()] + m.expand(repl) + line[m.end() :]
            if new != line:
                out.append(new)
    return out


def pytest(args: list[str]) -> int:
    """pytest's exit code: 0 passed, 1 a test failed, 2 interrupted (a collection error), 5 no test ran."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT, capture_output=True, text=True,
    ).returncode  # fmt: skip


def run(mutant: Mutant) -> bool:
    """True when a test fails with the mutant in place (killed); a mutant that breaks the import or
    the collection (exit 2) counts as killed too."""
    file = ROOT / mutant.path
    original = file.read_text()
    lines = original.splitlines(keepends=True)
    ending = lines[mutant.line - 1][len(lines[mutant.line - 1].rstrip("\r\n")) :]
    lines[mutant.line - 1] = mutant.new + ending
    file.write_text("".join(lines))
    try:
        code = pytest(list(mutant.tests) or FAST_SUITE)
        if code == 5:
            sys.exit(f"no test ran for {mutant} (its tests: {' '.join(mutant.tests)}): fix the selection")
        return code in (1, 2)
    finally:
        file.write_text(original)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--changed", nargs="?", const="main", metavar="BASE", help="mutate lines changed since BASE"
    )
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--only", metavar="PATH", help="with --changed: mutate this file (or folder) only")
    parser.add_argument(
        "--tests",
        metavar="ARGS",
        help="with --changed: the pytest arguments to run (default: the fast suite)",
    )
    args = parser.parse_args(argv)
    mutants = changed(args.changed) if args.changed else recorded()
    if args.only:
        mutants = [m for m in mutants if m.path.startswith(args.only)]
    if args.tests:
        mutants = [Mutant(m.path, m.line, m.old, m.new, tuple(shlex.split(args.tests))) for m in mutants]
    if args.list:
        print("\n".join(str(m) for m in mutants))
        return 0
    for selection in sorted({m.tests for m in mutants}):  # the tests pass before anything is mutated
        code = pytest(list(selection) or FAST_SUITE)
        if code != 0:
            sys.exit(f"the unmutated tree fails or selects nothing ({' '.join(selection) or 'fast suite'}: "
                     f"pytest exit {code}); fix that first")  # fmt: skip
    survivors = []
    for i, mutant in enumerate(mutants, 1):
        start = time.monotonic()
        killed = run(mutant)
        verdict = "killed  " if killed else "SURVIVED"
        print(f"[{i}/{len(mutants)}] {verdict} {mutant}  ({time.monotonic() - start:.0f}s)")
        if not killed:
            survivors.append(mutant)
    print(f"{len(mutants) - len(survivors)} of {len(mutants)} mutants killed")
    return min(len(survivors), 100)


if __name__ == "__main__":
    sys.exit(main())
