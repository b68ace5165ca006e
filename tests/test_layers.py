"""Layering of ``src/scontrast``: no import cycle, ``preprocess`` below ``tl`` and ``pl``, small files.

The import graph is read from the source (``ast``), not by importing: every ``import`` and
``from ... import`` statement counts, at module level and inside functions, except those under
``if TYPE_CHECKING:`` (they never run).  A name imported from a package (``from scontrast import
x``) is an edge to the package's ``__init__`` *and* to the submodule ``x`` when it is one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "scontrast"
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """Every module of the package, name -> path."""
    return {_module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST):
    """Import statements that can run: skip the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """Absolute module named by ``from <level dots><module> import ...`` inside ``module``."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _from_targets(module: str, is_package: bool, node: ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """Modules a ``from X import a, b`` runs: submodules ``X.a`` by name, and ``X`` itself.

    Inside package ``X`` (``X`` is the importer's own package or an ancestor) ``X`` is already
    initialising, so ``from X import sub`` needs only ``X.sub``; but ``from X import name`` with a
    name defined in (or re-exported by) ``X/__init__`` reads the package root: that edge is kept,
    and it closes a cycle, because ``X/__init__`` imports the importer.
    """
    target = _resolve(module, is_package, node)
    submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
    names_from_root = len(submodules) < len(node.names)
    inside = module == target or module.startswith(target + ".")
    if inside and not names_from_root:
        return submodules
    return [target] + submodules


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Edges module -> internal modules it imports (shape: {name: {name, ...}})."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _import_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                targets = _from_targets(name, is_package, node, modules)
            for target in targets:
                # "import a.b.c" also runs a and a.b: the longest internal prefix is the edge
                # that matters for cycles through submodules; parents are package inits.
                if target in modules:
                    edges.add(target)
        edges.discard(name)
        graph[name] = edges
    return graph


def _parent_edges(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Importing ``a.b.c`` first runs ``a/__init__`` and ``a/b/__init__``: add those edges,
    except into a package that contains the importer (Python has it already initialising)."""
    full = {k: set(v) for k, v in graph.items()}
    for name, edges in graph.items():
        for target in edges:
            parts = target.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent in graph and not (name == parent or name.startswith(parent + ".")):
                    full[name].add(parent)
    return full


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(components)


def test_graph_reader_finds_a_cycle(tmp_path):
    """The reader resolves relative and function-level imports and reports planted cycles,
    including a submodule reading a name back from its package root."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .a import f\nfrom .e import g\n")
    (pkg / "e.py").write_text("from . import f\n\ng = f\n")
    (pkg / "a.py").write_text("def f():\n    from . import b\n    return b\n")
    (pkg / "b.py").write_text("from .a import f\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n")
    global SRC
    saved = SRC
    try:
        SRC = tmp_path
        modules = {_module_name(p): p for p in sorted(pkg.rglob("*.py"))}
        graph = _parent_edges(import_graph(modules))
    finally:
        SRC = saved
    assert graph["pkg.c"] == set()
    assert graph["pkg.a"] == {"pkg.b"}  # a submodule by name: no edge to the package root
    assert find_cycles(graph) == [["pkg", "pkg.e"], ["pkg.a", "pkg.b"]]


def test_no_import_cycle():
    graph = _parent_edges(import_graph(_modules()))
    cycles = find_cycles(graph)
    assert not cycles, "import cycles in src/scontrast:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("lower", ["scontrast.preprocess", "scontrast.core", "scontrast.io"])
def test_lower_layers_import_no_tl_or_pl(lower):
    """``preprocess``, ``core`` and ``io`` sit below the tools and plots."""
    modules = _modules()
    graph = _parent_edges(import_graph(modules))
    own = {m for m in modules if m == lower or m.startswith(lower + ".")}
    bad = sorted(f"{m} -> {t}" for m in own for t in graph[m] if t.startswith(("scontrast.tl", "scontrast.pl")))
    assert not bad, "lower layer imports tl/pl:\n" + "\n".join(bad)


def test_no_source_file_over_600_lines():
    long = sorted(
        f"{p.relative_to(SRC)}: {n}" for p in (SRC / PACKAGE).rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES
    )
    assert not long, f"source files over {MAX_LINES} lines:\n" + "\n".join(long)


#: the estimator packages: each stands on the shared modules (core, bounds, design, _matching...), none on another
METHODS = ("sparda", "cpca", "pcpca", "quadro", "latent_features", "fangs")


def test_no_method_package_imports_another():
    """Code two methods share (e.g. the maximum-overlap matching of latent_features and fangs,
    ``scontrast._matching``) lives in a module both import, not in either package."""
    graph = import_graph(_modules())
    bad = sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        for t in targets
        if len(m.split(".")) > 1
        and len(t.split(".")) > 1
        and m.split(".")[1] in METHODS
        and t.split(".")[1] in METHODS
        and m.split(".")[1] != t.split(".")[1]
    )
    assert not bad, "a method package imports another:\n" + "\n".join(bad)


def test_a_write_outside_the_workflow_never_reads_the_run_files(tmp_path, monkeypatch):
    """The run check is the workflow's policy: core calls it only under a run's token."""
    from scontrast import _runs, core

    calls = []
    monkeypatch.setattr(core, "check_current_run", lambda: calls.append(1))
    monkeypatch.delenv(_runs.RUN_TOKEN_ENV, raising=False)
    tmp = tmp_path / "a.tmp"
    tmp.write_text("x")
    core.move_into_place(tmp, tmp_path / "a")
    assert calls == [] and (tmp_path / "a").read_text() == "x"
    monkeypatch.setenv(_runs.RUN_TOKEN_ENV, "token")
    tmp.write_text("y")
    core.move_into_place(tmp, tmp_path / "a")
    assert calls == [1] and (tmp_path / "a").read_text() == "y"


def test_core_imports_nothing_of_scontrast_but_the_run_check():
    assert import_graph(_modules())["scontrast.core"] == {"scontrast._runs"}
