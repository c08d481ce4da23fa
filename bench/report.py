"""Issue 24 (part): "Report: build with three releases ... target <= 1.5 s". Times `build_report` and
each format's rendering on the sample, broken down by part, against the plain reference (the old path).

The study: the sample's cohort / single visit at k = 5 with three releases, GCCens on the paper's
codes, Heatherly DEMO_D and LDA on the top 10 codes (as /tmp/mkreport.py of the issue).

Paths, each timed `--repeat` times (median printed), in one warm process (phecode map read once, as
in the app):
  reference  the old path: the Report page's build as it was (no PheWAS, matrices or files handed
             over; the PheWAS tables computed a second time for the membership attack; the ledger as it
             was, each pair's combined release built through pandas and verified by
             `risk.release_distinguishability` (tests/reference_ledger.py)), and the formats as the
             page and the bundle rendered them (HTML twice, PDF twice, JSON twice, Markdown).
  cold       today's `build_report` given nothing (the CLI's `study report`, a first build), each
             format rendered once.
  session    today's Report page: the PheWAS tables, the verification matrices, the ledger's pairs,
             the release figures and headlines and the gate's files the session already holds are
             handed over; each format rendered once.

Parts (exclusive time; a part called inside another counts as itself only): PheWAS, matrices (the
verification under the four adversaries), membership, ledger, files (the export gate), figures (the
release figures, utility figures and the comparison table), risk before (the original data under
each adversary), other (the rest of build_report), then render html / pdf / json / markdown / bundle.
The reports of the three paths are checked byte-identical (reproducible JSON). The membership attack
is today's in every path: issue 28 changed what it computes (case pools, a per-target null), so the
attack as it was before issue 24 is no reference for it any more.

    .venv/bin/python -m bench.report [--repeat 3] [--data sample|paper] [--paths reference,cold,session]

`--data paper` (issue 36): the same study made on the paper-scale sample variant (`sample_data/paper/`,
1,366,786 patients; run it under `flock /work/paper.lock` on a shared machine); `--paths cold` times
the first build alone (the reference path's old ledger takes minutes there).

Not a test: figures only (never part of `make test`).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

TARGET = 1.5  # seconds, issue 24: build with three releases
PARTS = ("PheWAS", "matrices", "membership", "ledger", "files", "figures", "risk before", "other")
RENDERS = ("html", "pdf", "json", "markdown", "bundle")


# ------------------------------------------------------------------- the reference ledger
def reference_pair(a, b, adversary, k, population, cache=None):
    """The ledger's `verify_pair` as it was (tests/reference_ledger.py; it shared nothing between
    pairs, so `cache` is ignored)."""
    from tests.reference_ledger import reference_verify_pair

    return reference_verify_pair(a, b, adversary, k, population)


# ------------------------------------------------------------------------------------- the timer
class Parts:
    """Exclusive time per part: a wrapped function's time, less that of the parts called inside it."""

    def __init__(self) -> None:
        self.times: dict[str, float] = defaultdict(float)
        self._stack: list[float] = []  # time of nested parts, per open part

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append(0.0)
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - t
                inner = self._stack.pop()
                self.times[name] += spent - inner
                if self._stack:
                    self._stack[-1] += spent

        return timed


@contextlib.contextmanager
def patched(parts: Parts, *, reference: bool) -> Iterator[None]:
    """The report's parts wrapped by `parts`; with `reference`, the old path's PheWAS, membership and
    ledger."""
    from engine import risk
    from engine.report import report as R
    from engine.study import compare, ledger
    from engine.utility import phewas

    targets: list[tuple[Any, str, str]] = [
        (phewas, "phewas_of_records", "PheWAS"),
        (phewas, "phewas_of_release", "PheWAS"),
        (phewas, "significance_table", "PheWAS"),
        (R, "verification_matrix", "matrices"),
        (R, "_membership", "membership"),
        (R, "_ledger", "ledger"),
        (R, "_files_of", "files"),
        (compare, "release_figures", "figures"),
        (R, "release_comparison", "figures"),
        (R, "utility_figures", "figures"),
        (R, "code_map_entries", "figures"),
        (risk, "original_distinguishability", "risk before"),
    ]
    saved = [(mod, attr, getattr(mod, attr)) for mod, attr, _ in targets]
    saved += [(R, "_phewas_tables", R._phewas_tables)]
    saved += [(ledger, "verify_pair", ledger.verify_pair)]
    try:
        for mod, attr, part in targets:
            setattr(mod, attr, parts.wrap(part, getattr(mod, attr)))
        if reference:
            R._phewas_tables = lambda cohort, inputs, genotypes, given: given  # type: ignore[assignment]
            ledger.verify_pair = reference_pair  # type: ignore[assignment]
        yield
    finally:
        for mod, attr, fn in saved:
            setattr(mod, attr, fn)


