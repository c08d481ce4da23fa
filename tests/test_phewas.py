"""PheWAS: phenotype rules, p-values against an independent scipy computation, released items,
and the Table 4 comparison."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2_contingency

from engine.records import Records
from engine.release import Release, set_item_label
from engine.utility.phewas import (
    PhewasSettings,
    paired,
    phecode_table,
    phenotype_matrix,
    r_squared,
    run_phewas,
    significance_table,
)


def _cohort(n: int = 400, seed: int = 1):
    """Patients with hypertension (401.1 / 401.9 -> phecode 401.1), some with CAD (414.01 -> 411.4,
    rolling up to 411), the rest with an unrelated code; SNP `rsX` raises the odds of CAD."""
    rng = np.random.default_rng(seed)
    ids = [f"P{i:04d}" for i in range(n)]
    g = rng.binomial(2, 0.3, size=n).astype(float)
    g[rng.random(n) < 0.03] = np.nan
    rows = []
    for i, pid in enumerate(ids):
        rows.append((pid, 1, "401.1" if i % 2 else "401.9"))
        risk = 0.15 * (1 + (0 if np.isnan(g[i]) else g[i]))
        if rng.random() < risk:
            rows.append((pid, 2, "414.01"))
            if rng.random() < 0.5:
                rows.append((pid, 3, "414.01"))
        else:
            rows.append((pid, 2, "724.2"))
    events = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    geno = pd.DataFrame({"patient_id": ids, "rsX": g})
    return Records.from_frame(events), geno


def _independent_p(records: Records, geno: pd.DataFrame, case_codes: set[str], excl_codes_pred, test: str):
    """Cases/controls from raw code lists, then scipy's contingency test (no continuity correction)."""
    gmap = dict(zip(geno["patient_id"], geno["rsX"], strict=True))
    case_g, ctrl_g = [], []
    for p, pid in enumerate(records.patient_ids):
        codes = set(records.patient_codes(p))
        gv = gmap[pid]
        if np.isnan(gv):
            continue
        if codes & case_codes:
            case_g.append(int(gv))
        elif not any(excl_codes_pred(c) for c in codes):
            ctrl_g.append(int(gv))
    if test == "allelic":
        a = sum(case_g)
        c = sum(ctrl_g)
        table = [[a, 2 * len(case_g) - a], [c, 2 * len(ctrl_g) - c]]
    else:
        table = [[case_g.count(v) for v in (0, 1, 2)], [ctrl_g.count(v) for v in (0, 1, 2)]]
        table = np.array(table)
        table = table[:, table.sum(axis=0) > 0]
    return chi2_contingency(np.asarray(table), correction=False).pvalue, len(case_g), len(ctrl_g)


@pytest.mark.parametrize("test", ["allelic", "genotypic"])
def test_p_values_match_scipy(test):
    records, geno = _cohort()
    res = run_phewas(phenotype_matrix(records), geno, PhewasSettings(min_cases=20, test=test))
    # 411.4 (coronary atherosclerosis) rolls up to 411; its exclusion range is 411-414.99
    in_range = lambda c: c.startswith(("411", "412", "413", "414"))  # noqa: E731
    for phecode in ("411.4", "411"):
        row = res[(res.phecode == phecode) & (res.snp == "rsX")].iloc[0]
        p, n_case, n_ctrl = _independent_p(records, geno, {"414.01"}, in_range, test)
        assert row.n_cases == n_case and row.n_controls == n_ctrl
        assert row.p == pytest.approx(p, rel=1e-9)
    # hypertension: every patient is a case, so no controls and no test
    assert not (res.phecode == "401.1").any()


def test_planted_association_is_found():
    records, geno = _cohort(n=1200, seed=3)
    res = run_phewas(phenotype_matrix(records), geno)
    row = res[res.phecode == "411.4"].iloc[0]
    assert row.p < 1e-4 and row.odds_ratio > 1.3
    assert row.ci_low < row.odds_ratio < row.ci_high


