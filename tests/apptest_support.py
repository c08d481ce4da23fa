"""One way to build AppTests of CohortShield's pages, shared by every page test.

Why not `AppTest.from_file("app.py")` + `switch_page`: with Streamlit 1.67, a `pages/` folder beside
the main script puts AppTest's pages manager in the legacy pages-directory mode, so every rerun after
the first executes the page without the entry point: the sidebar and its widget state vanish. The
real server is not affected (the browser end-to-end test runs app.py as is).

So the tests run the entry point's own sidebar through `AppTest.from_string`, with absolute page
paths: `full_app()` is app.py's text; `page_app(...)` is app.py's sidebar with a single page (a page
file, or one method module's view function), which keeps a page test from rendering pages it does not
test.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from streamlit import config
from streamlit.testing.v1 import AppTest

# The shipped .streamlit/config.toml shows users no exception details (client.showErrorDetails =
# "none"); tests want them in their failure messages. tests/test_page_honest.py checks the shipped
# value on its own.
config.set_option("client.showErrorDetails", "full")

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
PAGES = re.findall(r'navigation\.page\(\s*"([^"]+)"', APP.read_text())


def full_app(timeout: float = 300) -> AppTest:
    """app.py itself, its pages named by absolute path."""
    text = re.sub(r'navigation\.page\(\s*"(?!/)', f'navigation.page("{ROOT}/', APP.read_text())
    return AppTest.from_string(text, default_timeout=timeout)


def page_path(page: str) -> str:
    """Absolute path of a page file given as `pages/x.py` (for `switch_page` on a `full_app`)."""
    return str(ROOT / page)


def page_app(
    page: str | None = None,
    *,
    view: tuple[str, str] | None = None,
    state: dict | None = None,
    timeout: float = 300,
) -> AppTest:
    """The real sidebar and one page: a page file (`pages/risk.py`) or a view function
    (`view=("ui.views.gccens", "render_anonymize")`, called with the sidebar's Context).

    `state` seeds session state before the first run (widget keys included).
    """
    if (page is None) == (view is None):
        raise ValueError("give exactly one of page or view")
    if page is not None:
        target = f"navigation.page({str(ROOT / page)!r})"
        body = ""
    else:
        module, function = view
        body = (
            f"import {module} as _view\nfrom ui.context import current as _current\n\n"
            f"def _page():\n    _view.{function}(_current())\n\n"
        )
        target = "st.Page(_page, title='view')"
    text = (  # as app.py: the sidebar and the page, in a run of this session with its engine memos
        "import streamlit as st\nfrom ui import cache, heap, navigation, sidebar, state\n"
        + body
        + f"page = navigation.navigation([{target}])\n"
        + "with state.running(), cache.engine_scope():\n    ctx = sidebar.render()\n    try:\n        page.run()\n"
        + "    finally:\n        heap.settle(data_loaded=ctx is not None)\n"
    )
    at = AppTest.from_string(text, default_timeout=timeout)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    return at


def run_view(module: str, page: str, **state) -> AppTest:
    """Run one method module's Anonymize (`page="anonymize"`) or Trade-offs view once, with session
    state seeded, and fail on any exception shown."""
    function = {"anonymize": "render_anonymize", "tradeoffs": "render_tradeoffs"}[page]
    at = page_app(view=(module, function), state=state)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown(markdown: str) -> str:
    """What the browser shows for a Markdown text's characters: CommonMark backslash escapes of
    punctuation and the invisible word joiners (U+2060) removed (untrusted text is escaped by
    `ui.literal.md`)."""
    return _ESCAPED.sub(r"\1", str(markdown)).replace("\u2060", "")


_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")


def page_text(at: AppTest) -> str:
    """The markdown, success and error texts of a run as shown, joined (for asserting on what a page
    says)."""
    parts = [m.value for m in at.markdown] + [s.value for s in at.success] + [e.value for e in at.error]
    return "\n".join(shown(p) for p in parts)


def run_prompts(at: AppTest) -> list[str]:
    """The "parameters changed since the last run: press Run" messages on the page (ui/progress.py,
    `run(..., ask=True)`)."""
    return [i.value for i in at.info if "the parameters changed since the last run" in i.value]


def add_release(at: AppTest, name: str, release, settings=None) -> None:
    """Put `release` in the session's study, as the "Add to study" button does, after a first run of a
    page that opened the study: verified under the sidebar's adversary and k, the gate's files kept.
    `settings` None: the release stands for one made by hand (`engine.report.report.UnrecordedSettings`)."""
    from engine.report.report import UnrecordedSettings
    from engine.study.runs import RunInputs
    from engine.study.study import make_release
    from ui.study import MADE, STUDY, MadeFiles

    ctx = at.session_state["context"]
    study = at.session_state[STUDY]
    made = make_release(  # the engine's one way, with the release already made (no copy of it here)
        name,
        settings or UnrecordedSettings(release.method),
        RunInputs(ctx.population, ctx.cohort),
        study.data,
        ctx.adversary,
        int(ctx.k),
        pseudonyms=study.pseudonyms,
        release=release,
    )
    at.session_state[STUDY] = study.add(made.entry)
    held = dict(at.session_state[MADE]) if MADE in at.session_state else {}
    held[name] = MadeFiles(release, made.files)
    at.session_state[MADE] = held


# ------------------------------------------------------------------------ chart labels (issue 16)
RAW_WORDS = frozenset({"value", "variable", "index", "x", "y", "color", "colour"})
_SNAKE = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")
_FACET = re.compile(r"^[A-Za-z_]\w*=(?!\s)")


def is_raw_identifier(title: str) -> bool:
    """An axis, legend or facet title that is a column identifier rather than words: plotly
    express's defaults `value` / `variable`, a snake_case name (`share_codes_retained`), or a facet
    label `measure=DC Local %`."""
    t = re.sub(r"<[^>]+>", "", str(title)).strip()
    return t in RAW_WORDS or bool(_SNAKE.match(t)) or bool(_FACET.match(t))


def _plotly_titles(spec: dict) -> list[tuple[str, str]]:
    out = []
    layout = spec.get("layout", {})
    for name, axis in layout.items():
        if (name.startswith(("xaxis", "yaxis")) or name in ("scene",)) and isinstance(axis, dict):
            title = axis.get("title")
            text = title.get("text") if isinstance(title, dict) else title
            if text:
                out.append((name, str(text)))
    legend = layout.get("legend", {})
    if isinstance(legend, dict):
        title = legend.get("title")
        text = title.get("text") if isinstance(title, dict) else title
        if text:
            out.append(("legend", str(text)))
    for i, ann in enumerate(layout.get("annotations", []) or []):
        if isinstance(ann, dict) and ann.get("text"):
            out.append((f"annotation {i}", str(ann["text"])))
    for i, trace in enumerate(spec.get("data", []) or []):
        if trace.get("showlegend", True) is not False and trace.get("name"):
            out.append((f"trace {i} name", str(trace["name"])))
    return out


def _vega_titles(spec: dict) -> list[tuple[str, str]]:
    out = []
    for channel, enc in (spec.get("encoding") or {}).items():
        if isinstance(enc, dict) and channel in ("x", "y", "color"):
            text = enc.get("title", enc.get("field"))
            if text:
                out.append((channel, str(text)))
    for layer in spec.get("layer", []) or []:
        out += _vega_titles(layer)
    return out


def chart_titles(at: AppTest) -> list[tuple[str, str, str]]:
    """(chart, place, title) of every plotly and Vega-Lite chart of a run: axis titles, legend
    titles, annotations (facet labels) and legend entries."""
    import json

    out = []
    for i, chart in enumerate(at.get("plotly_chart")):
        for place, text in _plotly_titles(json.loads(chart.proto.spec)):
            out.append((f"plotly {i}", place, text))
    for i, chart in enumerate(at.get("arrow_vega_lite_chart")):
        for place, text in _vega_titles(json.loads(chart.proto.spec)):
            out.append((f"vega {i}", place, text))
    return out


def raw_chart_titles(at: AppTest) -> list[tuple[str, str, str]]:
    """The chart titles of a run that are raw identifiers (`is_raw_identifier`)."""
    return [t for t in chart_titles(at) if is_raw_identifier(t[2])]


def download_labels(at: AppTest) -> list[str]:
    return [b.proto.label for b in at.get("download_button")]


def plotly_specs(at: AppTest) -> list[dict]:
    import json

    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def reopen_in_new_session(name: str, data: bytes, mime: str = "application/json") -> AppTest:
    """A new session (the whole app, on the shipped sample) that reopens a study file on the Report
    page, its first render after the upload done; fails on any exception shown."""
    at = full_app()
    at.run()
    at.switch_page(page_path("pages/report.py")).run()
    at.file_uploader(key="study_upload").upload(name, data, mime)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


class Counts:
    """Calls counted across processes (a file per name, a byte per call): the app's long runs happen
    in worker processes of the app's pool (ui/worker.py), whose in-memory counters the test never
    sees. `counts.add(name)`; `counts[name]` / `counts.get(name, 0)` read the count."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def add(self, name: str) -> None:
        with open(self.folder / name, "ab") as f:
            f.write(b"x")

    def __getitem__(self, name: str) -> int:
        path = self.folder / name
        return path.stat().st_size if path.exists() else 0

    def get(self, name: str, default: int = 0) -> int:
        return self[name] or default


def fresh_process_memo() -> None:
    """The engine's process memo (`engine.memo.LOCAL`) emptied: a test that counts that memo sees its
    own sessions' entries only, whether it runs alone or after another app test."""
    from engine import memo

    memo.clear()


def _resolve(target: str) -> tuple[Any, str]:
    """("module:attr" or "module:Class.attr") -> (the object holding the attribute, its name)."""
    module, _, path = target.partition(":")
    owner: Any = importlib.import_module(module)
    *parents, attr = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, attr


def _counting(counts: Counts, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def counted(*args: Any, **kwargs: Any) -> Any:
        counts.add(name)
        return original(*args, **kwargs)

    return counted


def _install_counting(folder: str, patches: Mapping[str, str]) -> None:
    """In a worker of the test's pool, at its start (`engine.scale.pool.Pool(warm=...)`): the counters."""
    counts = Counts(Path(folder))
    for name, target in patches.items():
        owner, attr = _resolve(target)
        setattr(owner, attr, _counting(counts, name, getattr(owner, attr)))


def _install(patches: Mapping[str, Any]) -> None:
    """In a worker of the test's pool, at its start: each target set to its value."""
    for target, value in patches.items():
        owner, attr = _resolve(target)
        setattr(owner, attr, value)


def patch_in_workers(monkeypatch: Any, patches: Mapping[str, Any]) -> Iterator[None]:
    """Set each target ("module:attr" or "module:Class.attr") to its value (picklable: a module-level
    function or a partial of one) in this process and in the worker processes the app's runs happen
    in, as `count_calls` does. A generator: the pool is closed after the block."""
    from engine.scale import pool
    from ui import worker

    for target, value in patches.items():
        owner, attr = _resolve(target)
        monkeypatch.setattr(owner, attr, value)
    mine = pool.Pool(size=1, preload=worker.PRELOAD, warm=functools.partial(_install, dict(patches)))
    monkeypatch.setattr(worker, "_POOL", [mine])
    try:
        yield
    finally:
        mine.close()


def count_calls(monkeypatch: Any, folder: Path, patches: Mapping[str, str]) -> Iterator[Counts]:
    """Count the calls of each target (`name` -> "module:attr" or "module:Class.attr") in this process
    and in the worker processes the app's runs happen in: those of a pool of the test's own
    (ui/worker.py's `app_pool`), whose workers install the same counters when they start (a worker
    imports the code afresh: a monkeypatch of this process does not reach it). A generator for a
    fixture: the pool is closed after the test."""
    from engine.scale import pool
    from ui import worker

    counts = Counts(folder)
    for name, target in patches.items():
        owner, attr = _resolve(target)
        monkeypatch.setattr(owner, attr, _counting(counts, name, getattr(owner, attr)))
    mine = pool.Pool(
        size=1, preload=worker.PRELOAD, warm=functools.partial(_install_counting, str(folder), dict(patches))
    )
    monkeypatch.setattr(worker, "_POOL", [mine])
    try:
        yield counts
    finally:
        mine.close()


class SessionReadInAJob(RuntimeError):
    """A page's job read `st.session_state` in its pool worker, which has no session (tests only)."""


def _trap_session_reads() -> None:
    """In a worker of the tests' app pool, at its start: a job that reads `st.session_state` raises
    (the worker has no session: Streamlit would hand it an empty one, and the job would go on with
    every default, silently). Streamlit's own internals are touched here, in the tests only. Then the
    kernels, as the app's workers load them (`engine.scale.preload_kernels.ensure`)."""
    import streamlit.runtime.state.session_state_proxy as proxy

    from engine.scale import preload_kernels
    from ui import cache

    original = proxy.get_session_state

    def trapped(*args: Any, **kwargs: Any) -> Any:
        if cache._WORKER_SIDE.get() is not None:
            raise SessionReadInAJob(
                "a page's job read st.session_state in its pool worker, which has no session: "
                "read the value in the script run and pass it to the job"
            )
        return original(*args, **kwargs)

    proxy.get_session_state = trapped
    preload_kernels.ensure()


_TRAPPING: list[Any] = []


def trapping_app_pool() -> Any:
    """The app's pool for the tests (one per test process): its workers trap a job's reads of session
    state (`_trap_session_reads`)."""
    import atexit

    from engine.scale import pool
    from ui import worker

    if not _TRAPPING:
        _TRAPPING.append(pool.Pool(size=1, preload=worker.PRELOAD, warm=_trap_session_reads))
        atexit.register(_TRAPPING[0].close)
    return _TRAPPING[0]
