"""Mutation testing for this repository: does a small, realistic bug in the code fail a test?

    scripts/mutate                     the recorded mutants (tests/mutants.txt), each against its tests
    scripts/mutate --changed [BASE]    new mutants on the lines changed since BASE (default: main),
                                       Python and bash alike, each against the fast suite
    scripts/mutate --changed main --only efa_constructs/node/boot/health-check.sh \
        --tests "tests/test_monitoring.py"      the same, one file, against the tests that cover it
    scripts/mutate --whole efa_constructs/node/problems.py --tests tests/test_device_health.py
                                       every line of a file or folder, the code no change touched too
    scripts/mutate --whole efa_constructs/core --sample 40 --seed 3    forty of them, drawn
    scripts/mutate --list --changed    print the mutants it would try, run nothing

Each mutant is one textual change to one line of ``efa_constructs/`` (a comparison flipped, a bound
moved by one, ``and`` for ``or``, a numeric sort made textual...) or one of the kinds of bug that
outlived those (KINDS: a row dropped from a table, a default changed, a boundary met from below, one
of two alternatives ignored, a rule applied to the wrong case, a reference taken as a literal). The
file is changed in place, the tests run (``pytest -x -q``, stopping at the first failure), the file is
restored, and the mutant is KILLED (a test failed, or the tests ran ten times longer than unmutated: a
loop that no longer ends, stopped) or SURVIVED (every test passed: a bug the suite cannot see). The
exit code is the number of survivors (capped at 100). A run stopped from outside (kill -9) cannot
restore the file: ``git diff efa_constructs`` after one.

Why our own: mutmut and its peers mutate Python only, and most of the node software is bash; they
also start one test process per mutant with no way to point a mutant at the tests that cover it,
which here means starting aws-cdk-lib's Node process for each of hundreds of mutants. This runner is
a table of operators and a loop; a recorded mutant names its tests.
"""

from __future__ import annotations

import argparse
import random
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

