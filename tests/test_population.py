"""Heatherly 2013: frequency-bin generalization, scopes, Diagnosis Count and Code Count (Figure 15)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.adversary import Adversary
from engine.anonymize.population import (
    anonymize,
    compare_scopes,
    frequency_bin_generalization,
    icd9_ancestor,
    parse_constraints,
    suppress_rare,
    utility_groups,
    visit_support,
)
from engine.records import Records
from engine.risk import verify
from engine.utility.retention import code_count, diagnosis_count, figures

# Figure 15, left: records 49532, 579852, 778954, 794456 and the conditions they hold ("Y").
FIG15 = {
    "49532": ["427.31", "401.0", "695.4"],
    "579852": ["053.11", "810.03"],
    "778954": ["427.31", "401.0", "810.03"],
    "794456": ["427.31", "695.4", "810.03"],
}


def records_of(data: dict[str, list[list[str]]]) -> Records:
    rows = [(p, v, c) for p, visits in data.items() for v, codes in enumerate(visits) for c in codes]
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


def fig15_records() -> Records:
    # 290.11 is in the figure's vocabulary but held by no record
    rows = [(p, 0, c) for p, codes in FIG15.items() for c in codes]
    df = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    return Records.from_frame(df, items=sorted({*df["code"], "290.11"}))


def test_figure15_counts_before():
    r = fig15_records()
    assert diagnosis_count(r) == 11
    assert code_count(r) == 5


def test_figure15_counts_after_anonymization_k2():
    # with k = 2 the procedure suppresses exactly 053.11 (held by record 579852 alone, no other code
    # of phecode 053.1 to join): Figure 15 right, DC 11 -> 10, CC 5 -> 4
    r = fig15_records()
    res = anonymize(r, r.patient_ids, 2)
    rel = res.release
    assert diagnosis_count(rel.records) == 10
    assert code_count(rel.records, rel.item_codes) == 4
    assert rel.item_codes == {}
    assert rel.suppressed[["patient_id", "code"]].values.tolist() == [["579852", "053.11"]]
    assert rel.records.patient_visits(1) == [["810.03"]]


def test_figure15_paper_procedure_leaves_residual_violation_and_completion_fixes_it():
    # the record 49532 as one visit {427.31, 401.0, 695.4} is held by that record alone: every item
    # reaches k = 2, the visit does not (the paper's claim vs its procedure)
    r = fig15_records()
    plain = anonymize(r, r.patient_ids, 2)
    assert not plain.verification.ok
    failing = plain.verification.failing
    assert set(failing["patient_id"]) == {"49532", "778954", "794456"}
    done = anonymize(r, r.patient_ids, 2, complete=True)
    assert done.verification.ok
    assert done.release.loss["completion visits below k by round"][0] == 3
    assert done.release.loss["completion visits below k by round"][-1] == 0


def test_bins_merge_within_bin_then_adjacent_bins():
    # 3-digit constraint: 250.0x share category 250. Supports (disjoint records): 250.00:1, 250.01:1,
    # 250.02:2, 250.03:3, 250.10:6 (>= k, never merged), 733.00:1 (alone in its category).
    # k = 5. width 1: bin 1 merges {250.00,250.01} (support 2); width 2: bin 1-2 merges it with
    # 250.02 (support 4); width 4: bin 1-4 merges that with 250.03 (support 7 >= 5). 733.00 suppressed.
    data: dict[str, list[list[str]]] = {}
    n = 0

    def add(code: str, times: int) -> None:
        nonlocal n
        for _ in range(times):
            data[f"p{n:02d}"] = [[code]]
            n += 1

    for code, times in [
        ("250.00", 1),
        ("250.01", 1),
        ("250.02", 2),
        ("250.03", 3),
        ("250.10", 6),
        ("733.00", 1),
    ]:
        add(code, times)
    r = records_of(data)
    utility = utility_groups(r.items, "icd9:3-digit")
    item_of_code, stats = frequency_bin_generalization(r, 5, utility)
    codes = list(r.items)
    rep = dict(zip(codes, item_of_code.tolist(), strict=True))
    assert rep["250.00"] == rep["250.01"] == rep["250.02"] == rep["250.03"] == codes.index("250.00")
    assert rep["250.10"] == codes.index("250.10")
    assert rep["733.00"] == -1
    assert stats["stages"] == 3
    assert (
        stats["codes generalized"] == 4 and stats["generalized items"] == 1 and stats["codes suppressed"] == 1
    )
    res = anonymize(r, r.patient_ids, 5, constraints="icd9:3-digit")
    assert res.release.item_codes == {
        "{250.00,250.01,250.02,250.03}": frozenset({"250.00", "250.01", "250.02", "250.03"})
    }
    assert res.verification.ok  # single-code visits: per-item k is enough here


def test_merge_needs_same_bin_until_bins_are_grouped():
    # k = 3: 250.00 (support 1) and 250.01 (support 2) sit in different bins at width 1 and join at
    # width 2; 250.00 and 401.1 differ in category and never join.
    r = records_of(
        {"a": [["250.00"]], "b": [["250.01"]], "c": [["250.01"]], "d": [["401.1"]], "e": [["401.1"]]}
    )
    item_of_code, stats = frequency_bin_generalization(r, 3, utility_groups(r.items, "icd9:3-digit"))
    codes = list(r.items)
    assert item_of_code[codes.index("250.01")] == codes.index("250.00")
    assert item_of_code[codes.index("401.1")] == -1
    assert stats["stages"] == 2


def test_merged_item_still_below_k_is_suppressed():
    r = records_of({"a": [["250.00"]], "b": [["250.01"]], "c": [["401.1"]] * 1})
    res = anonymize(r, r.patient_ids, 5, constraints="none")
    assert res.release.records.n_events == 0
    assert len(res.release.suppressed) == 3


def test_generalized_item_once_per_visit_in_visit_order():
    # Figure 13's record 49532: 401.0 and 401.1 in one visit become one item at 401.0's place
    data = {
        "49532": [["427.31", "401.0", "401.1"], ["695.4"]],
        "794456": [["427.31"], ["401.0"], ["695.4"]],
        "x": [["427.31", "401.1"]],
    }
    r = records_of(data)
    res = anonymize(r, r.patient_ids, 3, constraints="icd9:3-digit")
    label = "{401.0,401.1}"
    assert res.release.item_codes[label] == frozenset({"401.0", "401.1"})
    # 695.4 (2 records, alone in category 695) is suppressed; its visit stays, empty
    assert res.release.records.patient_visits(0) == [["427.31", label], []]
    assert res.release.records.patient_visits(1) == [["427.31"], [label], []]
    assert res.release.records.patient_visits(2) == [["427.31", label]]


def test_utility_groups():
    codes = ["401.1", "401.9", "401.0", "ZZZ.99", "ZZZ.98"]
    g = utility_groups(codes, "phecode")
    assert g[0] == g[1]  # both phecode 401.1
    assert g[2] != g[0]  # phecode 401.3
    assert g[3] != g[4]  # unmapped codes are each a group of their own
    assert len(set(utility_groups(codes, "none").tolist())) == 1
    g3 = utility_groups(codes, "icd9:3-digit")
    assert g3[0] == g3[1] == g3[2]
    with pytest.raises(ValueError, match="unknown utility constraints"):
        parse_constraints("icd10")
    assert icd9_ancestor("401.1", "section") == "401-405"
    assert icd9_ancestor("401.1", "chapter") == "390-459"
    assert icd9_ancestor("401.1", "4-digit") == "401.1"
    assert icd9_ancestor("250.01", "4-digit") == "250.0"


def _three_groups() -> tuple[dict[str, Records], np.ndarray]:
    rng = np.random.default_rng(7)
    pool = ["401.1", "401.9", "401.0", "250.00", "250.01", "250.02", "427.31", "427.32", "V45.81", "733.00"]
    weights = np.array([30, 20, 3, 15, 5, 2, 10, 2, 4, 1], dtype=float)
    rows = []
    for p in range(120):
        for v in range(rng.integers(1, 4)):
            for c in rng.choice(pool, size=rng.integers(1, 3), replace=False, p=weights / weights.sum()):
                rows.append((f"p{p:03d}", v, c))
    pop = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    ids = pop.patient_ids
    groups = {"population": pop, "biobank": pop.subset(ids[:60]), "cohort": pop.subset(ids[:20])}
    return groups, ids[:20]


def test_scopes_extract_the_same_cohort_and_verify_against_their_pool():
    groups, cohort_ids = _three_groups()
    for scope, name in (("cohort", "DEMO_D"), ("biobank", "DEMO_B"), ("population", "DEMO_S")):
        res = anonymize(groups[scope], cohort_ids, 3, scope=scope, complete=True)
        rel = res.release
        assert rel.method == f"Heatherly {name}"
        assert list(rel.records.patient_ids) == list(cohort_ids)
        if scope == "cohort":
            assert rel.population is None
            assert res.verification.adversary == Adversary("cohort", "single_visit")
        else:
            assert rel.population is res.released_group
            assert rel.population.n_patients == groups[scope].n_patients
            assert res.verification.adversary == Adversary("population", "single_visit")
        assert res.verification.ok
        # the verification is the risk engine's, recomputed here independently of the method
        again = verify(rel, res.verification.adversary, 3)
        assert (again.distinguishability == res.verification.distinguishability).all()


def test_compare_scopes_tables():
    groups, cohort_ids = _three_groups()
    cmp_ = compare_scopes(groups, cohort_ids, 3)
    t1, t2, t3 = cmp_.table1(), cmp_.table2(), cmp_.table3()
    assert list(t2["dataset"]) == ["population-Anon", "biobank-Anon", "DEMO_D", "DEMO_S", "DEMO_B"]
    assert list(t1["dataset"])[:3] == ["population*", "biobank*", "cohort*"]
    pop_dc = diagnosis_count(groups["population"])
    row = t2.set_index("dataset").loc["population-Anon"]
    assert row["with generalization: count"] == diagnosis_count(cmp_.results["population"].released_group)
    plain, _ = suppress_rare(groups["population"], cohort_ids, 3)
    assert row["without generalization: count"] == diagnosis_count(plain)
    assert row["with generalization: SD %"] == pytest.approx(100 * row["with generalization: count"] / pop_dc)
    demo = t3.set_index("dataset").loc["DEMO_D"]
    assert demo["with generalization: Local %"] == pytest.approx(
        100 * demo["with generalization: count"] / code_count(groups["cohort"])
    )
    # generalizing keeps at least as many codes as removing the rare ones
    assert (t3["with generalization: count"] >= t3["without generalization: count"]).all()


def test_deterministic():
    groups, cohort_ids = _three_groups()
    a = anonymize(groups["population"], cohort_ids, 4, scope="population", complete=True)
    b = anonymize(groups["population"], cohort_ids, 4, scope="population", complete=True)
    pd.testing.assert_frame_equal(a.release.to_frame(), b.release.to_frame())
    pd.testing.assert_frame_equal(a.release.code_map(), b.release.code_map())
    assert a.release.loss == b.release.loss


def test_visit_support_counts_visit_sets():
    r = records_of({"a": [["1", "2"], ["3"]], "b": [["1", "2", "3"]], "c": [["2"]]})
    visits, sup = visit_support(r, np.arange(3))
    assert dict(zip(visits.tolist(), sup.tolist(), strict=True)) == {0: 2, 1: 2, 2: 2, 3: 3}


def test_bad_input():
    r = fig15_records()
    with pytest.raises(ValueError, match="k must be"):
        anonymize(r, r.patient_ids, 0)
    with pytest.raises(ValueError, match="scope"):
        anonymize(r, r.patient_ids, 2, scope="galaxy")
    with pytest.raises(KeyError):
        anonymize(r, ["nobody"], 2)


def test_figures_population_size():
    r = fig15_records()
    res = anonymize(r, r.patient_ids, 4)
    f = figures(res.release.records, res.release.item_codes)
    assert f.population_size <= 4
    assert f.diagnosis_count == diagnosis_count(res.release.records)


def _cli_files(tmp_path):
    rows = ["patient_id,visit,code"]
    for p in range(1, 7):
        rows += [f"p{p},1,401.1", f"p{p},2,250.00"]
    rows += ["p1,1,401.9", "p2,3,733.00", "p3,1,427.31", "p4,3,427.31", "p4,3,733.00"]
    rows = [rows[0] + ",age"] + [r + ",50" for r in rows[1:]]  # ages are in the input, not the release
    (tmp_path / "ev.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "co.csv").write_text("patient_id\np1\np2\np3\np4\n")
    return tmp_path / "ev.csv", tmp_path / "co.csv"


@pytest.mark.parametrize("with_visits", [False, True], ids=["one set per patient", "visits kept"])
def test_cli_writes_verified_release_codemap_and_report(tmp_path, capsys, with_visits):
    import json

    from engine.commands.cli import main

    ev, co = _cli_files(tmp_path)
    out, cm, rep = tmp_path / "out.csv", tmp_path / "cm.csv", tmp_path / "r.json"
    args = ["anonymize", "generalize", "--events", str(ev), "--cohort", str(co), "--k", "2"]
    args += [
        "--constraints",
        "none",
        "--complete",
        "--out",
        str(out),
        "--codemap",
        str(cm),
        "--report",
        str(rep),
    ]
    assert main(args + (["--with-visits"] if with_visits else [])) == 0
    released = pd.read_csv(out, dtype=str)
    # the export chosen, the papers' form by default: one row per patient (and visit) and item, no ages
    expected = ["patient_id", "visit", "code"] if with_visits else ["patient_id", "code"]
    assert list(released.columns) == expected
    assert not released.duplicated().any()
    report = json.loads(rep.read_text())
    assert report["verification"]["ok"] is True
    assert report["retention"]["original"]["diagnosis_count"] == 13
    assert report["retention"]["with generalization"]["diagnosis_count"] == diagnosis_count(
        Records.from_frame(released)
    )
    codemap = pd.read_csv(cm, dtype=str)
    assert set(codemap["released_item"]) == set(released["code"])
    printed = capsys.readouterr().out
    assert "DEMO_D" in printed
    assert ("visits kept" if with_visits else "one set of codes per patient") in printed


def test_cli_refuses_unverified_release_and_bad_arguments(tmp_path, capsys):
    from engine.commands.cli import main

    ev, co = _cli_files(tmp_path)
    out = tmp_path / "out.csv"
    base = ["anonymize", "generalize", "--events", str(ev), "--cohort", str(co), "--out", str(out)]
    # k = 2: the visit {427.31, 733.00} of p4 is held by p4 alone -> not verified
    assert main([*base, "--k", "2"]) == 2
    assert "Not verified" in capsys.readouterr().err and not out.exists()
    assert main([*base, "--k", "2", "--constraints", "icd10"]) == 2
    assert "unknown utility constraints" in capsys.readouterr().err
    assert main([*base, "--k", "2", "--scope", "biobank"]) == 2
    assert "--biobank" in capsys.readouterr().err
    # a biobank that does not hold the whole cohort cannot be the anonymized group
    bio = tmp_path / "biobank.csv"
    cohort_ids = pd.read_csv(co, dtype=str)["patient_id"]
    pd.DataFrame({"patient_id": cohort_ids[:1]}).to_csv(bio, index=False)
    assert main([*base, "--k", "2", "--scope", "biobank", "--biobank", str(bio)]) == 2
    assert "not in the biobank" in capsys.readouterr().err


# ------------------------------------------------------------------------------ export structure
def test_completion_without_visits_suppresses_from_the_whole_record():
    """Without visits in the file, dropping 250.00 from P1's first visit alone hides nothing (P1's
    second visit still shows it, and P1 alone holds both codes): the completion pass drops it from
    P1's whole record."""
    r = records_of({"P1": [["401.1", "250.00"], ["250.00"]], "P2": [["401.1"]], "P3": [["250.00"]]})
    res = anonymize(r, r.patient_ids, 2, complete=True)
    assert res.verification.ok and not res.release.shows_visits
    rows = res.release.exported_frame()
    assert list(rows.columns) == ["patient_id", "code"]
    held = {p: set(g["code"]) for p, g in rows.groupby("patient_id")}
    assert "250.00" not in held["P1"]
    # every record left in the file has a look-alike (whole records)
    assert all(sum(h <= other for other in held.values()) >= 2 for h in held.values())


