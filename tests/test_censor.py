"""GCCens (Tamersoy 2010 Figures 1-3; thesis Algorithm 1, Example 1) and its CUL measures."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from engine import risk
from engine.adversary import Adversary
from engine.anonymize.censor import DominanceCounter, gccens, gccens_run, prepare
from engine.records import Records
from engine.study.experiments import gccens_sweep_caps as sweep_caps
from engine.study.experiments import gccens_sweep_k as sweep_k
from engine.utility.censoring import censoring_loss, cul_statistics, release_cul

K_MAP = Adversary("population", "all_visits")
K_ANON = Adversary("cohort", "all_visits")

# Figure 1 (left): the identified population P
FIGURE_1_P = {
    "Dan": ["250"],
    "Bella": ["250", "250", "272"],
    "John": ["250", "250", "272", "272"],
    "Ada": ["401"] * 4,
    "Tom": ["272", "272", "724"],
    "Alan": ["250"],
    "Eric": ["272", "724"],
}
FIGURE_1_S = ["Alan", "Tom", "Bella"]  # sample records s1, s2, s3
EXAMPLE_CAPS = {"250": 2, "272": 2, "401": 0, "724": 1}


def _records(rows: dict[str, list[str]]) -> Records:
    df = pd.DataFrame([(p, c) for p, cs in rows.items() for c in cs], columns=["patient_id", "code"])
    return Records.from_frame(df)


@pytest.fixture
def figure_1() -> tuple[Records, Records]:
    pop = _records(FIGURE_1_P)
    return pop, pop.subset(FIGURE_1_S)


def _multisets(recs: Records) -> list[list[str]]:
    return [sorted(recs.patient_codes(i)) for i in range(recs.n_patients)]


@pytest.mark.parametrize("kernel", ["dominance", "risk"])
def test_figure_1_to_3_worked_example(figure_1, kernel):
    pop, sample = figure_1
    release = gccens(sample, pop, 2, caps=EXAMPLE_CAPS, kernel=kernel)
    # Figure 3: {250}, {272, 724}, {250, 272}
    assert _multisets(release.records) == [["250"], ["272", "724"], ["250", "272"]]
    # Example 1: first one 250 from s3 (C becomes {1, 2, 0, 1}), then one 272 from s2
    assert [(s["code"], s["records"]) for s in release.loss["steps"]] == [("250", 1), ("272", 1)]
    # CUL column of Figure 3: 0, 0.33, 0.33
    np.testing.assert_allclose(release_cul(release), [0, 1 / 3, 1 / 3])
    assert release.counts_repeats
    assert release.loss["k_reached"]
    verification = risk.verify(release, K_MAP, 2, pop)
    assert verification.ok
    # the released Tom record {272, 724} matches Tom and Eric: dis = 2 ("dis(272, 724) = 2")
    np.testing.assert_array_equal(verification.distinguishability, [4, 2, 2])


def test_figure_1_original_risk(figure_1):
    """Before censoring Tom's {272, 272, 724} is unique; Bella's {250, 250, 272} has dis 2 under the
    containment definition (Bella and John), not the text's 1."""
    pop, sample = figure_1
    dis = risk.original_distinguishability(sample, K_MAP, pop, matching=risk.Matching(count_repeats=True))
    np.testing.assert_array_equal(dis, [4, 1, 2])


def test_censored_instances_are_listed(figure_1):
    pop, sample = figure_1
    release = gccens(sample, pop, 2, caps=EXAMPLE_CAPS)
    sup = release.suppressed.sort_values("patient_id").reset_index(drop=True)
    assert sup[["patient_id", "code", "stage"]].values.tolist() == [
        ["Bella", "250", "censor"],
        ["Tom", "272", "censor"],
    ]
    # nothing lost silently: released + censored = original, per record and code
    before = sample.to_frame().groupby(["patient_id", "code"]).size()
    after = release.to_frame().groupby(["patient_id", "code"]).size()
    gone = release.suppressed.groupby(["patient_id", "code"]).size()
    pd.testing.assert_series_equal(after.add(gone, fill_value=0).astype(int), before, check_names=False)


