"""Issue 24 ("Live means live"): the app's slow interactions, timed through the app's own code path.

Each interaction runs in AppTest (tests/apptest_support.py `page_app`: app.py's sidebar and one page, as bench/kprofile.py)
at a k this process has not computed before (every measurement takes the next unused k), three times;
the median is printed beside the issue's target. The same work is then timed through the engine alone
(the entry points the views call), so a row's gap between the two is the page's own cost.

    .venv/bin/python -m bench.ui [--repeat 3] [--rows load,labs,gccens,profiles,lda,heatherly,rekey]

Rows:
  load       first load of the sample (the app's sidebar and the Cohort page, `page_app`) in a fresh
             process (a subprocess per run)
  labs       the Lab orders page opened in a new session (the latent-space section as it opens)
  gccens     GCCens on all codes: "Run" pressed after choosing all codes at a new k
  profiles   UGACLIP / ACLIP (both) opened at a new k (a new session: its sidebar, about 0.3 s, included)
  lda        LDA opened at a new k (the same)
  heatherly  Heatherly: the completion pass ticked at a new k
  rekey      a change of k on the Risk page with four releases in the study (every release re-verified)

Not a test: figures only (never part of `make test`).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

TARGETS = {
    "load": ("first load of the sample (fresh process)", 3.0),
    "labs": ("Lab orders: open", 1.0),
    "gccens": ("GCCens: all codes, Run", 1.0),
    "profiles": ("UGACLIP / ACLIP: open at a new k", 1.0),
    "lda": ("LDA: open at a new k", 1.0),
    "heatherly": ("Heatherly: completion pass", 1.0),
    "rekey": ("a change of k with 4 releases in the study", 1.0),
}
METHODS = {
    "gccens": "GCCens (censoring)",
    "heatherly": "Generalization (Heatherly)",
    "profiles": "Clinical profiles (UGACLIP / ACLIP)",
    "lda": "Trajectories (LDA)",
}
_K = [7]  # the next k this process has not used


def fresh_k() -> int:
    _K[0] += 1
    return _K[0]


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _ok(at) -> None:
    if at.exception:
        raise RuntimeError([e.value for e in at.exception][:1])


# ------------------------------------------------------------------------------ through the app
_LOAD_SCRIPT = """
import time
from tests.apptest_support import page_app
at = page_app("pages/cohort.py")
t = time.perf_counter()
at.run()
print(time.perf_counter() - t)
assert not at.exception, [e.value for e in at.exception]
"""


def app_load() -> float:
    out = subprocess.run([sys.executable, "-c", _LOAD_SCRIPT], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _opened_at_new_k(method: str, state: dict | None = None):
    """A new session of the app's sidebar and the Anonymize page on `method`, k seeded with an unused
    value; returns the AppTest and its first run (the timed one: opening the page at that k)."""
    from tests.apptest_support import page_app

    at = page_app(
        "pages/anonymize.py",
        state={"method_render_anonymize": METHODS[method], "k": fresh_k(), **(state or {})},
    )
    return at, at.run


def app_open(method: str) -> float:
    at, open_ = _opened_at_new_k(method)
    took = _timed(open_)
    _ok(at)
    return took


def app_gccens_all_codes() -> float:
    at, open_ = _opened_at_new_k("gccens")
    open_()  # the paper's codes: the first run at this place starts by itself
    _ok(at)
    at.selectbox(key="gcc_mode").set_value("All codes").run()  # waits for Run (ask=True)
    _ok(at)
    at.sidebar.number_input(key="k").set_value(fresh_k()).run()
    _ok(at)
    took = _timed(lambda: at.button(key="gcc_run_start").click().run())
    _ok(at)
    return took


def app_heatherly_completion() -> float:
    at, open_ = _opened_at_new_k("heatherly", {"hea_complete": False})
    open_()
    _ok(at)
    took = _timed(lambda: at.checkbox(key="hea_complete").check().run())
    _ok(at)
    return took


def app_labs() -> float:
    from tests.apptest_support import page_app

    at = page_app("pages/labs.py")
    took = _timed(at.run)
    _ok(at)
    return took


def _study_releases():
    """Four releases of the sample (GCCens, Heatherly, UGACLIP, LDA at k = 5) with their settings."""
    from engine.io.loaders import load_sample_checked
    from engine.study.runs import GCCensSettings, HeatherlySettings, LDASettings, ProfilesSettings, RunInputs

    ds = load_sample_checked().data
    inputs = RunInputs(ds.events, ds.group_records("cohort"))
    settings = [GCCensSettings(k=5), HeatherlySettings(k=5), ProfilesSettings(k=5), LDASettings(k=5)]
    return ds, [(s, s.run(inputs)) for s in settings]


def app_rekey(releases) -> float:
    from tests.apptest_support import add_release, page_app

    at = page_app("pages/risk.py")
    at.run()
    _ok(at)
    for i, (settings, release) in enumerate(releases):
        add_release(at, f"release {i}", release, settings)
    at.run()
    _ok(at)
    took = _timed(lambda: at.sidebar.number_input(key="k").set_value(fresh_k()).run())
    _ok(at)
    return took


# ------------------------------------------------------------------------------ the engine alone
_ENGINE_LOAD = """
import time
t = time.perf_counter()
from engine.io.loaders import load_sample_checked
ds = load_sample_checked().data
ds.group_records("cohort")
print(time.perf_counter() - t)
"""


def engine_load() -> float:
    out = subprocess.run([sys.executable, "-c", _ENGINE_LOAD], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def engine_cases(releases) -> dict[str, Callable[[], object]]:
    from engine import risk
    from engine.adversary import Adversary
    from engine.anonymize.population import compare_scopes
    from engine.io.loaders import load_sample_checked
    from engine.labs.reident import patient_days
    from engine.study.runs import (
        CodeSelection,
        GCCensSettings,
        LabRecallSettings,
        LDASettings,
        ProfilesSettings,
        RunInputs,
        biobank_between,
    )

    ds = load_sample_checked().data
    population, cohort = ds.events, ds.group_records("cohort")
    inputs = RunInputs(population, cohort)
    # the groups the app compares (ui.views.heatherly._groups): the biobank between cohort and population
    groups = {"cohort": cohort, "population": population}
    bio = biobank_between(ds, "population", "cohort", cohort, population)
    if bio is not None:
        groups["biobank"] = bio
    days = patient_days(ds.labs)

    def labs() -> None:  # what the page computes on opening: uniqueness, draws, raw recall
        from engine.labs.reident import uniqueness

        s = LabRecallSettings(simulations=50)
        kept = s.restricted(days)
        uniqueness(days)
        s.raw_recall(kept, s.draws(kept))

    def rekey() -> None:
        k = fresh_k()
        for _settings, release in releases:
            risk.verify(release, Adversary("population", "single_visit"), k, population)

    return {
        "labs": labs,
        # the scope the app runs by default (the sidebar's cohort adversary): the step-by-step loop
        "gccens": lambda: GCCensSettings(k=fresh_k(), scope="cohort", codes=CodeSelection("all")).run(inputs),
        "profiles": lambda: [
            ProfilesSettings(algorithm=a, k=k).run(inputs) for k in [fresh_k()] for a in ("UGACLIP", "ACLIP")
        ],
        "lda": lambda: LDASettings(k=fresh_k()).run(inputs),
        "heatherly": lambda: compare_scopes(groups, cohort.patient_ids, fresh_k(), complete=True),
        "rekey": rekey,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", default=",".join(TARGETS))
    ap.add_argument("--no-engine", action="store_true", help="skip the engine-alone timings")
    args = ap.parse_args(argv)
    rows = args.rows.split(",")
    releases = _study_releases()[1] if "rekey" in rows else []
    app: dict[str, Callable[[], float]] = {
        "load": app_load,
        "labs": app_labs,
        "gccens": app_gccens_all_codes,
        "profiles": lambda: app_open("profiles"),
        "lda": lambda: app_open("lda"),
        "heatherly": app_heatherly_completion,
        "rekey": lambda: app_rekey(releases),
    }
    print(f"median of {args.repeat}, each at a k this process had not computed before\n")
    print(f"| {'interaction (AppTest)':<45} | {'median':>8} | {'runs':<20} | target |")
    print(f"|{'-' * 47}|{'-' * 10}|{'-' * 22}|--------|")
    for row in rows:
        times = [app[row]() for _ in range(args.repeat)]
        label, target = TARGETS[row]
        med = statistics.median(times)
        flag = "" if med <= target else " over"
        runs = " ".join(f"{t:.2f}" for t in times)
        print(f"| {label:<45} | {med:6.2f} s | {runs:<20} | ≤ {target:g} s{flag}", flush=True)
    if args.no_engine:
        return 0
    print(f"\n| {'the same through the engine alone':<45} | {'median':>8} | {'runs':<20} |")
    print(f"|{'-' * 47}|{'-' * 10}|{'-' * 22}|")
    cases: dict[str, Callable[[], object]] = {"load": engine_load, **engine_cases(releases)}
    for row in rows:
        fn = cases[row]
        times = [fn() if row == "load" else _timed(fn) for _ in range(args.repeat)]  # type: ignore[misc]
        label = TARGETS[row][0]
        runs = " ".join(f"{t:.2f}" for t in times)
        print(f"| {label:<45} | {statistics.median(times):6.2f} s | {runs:<20} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