# ------------------------------------------------------------------------------------- the study
def sample_study(ds: Any = None) -> dict[str, Any]:
    """The study of three releases of the shipped sample, or of the dataset `ds` (bench/ui.py
    `--data paper`: the paper-scale variant the app loaded)."""
    from engine.adversary import Adversary
    from engine.io.loaders import load_sample
    from engine.report.report import ReleaseInput
    from engine.study.runs import CodeSelection, GCCensSettings, HeatherlySettings, LDASettings, RunInputs
    from engine.study.study import Determination, Study, data_ref, make_release

    ds = load_sample() if ds is None else ds
    inputs = RunInputs(
        ds.group_records("population"), ds.group_records("cohort"), ds.group_records("biobank")
    )
    data = data_ref(ds.name, ds.events, inputs, biobank="biobank", sources=dict(ds.sources))
    adv = Adversary("cohort", "single_visit")
    study = Study(
        data, adv, 5, determination=Determination("Study team, Dept. of Genetics", "controlled", "DUA signed")
    )
    made: dict[str, Any] = {}
    for name, s in [
        ("GCCens paper codes", GCCensSettings(k=5, scope="cohort", codes=CodeSelection("paper"))),
        ("Heatherly DEMO_D", HeatherlySettings(k=5)),
        ("LDA", LDASettings(k=5, codes=CodeSelection("top", 10), age_low=0, age_high=127)),
    ]:
        m = make_release(name, s, inputs, data, adv, 5, pseudonyms=study.pseudonyms)
        study = study.add(m.entry)
        made[name] = m
    plain = {n: ReleaseInput(m.release, m.verification) for n, m in made.items()}  # what the page handed over
    held = {n: ReleaseInput(m.release, m.verification, m.files or None) for n, m in made.items()}
    return {"ds": ds, "inputs": inputs, "study": study, "made": made, "plain": plain, "held": held}


def session_memos(s: Mapping[str, Any]) -> dict[str, Any]:
    """What the session holds before the build: PheWAS tables (PheWAS page / Report page memo), the
    verification matrices and the ledger's pairs (Report page memos), each release's file figures and
    headline (`ui.honest`'s memos, the release warnings of every page showing it); the files are the
    gate's from Add to study."""
    from engine.report.report import PhewasResults
    from engine.study import compare
    from engine.study.ledger import ledger, study_ledger_releases
    from engine.study.study import verification_matrix
    from engine.utility import phewas

    geno, inputs, study = s["ds"].genotypes, s["inputs"], s["study"]
    releases = {n: m.release for n, m in s["made"].items()}
    return {
        "ledger": ledger(study_ledger_releases(study, releases), study.adversary, 5, inputs.population),
        "figures": {n: compare.release_figures(r, inputs.cohort) for n, r in releases.items()},
        "headlines": {n: compare.headline(r, inputs.cohort) for n, r in releases.items()},
        "phewas": PhewasResults(
            phewas.phewas_of_records(inputs.cohort, geno),
            {n: phewas.phewas_of_release(m.release, geno) for n, m in s["made"].items()},
        ),
        "matrices": {n: verification_matrix(m.release, inputs.population, 5) for n, m in s["made"].items()},
    }