def test_targeted_variant_spares_records_that_meet_k(figure_1):
    """Bella's record already meets 2-map, so the targeted variant leaves it whole."""
    pop, sample = figure_1
    release = gccens(sample, pop, 2, caps=EXAMPLE_CAPS, variant="targeted")
    assert _multisets(release.records) == [["250"], ["272", "724"], ["250", "250", "272"]]
    assert risk.verify(release, K_MAP, 2, pop).ok


def test_default_caps_are_the_sample_maxima(figure_1):
    pop, sample = figure_1
    problem = prepare(sample, pop)
    assert problem.default_caps() == {"250": 2, "272": 2, "724": 1}
    # with no caps given the example needs the same two steps
    release = gccens_run(problem, 2)
    assert _multisets(release.records) == [["250"], ["272", "724"], ["250", "272"]]
    assert release.params["caps"] == {"250": 2, "272": 2, "724": 1}


def test_preprocess_keeps_first_occurrences_in_visit_order():
    df = pd.DataFrame(
        {
            "patient_id": ["a"] * 4 + ["b"] * 2,
            "visit": [3, 1, 2, 2, 1, 1],
            "code": ["401", "401", "401", "250", "401", "250"],
        }
    )
    recs = Records.from_frame(df)
    release = gccens(recs, recs, 1, cap=1)
    kept = release.to_frame()
    assert kept[kept.patient_id == "a"][["visit", "code"]].values.tolist() == [[1, "401"], [2, "250"]]
    sup = release.suppressed
    assert sorted(sup[["visit", "code", "stage"]].values.tolist()) == [[2, "401", "cap"], [3, "401", "cap"]]
    # CUL against the capped record is 0 (caps are not the loop's loss), against the original 2/4
    np.testing.assert_allclose(release_cul(release), [0, 0])
    np.testing.assert_allclose(release_cul(release, baseline="original"), [0.5, 0])


def test_universal_cap_and_per_code_caps(figure_1):
    pop, sample = figure_1
    problem = prepare(sample, pop)
    np.testing.assert_array_equal(problem.cap_vector(cap=1), [1, 1, 1])
    np.testing.assert_array_equal(problem.cap_vector(caps={"272": 0, "999": 3}), [2, 0, 1])
    with pytest.raises(ValueError, match="must be >= 0"):
        problem.cap_vector(caps={"250": -1})


def test_cohort_scope_is_k_anonymity(figure_1):
    _pop, sample = figure_1
    release = gccens(sample, None, 2, scope="cohort")
    verification = risk.verify(release, K_ANON, 2)
    assert verification.ok
    assert release.loss["k_reached"]


def test_unreachable_k_is_reported_not_hidden(figure_1):
    pop, sample = figure_1
    release = gccens(sample, pop, 8, caps=EXAMPLE_CAPS)  # only 7 patients in P
    assert not release.loss["k_reached"]
    assert release.records.n_events == 0
    verification = risk.verify(release, K_MAP, 8, pop)
    assert not verification.ok
    assert len(verification.failing) == 3


def test_bad_parameters(figure_1):
    pop, sample = figure_1
    with pytest.raises(ValueError, match="needs the population"):
        gccens(sample, None, 2)
    with pytest.raises(ValueError, match="k must be"):
        gccens(sample, pop, 0)
    with pytest.raises(ValueError, match="variant"):
        gccens(sample, pop, 2, variant="greedy")


def test_deterministic(figure_1):
    pop, sample = figure_1
    a = gccens(sample, pop, 3, cap=2)
    b = gccens(sample, pop, 3, cap=2)
    assert a.records.fingerprint == b.records.fingerprint
    assert a.loss == b.loss


