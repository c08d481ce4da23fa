"""One view protocol for the method views (issue 38, finding 3: "No view protocol").

A method view (`ui/views/<method>.py`) declares its sections, a `MethodView`:

- `settings(ctx)`: draws its settings section (widgets from the method's declarations,
  `ui.parameter_widgets`) and returns the view's settings, a hashable value (typed settings of
  `engine.study.runs`, or the view's own frozen parameters); None when nothing can run (the section
  said why);
- `runs(ctx, settings)`: the long computations of those settings, by run key (`Run`: the label, the
  compute for `ui.progress.run`, whether a change waits for "Run");
- `results(ctx, settings, outcomes, shown)`: draws the result section of the runs' outcomes, calling
  `shown.add(...)` where its "Add to study" control goes;
- `stale_caption(settings)`: the caption over the previous settings' results, drawn greyed.

`drive(view, ctx)` does the rest, once for every view: each run under a progress bar with Cancel
(`progress.run`, its job the data loaded and the settings), the previous settings' results drawn greyed
under `view.stale_caption` while changed ones wait for "Run" (never another data's), "Add to study"
only for fresh results, and the errors: the one place a view's exception becomes a message
(`ui.errors.show`: a `UserError`'s own text, else a reference to the server log).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar

from engine.release import Release
from engine.study.runs import MethodSettings
from ui import errors
from ui import progress as progress_ui
from ui.context import Context
from ui.study import add_to_study, data_of, remember

S = TypeVar("S", bound=Hashable)
R = TypeVar("R")
P = ParamSpec("P")


@dataclass(frozen=True)
class Run(Generic[R]):
    """One long computation of a view's settings: `compute(progress)` under a progress bar (`label`).
    `ask`: after its first run, a change waits for "Run"; `ask_first`: the first run waits too
    (`progress.run`). `stale`: its last outcome is held in the session, drawn greyed while changed
    settings wait for "Run" (False for a run that never waits: nothing held). `preview_of`: the
    outcome is the release of these settings, recorded as their study preview as soon as it is made
    (`ui.study.remember`: "Add to study" and every figure of it the view memoizes then find it where
    the study's preview is)."""

    label: str
    compute: Callable[[progress_ui.Tracker], R]
    ask: bool = False
    ask_first: bool = False
    stale: bool = True
    preview_of: MethodSettings | None = None


@dataclass(frozen=True)
class Shown:
    """How a result section is drawn: `stale` (a previous settings' results, greyed: nothing from them
    enters the study or leaves as a release file)."""

    ctx: Context
    stale: bool = False

    def add(
        self,
        settings: MethodSettings | None,
        name: str,
        key: str,
        release: Release | None = None,
        why_not: str | None = None,
    ) -> None:
        """The "Add to study" control of `settings` (its default `name`, widget `key`): `release`, the
        one the section shows, is recorded as the preview of `settings` (`ui.study.remember`: Add does
        not run it again); nothing is offered for stale results. `settings` None: `why_not` says why
        these parameters cannot be recorded."""
        if settings is not None and release is not None:
            remember(self.ctx, settings, release)
        if not self.stale:
            add_to_study(self.ctx, settings, name, key, why_not)


@dataclass(frozen=True)
class MethodView(Generic[S, R]):
    """A method view's sections (module docstring); `key` names its greyed container; without a
    `stale_caption` the view's runs hold nothing for a greyed view (`Run.stale` False). Called with
    the Context, it draws itself (`drive`): a view module's `render_anonymize`."""

    key: str
    settings: Callable[[Context], S | None]
    runs: Callable[[Context, S], Mapping[str, Run[R]]]
    results: Callable[[Context, S, dict[str, R], Shown], None]
    stale_caption: Callable[[S], str] | None = None

    def __call__(self, ctx: Context) -> None:
        drive(self, ctx)


def run(ctx: Context, key: str, settings: Hashable, one: Run[R], *, stale: bool = False) -> Any:
    """`progress.run` of `one` at `key`, its job the data loaded now and `settings`: the outcome, None
    (cancelled, or waiting for "Run"), or with `stale` the previous job's `progress.Stale`."""
    out = progress_ui.run(
        one.label,
        one.compute,
        key=key,
        job=(data_of(ctx).key, settings),
        ask=one.ask,
        ask_first=one.ask_first,
        stale=stale,  # type: ignore[call-overload]
    )
    if one.preview_of is not None and isinstance(out, Release):
        remember(ctx, one.preview_of, out)
    return out


def guarded(render: Callable[P, None]) -> Callable[P, None]:
    """`render(ctx)` with its exception shown where it stopped (`ui.errors.show`: a `UserError`'s own
    text, else a reference): the one catch of the method views (issue 38, finding 3). Streamlit's stop
    and rerun are BaseExceptions and pass through."""

    @functools.wraps(render)
    def shown(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            render(*args, **kwargs)
        except Exception as exc:
            errors.show(exc)

    return shown


@guarded
def drive(view: MethodView[Any, Any], ctx: Context) -> None:
    """Draw `view`: settings, runs, results (fresh, or the previous ones greyed)."""
    settings = view.settings(ctx)
    if settings is None:
        return
    data = data_of(ctx).key
    fresh: dict[str, Any] = {}
    stale: dict[str, Any] = {}
    held: Any = None  # the settings of the stale results
    for key, one in view.runs(ctx, settings).items():
        out = run(ctx, key, settings, one, stale=one.stale)
        if isinstance(out, progress_ui.Stale):
            held_data, held_settings = out.job
            if held_data == data:  # never another data's results drawn over this data
                stale[key], held = out.result, held_settings
        elif out is not None:
            fresh[key] = out
    if stale and view.stale_caption is not None:  # the previous parameters' results, greyed, until "Run"
        with progress_ui.greyed(view.key, view.stale_caption(held)):
            view.results(ctx, held, stale, Shown(ctx, stale=True))
    elif fresh:
        view.results(ctx, settings, fresh, Shown(ctx))