def test_completion_with_visits_counts_and_suppresses_within_visits():
    """The minimal case of issue 12 with visits kept: P1's visit {401.1, 250.00} is held within one
    visit by P1 alone, so the paper's procedure is refused and the completion pass fixes it."""
    r = records_of({"P1": [["401.1", "250.00"]], "P2": [["401.1"], ["250.00"]]})
    _, sup = visit_support(r, np.arange(2))
    _, within = visit_support(r, np.arange(2), within_visits=True)
    assert sup.tolist() == [2, 2, 2] and within.tolist() == [1, 2, 2]
    for scope in ("cohort", "population"):
        assert anonymize(r, r.patient_ids, 2, scope=scope).verification.ok  # one set per patient
        plain = anonymize(r, r.patient_ids, 2, scope=scope, with_visits=True)
        assert plain.release.shows_visits and not plain.verification.ok
        done = anonymize(r, r.patient_ids, 2, scope=scope, with_visits=True, complete=True)
        assert done.verification.ok and done.release.params["with_visits"]
        assert list(done.release.exported_frame().columns) == ["patient_id", "visit", "code"]
    no_visits = Records.from_frame(pd.DataFrame({"patient_id": ["a"], "code": ["401.1"]}))
    with pytest.raises(ValueError, match="no visit column"):
        anonymize(no_visits, ["a"], 2, with_visits=True)