def test_dominance_counter_dense_and_bitset_agree():
    rng = np.random.default_rng(3)
    cands = rng.integers(0, 4, size=(200, 5))
    targets = rng.integers(0, 4, size=(60, 5))
    brute = np.array([(cands >= t).all(axis=1).sum() for t in targets])
    top = np.full(5, 3)
    dense = DominanceCounter(cands, top)
    assert dense.dense
    np.testing.assert_array_equal(dense.count(targets), brute)
    import engine.anonymize.censor as censor

    old = censor.DENSE_LIMIT
    censor.DENSE_LIMIT = 1
    try:
        bits = DominanceCounter(cands, top)
    finally:
        censor.DENSE_LIMIT = old
    assert not bits.dense
    np.testing.assert_array_equal(bits.count(targets), brute)


def test_cul_statistics_of_figure_3(figure_1):
    pop, sample = figure_1
    release = gccens(sample, pop, 2, caps=EXAMPLE_CAPS)
    stats = cul_statistics(release_cul(release), release)
    # CULs 0, 1/3, 1/3: mean 2/9, sample std sqrt(1/27), median 1/3, G1 = -sqrt(3)
    assert stats.mean == pytest.approx(2 / 9)
    assert stats.std == pytest.approx(math.sqrt(1 / 27))
    assert stats.median == pytest.approx(1 / 3)
    assert stats.skewness == pytest.approx(-math.sqrt(3))
    assert stats.share_modified == pytest.approx(2 / 3)
    assert stats.share_codes_retained == pytest.approx(5 / 7)  # 5 of the 7 sample codes kept
    loss = censoring_loss(release)
    assert loss["codes_before"].tolist() == [1, 3, 3]


def test_sweeps_have_the_table_layout(figure_1):
    pop, sample = figure_1
    problem = prepare(sample, pop)
    seen = []
    t1 = sweep_k(problem, ks=range(2, 5), cap=2, progress=lambda f, m: seen.append((f, m)))
    assert t1["k"].tolist() == [2, 3, 4]
    assert seen[0] == (0.0, "k = 2, cap = 2: point 1 of 3") and seen[-1] == (1.0, "3 points done")
    assert {"mean", "std", "median", "skewness", "share_modified", "share_codes_retained"} <= set(t1.columns)
    assert t1["verified"].all()
    # each row is the same as a single run with those parameters
    single = cul_statistics(release_cul(gccens_run(problem, 3, cap=2)))
    assert t1.loc[t1.k == 3, "mean"].item() == pytest.approx(single.mean)
    t2 = sweep_caps(problem, caps=[1, 2], k=2)
    assert t2["cap"].tolist() == [1, 2]
    assert t2["verified"].all()


# ------------------------------------------------------------------------------------------ CLI
def _write_figure_1(tmp_path):
    rows = [(p, c) for p, cs in FIGURE_1_P.items() for c in cs]
    pd.DataFrame(rows, columns=["patient_id", "code"]).to_csv(tmp_path / "events.csv", index=False)
    pd.DataFrame({"patient_id": FIGURE_1_S}).to_csv(tmp_path / "cohort.csv", index=False)
    return tmp_path / "events.csv", tmp_path / "cohort.csv"


def _in_source_ids(release_csv, crosswalk_csv) -> pd.DataFrame:
    """A written release read back in source ids through the crosswalk the command wrote beside it."""
    rows = pd.read_csv(release_csv, dtype=str)
    walk = pd.read_csv(crosswalk_csv, dtype=str)
    rows["patient_id"] = rows["patient_id"].map(dict(zip(walk["release_id"], walk["source_id"], strict=True)))
    return rows


