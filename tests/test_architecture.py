"""The architecture's import rules in one place (issue 38, finding 6: "checked by one test, not twenty
parsers"). Every source file is parsed once (`tree`); each rule in RULES reads the imports found there and
names what breaks it, and `test_the_rule_holds` runs each rule as a case of its own.

The rules: no import cycle in engine/ or in ui/ (issue 24: type-only imports included); measures import no
method; engine/'s top level holds only the core (issue 17); engine/ never imports Streamlit, ui/ or
pages/; every progress parameter of the engine is the one protocol (issue 24); engine/ keeps no memo at
module level but those `engine.memo.PROCESS_WIDE` lists (issue 24); no module of the app imports
`streamlit.runtime` (issue 38, finding 4); and, in a fresh process, the first load imports no heavy module
(issue 24). tests/test_setup_split.py and tests/test_packaging.py
read the same walk (`top_level_imports`) for the distributions the code imports.

Imports are read from the source with `ast` (every `import` / `from ... import`, at module level or
inside a function: a lazy import is a dependency all the same). Those under `if TYPE_CHECKING:` never
run, but a cycle through them is a cycle of the design all the same: the cycle rules count them
(`type_checking=True`). A package's `__init__` counts only where it is imported itself.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "engine"
UI = ROOT / "ui"
# the code the app and the engine run: what the distribution must declare and may not take from the tools
APP_SOURCES = (
    ROOT / "app.py",
    ROOT / "serve.py",
    *(p for d in ("engine", "ui", "pages") for p in sorted((ROOT / d).rglob("*.py"))),
)

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
# engine/ is plain Python (README, docs/architecture.md): the app's layers are never its imports
NOT_IN_ENGINE = ("streamlit", "ui", "pages")


@cache
def tree(path: Path) -> ast.Module:
    """A source file, parsed once for every rule that reads it."""
    return ast.parse(path.read_text(), str(path))


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


def _imports_of(root: Path, type_checking: bool) -> dict[str, tuple[Path, set[str]]]:
    """Module of `root`'s package -> its file and the dotted names it imports."""
    return {
        name: (path, _imported_names(tree(path), name, path.name == "__init__.py", type_checking))
        for name, path in _modules(root).items()
    }


