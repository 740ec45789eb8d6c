"""The package's house rules on who imports whom (CONTRIBUTING.md, "Which module may import which"): no import
circle anywhere (issue 60: five, each a split's back-import, are gone), and the layers one way: the pure core
imports neither the constructs nor the command line; the command line (tools) never the constructs; the node's
files nothing of the package. Every import counts: at the top, in a function (a lazy import is still a
dependency) and under TYPE_CHECKING."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import ROOT

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

PACKAGE = ROOT / "efa_constructs"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from pkg import name``: the submodule when `name` is
    one, else the package)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join([*base, *([node.module] if node.module else [])])
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    graph[module].add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                graph[module] |= {a.name for a in node.names}
        graph[module] = {m for m in graph[module] if m in modules and m != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_circle() -> None:
    assert circles(imports()) == []


def test_the_check_finds_a_circle() -> None:
    """The check can fail: a back-import added to a layer is found."""
    graph = imports()
    graph["efa_constructs.core.pcluster_rules"].add("efa_constructs.core.pcluster")
    assert ["efa_constructs.core.pcluster", "efa_constructs.core.pcluster_rules"] in circles(graph)


def test_the_layers_import_one_way() -> None:
    """core: pure (no constructs, no command line); tools: never the constructs (the command line runs without
    CDK's Node process); node: the nodes' own files, nothing of the package above them."""
    rules = {
        "efa_constructs.core": ("efa_constructs.cdk", "efa_constructs.tools"),
        "efa_constructs.tools": ("efa_constructs.cdk",),
        "efa_constructs.node": ("efa_constructs.core", "efa_constructs.cdk", "efa_constructs.tools"),
    }
    wrong = [
        f"{module} imports {target}"
        for module, targets in imports().items()
        for layer, forbidden in rules.items()
        if module.startswith(layer)
        for target in targets
        if target.startswith(forbidden)
    ]
    assert wrong == []
