"""The mutation runner (scripts/mutate): its recorded mutants still name real lines, and its operators
make the bugs they promise (the runner itself is exercised by running it: see CONTRIBUTING)."""

from __future__ import annotations

import pytest

from tests import mutate

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free


def test_every_recorded_mutant_names_one_line_of_the_code_and_its_tests() -> None:
    """A change to a line a mutant names must update tests/mutants.txt (recorded() exits otherwise)."""
    mutants = mutate.recorded()
    assert len(mutants) >= 11
    for m in mutants:
        assert (
            m.old != m.new
            and m.tests
            and (mutate.ROOT / m.path).read_text().splitlines()[m.line - 1] == m.old
        )


def test_operators_make_the_bugs_they_name() -> None:
    sh = mutate.line_mutants(".sh", """  }' | sort -k1,1n -k2,2V) || nodes=\"\"""")
    assert """  }' | sort -k1,1 -k2,2V) || nodes=\"\"""" in sh
    sh = mutate.line_mutants(".sh", '[ "$have" -eq "$want" ] && break')
    assert sh[:2] == ['[ "$have" -ne "$want" ] && break', '[ "$have" -eq "$want" ] || break']
    py = mutate.line_mutants(".py", "    if n is not None and n > limit:")
    assert "    if n is not None and n >= limit:" in py and "    if n is not None or n > limit:" in py
    assert mutate.line_mutants(".py", '    why = "a and b > c"') == []  # text, not logic
    assert mutate.line_mutants(".py", "    # x > 1") == []
    assert "MAX = 1025" in mutate.line_mutants(".py", "MAX = 1024")


def test_prose_is_not_mutated() -> None:
    """Docstrings and trailing comments are text: `or` in a sentence is not logic."""
    lines = ['"""A module.', "", "A str or a list.", '"""', "x = a or b  # one or the other"]
    assert mutate._docstring_lines(lines) == {1, 2, 3, 4}
    expected = ["x = a and b  # one or the other", "x = a  # one or the other"]
    assert mutate.line_mutants(".py", lines[4]) == expected


def test_the_kinds_that_outlived_the_operators_are_made() -> None:
    """Issue 60 named the bugs that lived: a row dropped from a table, a default changed, a boundary
    met from below, one of two alternatives ignored, the wrong case, a reference taken as a literal."""
    assert "    " in mutate.line_mutants(".py", '    "p5.48xlarge": 32,')  # the row is gone
    assert '    "p5.48xlarge": 31,' in mutate.line_mutants(".py", '    "p5.48xlarge": 32,')
    case = mutate.line_mutants(".py", '    if net.lower() in ("ofi", "aws libfabric"):')
    assert '    if net.lower() in ("ofi",):' in case and '    if net in ("ofi", "aws libfabric"):' in case
    assert 'x = env.get("X")' in mutate.line_mutants(".py", 'x = env.get("X", 10)')
    assert "if False and 'Ref' in v:" in mutate.line_mutants(".py", "if isinstance(v, dict) and 'Ref' in v:")
    assert "ok = a" in mutate.line_mutants(".py", "ok = a or b")
    assert mutate.line_mutants(".py", "    foo(bar,") == []  # a dropped half-call is no code
    assert "-1" not in "".join(mutate.line_mutants(".py", "x = 0"))
    sh = mutate.line_mutants(".sh", "    ofi|libfabric) ok=1 ;;")
    assert "    ofi) ok=1 ;;" in sh and "    " in sh
    assert mutate.line_mutants(".sh", '  case "${net,,}" in') == ['  case "${net}" in']
    assert 'm="${LIMIT:-}"' in mutate.line_mutants(".sh", 'm="${LIMIT:-10}"')
    assert '[ "have" -eq 0 ]' in mutate.line_mutants(".sh", '[ "$have" -eq 0 ]')
    assert mutate.line_mutants(".sh", "awk '{ print \"$1\" }' x") == []  # awk's own text


def test_whole_files_are_mutated_line_by_line_docstrings_aside() -> None:
    path = "efa_constructs/node/problems.py"
    mutants = mutate.whole([path])
    lines = (mutate.ROOT / path).read_text().splitlines()
    prose = mutate._docstring_lines(lines)
    assert mutants and all(m.path == path and m.line not in prose for m in mutants)
    assert {m.line for m in mutants} == {
        n for n, text in enumerate(lines, 1) if n not in prose and mutate.line_mutants(".py", text)
    }


def test_a_trailing_comment_is_prose_even_with_an_apostrophe_in_it() -> None:
    """Found mutating a figure in "# EC2's default: 5 per region" (the apostrophe made it look quoted)."""
    line = "    limit = int(found['Value']) if found else 5  # EC2's default: 5 per region"
    made = mutate.line_mutants(".py", line)
    assert made and all(m.endswith("# EC2's default: 5 per region") for m in made), made
    assert mutate.line_mutants(".sh", 'if [ "$#" -gt 2 ]; then  # it\'s 2') == [
        'if [ "$#" -ge 2 ]; then  # it\'s 2',
        'if [ "$#" -gt 3 ]; then  # it\'s 2',
        'if [ "$#" -gt 1 ]; then  # it\'s 2',
    ]