def test_min_code_count_counts_visits():
    records, geno = _cohort()
    pm = phenotype_matrix(records)
    j = list(pm.phecodes).index("411.4")
    counts = pm.counts[:, j].toarray().ravel()
    brute = np.array(
        [sum("414.01" in v for v in records.patient_visits(p)) for p in range(records.n_patients)]
    )
    assert (counts == brute).all()
    two = run_phewas(pm, geno, PhewasSettings(min_code_count=2, min_cases=5))
    one = run_phewas(pm, geno, PhewasSettings(min_code_count=1, min_cases=5))
    n2 = two[two.phecode == "411.4"].n_cases.iloc[0]
    n1 = one[one.phecode == "411.4"].n_cases.iloc[0]
    assert n2 < n1
    # patients with exactly one occurrence are neither cases nor controls under min_code_count=2
    assert two[two.phecode == "411.4"].n_controls.iloc[0] == one[one.phecode == "411.4"].n_controls.iloc[0]


def test_rollup_flag_is_respected():
    table = phecode_table()
    idx = table.index()
    # 414.01 rolls up: counts toward 411.4 and 411
    assert {idx["411.4"], idx["411"]} <= set(table.code_phecodes["414.01"])
    # 251.0 has Rollup 0 in the v1.2 map: only its own phecode
    assert table.code_phecodes["251.0"] == frozenset({idx["251.1"]})


def test_generalized_items_count_only_within_one_phecode():
    records, geno = _cohort()
    df = records.to_frame()
    # inside phecode 401.1: {401.1,401.9} loses nothing; across phecodes: {414.01,724.2} counts for neither
    within = set_item_label(["401.1", "401.9"])
    across = set_item_label(["414.01", "724.2"])
    df["code"] = (
        df["code"]
        .map({"401.1": within, "401.9": within, "414.01": across, "724.2": across})
        .fillna(df["code"])
    )
    rel = Release(
        "test",
        Records.from_frame(df),
        item_codes={within: frozenset({"401.1", "401.9"}), across: frozenset({"414.01", "724.2"})},
    )
    pm_o = phenotype_matrix(records)
    pm_r = phenotype_matrix(rel.records, rel.item_codes)
    j401 = list(pm_o.phecodes).index("401.1")
    j411 = list(pm_o.phecodes).index("411.4")
    assert (pm_r.counts[:, j401].toarray() == pm_o.counts[:, j401].toarray()).all()
    assert pm_r.counts[:, j411].nnz == 0
    # the conservative control rule: every holder of the mixed item is excluded from 411.4's controls
    assert pm_r.excluded[:, j411].nnz == records.n_patients
    assert run_phewas(pm_r, geno).query("phecode == '411.4'").empty


def test_significance_table_counts_lost_and_false():
    orig = pd.DataFrame(
        {
            "snp": ["s"] * 4,
            "phecode": ["1", "2", "3", "4"],
            "phenotype": ["a", "b", "c", "d"],
            "n_cases": [30] * 4,
            "odds_ratio": [1.0] * 4,
            "p": [0.01, 0.04, 0.5, 0.2],
            "p_bonferroni": [0.04, 0.16, 1.0, 0.8],
            "p_bh": [0.04, 0.08, 0.5, 0.27],
        }
    )
    rel = orig.copy()
    rel["p"] = [0.01, 0.3, 0.01, 0.2]  # phecode 2 lost, phecode 3 false
    rel = rel[rel.phecode != "4"]  # a test that did not run is not significant
    t = significance_table(orig, {"R": rel}, correction="heatherly2013")  # Table 4's setting
    s = t[t.snp == "s"].iloc[0]
    assert (s["original"], s["R: lost"], s["R: false"], s["R: identical"]) == (2, 1, 1, 1)
    assert t[t.snp == "Total"].iloc[0]["R: lost"] == 1
    pr = paired(orig, rel)
    assert np.isnan(pr.loc[pr.phecode == "4", "p_released"]).all()
    assert r_squared(paired(orig, orig)) == pytest.approx(1.0)


def test_paired_with_an_empty_release_is_numeric():
    records, geno = _cohort()
    orig = run_phewas(phenotype_matrix(records), geno)
    empty = orig.iloc[0:0]
    pr = paired(orig, empty)
    assert pr["p_released"].isna().all() and pr["neglog10_original"].notna().all()


