"""No import cycle between modules of Strata's packages (issue 11).

import-linter checks the layers between packages; this checks what the layers cannot: a cycle
between modules of one package. Imports inside functions count (an import moved into a function to
hide a cycle is still a cycle), and so does a submodule importing its package's ``__init__`` when
that ``__init__`` imports it back (issue 30).

grimp records ``from pkg import submodule`` as an import of ``pkg.submodule`` only, yet the statement
reads the package's namespace: ``pkg/__init__`` must have run (or be running) first. Those statements
count here as an import of ``pkg`` too, so ``pkg/__init__ -> pkg.a -> pkg`` is a cycle.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _root_packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["root_packages"])


_FROM_IMPORT = re.compile(r"\s*from\s+(\.*)([\w.]*)\s+import\b")


def _named_package(graph: grimp.ImportGraph, importer: str, line: str) -> str | None:
    """The package a ``from X import ...`` line names (relative forms resolved), or None."""
    match = _FROM_IMPORT.match(line)
    if match is None:
        return None
    dots, name = match.groups()
    if not dots:
        return name
    parts = importer.split(".")
    if not graph.find_children(importer):  # a plain module: `.` is its package
        parts = parts[:-1]
    parts = parts[: len(parts) - (len(dots) - 1)]
    return ".".join([*parts, name] if name else parts)


def _imports(graph: grimp.ImportGraph) -> Callable[[str], list[str]]:
    """The modules each module imports: grimp's edges plus the package of a ``from pkg import submodule``."""

    def imported_by(module: str) -> list[str]:
        found = set(graph.find_modules_directly_imported_by(module))
        for imported in list(found):
            for detail in graph.get_import_details(importer=module, imported=imported):
                package = _named_package(graph, module, detail["line_contents"])
                if (
                    package
                    and package != module
                    and imported.startswith(package + ".")
                    and package in graph.modules
                ):
                    found.add(package)
        return sorted(found)

    return imported_by


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    imports = _imports(graph)
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in modules:
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, imports(start))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                child = todo.pop()
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, imports(child)))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(graph: grimp.ImportGraph, component: list[str]) -> str:
    """One concrete loop through the component, with the line of each import."""
    imports = _imports(graph)
    members = set(component)
    start = component[0]
    path = [start]
    seen = {start}
    node = start
    while True:
        nexts = [m for m in imports(node) if m in members]
        closing = start in nexts
        unvisited = [m for m in nexts if m not in seen]
        if closing and (len(path) > 1 or not unvisited):
            path.append(start)
            break
        if not unvisited:
            path.append(nexts[0])
            break
        node = unvisited[0]
        path.append(node)
        seen.add(node)
    steps = []
    for importer, imported in itertools.pairwise(path):
        details = graph.get_import_details(importer=importer, imported=imported) or [
            detail
            for child in graph.find_modules_directly_imported_by(importer)
            for detail in graph.get_import_details(importer=importer, imported=child)
            if _named_package(graph, importer, detail["line_contents"]) == imported
        ]
        where = ", ".join(f"line {d['line_number']}" for d in details) or "?"
        steps.append(f"{importer} -> {imported} ({where})")
    return f"cycle among {component}:\n    " + "\n    ".join(steps)


def test_no_import_cycle_between_modules() -> None:
    graph = grimp.build_graph(*_root_packages(), include_external_packages=False)
    cycles = _cycles(graph)
    assert not cycles, "\n".join(_describe(graph, c) for c in cycles)


def test_a_cycle_through_a_package_init_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pkg/__init__` imports `pkg.engine`, which takes `registry` from `pkg` itself: a cycle."""
    package = tmp_path / "cyclepkg"
    package.mkdir()
    (package / "__init__.py").write_text("from cyclepkg.engine import run\n")
    (package / "registry.py").write_text("TYPES = {}\n")
    (package / "engine.py").write_text("from cyclepkg import registry\n\ndef run():\n    return registry\n")
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text("from .leaf import VALUE\n")
    (package / "sub" / "leaf.py").write_text("from . import other\n\nVALUE = other\n")
    (package / "sub" / "other.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclepkg", include_external_packages=False)
    assert sorted(_cycles(graph)) == [
        ["cyclepkg", "cyclepkg.engine"],
        ["cyclepkg.sub", "cyclepkg.sub.leaf"],
    ]
    assert "cyclepkg.engine -> cyclepkg (line 1)" in _describe(graph, ["cyclepkg", "cyclepkg.engine"])
