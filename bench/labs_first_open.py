"""Issue 24: the first opening of the Lab orders page in a server process, with and without the
shipped sample's lab orders read ahead (`engine.io.loaders.warm_sample_labs`).

Each run is a fresh process (AppTest, tests/apptest_support.py `page_app`, as bench/ui.py): the app's
first load (the sidebar and the Cohort page, bench.ui's `load` row), a pause (a user reading the first
page before choosing Lab orders), another new session's Cohort page (another session served while the
lab orders are read ahead), then the Lab orders page in a new session. A thread of the process sleeps
5 ms at a time from the first load's end to the Lab orders page's: its longest lateness is how long
another thread (a server's health endpoint, another session) waited for the interpreter meanwhile.

    .venv/bin/python -m bench.labs_first_open [--repeat 3] [--pauses 0,3]

"plain": COHORTSHIELD_WARM_LABS=0 (read on first use); "ahead": COHORTSHIELD_WARM_LABS=1 (as in a
Streamlit server). Medians of `--repeat` processes; the ratio is ahead / plain. Not a test: figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_RUN = """
import json, threading, time
from tests.apptest_support import page_app

def timed(page):
    at = page_app(page)
    t = time.perf_counter()
    at.run()
    took = time.perf_counter() - t
    assert not at.exception, [e.value for e in at.exception]
    return took

late, stop = [0.0], threading.Event()

def probe():
    while not stop.is_set():
        t = time.perf_counter()
        time.sleep(0.005)
        late[0] = max(late[0], time.perf_counter() - t - 0.005)

load = timed("pages/cohort.py")
threading.Thread(target=probe, daemon=True).start()
time.sleep(PAUSE)
other = timed("pages/cohort.py")
labs = timed("pages/labs.py")
stop.set()
print(json.dumps({"load": load, "other": other, "labs": labs, "late": late[0]}))
"""


def one(pause: float, ahead: bool) -> dict[str, float]:
    env = {**os.environ, "COHORTSHIELD_WARM_LABS": "1" if ahead else "0"}
    out = subprocess.run(
        [sys.executable, "-c", _RUN.replace("PAUSE", repr(pause))],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pauses", default="0,3")
    args = ap.parse_args(argv)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(
        "\n| pause | mode  | first load (Cohort) | other session (Cohort) | Lab orders, first opening | "
        "longest wait of another thread |"
    )
    print("|-------|-------|---------------------|------------------------|---------------------------|---|")
    for pause in [float(p) for p in args.pauses.split(",")]:
        medians: dict[bool, dict[str, float]] = {}
        for ahead in (
            False,
            True,
        ):  # alternated per process would mix caches: none is shared across processes
            runs = [one(pause, ahead) for _ in range(args.repeat)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            medians[ahead] = med

            def cell(k: str, runs: list[dict[str, float]] = runs, med: dict[str, float] = med) -> str:
                return f"{med[k]:.2f} s ({' '.join(f'{r[k]:.2f}' for r in runs)})"

            mode = "ahead" if ahead else "plain"
            print(
                f"| {pause:g} s | {mode} | {cell('load')} | {cell('other')} | {cell('labs')} | {cell('late')} |",
                flush=True,
            )
        plain, ahead_ = medians[False], medians[True]
        print(
            f"| {pause:g} s | ratio | {ahead_['load'] / plain['load']:.2f} | {ahead_['other'] / plain['other']:.2f} "
            f"| {ahead_['labs'] / plain['labs']:.2f} | {ahead_['late'] / max(plain['late'], 1e-9):.2f} |"
        )
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
