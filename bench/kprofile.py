"""Where a change of k spends its time, page by page (issue 13, "Long work"): cProfile of one AppTest
rerun after k changes, on the shipped sample. Not a test: figures only.

Each page is rendered once at the sidebar's default k (its first run, not profiled), then k is set to
`--k` and the rerun is profiled; prints the rerun's wall time and the top cumulative costs below the
script runner.

    .venv/bin/python -m bench.kprofile [--pages cohort,risk,...] [--k 6] [--top 12]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

from streamlit.runtime.scriptrunner import script_runner

from tests.apptest_support import page_app

_PROFILE: list[cProfile.Profile] = []  # the profiler of the next script run, if any
_exec = script_runner.exec_func_with_error_handling


def _profiled_exec(func, ctx):  # the script runs in its own thread: profile it there
    if not _PROFILE:
        return _exec(func, ctx)
    prof = _PROFILE[0]
    prof.enable()
    try:
        return _exec(func, ctx)
    finally:
        prof.disable()


script_runner.exec_func_with_error_handling = _profiled_exec

METHODS = {
    "gccens": "GCCens (censoring)",
    "heatherly": "Generalization (Heatherly)",
    "profiles": "Clinical profiles (UGACLIP / ACLIP)",
    "lda": "Trajectories (LDA)",
}
PAGES = {
    "cohort": dict(page="pages/cohort.py"),
    "risk": dict(page="pages/risk.py"),
    **{
        f"anonymize-{m}": dict(page="pages/anonymize.py", state={"method_render_anonymize": title})
        for m, title in METHODS.items()
    },
    "phewas": dict(page="pages/phewas.py"),
    "report": dict(page="pages/report.py"),
}


def profile(name: str, k: int, top: int) -> None:
    spec = dict(PAGES[name])
    t0 = time.perf_counter()
    at = page_app(spec["page"], state=spec.get("state"))
    at.run()
    first = time.perf_counter() - t0
    if at.exception:
        print(f"== {name}: exception on first run: {[e.value for e in at.exception][:1]}")
        return
    at.sidebar.number_input(key="k").set_value(k)
    prof = cProfile.Profile()
    _PROFILE[:] = [prof]
    t0 = time.perf_counter()
    at.run()
    _PROFILE.clear()
    wall = time.perf_counter() - t0
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats(r"(engine|ui|pages)/", top)
    print(f"== {name}: first run {first:.2f} s, rerun after k -> {k}: {wall:.2f} s")
    lines = [ln for ln in out.getvalue().splitlines() if any(d in ln for d in ("engine/", "ui/", "pages/"))]
    for ln in lines[:top]:
        print("   ", ln.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pages", default=",".join(PAGES))
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    for name in args.pages.split(","):
        profile(name, args.k, args.top)


if __name__ == "__main__":
    main()
