"""The cost of a script run's stop/rerun check (issue 38, finding 4): `ui.script_run.yield_check()`, a
read of `st.session_state` (public API), against Streamlit's own check of the run (the private
`get_run_yield_check()` the app called before), each called `N` times in one AppTest script run, and
one unthrottled read (what each poll of a wait costs). None draws or sends anything. Figures only.

    .venv/bin/python -m bench.yield_check

Measured 29 Nov 2026 (load average 4.1 on the 2 shared cores), two runs: in a tight loop
ui.script_run.yield_check 0.30-0.32 us a call (it reads at most every 10 ms), Streamlit's
get_run_yield_check 1.59-1.71 us (ratio 0.18-0.20); one read of st.session_state 11.9 us (ratio
7.0-7.5 to the reference), so a wait polling every 0.1 s spends 0.12 ms a second on it. Before the
10 ms throttle the check read at every call: 10.5-12.6 us a call in the tight loop.
"""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
N = 200_000

_SCRIPT = """
import sys, time
sys.path.insert(0, {root!r})
import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_run_yield_check
from ui import state
from ui.script_run import yield_check

with state.running():
    out = {{}}
    read = lambda: "_bench" in st.session_state  # what one poll of a wait costs: a read, unthrottled
    checks = (("app", yield_check()), ("read", read), ("streamlit", get_run_yield_check()))
    for name, check in checks:
        start = time.perf_counter()
        for _ in range({n}):
            check()
        out[name] = (time.perf_counter() - start) / {n}
    st.session_state["out"] = out
"""


def main() -> int:
    at = AppTest.from_string(_SCRIPT.format(root=str(ROOT), n=N), default_timeout=300).run()
    if at.exception:
        print(at.exception[0].value)
        return 1
    out = at.session_state["out"]
    app, read, reference = out["app"], out["read"], out["streamlit"]
    print(f"calls per check: {N:,}")
    print(f"ui.script_run.yield_check, called in a tight loop (reads every 10 ms): {app * 1e6:.2f} us a call")
    print(f"one read of st.session_state (each poll of a wait): {read * 1e6:.2f} us")
    print(f"Streamlit's get_run_yield_check (reference): {reference * 1e6:.2f} us a call")
    print(f"ratios: tight loop {app / reference:.2f}, one read {read / reference:.2f}")
    print(f"a wait polling every 0.1 s: {read * 10 * 1e6:.0f} us a second")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
