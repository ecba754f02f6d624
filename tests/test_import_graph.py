"""The import graph of models/, harness/ and experiments/ has no circle, counting every import
statement (those inside functions too, which lint-imports' layers do not see as circles).

Each module is a node; `import a.b` and `from a import b` are edges to a.b when it is a
module, else to a. A circle is a strongly connected component of two modules or more (or a
module importing itself).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("models", "harness", "experiments")

def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _targets(node: ast.AST, module: str, is_package: bool, known: dict) -> list[str]:
    """The modules of ours that one import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: from the module's own package, one level up per extra dot
        here = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module
                                                               else []))
    else:
        base = node.module or ""
    out = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    return [t for t in out if t in known]


@cache
def import_graph() -> dict[str, set[str]]:
    """module -> the modules of ours it imports anywhere in its file."""
    known = _modules()
    graph = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        graph[module] = {t for node in ast.walk(tree)
                         for t in _targets(node, module, is_package, known)}
    return graph


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components with a circle in them (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _show(components: set[frozenset[str]]) -> str:
    return "\n".join(" <-> ".join(sorted(c)) for c in sorted(components, key=sorted))


def test_finds_a_circle_and_only_that():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert circles(graph) == {frozenset("abc"), frozenset("e")}


def test_sees_imports_inside_functions():
    graph = import_graph()
    # harness.cli imports the suites only inside its commands (so --help stays instant)
    assert "experiments" in set().union(*(graph[m] for m in graph if m.startswith("harness.cli")))
    assert "harness.report.claims" in graph["harness.report.readme"]


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, f"import circles (imports inside functions included):\n{_show(found)}"
