"""Benchmark: records below k when each single-visit method's release is read back from the CSV it
exports, with and without the visit grouping (issue 12, finding 1), and what reaching k costs.

    .venv/bin/python -m bench.exports [--k 5] [--methods M ...] [--json OUT.json]

On the shipped sample (the CLI defaults: cohort.csv is the cohort, every patient of events.parquet the
population, biobank.csv the biobank), for Heatherly with the completion pass (DEMO_D, DEMO_B, DEMO_S;
PheWAS-code constraints) and UGACLIP / ACLIP (PPE single-visit policy, the Table 1 utility policy):
each release is written in both structures (`patient_id, code`: one set per patient, the papers'
form; `patient_id, visit, code`: visits kept), read back with the csv module and counted by the plain
brute force of `tests/test_exports_brute_force.py` (independent of `engine.risk`).

Another engine tree is measured by putting it first on the import path, e.g. main before the fix:

    git archive main | tar -x -C /tmp/main-snapshot && PYTHONPATH=/tmp/main-snapshot .venv/bin/python -m bench.exports

An engine without export structures (`with_visits`) releases one thing, verified on whole records;
the bench then writes both structures of it itself (main wrote the one with visits). With them, each
structure is its own run, written by `Release.exported_frame`. Columns: `verified` is the engine's own
verdict (a refused release would not be written); `below k` the brute force's count on the file;
`events` released cohort events (visit, item), `codes` original codes the released items stand for
(Heatherly's Code Count), `utility` UGACLIP/ACLIP utility constraints satisfied, `phewas lost` /
`phewas false` the associations lost and false against the original cohort's PheWAS on the sample's
six SNPs (Heatherly's Table 4 setting: p <= 0.05, no correction; Total row).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
METHODS = ("Heatherly DEMO_D", "Heatherly DEMO_B", "Heatherly DEMO_S", "UGACLIP", "ACLIP")
SCOPES = {"DEMO_D": "cohort", "DEMO_B": "biobank", "DEMO_S": "population"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--json", help="write the rows as JSON here")
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("brute", REPO / "tests" / "test_exports_brute_force.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {REPO / 'tests' / 'test_exports_brute_force.py'}")
    brute = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(brute)

    from engine.anonymize.population import anonymize
    from engine.anonymize.profiles import run_profiles
    from engine.io.loaders import load_sample
    from engine.utility.phewas import phewas_of_records, phewas_of_release, significance_table
    from engine.utility.queries import read_utility_policy

    ds = load_sample()
    cohort = ds.group_records("cohort")
    groups = {
        "cohort": cohort,
        "biobank": ds.group_records("biobank"),
        "population": ds.events,
    }
    original = brute.original_visits_of(cohort.to_frame())
    utility = read_utility_policy().as_mapping()
    genotypes = ds.genotypes
    phewas_original = phewas_of_records(cohort, genotypes)

    def phewas_change(release) -> tuple[int, int]:
        """(lost, false) associations of the release, Total row of Heatherly's Table 4."""
        table = significance_table(
            phewas_original, {"r": phewas_of_release(release, genotypes)}, correction="heatherly2013"
        )
        total = table[table["snp"] == "Total"].iloc[0]
        return int(total["r: lost"]), int(total["r: false"])

    structured = "with_visits" in inspect.signature(anonymize).parameters
    engine_dir = Path(inspect.getfile(anonymize)).resolve().parent.parent.parent
    print(
        f"engine {engine_dir} ({'export structures' if structured else 'no export structures'}); "
        f"cohort {cohort.n_patients} records, {cohort.n_events} events, k = {args.k}"
    )

    def run(method: str, with_visits: bool | None):
        extra = {} if with_visits is None else {"with_visits": with_visits}
        if method.startswith("Heatherly"):
            scope = SCOPES[method.split()[1]]
            res = anonymize(groups[scope], cohort.patient_ids, args.k, scope=scope, complete=True, **extra)
            return res.release, res.verification, res.verification.ok, None
        out = run_profiles(cohort, args.k, "single_visit", method, utility, **extra)
        return out.release, out.verification, out.verified, int(out.satisfaction["satisfied"].sum())

    def files(release, verification, ok: bool, with_visits: bool) -> tuple[str, str, str | None]:
        """(release CSV, code map CSV, released population CSV) in the given structure: the export
        gate's bytes when the engine has one and the release passed, else the rows it would hold."""
        cols = ["patient_id", "visit", "code"] if with_visits else ["patient_id", "code"]
        if structured and ok and importlib.util.find_spec("engine.io.export") is not None:
            from engine.io.export import release_files
            from tests.pseudonym_support import PSEUDONYMS, in_source_ids

            got = release_files(release, verification, verification.adversary, args.k, pseudonyms=PSEUDONYMS)
            rel, cmap = in_source_ids(release, got["release.csv"]), got["code_map.csv"].decode()
        elif structured:
            rel = release.exported_frame().to_csv(index=False)
            cmap = release.exported_code_map().to_csv(index=False)
        else:
            rel = release.records.to_frame()[cols].drop_duplicates().to_csv(index=False)
            cmap = release.code_map().to_csv(index=False)
        pop = None
        if release.population is not None:
            pop = release.population.to_frame()[cols].drop_duplicates().to_csv(index=False)
        return rel, cmap, pop

    rows = []
    for method in args.methods:
        runs = {}
        if structured:
            for wv in (False, True):
                t0 = time.perf_counter()
                runs[wv] = (*run(method, wv), time.perf_counter() - t0)
        else:
            t0 = time.perf_counter()
            one = (*run(method, None), time.perf_counter() - t0)
            runs = {False: one, True: one}
        for wv, (release, verification, ok, satisfied, seconds) in runs.items():
            rel, cmap, pop = files(release, verification, ok, wv)
            dis = brute.brute_force_distinguishability(original, rel, cmap, pop)
            below = len(brute.below_k(dis, args.k))
            codes = set()
            for item in set(release.records.items[release.records.event_item].tolist()):
                codes |= release.codes_of(str(item))
            lost, false = phewas_change(release)
            row = {
                "method": method,
                "export": "visits kept" if wv else "one set per patient",
                "verified": bool(ok),
                "below k": below,
                "unique": sum(d <= 1 for d in dis.values()),
                "records in file": len(dis),
                "events": int(release.records.n_events),
                "codes": len(codes),
                "utility": satisfied,
                "phewas lost": lost,
                "phewas false": false,
                "seconds": round(seconds, 1),
            }
            rows.append(row)
            print(
                f"{method:17s} {row['export']:20s} verified={row['verified']!s:5s} below k {below:5d} "
                f"(unique {row['unique']:5d} of {row['records in file']}) events {row['events']:6d} "
                f"codes {row['codes']:5d} utility {satisfied if satisfied is not None else '-'} "
                f"PheWAS lost {lost} false {false} "
                f"[{row['seconds']} s]",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