def run(s: Mapping[str, Any], path: str, memos: Mapping[str, Any]) -> tuple[dict[str, float], bytes]:
    """One build and its renderings along `path`; (seconds per part and render, the report's JSON)."""
    from engine.report import render
    from engine.report.bundle import bundle_files, zip_bytes
    from engine.report.report import build_report, report_json

    def bundle() -> bytes:  # what make_bundle writes; this study's releases fail jointly (issue 35): refused
        return zip_bytes(bundle_files(rep))

    parts = Parts()
    inputs = s["inputs"]
    given: dict[str, Any] = memos if path == "session" else {}
    releases = s["held"] if path == "session" else s["plain"]
    with patched(parts, reference=path == "reference"):
        t = time.perf_counter()
        rep = build_report(
            s["study"],
            releases,
            inputs.population,
            inputs.cohort,
            genotypes=s["ds"].genotypes,
            biobank=inputs.biobank,
            recipient="Study team",
            reproducible=True,
            **given,
        )
        build = time.perf_counter() - t
    out = {p: parts.times.get(p, 0.0) for p in PARTS[:-1]}
    out["other"] = build - sum(out.values())
    out["build"] = build
    renders: dict[str, Callable[[], object]]
    if path == "reference":  # the page: HTML, PDF, JSON, Markdown; the bundle rendered PDF, HTML, JSON again
        renders = {
            "html": lambda: render.render_html(rep.data),
            "pdf": lambda: render.render_pdf(rep.data),
            "json": lambda: report_json(rep.data),
            "markdown": lambda: render.render_markdown(rep.data),
            "bundle": bundle,  # nothing rendered through `rep` yet: renders all three
        }
    else:  # each once; the bundle reuses them
        renders = {
            "html": rep.to_html,
            "pdf": rep.to_pdf,
            "json": rep.to_json,
            "markdown": rep.to_markdown,
            "bundle": bundle,
        }
    for name, fn in renders.items():
        t = time.perf_counter()
        fn()
        out[f"render {name}"] = time.perf_counter() - t
    out["render"] = sum(out[f"render {r}"] for r in RENDERS)
    out["total"] = build + out["render"]
    return out, rep.to_json()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", choices=("sample", "paper"), default="sample")
    ap.add_argument("--paths", default="reference,cold,session", help="comma-separated, of these three")
    args = ap.parse_args()
    paths = args.paths.split(",")
    from engine.utility.phewas import phecode_table

    phecode_table()  # read once per process, as in the app
    paper = None
    if args.data == "paper":
        from engine.io.imports import load_sample_variant

        paper = load_sample_variant("paper").data
    s = sample_study(paper)
    memos = session_memos(s) if "session" in paths else {}
    from engine.study.study import export_files

    files_same = all(
        dict(s["held"][n].files or {})
        == export_files(m.release, m.verification, pseudonyms=s["study"].pseudonyms)
        for n, m in s["made"].items()
    )
    figures: dict[str, list[dict[str, float]]] = {}
    reports: dict[str, bytes] = {}
    for _ in range(args.repeat):
        for path in paths:
            out, data = run(s, path, memos)
            figures.setdefault(path, []).append(out)
            reports[path] = data
    med = {p: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for p, rs in figures.items()}
    rows = [*PARTS, "build", *(f"render {r}" for r in RENDERS), "render", "total"]
    print(
        f"Report build, {args.data}, 3 releases, cohort / single visit, k = 5; median of {args.repeat} "
        "(seconds)"
    )
    print(f"{'part':<18}" + "".join(f"{p:>11}" for p in paths) + ("   ratio" if len(paths) == 3 else ""))
    for r in rows:
        line = f"{r:<18}" + "".join(f"{med[p][r]:>11.3f}" for p in paths)
        if len(paths) == 3:
            ref, ses = med["reference"][r], med["session"][r]
            line += f"{ref / ses:.1f}x".rjust(8) if ses > 1e-3 else "       -"
        print(line)
    print(
        f"target {TARGET} s (build): "
        + "; ".join(
            f"{p} build {med[p]['build']:.2f} s, with rendering {med[p]['total']:.2f} s" for p in paths
        )
    )
    print(
        "identical: reports (reproducible JSON)",
        len(set(reports.values())) == 1,
        "| the gate's files handed over = written again",
        files_same,
    )


if __name__ == "__main__":
    main()
