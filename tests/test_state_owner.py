"""Issue 24, "one owner of session state": every session-state key is declared once (ui/state.py) with
its default and owner; only the owner writes it; one keep.

Two checks: a static one over the source of ui/, pages/ and app.py (every write to `st.session_state`
names a declared key of the module that writes it), and a walk of the app through AppTest (every key
in session state after each page and method is declared or belongs to a widget drawn in that run).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from apptest_support import full_app, page_path

import ui.views
from ui import state

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "ui").rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"])
WRITERS = {"setdefault", "pop", "update", "__setitem__", "__delitem__"}
# functions that write a key their caller names (a parameter), on the caller's behalf
ON_BEHALF = {
    ("ui.persist", "seed"),
    ("ui.persist", "seed_choice"),
    ("ui.persist", "edited_column"),
    ("ui.sidebar", "_choose"),
    ("ui.import_view", "_kind_changed"),
}


def _owner(path: Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "ui":
        return ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
    return rel.as_posix()


def _is_session_state(node: ast.AST) -> bool:
    """`st.session_state`, or a name bound to it in the module (`state = st.session_state`)."""
    return (isinstance(node, ast.Attribute) and node.attr == "session_state") or (
        isinstance(node, ast.Name) and node.id in _ALIASES
    )


_ALIASES: set[str] = {"session_state"}


def _page_namespace(path: Path) -> SimpleNamespace:
    """A page script's names the test can read without running it: its imports, its module-level
    string constants, and its `declare(...)` calls run (a page declares its keys when it runs)."""
    names: dict[str, object] = {}
    for node in ast.parse(path.read_text()).body:
        run = isinstance(node, ast.Import | ast.ImportFrom)
        run |= isinstance(node, ast.Assign) and all(
            isinstance(v, ast.Constant) for v in getattr(node.value, "elts", [node.value])
        )
        run |= isinstance(node, ast.Expr) and "declare(" in ast.unparse(node)
        if run:
            exec(compile(ast.Module([node], []), str(path), "exec"), names)
    return SimpleNamespace(**names)


def _resolve(node: ast.AST, module: object) -> tuple[str, bool] | None:
    """(key, is a prefix) of a key expression: a string, a module constant, `mod.CONST`, an f-string
    (its leading text is the family's prefix); None when not resolvable statically."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, False
    if isinstance(node, ast.Name) and module is not None and isinstance(getattr(module, node.id, None), str):
        return getattr(module, node.id), False
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and module is not None:
        owner = getattr(module, node.value.id, None)
        if isinstance(getattr(owner, node.attr, None), str):
            return getattr(owner, node.attr), False
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value), True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # PREFIX + name
        left = _resolve(node.left, module)
        return None if left is None else (left[0], True)
    return None


def _functions(tree: ast.AST) -> dict[int, str]:
    """Line -> the name of the function (outermost) the line lies in."""
    out: dict[int, str] = {}
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                out[line] = node.name
    return out


def _writes(path: Path) -> list[tuple[int, ast.AST]]:
    """(line, key expression) of every write to session state in one source file."""
    tree = ast.parse(path.read_text())
    _ALIASES.clear()
    _ALIASES.add("session_state")
    for node in ast.walk(tree):  # `state = st.session_state`
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "session_state"
        ):
            _ALIASES.update(t.id for t in node.targets if isinstance(t, ast.Name))
    out: list[tuple[int, ast.AST]] = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for t in targets:
            if isinstance(t, ast.Subscript) and _is_session_state(t.value):
                out.append((node.lineno, t.slice))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in WRITERS
            and _is_session_state(node.func.value)
        ):
            if node.func.attr == "update":
                out += [(node.lineno, ast.Constant(kw.arg)) for kw in node.keywords if kw.arg]
            elif node.args:
                out.append((node.lineno, node.args[0]))
    return out