def test_cli_writes_release_and_report(tmp_path):
    import json

    from engine.commands.cli import main

    events, cohort = _write_figure_1(tmp_path)
    out, report = tmp_path / "released.csv", tmp_path / "report.json"
    argv = ["anonymize", "gccens", "--events", str(events), "--cohort", str(cohort), "--k", "2"]
    argv += ["--caps", "250=2,272=2,401=0,724=1", "--out", str(out), "--report", str(report)]
    assert main(argv) == 0
    released = pd.read_csv(out, dtype=str)
    assert list(released.columns) == ["patient_id", "code"]
    assert set(released["patient_id"]) <= {"R001", "R002", "R003"}  # release ids, never the names
    argv += ["--crosswalk", str(tmp_path / "crosswalk.csv")]
    assert main(argv) == 0
    got = (
        _in_source_ids(out, tmp_path / "crosswalk.csv").groupby("patient_id")["code"].apply(sorted).to_dict()
    )
    assert got == {"Alan": ["250"], "Tom": ["272", "724"], "Bella": ["250", "272"]}
    rep = json.loads(report.read_text())
    assert rep["verification"]["ok"]
    assert [r["cul"] for r in rep["per_record"]] == pytest.approx([0, 1 / 3, 1 / 3])
    assert rep["parameters"]["k"] == 2
    assert rep["cul_statistics"]["mean"] == pytest.approx(2 / 9)


def test_cli_errors_are_one_line(tmp_path, capsys):
    from engine.commands.cli import main

    events, cohort = _write_figure_1(tmp_path)
    base = [
        "anonymize",
        "gccens",
        "--events",
        str(events),
        "--cohort",
        str(cohort),
        "--out",
        str(tmp_path / "o.csv"),
    ]
    assert main([*base, "--k", "2", "--caps", "250:2"]) == 2
    assert "--caps entry 1" in capsys.readouterr().err
    assert main([*base, "--k", "9"]) == 2  # only 7 patients in the population
    err = capsys.readouterr().err
    assert "cannot be reached" in err and "\n" not in err.strip()
    assert not (tmp_path / "o.csv").exists()


def test_selected_rolled_up_codes_verify_against_the_original_population():
    """The paper's four 3-digit codes: roll 5-digit codes up, keep the chosen ones, and the release's
    item_codes let the risk engine verify against the original (unrolled) population."""
    from dataclasses import replace

    from engine.anonymize.censor import rolled_item_codes, select_codes

    rng = np.random.default_rng(5)
    vocab = ["250.00", "250.02", "272.4", "401.1", "401.9", "786.50"]
    rows = [(f"p{i:03d}", vocab[j]) for i in range(120) for j in rng.integers(0, 6, rng.integers(1, 7))]
    pop = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "code"]))
    cohort = pop.subset(pop.patient_ids[::4])
    roll = {c: c.split(".")[0] for c in vocab}
    chosen = ["250", "272", "401"]
    sel_cohort, sel_pop = select_codes(cohort, chosen, roll), select_codes(pop, chosen, roll)
    assert set(sel_cohort.items) <= set(chosen)
    assert sel_cohort.n_patients == cohort.n_patients
    release = gccens(sel_cohort, sel_pop, 4)
    release = replace(release, item_codes=rolled_item_codes(pop.items, roll))
    assert release.item_codes["401"] == {"401.1", "401.9"}
    on_original = risk.verify(release, K_MAP, 4, pop)
    on_rolled = risk.verify(replace(release, item_codes={}), K_MAP, 4, sel_pop)
    np.testing.assert_array_equal(on_original.distinguishability, on_rolled.distinguishability)
    assert on_original.ok


def test_selected_codes_leave_patients_without_codes_in_place():
    """Patients (and last visits) with none of the chosen codes stay, as empty records."""
    from engine.anonymize.censor import select_codes

    df = pd.DataFrame(
        {
            "patient_id": ["a", "a", "b", "c", "c"],
            "visit": [1, 2, 1, 1, 2],
            "code": ["250.00", "786.50", "786.50", "250.00", "786.50"],
        }
    )
    recs = Records.from_frame(df)
    sel = select_codes(recs, ["250.00"])
    assert sel.n_patients == 3
    assert [sel.patient_codes(i) for i in range(3)] == [["250.00"], [], ["250.00"]]
    release = gccens(sel, sel, 3)
    assert risk.verify(release, K_MAP, 3, sel).ok