#: The kinds of bug that outlived the operators above (issue 60): each (pattern, replacement, why).
#: "<-1>" moves a number down (a boundary met from below); "<drop>" blanks the line (a row dropped).
#: Shell kinds act on expansions, which are live inside double quotes, so only single quotes hide them.
KINDS = {
    ".py": [
        (r"(?<![\w.])(\d+)(?![\w.])", "<-1>", "a boundary at the rule's own value"),
        (r" (?:or|and) [^:,)\]#]*[^:,)\]#\s]", "", "one of two alternatives ignored"),
        (r"\bin \(([^,()]+), [^()]+\)", r"in (\1,)", "one alternative of a tuple ignored"),
        (r"\.(?:lower|casefold|upper)\(\)", "", "a rule applied to the wrong case"),
        (r", (?:flags=)?re\.(?:I|IGNORECASE)\)", ")", "a rule applied to the wrong case"),
        (r"(\.get\([^,()]+), [^()]+\)", r"\1)", "a default changed"),
        (r"\bisinstance\([^,()]+, dict\)", "False", "a reference taken as a literal"),
        (r"^\s*(?:[\"'(\[{\d-]|\w+=(?!=)).*,\s*$", "<drop>", "a row dropped from a table"),
    ],
    ".sh": [
        (r"(?<![\w.$-])(\d+)(?![\w.])", "<-1>", "a boundary at the rule's own value"),
        (r"\$\{(\w+),,\}", r"${\1}", "a rule applied to the wrong case"),
        (r"\bgrep -i", "grep", "a rule applied to the wrong case"),
        (r"\$\{(\w+):-[^}\s]+\}", r"${\1:-}", "a default changed"),
        (r'"\$(\w+)"', r'"\1"', "a reference taken as a literal"),
        (r"^(\s*[^\s()|#]+)\|[^)]*\)", r"\1)", "one alternative of a case pattern ignored"),
        (r"^\s*[^\s#(][^)]*\)\s.*;;\s*$", "<drop>", "a row dropped from a table (a case arm)"),
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
            out += file_mutants(path, range(int(start), int(start) + int(count or 1)))
    return out


def whole(paths: list[str]) -> list[Mutant]:
    """Operator mutants on every line of each file (or each .py and .sh under each folder): the older
    code a change did not touch, too."""
    files = []
    for given in paths:
        top = ROOT / given
        found = [top] if top.is_file() else sorted(f for f in top.rglob("*") if f.suffix in OPERATORS)
        if not found:
            sys.exit(f"--whole {given}: no .py or .sh file there")
        files += [str(f.relative_to(ROOT)) for f in found]
    return [m for f in files for m in file_mutants(f, range(1, 1 + len((ROOT / f).read_text().splitlines())))]


def file_mutants(path: str, numbers: range) -> list[Mutant]:
    """The mutants of the given lines (1-based) of one file, docstrings left alone."""
    lines = (ROOT / path).read_text().splitlines()
    prose = _docstring_lines(lines) if path.endswith(".py") else set()
    suffix = Path(path).suffix
    return [
        Mutant(path, n, lines[n - 1], new)
        for n in numbers
        if n not in prose
        for new in line_mutants(suffix, lines[n - 1])
    ]


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
    if line.lstrip().startswith("#") or '"""' in line or not line.strip():
        return []
    out: list[str] = []
    operators = [(p, r, "\"'") for p, r in OPERATORS[suffix]]
    operators += [(p, r, "'" if suffix == ".sh" else "\"'") for p, r, _ in KINDS[suffix]]
    code = line[: _comment_start(line, suffix)]  # a trailing comment is prose (an apostrophe in it too)
    for pattern, repl, quotes in operators:
        for m in re.finditer(pattern, code):
            before, after = code[: m.start()], code[m.end() :]
            if any((before.count(q) % 2 and after.count(q) % 2) or m.group(0).count(q) % 2 for q in quotes):
                continue  # between quotes on this line: text, not logic
            new = _apply(line, m, repl)
            if new is not None and new != line and new not in out:
                out.append(new)
    return out


def _comment_start(line: str, suffix: str) -> int:
    """Where the line's trailing comment starts (its length when it has none): the first ``#`` outside
    quotes; in bash only one that starts a word (``$#``, ``${#x}`` are code)."""
    quote = ""
    for i, c in enumerate(line):
        if quote:
            if c == quote and line[i - 1] != "\\":
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "#" and (suffix == ".py" or i == 0 or line[i - 1].isspace()):
            return i
    return len(line)


def _apply(line: str, m: re.Match[str], repl: str) -> str | None:
    """The line with one match replaced; None where the replacement makes no bug (a number below 0)
    or no code (a dropped row whose brackets do not close on its own line)."""
    if repl in ("<+1>", "<-1>"):
        n = int(m.group(1)) + (1 if repl == "<+1>" else -1)
        return None if n < 0 else line[: m.start(1)] + str(n) + line[m.end(1) :]
    if repl == "<drop>":
        arm = line.rstrip().endswith(";;")  # a shell case arm: its pattern's `)` stands alone
        balanced = arm or all(line.count(a) == line.count(b) for a, b in ("()", "[]", "{}"))
        return line[: len(line) - len(line.lstrip())] if balanced else None
    return line[: m.start()] + m.expand(repl) + line[m.end() :]


#: A mutant whose tests run this many times longer than the unmutated ones (a loop that no longer ends)
#: is stopped and counted killed: the suite saw it, as a test that never finishes.
HANG_FACTOR = 10
HANG = -9  # the code pytest() answers for a run it stopped


def pytest(args: list[str], timeout: float | None = None) -> int:
    """pytest's exit code: 0 passed, 1 a test failed, 2 interrupted (a collection error), 5 no test ran;
    HANG when it ran past `timeout` seconds."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args],
            cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        ).returncode  # fmt: skip
    except subprocess.TimeoutExpired:
        return HANG


def run(mutant: Mutant, timeout: float | None = None) -> int:
    """pytest's exit code with the mutant in place: 1 (a test failed), 2 (it broke the import or the
    collection) and HANG count as killed."""
    file = ROOT / mutant.path
    original = file.read_text()
    lines = original.splitlines(keepends=True)
    ending = lines[mutant.line - 1][len(lines[mutant.line - 1].rstrip("\r\n")) :]
    lines[mutant.line - 1] = mutant.new + ending
    file.write_text("".join(lines))
    try:
        code = pytest(list(mutant.tests) or FAST_SUITE, timeout)
        if code == 5:
            sys.exit(f"no test ran for {mutant} (its tests: {' '.join(mutant.tests)}): fix the selection")
        return code
    finally:
        file.write_text(original)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--changed", nargs="?", const="main", metavar="BASE", help="mutate lines changed since BASE"
    )
    parser.add_argument(
        "--whole", nargs="+", metavar="PATH", help="mutate every line of these files or folders"
    )
    parser.add_argument(
        "--sample", type=int, metavar="N", help="run N of the mutants, drawn with --seed (default 0)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the draw for --sample")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--only", metavar="PATH", help="with --changed: mutate this file (or folder) only")
    parser.add_argument(
        "--tests",
        metavar="ARGS",
        help="with --changed: the pytest arguments to run (default: the fast suite)",
    )
    args = parser.parse_args(argv)
    mutants = whole(args.whole) if args.whole else changed(args.changed) if args.changed else recorded()
    if args.only:
        mutants = [m for m in mutants if m.path.startswith(args.only)]
    if args.tests:
        mutants = [Mutant(m.path, m.line, m.old, m.new, tuple(shlex.split(args.tests))) for m in mutants]
    if args.sample is not None and args.sample < len(mutants):
        drawn = random.Random(args.seed).sample(mutants, args.sample)
        mutants = sorted(drawn, key=lambda m: (m.path, m.line))
    if args.list:
        print("\n".join(str(m) for m in mutants))
        return 0
    limits = {}
    for selection in sorted({m.tests for m in mutants}):  # the tests pass before anything is mutated
        start = time.monotonic()
        code = pytest(list(selection) or FAST_SUITE)
        if code != 0:
            sys.exit(f"the unmutated tree fails or selects nothing ({' '.join(selection) or 'fast suite'}: "
                     f"pytest exit {code}); fix that first")  # fmt: skip
        limits[selection] = max(60.0, HANG_FACTOR * (time.monotonic() - start))
    survivors = []
    for i, mutant in enumerate(mutants, 1):
        start = time.monotonic()
        code = run(mutant, limits[mutant.tests])
        verdict = {0: "SURVIVED", HANG: "killed (hung)"}.get(code, "killed  ")
        print(f"[{i}/{len(mutants)}] {verdict} {mutant}  ({time.monotonic() - start:.0f}s)")
        if code == 0:
            survivors.append(mutant)
    print(f"{len(mutants) - len(survivors)} of {len(mutants)} mutants killed")
    return min(len(survivors), 100)


if __name__ == "__main__":
    sys.exit(main())
