"""The mutation runner (scripts/mutate): its recorded mutants still name real lines, and its operators
make the bugs they promise (the runner itself is exercised by running it: see CONTRIBUTING)."""

from __future__ import annotations

from tests import mutate


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
    assert mutate.line_mutants(".sh", '[ "$have" -eq "$want" ] && break') == [
        '[ "$have" -ne "$want" ] && break',
        '[ "$have" -eq "$want" ] || break',
    ]
    py = mutate.line_mutants(".py", "    if n is not None and n > limit:")
    assert "    if n is not None and n >= limit:" in py and "    if n is not None or n > limit:" in py
    assert mutate.line_mutants(".py", '    why = "a and b > c"') == []  # text, not logic
    assert mutate.line_mutants(".py", "    # x > 1") == []
    assert "MAX = 1025" in mutate.line_mutants(".py", "MAX = 1024")


def test_prose_is_not_mutated() -> None:
    """Docstrings and trailing comments are text: `or` in a sentence is not logic."""
    lines = ['"""A module.', "", "A str or a list.", '"""', "x = a or b  # one or the other"]
    assert mutate._docstring_lines(lines) == {1, 2, 3, 4}
    assert mutate.line_mutants(".py", lines[4]) == ["x = a and b  # one or the other"]