def test_cli_population_file_scope_and_variant(tmp_path):
    from engine.commands.cli import main

    events, cohort = _write_figure_1(tmp_path)
    pd.DataFrame({"patient_id": ["Alan", "Tom", "Bella", "Eric", "John"]}).to_csv(
        tmp_path / "pop.csv", index=False
    )
    out = tmp_path / "released.csv"
    argv = ["anonymize", "gccens", "--events", str(events), "--population", str(tmp_path / "pop.csv")]
    argv += ["--cohort", str(cohort), "--k", "2", "--variant", "targeted", "--out", str(out)]
    argv += ["--crosswalk", str(tmp_path / "crosswalk.csv")]
    assert main(argv) == 0
    got = (
        _in_source_ids(out, tmp_path / "crosswalk.csv").groupby("patient_id")["code"].apply(sorted).to_dict()
    )
    # without Dan in P, Alan's {250} still has Bella, John, Alan; Bella keeps 250 x2 (Bella, John)
    assert got == {"Alan": ["250"], "Tom": ["272", "724"], "Bella": ["250", "250", "272"]}
    import json

    rep = tmp_path / "report.json"
    assert main([*argv, "--scope", "cohort", "--report", str(rep)]) == 0
    report = json.loads(rep.read_text())
    assert report["parameters"]["scope"] == "cohort" and report["parameters"]["variant"] == "targeted"
    assert report["verification"]["ok"] and report["verification"]["adversary"] == "cohort / all visits"


def _many_codes(n_codes: int = 70, n_patients: int = 40) -> pd.DataFrame:
    """Events over `n_codes` real ICD-9-CM codes (more than numpy's 64 array dimensions)."""
    from engine.vocab import phecode_map

    codes = sorted(phecode_map()["icd9"].astype(str).unique())[:n_codes]
    rows = [
        (f"P{p:03d}", codes[c]) for p in range(n_patients) for c in range(n_codes) if (p * 7 + c) % 3 == 0
    ]
    return pd.DataFrame(rows, columns=["patient_id", "code"])


def test_dominance_counter_with_more_than_64_codes_capped_at_zero():
    # finding 8 of issue 12: a cap grid of 70 axes (cap 0 on 70 codes) exceeded numpy's 64 dimensions
    rng = np.random.default_rng(5)
    cands = rng.integers(0, 3, size=(120, 72))
    top = np.zeros(72, dtype=np.int64)
    top[[3, 40]] = 2  # two codes keep a cap, the other 70 are capped at 0
    capped = np.minimum(cands, top)
    targets = np.minimum(rng.integers(0, 3, size=(50, 72)), top)
    brute = np.array([(capped >= t).all(axis=1).sum() for t in targets])
    counter = DominanceCounter(cands, top)
    assert counter.dense
    np.testing.assert_array_equal(counter.count(targets), brute)
    everything_zero = DominanceCounter(cands, np.zeros(72, dtype=np.int64))
    np.testing.assert_array_equal(everything_zero.count(np.zeros((3, 72))), [120, 120, 120])


@pytest.mark.parametrize("scope", ["population", "cohort"])
def test_universal_cap_zero_with_more_than_64_codes(scope):
    pop = Records.from_frame(_many_codes())
    sample = pop.subset(pop.patient_ids[:12])
    problem = prepare(sample, pop if scope == "population" else None, scope)
    assert len(problem.codes) > 64
    release = gccens_run(problem, 2, cap=0)
    assert release.records.n_events == 0 and release.loss["k_reached"]
    assert release.loss["censored_by_caps"] == sample.n_events
    adversary = Adversary(scope, "all_visits")
    assert risk.verify(release, adversary, 2, pop if scope == "population" else None).ok


