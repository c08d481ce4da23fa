"""Issue 39: differentially private PheWAS case/control tables (engine/disclosure/dp_phewas.py). The
stated sensitivity holds against a brute force, the tables read back give the exact PheWAS, the
clipping keeps every count at least 0, and `dp-table --phewas --genotypes` writes the tables and says
the associations kept."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.commands.cli import main
from engine.disclosure.dp_phewas import (
    associations_kept,
    bounded_phenotypes,
    count_vector,
    counts_of_vector,
    dp_phewas,
    table_of_counts,
)
from engine.disclosure.dp_tables import MAX_EPSILON
from engine.records import Records
from engine.utility.phewas import (
    PhewasSettings,
    phenotype_matrix,
    phewas_counts,
    phewas_of_counts,
    run_phewas,
)

CODES = ["250.00", "401.1", "427.31", "272.1", "724.2", "296.20", "V70.0"]
SNPS = ["rs1", "rs2"]


def _records(rows) -> Records:
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


def _vector(rows, genos, bound):
    phen, _ = bounded_phenotypes(phenotype_matrix(_records(rows)), bound)
    frame = pd.DataFrame(genos, columns=["patient_id", *SNPS])
    return count_vector(phewas_counts(phen, frame))


@st.composite
def cohorts(draw):
    rows, genos = [], []
    for p in range(draw(st.integers(1, 6))):
        for c in draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=6)):
            rows.append((f"p{p}", 1, c))
        genos.append((f"p{p}", *draw(st.lists(st.sampled_from([0, 1, 2, None]), min_size=2, max_size=2))))
    return rows, genos


@settings(max_examples=25, deadline=None)
@given(
    cohort=cohorts(),
    extra=st.lists(st.sampled_from(CODES), min_size=1, max_size=6),
    geno=st.lists(st.sampled_from([0, 1, 2, None]), min_size=2, max_size=2),
    bound=st.integers(1, 4),
)
def test_one_patient_moves_the_phewas_tables_by_at_most_the_stated_sensitivity(cohort, extra, geno, bound):
    """Adding a patient changes the noised vector by at most snps x (bound + 1) in L1 and by at most 1
    per cell (the L2 sensitivity's premise), brute force over the two vectors."""
    rows, genos = cohort
    before = _vector(rows, genos, bound)
    after = _vector(rows + [("new", 1, c) for c in extra], [*genos, ("new", *geno)], bound)
    moved = np.abs(after - before)
    assert moved.sum() <= len(SNPS) * (bound + 1)
    assert moved.max() <= 1


def _associated(n=120):
    """A cohort where rs1 goes with diabetes (250.00) and rs2 with nothing."""
    rng = np.random.default_rng(0)
    rows, genos = [], []
    for i in range(n):
        g1, g2 = int(rng.integers(0, 3)), int(rng.integers(0, 3))
        rows.append((f"p{i}", 1, "V70.0"))
        if rng.random() < 0.1 + 0.35 * g1:
            rows.append((f"p{i}", 1, "250.00"))
        if rng.random() < 0.3:
            rows.append((f"p{i}", 2, "401.1"))
        genos.append((f"p{i}", g1, g2))
    return rows, pd.DataFrame(genos, columns=["patient_id", *SNPS])


def test_the_tables_read_back_give_the_exact_phewas():
    """Without noise and a bound no patient reaches, the vector noised reads back into the exact
    PheWAS, and the written table's counts are the cases and controls that PheWAS tests."""
    rows, genos = _associated()
    rec = _records(rows)
    phen = phenotype_matrix(rec)
    exact = phewas_counts(phen, genos)
    bounded, truncated = bounded_phenotypes(phen, 1000)
    assert truncated == 0
    back = counts_of_vector(exact, count_vector(phewas_counts(bounded, genos)))
    s = PhewasSettings(min_cases=5)
    pd.testing.assert_frame_equal(phewas_of_counts(back, s), run_phewas(phen, genos, s))
    table = table_of_counts(back)
    row = run_phewas(phen, genos, s).query("snp == 'rs1' and phecode == '250.2'").iloc[0]
    mine = table[(table["snp"] == "rs1") & (table["phecode"] == "250.2")]
    assert mine["cases"].sum() == row["n_cases"] and mine["controls"].sum() == row["n_controls"]
    assert associations_kept(run_phewas(phen, genos, s), phewas_of_counts(back, s))["lost"] == 0


def test_negative_noisy_counts_and_controls_read_zero():
    """Clipping, stated: a negative count reads 0; excluded above the genotype total leaves 0 controls."""
    rows, genos = _associated(30)
    exact = phewas_counts(phenotype_matrix(_records(rows)), genos)
    vec = count_vector(exact).astype(np.float64)
    vec[::2] = -5  # every other cell negative
    n = len(exact.phecodes) * 3
    vec[2 * n : 2 * n + 3] = 0  # rs1's genotype totals 0: every excluded above them
    table = table_of_counts(counts_of_vector(exact, vec))
    assert (table[["cases", "controls"]] >= 0).all().all()
    assert (table.loc[table["snp"] == "rs1", "controls"] == 0).all()


def test_the_privacy_loss_meets_the_budget_and_associations_are_counted():
    """OpenDP's map at the stated sensitivity is within the budget; at the largest epsilon the strong
    association (rs1 with 250.2) is kept; a release with no association loses every one."""
    rows, genos = _associated()
    rec = _records(rows)
    for delta in (None, 1e-6):
        r = dp_phewas(rec, genos, 1.0, delta, max_phecodes=5)
        assert r.noise.epsilon <= 1.0 and r.sensitivity == 2 * 6
        assert r.noise.delta is None if delta is None else r.noise.delta <= delta
    s = PhewasSettings(min_cases=5)
    exact = run_phewas(phenotype_matrix(rec), genos, s)
    assert (exact.query("snp == 'rs1' and phecode == '250.2'")["p"] <= 0.05).all()
    sharp = dp_phewas(rec, genos, MAX_EPSILON, max_phecodes=20)
    kept = associations_kept(exact, phewas_of_counts(sharp.counts, s))
    assert kept["original"] >= 1 and kept["kept"] >= 1
    none = associations_kept(exact, exact.iloc[0:0])
    assert none == {"original": kept["original"], "kept": 0, "lost": kept["original"], "false": 0}


def test_dp_table_phewas_command_writes_the_tables_and_the_associations_kept(tmp_path, capsys):
    rows, genos = _associated()
    ev, g, out = tmp_path / "events.csv", tmp_path / "genotypes.csv", tmp_path / "dp.csv"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)
    genos.to_csv(g, index=False)
    args = ["dp-table", "--events", str(ev), "--epsilon", "1", "--out", str(out)]
    assert main([*args, "--phewas", "--genotypes", str(g)]) == 0
    table = pd.read_csv(out, dtype={"phecode": str})
    assert list(table.columns) == ["snp", "phecode", "genotype", "cases", "controls"]
    assert set(table["snp"]) == set(SNPS) and (table[["cases", "controls"]] >= 0).all().all()
    said = capsys.readouterr().out
    assert "sensitivity 42 (2 SNPs x (bound + 1))" in said and "kept" in said and "false" in said
    assert main([*args, "--phewas"]) == 2
    assert "--phewas and --genotypes go together" in capsys.readouterr().err
    ledger = tmp_path / "ledger.json"
    spend = [*args, "--phewas", "--genotypes", str(g), "--ledger", str(ledger), "--recipient", "lab"]
    assert main([*spend, "--budget", "1.5"]) == 0
    assert "lab has spent epsilon 1 of 1.5" in capsys.readouterr().out
    assert main(spend) == 2  # a second epsilon 1 would exceed the budget: refused before any noise
    assert "would exceed it" in capsys.readouterr().err