def test_significance_table_defaults_to_benjamini_hochberg():
    """Issue 16: uncorrected p <= 0.05 over a scan counts chance findings as associations; the default
    counts BH-adjusted p, and Heatherly's setting stays a named option."""
    orig = pd.DataFrame(
        {
            "snp": ["s"] * 3,
            "phecode": ["1", "2", "3"],
            "phenotype": ["a", "b", "c"],
            "n_cases": [30] * 3,
            "odds_ratio": [1.0] * 3,
            "p": [0.001, 0.04, 0.5],
            "p_bonferroni": [0.003, 0.12, 1.0],
            "p_bh": [0.003, 0.06, 0.5],
        }
    )
    default = significance_table(orig, {"R": orig})
    assert default.iloc[0]["original"] == 1  # only 0.001 survives BH at 0.05
    assert significance_table(orig, {"R": orig}, correction="heatherly2013").iloc[0]["original"] == 2
    assert significance_table(orig, {"R": orig}, correction="none").iloc[0]["original"] == 2
    with pytest.raises(ValueError, match="correction must be one of"):
        significance_table(orig, {"R": orig}, correction="holm")


def _significance_table_per_snp(original, released, alpha, col):
    """The formula significance_table used before issue 13 (one `paired` merge per SNP), kept as the
    reference its vectorized form must match."""
    rows = []
    for snp in sorted(set(original["snp"])):
        o = original[original["snp"] == snp]
        row = {"snp": snp, "original": int((o[col] <= alpha).sum())}
        for name, rel in released.items():
            pr = paired(o, rel[rel["snp"] == snp])
            sig_o = (pr[f"{col}_original"] <= alpha).fillna(False).astype(bool)
            sig_r = (pr[f"{col}_released"] <= alpha).fillna(False).astype(bool)
            row[f"{name}: lost"] = int((sig_o & ~sig_r).sum())
            row[f"{name}: false"] = int((~sig_o & sig_r).sum())
            row[f"{name}: identical"] = int((sig_o & sig_r).sum())
        rows.append(row)
    table = pd.DataFrame(rows)
    if len(table):
        total = table.drop(columns="snp").sum(numeric_only=True)
        table = pd.concat([table, pd.DataFrame([{"snp": "Total", **total.to_dict()}])], ignore_index=True)
    return table


def test_significance_table_equals_the_per_snp_formula():
    """Issue 13: the table is one merge and one groupby per release instead of a merge per SNP; on
    several SNPs, tests that did not run (NaN p, rows missing on either side), a SNP only in a release,
    a SNP absent from a release and an empty release, it is the old per-SNP table exactly."""
    rng = np.random.default_rng(13)
    rows = []
    for snp in ("rs2", "rs1", "rs3"):
        for code in ("8", "250.2", "401.1", "411.4", "714.1"):
            p = float(rng.choice([0.001, 0.02, 0.2, 0.7, np.nan]))
            rows.append((snp, code, "x", 30, 1.0, p, min(1.0, p * 5), min(1.0, p * 2)))
    cols = ["snp", "phecode", "phenotype", "n_cases", "odds_ratio", "p", "p_bonferroni", "p_bh"]
    orig = pd.DataFrame(rows, columns=cols)
    rel_a = orig.sample(frac=1.0, random_state=1).iloc[3:].copy()  # shuffled, three tests missing
    rel_a["p"] = rng.choice([0.001, 0.03, 0.4, np.nan], size=len(rel_a))
    rel_a["p_bh"] = rng.choice([0.001, 0.03, 0.4, np.nan], size=len(rel_a))
    rel_a = rel_a[rel_a.snp != "rs3"]  # a SNP the release lacks
    extra = pd.DataFrame([("rs9", "8", "x", 30, 1.0, 0.001, 0.001, 0.001)], columns=cols)
    rel_a = pd.concat([rel_a, extra], ignore_index=True)  # a SNP only in the release
    released = {"A": rel_a, "B": orig.iloc[0:0], "C": orig}
    for correction, col in (("heatherly2013", "p"), ("bh", "p_bh"), ("bonferroni", "p_bonferroni")):
        got = significance_table(orig, released, correction=correction)
        want = _significance_table_per_snp(orig, released, 0.05, col)
        pd.testing.assert_frame_equal(got, want)
    assert significance_table(orig.iloc[0:0], released).empty