def test_cli_cap_zero_with_more_than_64_codes(tmp_path):
    from engine.commands.cli import main

    events = _many_codes()
    events.to_csv(tmp_path / "events.csv", index=False)
    ids = events["patient_id"].drop_duplicates().head(12)
    pd.DataFrame({"patient_id": ids}).to_csv(tmp_path / "cohort.csv", index=False)
    argv = ["anonymize", "gccens", "--events", str(tmp_path / "events.csv")]
    argv += ["--cohort", str(tmp_path / "cohort.csv"), "--k", "2", "--cap", "0"]
    assert main([*argv, "--out", str(tmp_path / "released.csv")]) == 0


# Releases of GCCens with all codes on the shipped sample (k = 5, per-code caps), as the code before
# the issue-16 speed-ups gave them (measured with engine/anonymize/censor.py of the parent commit):
# the release's fingerprint, a digest of its steps, and the number of steps.
SAMPLE_ALL_CODES = {
    ("faithful", "population"): (
        "32719ba6b357a5cc1a41ae62e6ad42d50c8251d5845fdd84ea72cfa197a49078",
        "c90b1abbd6259acd",
        4058,
    ),
    ("targeted", "population"): (
        "39c1f7b10dcff4d8705113fa21934f86517245fc588d5b94639c4693f5b152cf",
        "d586552824d03c24",
        4060,
    ),
}


@pytest.mark.parametrize(("variant", "scope"), sorted(SAMPLE_ALL_CODES))
def test_all_codes_on_the_sample_are_unchanged_by_the_speed_ups(sample_dataset, variant, scope):
    """Issue 16: the faster loop (one-at-a-time bitset checks, the targeted variant's level
    histogram instead of rescanning the records below k) releases exactly what it did before."""
    import hashlib
    import json

    from engine.study.runs import CodeSelection, GCCensSettings, RunInputs

    ds = sample_dataset
    inputs = RunInputs(ds.events, ds.group_records("cohort"), ds.group_records("biobank"))
    release = GCCensSettings(codes=CodeSelection("all"), variant=variant, scope=scope).run(inputs)
    steps = release.loss["steps"]
    digest = hashlib.sha256(json.dumps(steps).encode()).hexdigest()[:16]
    assert (release.records.fingerprint, digest, len(steps)) == SAMPLE_ALL_CODES[(variant, scope)]


@pytest.mark.parametrize(
    "extra", [[], ["--cap", "1"], ["--caps", "250=1", "--scope", "cohort", "--variant", "targeted"]]
)
def test_the_cli_runs_the_settings_the_app_and_a_study_run(tmp_path, extra):
    """Issue 17: one way to run a method. The command's options become `GCCensSettings` (all codes);
    its release file is the one `GCCensSettings.run` exports for the same groups."""
    from engine.commands.cli import main
    from engine.commands.inputs import load_groups
    from engine.io.export import pseudonymous_frame, safe_csv_bytes
    from engine.study.runs import CodeSelection, GCCensSettings, RunInputs
    from tests.pseudonym_support import KEY, PSEUDONYMS

    events, cohort = _write_figure_1(tmp_path)
    out, key = tmp_path / "released.csv", tmp_path / "key"
    key.write_text(KEY)
    assert (
        main(
            [
                "anonymize",
                "gccens",
                "--events",
                str(events),
                "--cohort",
                str(cohort),
                "--k",
                "2",
                *extra,
                "--out",
                str(out),
                "--key-file",
                str(key),
            ]
        )
        == 0
    )
    opts = dict(zip(extra[::2], extra[1::2], strict=True))
    settings = GCCensSettings(
        k=2,
        scope=opts.get("--scope", "population"),
        codes=CodeSelection("all"),
        cap=int(opts["--cap"]) if "--cap" in opts else None,
        caps=(("250", 1),) if "--caps" in opts else (),
        variant=opts.get("--variant", "faithful"),
    )
    g = load_groups(str(events), cohort=str(cohort))
    release = settings.run(RunInputs(g.population, g.cohort))
    assert out.read_bytes() == safe_csv_bytes(pseudonymous_frame(release, PSEUDONYMS))
