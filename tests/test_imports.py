"""The shape of engine/ and ui/: no import cycle between their modules (issue 24: type-only imports
included), measures import no method, and every module outside the data model, hierarchy, risk and
release lives in a package named for its concept (issue 17).

Imports are read from the source with `ast` (every `import` / `from ... import`, at module level or
inside a function: a lazy import is a dependency all the same). Those under `if TYPE_CHECKING:` never
run, but a cycle through them is a cycle of the design all the same: the cycle tests count them
(`type_checking=True`). A package's `__init__` counts only where it is imported itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "engine"
UI = ENGINE.parent / "ui"

# The only modules at engine/'s top level (issue 17): the package and `python -m engine`'s entry, the data
# model (records, dataset, and vocab: which vocabulary an item label belongs to, read by every layer),
# the hierarchy, risk (with adversary, the attacker model it is measured under) and release; and memo,
# the engine's one memo, whose store the caller's scope gives (issue 24: read by every layer, risk too).
TOP_LEVEL = frozenset(
    {
        "__init__",
        "__main__",
        "records",
        "dataset",
        "vocab",
        "hierarchy",
        "risk",
        "adversary",
        "release",
        "memo",
    }
)


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_names(tree: ast.AST, module: str, is_package: bool, type_checking: bool = False) -> set[str]:
    """Dotted names this module's code imports (for `from a import b`: `a.b` and `a`); with
    `type_checking`, the imports under `if TYPE_CHECKING:` too."""
    names: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            names.add(source)
            names.update(f"{source}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph(root: Path = ENGINE, *, type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of `root`'s package it imports (itself left out); `type_checking`: the
    imports under `if TYPE_CHECKING:` included."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        tree = ast.parse(path.read_text())
        for imported in _imported_names(tree, name, path.name == "__init__.py", type_checking):
            if imported in modules:
                deps.add(imported)
        deps.discard(name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def test_the_cycle_finder_finds_cycles(tmp_path: Path) -> None:
    pkg = tmp_path / "engine"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from engine.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from engine import a\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engine import d\n"
    )
    (pkg / "d.py").write_text("from . import c\n")
    graph = import_graph(pkg)
    assert graph["engine.d"] == {"engine.c", "engine"}
    assert graph["engine.c"] == set()
    assert cycles(graph) == [["engine.a", "engine.sub.b"]]
    typed = import_graph(pkg, type_checking=True)  # a cycle through a type-only import is one too
    assert typed["engine.c"] == {"engine.d", "engine"}
    assert cycles(typed) == [["engine.a", "engine.sub.b"], ["engine.c", "engine.d"]]


def test_engine_has_no_import_cycle() -> None:
    graph = import_graph(type_checking=True)
    assert len(graph) > 50
    assert cycles(graph) == []


def test_ui_has_no_import_cycle() -> None:
    graph = import_graph(UI, type_checking=True)
    assert len(graph) > 20
    assert cycles(graph) == []


def test_measures_import_no_method() -> None:
    graph = import_graph(type_checking=True)
    measures = [m for m in graph if m.startswith("engine.utility")]
    assert measures
    offending = {m: sorted(d for d in graph[m] if d.startswith("engine.anonymize")) for m in measures}
    assert {m: d for m, d in offending.items() if d} == {}


def top_level_strays(root: Path = ENGINE) -> list[str]:
    """Modules directly in `root` that are not in TOP_LEVEL (each belongs in a concept package)."""
    return sorted(p.stem for p in root.glob("*.py") if p.stem not in TOP_LEVEL)


def test_the_top_level_check_finds_a_stray_module(tmp_path: Path) -> None:
    (tmp_path / "engine" / "labs").mkdir(parents=True)
    for name in ("__init__", "records", "risk", "labs/__init__", "labs/reident", "report"):
        (tmp_path / "engine" / f"{name}.py").write_text("")
    assert top_level_strays(tmp_path / "engine") == ["report"]


def test_engine_top_level_holds_only_the_core() -> None:
    assert (ENGINE / "records.py").is_file()
    assert top_level_strays() == []


# Modules that take a second or more to import and that drawing the sidebar and the Cohort page never
# uses (issue 24: the first load of the sample). Each is imported where it is used, not at module level.
HEAVY = ("scipy.stats", "scipy.spatial", "sklearn", "torch", "plotly.express", "numba")


def _first_load_modules() -> list[str]:
    """The modules app.py and the Cohort page import (their own `import` lines, read with `ast`) and
    the engine modules the first load reaches: the loaders and the study file's modules."""
    root = ENGINE.parent
    names: set[str] = set()
    for script in (root / "app.py", root / "pages" / "cohort.py"):
        imported = _imported_names(ast.parse(script.read_text()), "", False)
        names.update(n for n in imported if n.split(".")[0] in ("engine", "ui"))
    names.update({"engine.io.loaders", "engine.study.package", "engine.utility.phewas"})
    modules = set(_modules(ENGINE)) | set(_modules(UI))
    return sorted(n for n in names if n in modules)


def test_the_first_load_imports_no_heavy_module() -> None:
    import subprocess
    import sys

    wanted = _first_load_modules()
    assert {"ui.sidebar", "ui.cache", "engine.io.loaders", "engine.utility.phewas"} <= set(wanted)
    code = (
        "import importlib, sys\n"
        f"for m in {wanted!r}: importlib.import_module(m)\n"
        f"print(sorted(h for h in {HEAVY!r} if h in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ENGINE.parent, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
