"""Issue 39, third bullet: differentially private prevalence tables through OpenDP
(engine/disclosure/dp_tables.py). The bound on codes per patient is the sensitivity (checked against a
brute force on random small data), OpenDP's privacy map meets the budget, the noise shrinks with
epsilon, and the command refuses a bad budget by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.commands.cli import main
from engine.disclosure.dp_tables import (
    MAX_EPSILON,
    bounded_code_sets,
    bounded_prevalence,
    check_budget,
    dp_prevalence,
    exact_prevalence,
)
from engine.io.errors import UserError
from engine.records import Records

CODES = ["250", "272", "401", "724", "427.31", "810.03", "V70.0"]


def _records(rows) -> Records:
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


@st.composite
def cohorts(draw):
    rows = []
    for p in range(draw(st.integers(1, 8))):
        for c in draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=7)):
            rows.append((f"p{p}", 1, c))
    return rows


@settings(max_examples=40, deadline=None)
@given(
    rows=cohorts(), extra=st.lists(st.sampled_from(CODES), min_size=1, max_size=7), bound=st.integers(1, 4)
)
def test_one_patient_moves_the_bounded_table_by_at_most_the_bound(rows, extra, bound):
    """The sensitivity OpenDP is told: adding a patient changes the bounded table by at most `bound`
    in L1 (brute force over the two tables), and no patient keeps more than `bound` codes."""
    before = _records(rows)
    after = _records(rows + [("new", 1, c) for c in extra])
    sets, truncated = bounded_code_sets(after, bound)
    assert int(np.diff(sets.indptr).max()) <= bound
    assert truncated == sum(len(set(after.patient_codes(p))) > bound for p in range(after.n_patients))
    moved = np.abs(bounded_prevalence(after, CODES, bound) - bounded_prevalence(before, CODES, bound)).sum()
    assert moved <= bound
    # the bound keeps the same codes of a patient whatever the others hold
    kept = {after.items[j] for j in sets.indices[sets.indptr[-2] : sets.indptr[-1]]}
    alone = _records([("new", 1, c) for c in extra])
    s2, _ = bounded_code_sets(alone, bound)
    assert kept == {alone.items[j] for j in s2.indices}


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_the_privacy_loss_meets_the_budget_and_huge_epsilon_is_exact(delta):
    rec = _records([(f"p{i}", 1, CODES[i % 5]) for i in range(40)] + [("p0", 1, "V70.0")])
    t = dp_prevalence(rec, CODES, 1.0, delta, max_codes=2)
    assert t.epsilon <= 1.0 and (delta is None or t.delta <= delta)
    assert t.mechanism == ("laplace" if delta is None else "gaussian")
    assert list(t.table["code"]) == CODES and (t.table["patients"] >= 0).all()
    exact = exact_prevalence(rec, CODES)
    assert exact.tolist() == [8, 8, 8, 8, 8, 0, 1]
    sharp = dp_prevalence(rec, CODES, MAX_EPSILON, delta, max_codes=2)
    # scale 10 / 50 = 0.2: over 1,866 cells a noise of 2 comes once in about 6 draws, of 4 once in 130,000
    assert np.abs(sharp.table["patients"].to_numpy() - exact).max() <= 3


def test_the_error_shrinks_with_epsilon():
    rec = _records([(f"p{i}", 1, c) for i in range(300) for c in CODES[: 1 + i % 7]])
    exact = exact_prevalence(rec, CODES)
    errors = [
        dp_prevalence(rec, CODES, e, max_codes=7).error(exact)["mean absolute error"] for e in (0.1, 10)
    ]
    assert errors[0] > 5 * errors[1]  # Laplace scale 70 against 0.7


@pytest.mark.parametrize(
    ("epsilon", "delta", "words"),
    [
        (0, None, "epsilon"),
        (float("inf"), None, "epsilon"),
        (MAX_EPSILON * 2, None, "epsilon"),
        (-1, None, "epsilon"),
        (1, 1.5, "delta"),
        (1, 0, "delta"),
    ],
)
def test_a_bad_budget_is_refused_by_name(epsilon, delta, words):
    with pytest.raises(UserError, match=words):
        check_budget(epsilon, delta)


def test_dp_table_command_writes_the_table_and_states_the_budget(tmp_path, capsys):
    rows = [(f"p{i}", 1, c) for i in range(50) for c in CODES[: 1 + i % 7]]
    ev, codes = tmp_path / "events.csv", tmp_path / "codes.csv"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)
    pd.DataFrame({"code": [*CODES, "=HYPERLINK(1)"]}).to_csv(codes, index=False)  # a public list, untrusted
    out = tmp_path / "dp.csv"
    args = ["dp-table", "--events", str(ev), "--codes", str(codes), "--epsilon", "1", "--max-codes", "3"]
    args += ["--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert (
        "epsilon 1" in printed and "codes per patient kept: 3" in printed and "mean absolute error" in printed
    )
    table = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(table.columns) == ["code", "patients"] and len(table) == len(CODES) + 1
    assert not any(c.startswith("=") for c in table["code"])  # exported so that no spreadsheet evaluates it
    assert main([*args[:-2], "--epsilon", "0", "--out", str(out)]) == 2
    assert "epsilon must be a positive number" in capsys.readouterr().err


def test_a_codes_file_without_its_column_is_refused_by_name(tmp_path, capsys):
    ev, codes = tmp_path / "events.csv", tmp_path / "codes.csv"
    pd.DataFrame([("p1", 1, "250")], columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)
    pd.DataFrame({"icd": ["250"]}).to_csv(codes, index=False)
    args = [
        "dp-table",
        "--events",
        str(ev),
        "--codes",
        str(codes),
        "--epsilon",
        "1",
        "--out",
        str(tmp_path / "o.csv"),
    ]
    assert main(args) == 2
    assert "no column named 'code'" in capsys.readouterr().err


def test_the_ledger_spends_a_recipients_budget_and_refuses_beyond_it(tmp_path, capsys):
    """Tables to one recipient add up (sequential composition): 0.5 + 0.5 fits a budget of 1, a third
    is refused before any noise (exit 2, no file written), and another recipient has its own budget."""
    rows = [(f"p{i}", 1, c) for i in range(30) for c in CODES[: 1 + i % 7]]
    ev, ledger = tmp_path / "events.csv", tmp_path / "ledger.json"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)

    def table(name, recipient, eps, *extra):
        out = tmp_path / name
        args = ["dp-table", "--events", str(ev), "--epsilon", str(eps), "--out", str(out)]
        return main([*args, "--ledger", str(ledger), "--recipient", recipient, *extra]), out

    assert table("a.csv", "Lab A", 0.5, "--budget", "1")[0] == 0
    assert table("b.csv", "Lab A", 0.5)[0] == 0
    assert "spent epsilon 1 of 1" in capsys.readouterr().out
    code, out = table("c.csv", "Lab A", 0.1)
    assert code == 2 and not out.exists()
    assert "would exceed it" in capsys.readouterr().err
    assert table("d.csv", "Lab B", 0.1)[0] == 2  # no budget stated for Lab B
    assert "no privacy budget" in capsys.readouterr().err
    assert table("d.csv", "Lab A", 0.1, "--budget", "2")[0] == 2  # a stated budget is not raised
    assert "not changed" in capsys.readouterr().err
    from engine.disclosure.dp_budget import read_ledger

    saved = read_ledger(ledger)
    assert saved.spent("Lab A") == (1.0, 0.0) and [s.table for s in saved.spends] == ["a.csv", "b.csv"]
    tampered = ledger.read_text().replace('"epsilon": 0.5', '"epsilon": 0.75', 1)
    ledger.write_text(tampered)
    with pytest.raises(UserError, match="would exceed it"):  # a ledger over budget is never believed
        read_ledger(ledger)


def test_a_phecode_table_counts_patients_per_phecode_over_the_whole_map(tmp_path, capsys):
    """Phecode prevalence (issue 39): categories are every phecode of the public v1.2 map, whatever the
    data hold; a patient counts once per phecode one of their codes counts toward."""
    from engine.disclosure.dp_tables import PatientSets
    from engine.utility.phewas import phecode_table, phenotype_matrix

    rows = [(f"p{i}", 1, "250.00") for i in range(6)] + [(f"p{i}", 2, "401.1") for i in range(3)]
    rec = _records([*rows, ("p0", 3, "250.01")])  # two codes, one phecode: counted once
    sets = PatientSets.of_phecodes(rec)
    phecodes = list(phecode_table().phecodes.astype(str))
    assert list(sets.labels) == phecodes
    exact = exact_prevalence(sets, phecodes)
    m = phenotype_matrix(rec)
    assert exact.tolist() == np.asarray((m.counts > 0).sum(axis=0)).ravel().tolist()
    assert exact[phecodes.index("250.2")] == 6 and exact[phecodes.index("401.1")] == 3
    sharp = dp_prevalence(sets, phecodes, MAX_EPSILON, max_codes=10)
    # scale 10 / 50 = 0.2: over 1,866 cells a noise of 2 comes once in about 6 draws, of 4 once in 130,000
    assert np.abs(sharp.table["patients"].to_numpy() - exact).max() <= 3
    ev = tmp_path / "events.csv"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)
    out = tmp_path / "phe.csv"
    args = ["dp-table", "--events", str(ev), "--phecodes", "--epsilon", "1", "--out", str(out)]
    assert main(args) == 0
    assert pd.read_csv(out, dtype=str)["code"].tolist() == phecodes
    assert "phecodes" in capsys.readouterr().out
