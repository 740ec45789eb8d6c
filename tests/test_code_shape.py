"""The shape issues 42 and 52 hold the package to: no function of complexity over 15 (radon's cyclomatic
complexity, the measure the issue took), no function body over 60 lines, no module over 500 lines, and
at most 10 opt-outs of the formatter (``# fmt: skip``, where a table or a call of many keywords reads
better packed). A function that grows past either is split into named steps, a module into rooms."""

from __future__ import annotations

import ast
from pathlib import Path

from radon.complexity import cc_visit

from tests.helpers import ROOT

SOURCES = sorted([*(ROOT / "efa_constructs").rglob("*.py"), *(ROOT / "stacks").glob("*.py"), ROOT / "app.py"])
MAX_COMPLEXITY, MAX_BODY_LINES, MAX_MODULE_LINES, MAX_FMT_SKIPS = 15, 60, 500, 10


def _name(path: Path, name: str) -> str:
    return f"{path.relative_to(ROOT)}:{name}"


def test_no_function_is_more_complex_than_15() -> None:
    too_complex = [
        f"{_name(path, block.fullname)} ({block.complexity})"
        for path in SOURCES
        for block in cc_visit(path.read_text())
        if block.complexity > MAX_COMPLEXITY
    ]
    assert not too_complex, too_complex


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's end."""
    body = node.body
    docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1
    end = node.end_lineno or node.lineno
    return end - body[1 if docstring else 0].lineno + 1


def test_no_function_body_is_longer_than_60_lines() -> None:
    too_long = [
        f"{_name(path, node.name)} ({_body_lines(node)} lines)"
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _body_lines(node) > MAX_BODY_LINES
    ]
    assert not too_long, too_long


def test_no_module_is_longer_than_500_lines_and_the_formatter_is_rarely_skipped() -> None:
    too_long = [
        f"{p.relative_to(ROOT)} ({n})" for p in SOURCES if (n := len(p.read_text().splitlines())) > 500
    ]
    assert not too_long, too_long
    skips = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in SOURCES
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if line.endswith("# fmt: skip")
    ]
    assert len(skips) <= MAX_FMT_SKIPS, skips


def test_the_node_scripts_are_shipped_and_granted_one_way() -> None:
    """Every orchestrator ships its node scripts through ``_shared.NodeScripts`` (the asset and the read
    of its one object): no other module makes an S3 asset or writes its own read of one."""
    made_elsewhere = [
        _name(path, f"line {node.lineno}")
        for path in SOURCES
        if path.name != "_shared.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in ("Asset", "arn_for_objects")
    ]
    assert not made_elsewhere, made_elsewhere


#: What runs a Debian package's program in a test: helpers' systemd_verify (systemd-analyze), test_pcs's
#: _cloud_init (cloud-init's own code), a skip for a missing program (cloud-init, libfabric's fi_info).
_RUNS_DEBIAN = {"systemd_verify", "_cloud_init", "NO_CLOUD_INIT", "fi_info"}


def test_a_test_that_runs_a_debian_program_is_marked_so_a_selection_installs_it() -> None:
    """scripts/test installs the Debian packages for a selection only when it selects a test marked debian
    (or a one-machine cluster's; issue 60 item 15): every test that runs one of their programs is marked."""
    unmarked = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            decorators = " ".join(ast.unparse(d) for d in node.decorator_list)
            used = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | {
                n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            }
            runs = used & _RUNS_DEBIAN or any(name in decorators for name in _RUNS_DEBIAN)
            if runs and "pytest.mark.debian" not in decorators:
                unmarked.append(_name(path, node.name))
    assert not unmarked, unmarked


def test_collection_names_the_selected_tests_that_need_debian_packages(tmp_path: Path) -> None:
    """What scripts/test asks before it installs them: the selected tests marked debian, and a one-machine
    cluster's; nothing for a selection of neither (and a collection starts no background run)."""
    import os
    import subprocess
    import sys

    def needed(*selection: str) -> list[str]:
        out = tmp_path / "needed"
        subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
             "--debian-needed", str(out), *selection],
            cwd=ROOT, check=True, capture_output=True,
            env={k: v for k, v in os.environ.items() if k != "EFA_CDK_FLOOR"},  # the main run's collection
        )  # fmt: skip
        return out.read_text().splitlines()

    assert needed("tests/test_pcs.py", "-k", "cloud_init_runs or composes") == [
        "tests/test_pcs.py::test_cloud_init_runs_the_pcs_cloud_config_and_the_node_mounts_efs_over_tls"
    ]
    sweep = "test_two_slowed_nodes_are_both_named_and_the_node_between_them_is_cleared"
    assert needed("tests/e2e/test_sweep.py") == [f"tests/e2e/test_sweep.py::{sweep}"]
    assert needed("tests/test_catalogue.py") == []
