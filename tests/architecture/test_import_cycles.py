"""No import cycle between modules of Strata's packages (issue 11).

import-linter checks the layers between packages; this checks what the layers cannot: a cycle
between modules of one package. Imports inside functions count (an import moved into a function to
hide a cycle is still a cycle), and so does a submodule importing its package's ``__init__`` when
that ``__init__`` imports it back.
"""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def _root_packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["root_packages"])


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
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
        work: list[tuple[str, list[str]]] = [(start, sorted(graph.find_modules_directly_imported_by(start)))]
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
                    work.append((child, sorted(graph.find_modules_directly_imported_by(child))))
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
    members = set(component)
    start = component[0]
    path = [start]
    seen = {start}
    node = start
    while True:
        nexts = sorted(m for m in graph.find_modules_directly_imported_by(node) if m in members)
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
        details = graph.get_import_details(importer=importer, imported=imported)
        where = ", ".join(f"line {d['line_number']}" for d in details) or "?"
        steps.append(f"{importer} -> {imported} ({where})")
    return f"cycle among {component}:\n    " + "\n    ".join(steps)


def test_no_import_cycle_between_modules() -> None:
    graph = grimp.build_graph(*_root_packages(), include_external_packages=False)
    cycles = _cycles(graph)
    assert not cycles, "\n".join(_describe(graph, c) for c in cycles)