def import_graph(root: Path = ENGINE, *, type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of `root`'s package it imports (itself left out); `type_checking`: the
    imports under `if TYPE_CHECKING:` included."""
    imports = _imports_of(root, type_checking)
    return {name: {i for i in imported if i in imports} - {name} for name, (_, imported) in imports.items()}


def top_level_imports(paths: Iterable[Path] = APP_SOURCES) -> dict[str, Path]:
    """Every top-level module these files import absolutely, with the first file importing it."""
    found: dict[str, Path] = {}
    for path in paths:
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], path)
    return found


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


def top_level_strays(root: Path = ENGINE) -> list[str]:
    """Modules directly in `root` that are not in TOP_LEVEL (each belongs in a concept package)."""
    return sorted(p.stem for p in root.glob("*.py") if p.stem not in TOP_LEVEL)


def engine_imports_of_the_app(root: Path = ENGINE) -> list[str]:
    """`module imports name` for every import of NOT_IN_ENGINE by `root`'s modules (type-only ones too)."""
    return sorted(
        f"{name} imports {imported}"
        for name, (_, names) in _imports_of(root, type_checking=True).items()
        for imported in names
        if imported.split(".")[0] in NOT_IN_ENGINE
    )


def progress_parameters_off_the_protocol(root: Path = ENGINE) -> list[str]:
    """Issue 24: five progress signatures were found; every engine function that takes a progress
    callback annotates it `Progress | None` (`engine.io.progress.Progress`), and none takes an
    `on_progress`."""
    wrong = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(tree(path)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                where = f"{path.relative_to(root.parent)}:{node.lineno} {node.name}({a.arg})"
                if a.arg == "on_progress":
                    wrong.append(f"{where}: a second progress callback")
                elif a.arg == "progress" and a.annotation is not None:
                    text = ast.unparse(a.annotation).replace(" ", "")
                    if text not in {"Progress|None", "Progress"}:
                        wrong.append(f"{where}: annotated {ast.unparse(a.annotation)}")
    return wrong


# --------------------------------------------------- no other engine memo than engine.memo (issue 24)
_MAPPINGS = {"dict", "OrderedDict", "defaultdict", "Counter", "WeakKeyDictionary", "WeakValueDictionary"}
_WRITES = {"pop", "popitem", "setdefault", "update", "clear", "__setitem__", "__delitem__"}


def _module_mappings(tree: ast.Module) -> set[str]:
    """The module-level names bound to a dict (a literal, a comprehension or a mapping's constructor)."""
    names: set[str] = set()
    for node in tree.body:
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        is_mapping = isinstance(value, ast.Dict | ast.DictComp) or (
            isinstance(value, ast.Call)
            and (getattr(value.func, "id", None) or getattr(value.func, "attr", None)) in _MAPPINGS
        )
        if is_mapping:
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _written(tree: ast.Module, names: set[str]) -> set[str]:
    """Those of `names` the module writes after import (item assigned or deleted, a mutating method)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            target = node.value
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _WRITES
        ):
            target = node.func.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in names:
            out.add(target.id)
    return out


def _cached_functions(tree: ast.Module) -> set[str]:
    """The module-level functions decorated with `lru_cache` or `cache` (functools)."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if (getattr(target, "id", None) or getattr(target, "attr", None)) in ("lru_cache", "cache"):
                    out.add(node.name)
    return out


def module_memos(tree: ast.Module) -> set[str]:
    """A module's memos: module-level dicts it writes after import, and `lru_cache` / `cache` functions."""
    return _written(tree, _module_mappings(tree)) | _cached_functions(tree)


def _engine_memos_not_listed() -> list[str]:
    from engine.memo import PROCESS_WIDE

    return [
        f"{rel}: {name}, not in engine.memo.PROCESS_WIDE"
        for path in sorted(ENGINE.rglob("*.py"))
        for rel in [path.relative_to(ROOT).as_posix()]
        for name in sorted(module_memos(tree(path)))
        if (rel, name) not in PROCESS_WIDE
    ]


def _listed_memos_not_there() -> list[str]:
    """The list of exceptions names only what is there (a stale entry would hide a new memo)."""
    from engine.memo import PROCESS_WIDE

    return [
        f"{rel}: {name}"
        for (rel, name), why in PROCESS_WIDE.items()
        if not why or name not in module_memos(tree(ROOT / rel))
    ]


def _no_cycle(root: Path, least: int) -> list[str]:
    graph = import_graph(root, type_checking=True)
    assert len(graph) > least, f"only {len(graph)} modules found in {root}"
    return [" <-> ".join(c) for c in cycles(graph)]


def _measures_import_no_method() -> list[str]:
    graph = import_graph(type_checking=True)
    measures = [m for m in graph if m.startswith("engine.utility")]
    assert measures
    return sorted(f"{m} imports {d}" for m in measures for d in graph[m] if d.startswith("engine.anonymize"))


def _top_level_holds_only_the_core() -> list[str]:
    assert (ENGINE / "records.py").is_file()
    return top_level_strays()


# no module forks (issue 38, finding 4: long work runs in `engine.scale.pool`, whose workers come from a
# fork server started from a clean interpreter, never from a fork of the multi-threaded server)
FORKING: frozenset[str] = frozenset()


def fork_calls(roots: Iterable[Path] = (ENGINE, UI)) -> list[str]:
    """`file:line` of every call of `os.fork` (or `fork` imported from os) under `roots`."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(tree(path)):
                named = (isinstance(node, ast.Attribute) and node.attr in ("fork", "forkpty")) or (
                    isinstance(node, ast.ImportFrom)
                    and node.module == "os"
                    and any(a.name in ("fork", "forkpty") for a in node.names)
                )
                if named:
                    found.append(f"{path.relative_to(root.parent).as_posix()}:{node.lineno}")
    return found


def _nothing_forks() -> list[str]:
    return [where for where in fork_calls() if where.split(":")[0] not in FORKING]


# issue 38, finding 4: the app reaches Streamlit through its public API only (no import left)
RUNTIME_IMPORTERS: frozenset[tuple[str, str]] = frozenset()


def streamlit_runtime_imports(paths: Iterable[Path] = APP_SOURCES, root: Path = ROOT) -> list[str]:
    """`file:line function imports name` of every import of `streamlit.runtime` (or of `runtime` from
    streamlit) in `paths`, with the function it is in (`<module>` at module level)."""
    found = []

    def visit(node: ast.AST, rel: str, function: str) -> None:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            names = []
        hits = [n for n in names if n == "streamlit.runtime" or n.startswith("streamlit.runtime.")]
        if hits:
            found.append(f"{rel}:{node.lineno} {function} imports {hits[0]}")
        named = node.name if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else function
        for child in ast.iter_child_nodes(node):
            visit(child, rel, named)

    for path in paths:
        visit(tree(path), path.relative_to(root).as_posix(), "<module>")
    return found


def _only_public_streamlit() -> list[str]:
    return [
        where
        for where in streamlit_runtime_imports()
        if (where.split(":")[0], where.split(" ")[1]) not in RUNTIME_IMPORTERS
    ]


RULES: dict[str, Callable[[], list[str]]] = {
    "engine has no import cycle": lambda: _no_cycle(ENGINE, 50),
    "ui has no import cycle": lambda: _no_cycle(UI, 20),
    "measures import no method": _measures_import_no_method,
    "engine's top level holds only the core": _top_level_holds_only_the_core,
    "engine imports no streamlit, ui or pages": engine_imports_of_the_app,
    "every progress parameter of the engine is the one protocol": progress_parameters_off_the_protocol,
    "engine keeps no memo at module level but engine.memo.PROCESS_WIDE's": _engine_memos_not_listed,
    "every entry of engine.memo.PROCESS_WIDE is a memo there": _listed_memos_not_there,
    "no module calls os.fork": _nothing_forks,
    "no module of the app imports streamlit.runtime": _only_public_streamlit,
}


@pytest.mark.parametrize("rule", RULES)
def test_the_rule_holds(rule: str) -> None:
    assert RULES[rule]() == []


# ----------------------------------------------------------------- each finder finds what it looks for
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


def test_the_top_level_check_finds_a_stray_module(tmp_path: Path) -> None:
    (tmp_path / "engine" / "labs").mkdir(parents=True)
    for name in ("__init__", "records", "risk", "labs/__init__", "labs/reident", "report"):
        (tmp_path / "engine" / f"{name}.py").write_text("")
    assert top_level_strays(tmp_path / "engine") == ["report"]


def test_an_engine_import_of_streamlit_ui_or_pages_is_named(tmp_path: Path) -> None:
    pkg = tmp_path / "engine"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import numpy as np\nfrom engine import risk\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "lazy.py").write_text("def f():\n    import streamlit.runtime as r\n")
    (pkg / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ui.context import Context\n"
    )
    (pkg / "page.py").write_text("from pages import cohort\nimport uikit\n")
    assert engine_imports_of_the_app(pkg) == [
        "engine.page imports pages",
        "engine.page imports pages.cohort",
        "engine.sub.lazy imports streamlit.runtime",
        "engine.typed imports ui.context",
        "engine.typed imports ui.context.Context",
    ]


def test_a_progress_parameter_off_the_protocol_is_named(tmp_path: Path) -> None:
    pkg = tmp_path / "engine"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "def good(x, progress: Progress | None = None): ...\n"
        "def bad(x, progress: Callable[[int, int], None]): ...\n"
        "def other(x, *, on_progress=None): ...\n"
    )
    assert progress_parameters_off_the_protocol(pkg) == [
        "engine/m.py:2 bad(progress): annotated Callable[[int, int], None]",
        "engine/m.py:3 other(on_progress): a second progress callback",
    ]


def test_a_fork_call_is_named(tmp_path: Path) -> None:
    pkg = tmp_path / "engine"
    pkg.mkdir()
    (pkg / "a.py").write_text("import os\n\ndef f():\n    return os.fork()\n")
    (pkg / "b.py").write_text("from os import fork\n")
    (pkg / "c.py").write_text("import os\nos.getpid()\n")
    assert fork_calls([pkg]) == ["engine/a.py:4", "engine/b.py:1"]


def test_an_import_of_streamlit_runtime_is_named(tmp_path: Path) -> None:
    (tmp_path / "ui").mkdir()
    (tmp_path / "ui" / "a.py").write_text(
        "import streamlit as st\nfrom streamlit import runtime\n\n"
        "def f():\n    from streamlit.runtime.scriptrunner import get_script_run_ctx\n"
    )
    (tmp_path / "ui" / "b.py").write_text("import streamlit.runtime.caching\nimport streamlit.runtimes\n")
    paths = sorted((tmp_path / "ui").glob("*.py"))
    assert streamlit_runtime_imports(paths, tmp_path) == [
        "ui/a.py:2 <module> imports streamlit.runtime",
        "ui/a.py:5 f imports streamlit.runtime.scriptrunner",
        "ui/b.py:1 <module> imports streamlit.runtime.caching",
    ]


def test_the_static_check_finds_a_memo() -> None:
    found = ast.parse(
        "_M = {}\n_C: dict = dict()\nTABLE = {'a': 1}\n"
        "def f(k):\n    _M[k] = 1\n    _C.setdefault(k, 2)\n    return TABLE[k]\n"
        "@lru_cache(maxsize=2)\ndef g(x):\n    return x\n"
    )
    assert _written(found, _module_mappings(found)) == {"_M", "_C"}
    assert _cached_functions(found) == {"g"}
    assert module_memos(found) == {"_M", "_C", "g"}


# ------------------------------------------------------------------ the first load, in a fresh process
# Modules that take a second or more to import and that drawing the sidebar and the Cohort page never
# uses (issue 24: the first load of the sample). Each is imported where it is used, not at module level.
HEAVY = ("scipy.stats", "scipy.spatial", "sklearn", "torch", "plotly.express", "numba")


def _first_load_modules() -> list[str]:
    """The modules app.py and the Cohort page (ui/views/cohort.py) import (their own `import` lines, read with `ast`) and
    the engine modules the first load reaches: the loaders and the study file's modules."""
    names: set[str] = set()
    for script in (ROOT / "app.py", ROOT / "pages" / "cohort.py", ROOT / "ui" / "views" / "cohort.py"):
        imported = _imported_names(tree(script), "", False)
        names.update(n for n in imported if n.split(".")[0] in ("engine", "ui"))
    names.update({"engine.io.loaders", "engine.study.package", "engine.utility.phewas"})
    modules = set(_modules(ENGINE)) | set(_modules(UI))
    return sorted(n for n in names if n in modules)


def test_the_first_load_imports_no_heavy_module() -> None:
    wanted = _first_load_modules()
    assert {"ui.sidebar", "ui.cache", "engine.io.loaders", "engine.utility.phewas"} <= set(wanted)
    code = (
        "import importlib, sys\n"
        f"for m in {wanted!r}: importlib.import_module(m)\n"
        f"print(sorted(h for h in {HEAVY!r} if h in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