def test_a_hierarchy_that_cannot_be_built_is_an_error_not_other_constraints(monkeypatch) -> None:
    """Issue 17: the utility constraints `icd9:LEVEL` come from `Hierarchy.icd9()` or not at all; a
    failure there used to fall back silently to digit-reading groups defined differently."""
    from engine.anonymize import population
    from engine.hierarchy import Hierarchy

    assert population.icd9_ancestor("250.00", "3-digit") == "250"
    assert population.icd9_ancestor("999.99x", "section") is None  # unknown code: a group of its own

    def broken(cls, levels=()):
        raise RuntimeError("icd9 hierarchy damaged")

    monkeypatch.setattr(Hierarchy, "icd9", classmethod(broken))
    with pytest.raises(RuntimeError, match="damaged"):
        population.utility_groups(["250.00", "250.01"], "icd9:3-digit")


@pytest.mark.parametrize(
    "extra", [[], ["--complete", "--with-visits"], ["--scope", "population", "--constraints", "none"]]
)
def test_the_cli_runs_the_settings_the_app_and_a_study_run(tmp_path, extra):
    """Issue 17: one way to run a method. The command's options become `HeatherlySettings`; its
    release file is the one `HeatherlySettings.run` exports for the same groups."""
    from engine.commands.cli import main
    from engine.commands.inputs import load_groups
    from engine.io.export import pseudonymous_frame, safe_csv_bytes
    from engine.study.runs import HeatherlySettings, RunInputs
    from tests.pseudonym_support import KEY, PSEUDONYMS

    ev, co = _cli_files(tmp_path)
    out, key = tmp_path / "out.csv", tmp_path / "key"
    key.write_text(KEY)
    code = main(
        [
            "anonymize",
            "generalize",
            "--events",
            str(ev),
            "--cohort",
            str(co),
            "--k",
            "2",
            *extra,
            "--out",
            str(out),
            "--key-file",
            str(key),
        ]
    )
    opts = dict(zip(extra[::2], extra[1::2], strict=False))
    settings = HeatherlySettings(
        k=2,
        scope=opts.get("--scope", "cohort"),
        constraints=opts.get("--constraints", "phecode"),
        complete="--complete" in extra,
        with_visits="--with-visits" in extra,
    )
    g = load_groups(str(ev), cohort=str(co))
    release = settings.run(RunInputs(g.population, g.cohort))
    if code == 0:
        assert out.read_bytes() == safe_csv_bytes(pseudonymous_frame(release, PSEUDONYMS))
    else:  # refused: then the settings' release fails verification too, and no file is left
        from engine import risk

        assert not risk.verify(release, settings.adversary, 2, g.population).ok and not out.exists()