def _owners(key: str, prefix: bool) -> set[str]:
    """The owners of a key, or of every declared key and family an f-string's prefix names."""
    if not prefix:
        decl = state.declared(key)
        return set() if decl is None else {decl.owner}
    return {d.owner for name, d in [*state.DECLARED.items(), *state.PREFIXES.items()] if name.startswith(key)}


def test_every_write_to_session_state_is_by_the_keys_owner():
    wrong: list[str] = []
    for path in SOURCES:
        if path == ROOT / "ui" / "state.py":
            continue  # the mechanism itself (keep, the seeding of declared defaults)
        owner = _owner(path)
        module = importlib.import_module(owner) if owner.startswith("ui") else _page_namespace(path)
        functions = _functions(ast.parse(path.read_text()))
        for line, expr in _writes(path):
            got = _resolve(expr, module)
            where = f"{path.relative_to(ROOT)}:{line}"
            if got is None:
                if (owner, functions.get(line)) not in ON_BEHALF:
                    wrong.append(f"{where}: a key the test cannot read ({ast.unparse(expr)})")
                continue
            owners = _owners(*got)
            if not owners:
                wrong.append(f"{where}: {got[0]!r} is not declared (ui/state.py)")
            elif owners != {owner}:
                wrong.append(f"{where}: {got[0]!r} is owned by {sorted(owners)}, written by {owner}")
    assert not wrong, "\n".join(wrong)


def test_a_key_declared_twice_is_refused():
    state.declare("tests.a", held={"_test_state_twice": None})
    state.declare("tests.a", held={"_test_state_twice": None})  # the same declaration again: harmless
    with pytest.raises(state.StateDeclarationError, match=r"already declared by tests\.a"):
        state.declare("tests.b", held={"_test_state_twice": None})


def test_there_is_one_keep():
    """The three "keep every key" loops (sidebar.seed_state, persist.keep, import_view.keep) are one."""
    keeps = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name == "keep"
    ]
    assert keeps == ["ui/state.py:" + keeps[0].split(":")[1]] and len(keeps) == 1, keeps


def _undeclared(at) -> list[str]:
    inner = at.session_state._state._state
    keys = inner.filtered_state.keys()
    return sorted(
        k for k in keys if state.declared(k) is None and inner._key_id_mapper.get_id_from_key(k, None) is None
    )


def _walk():
    at = full_app()
    at.run()
    yield "Cohort", at
    for page in ("risk", "tradeoffs", "phewas", "labs", "report", "compare", "glossary"):
        at.switch_page(page_path(f"pages/{page}.py")).run()
        yield page, at
    at.switch_page(page_path("pages/anonymize.py")).run()
    yield "anonymize", at
    for method in (v.title for v in ui.views.VIEWS.values()):
        at.session_state["method_render_anonymize"] = method
        at.run()
        yield method, at


@pytest.mark.usefixtures("sample_dataset")
def test_every_key_in_session_state_is_declared_or_a_drawn_widgets():
    seen: dict[str, list[str]] = {}
    for where, at in _walk():
        assert not at.exception, (where, [e.value for e in at.exception][:1])
        for key in _undeclared(at):
            seen.setdefault(key, []).append(where)
    assert not seen, seen


def test_kept_sliders_keep_their_default_without_streamlits_warning(caplog):
    """The Risk and Cohort pages' kept sliders were drawn with a default while ui.state re-assigned their
    value through session state: Streamlit logged "created with a default value but also had its value
    set via the Session State API" on every page switch. They start at 20 and are drawn without one."""
    import logging

    from apptest_support import page_app

    for page, key in (("pages/risk.py", "risk_n_patterns"), ("pages/cohort.py", "cohort_top_n")):
        at = page_app(page)
        at.run()
        assert at.slider(key=key).value == 20
        at.session_state[key] = 30  # a value kept across a page switch, put back by ui.state.keep
        with caplog.at_level(logging.WARNING, logger="streamlit"):
            at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.slider(key=key).value == 30
        assert not [r for r in caplog.records if "default value" in r.getMessage()], page
