"""Built figures memoized per session (issue 40, finding 7): a rerun at a k already computed rebuilt
every plotly figure (`update_layout`, validation, `deepcopy`), about half of a page's server CPU.

    st.plotly_chart(figure_memo.built(distinguishability_cdf_figure, curves, k), key="...")

The key is the builder's name and a content fingerprint of every argument (`value_fingerprint`); the
figure is held in this session only (`ui.cache.memo` with no `data`: the inputs may be an upload's),
unless the caller names in `data` what the inputs derive from and that is the shipped sample (a
`Context` of it): then one process-wide entry serves every session (16 sessions on the sample each
built every figure at every k: about 0.1 s each, most of the server's CPU in the first half minute of
`bench/load_ws.py`). Never modified after it is built (`st.plotly_chart` reads it, through a copy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from ui import cache
from ui.fingerprints import value_fingerprint

SIZE = 24  # figures held per session: the most one page shows, with a k or two back
SHARED_SIZE = 96  # figures of the shipped sample held for the server: every page's, at a dozen k


def built(build: Callable[..., go.Figure], *args: Any, data: Any = None, **kwargs: Any) -> go.Figure:
    """`build(*args, **kwargs)`, once per content of its arguments in this session, or in the server
    when `data` (what every argument derives from, as `ui.cache.memo`'s) is the shipped sample."""
    key = (build.__module__, build.__qualname__, value_fingerprint((args, sorted(kwargs.items()))))
    if cache.shipped(data):
        return cache.memo("shared figures", key, lambda: build(*args, **kwargs), size=SHARED_SIZE, data=data)
    return cache.memo("figures", key, lambda: build(*args, **kwargs), size=SIZE)
