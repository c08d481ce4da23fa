"""The papers' statements about distinguishability, as tests (engine/risk.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine import risk
from engine.adversary import ALL_ADVERSARIES, Adversary
from engine.records import Records
from engine.release import Release, set_item_label
from tests.reference_risk import reference_distinguishability


def records(rows: dict[str, list[list[str]]]) -> Records:
    """Records from {patient: [visit codes, ...]} (visits numbered in order)."""
    frame = [(p, v, c) for p, visits in rows.items() for v, codes in enumerate(visits) for c in codes]
    return Records.from_frame(pd.DataFrame(frame, columns=["patient_id", "visit", "code"]))


# Tamersoy 2010, Figure 1: the population P (left) and the research sample S (right)
FIG1_P = {
    "Dan": ["250"],
    "Bella": ["250", "250", "272"],
    "John": ["250", "250", "272", "272"],
    "Ada": ["401", "401", "401", "401"],
    "Tom": ["272", "272", "724"],
    "Alan": ["250"],
    "Eric": ["272", "724"],
}
FIG1_S = {"s1": ["250"], "s2": ["272", "272", "724"], "s3": ["250", "250", "272"]}  # Alan, Tom, Bella
FIG3_T = {"t1": ["250"], "t2": ["272", "724"], "t3": ["250", "272"]}  # GCCens output, k = 2


def one_visit(rows: dict[str, list[str]]) -> Records:
    frame = [(p, c) for p, codes in rows.items() for c in codes]
    return Records.from_frame(pd.DataFrame(frame, columns=["patient_id", "code"]))


def test_tamersoy_figure1_dis_272_724_is_2():
    """ "dis(272, 724) = 2 because two records in P contain all of these codes (Tom and Eric)"."""
    population = one_visit(FIG1_P)
    known = one_visit({"x": ["272", "724"]})
    for repeats in (False, True):
        dis = risk.distinguishability(
            known, population, "all_visits", matching=risk.Matching(count_repeats=repeats)
        )
        assert dis.tolist() == [2]


def test_tamersoy_figure1_tom_unique_with_repeats():
    """ "Tom's record is the only one in the population with this code combination" (272, 272, 724)."""
    population = one_visit(FIG1_P)
    sample = one_visit(FIG1_S)
    with_repeats = risk.distinguishability(
        sample, population, "all_visits", matching=risk.Matching(count_repeats=True)
    )
    as_sets = risk.distinguishability(
        sample, population, "all_visits", matching=risk.Matching(count_repeats=False)
    )
    # s1 = {250}: Dan, Bella, John, Alan. s2 = Tom: unique only when repeats count.
    # s3 = {250, 250, 272}: Bella and John hold at least these occurrences (see the convention below).
    assert with_repeats.tolist() == [4, 1, 2]
    assert as_sets.tolist() == [4, 2, 2]


def test_tamersoy_figure3_release_is_2_mapped():
    """Figure 3: GCCens' output T satisfies 2-map against P (k = 2), repeat counts released.

    Convention: a candidate needs *at least* as many occurrences (the issue's rule). The paper's walk-
    through says dis({250, 250, 272}) = 1 before censoring, which holds only if a count below its cap
    were read as exact; with the at-least rule it is 2 (Bella, John) -- see the test above.
    """
    population = one_visit(FIG1_P)
    release = Release("GCCens", one_visit(FIG3_T), counts_repeats=True)
    v = risk.verify(release, Adversary("population", "all_visits"), 2, population)
    assert v.ok
    assert v.distinguishability.tolist() == [4, 2, 2]
    assert risk.verify(release, Adversary("population", "all_visits"), 3, population).failing[
        "patient_id"
    ].tolist() == ["t2", "t3"]


# Heatherly 2013, Figure 13: original records by visit (a) and a 2-anonymized release (b)
FIG13_A = {
    "49532": [["427.31", "401.00", "401.01"], ["695.40"]],
    "579852": [["810.03", "053.00"]],
    "778954": [["681.11"], ["427.31"], ["810.03"]],
    "794456": [["427.31"], ["401.00"], ["810.03"]],
}
G401 = set_item_label(["401.00", "401.01"])
FIG13_B = {
    "49532": [["427.31", G401], ["695.40"]],
    "579852": [["810.03"]],  # 053.00 suppressed
    # printed as record 3: 427.31, 695.40, 810.03 (the figure is fictional; 695.40 sits where 681.11 was)
    "778954": [["695.40"], ["427.31"], ["810.03"]],
    "794456": [["427.31"], [G401], ["810.03"]],
}


def fig13_release() -> Release:
    frame = [(p, v, c) for p, visits in FIG13_B.items() for v, codes in enumerate(visits) for c in codes]
    recs = Records.from_frame(pd.DataFrame(frame, columns=["patient_id", "visit", "code"]))
    return Release("Heatherly", recs, item_codes={G401: frozenset({"401.00", "401.01"})})


def test_heatherly_figure13_alice_unique_in_original():
    """Alice (49532) is uniquely identified by her visit {427.31, 401.00, 401.01} in the original."""
    original = records(FIG13_A)
    dis = risk.original_distinguishability(original, Adversary("cohort", "single_visit"))
    assert dis.tolist() == [1, 1, 1, 2]


def test_heatherly_figure13_release_is_2_anonymous_per_visit():
    """In (b) the attacker "would be unable to determine whether this patient is Record 1 or 4"."""
    release = fig13_release()
    v = risk.verify(release, Adversary("cohort", "single_visit"), 2)
    assert v.ok, v.message()
    # 49532's first visit {427.31, {401.00,401.01}} matches records 1 and 4
    assert v.distinguishability.tolist() == [2, 3, 2, 2]
    assert v.distinguishability.tolist() == reference_distinguishability(
        release.records, release.records, "single_visit", item_codes=release.item_codes
    )


def test_generalized_item_matches_only_subsets_of_its_codes():
    """A released item {401.00,401.01} is matched by 401.00, 401.01 or itself, not by a wider item."""
    g = G401
    wide = set_item_label(["401.00", "401.01", "401.9"])
    item_codes = {g: frozenset({"401.00", "401.01"}), wide: frozenset({"401.00", "401.01", "401.9"})}
    cands = one_visit({"a": ["401.00"], "b": ["401.01"], "c": [g], "d": [wide], "e": ["250"]})
    targets = one_visit({"t": [g]})
    dis = risk.distinguishability(targets, cands, "all_visits", matching=risk.Matching(item_codes=item_codes))
    assert dis.tolist() == [3]
    dis_wide = risk.distinguishability(
        one_visit({"t": [wide]}), cands, "all_visits", matching=risk.Matching(item_codes=item_codes)
    )
    assert dis_wide.tolist() == [4]


def test_generalized_items_with_repeats_sum_their_codes():
    item_codes = {G401: frozenset({"401.00", "401.01"})}
    cands = one_visit({"a": ["401.00", "401.01"], "b": ["401.00"], "c": ["401.01", "401.01", "250"]})
    targets = one_visit({"t": [G401, G401]})
    got = risk.distinguishability(
        targets, cands, "all_visits", matching=risk.Matching(item_codes=item_codes, count_repeats=True)
    )
    assert got.tolist() == [2]


def test_empty_known_set_matches_every_candidate():
    cands = one_visit({"a": ["1"], "b": ["2"], "c": ["3"]})
    empty = records({"a": [["1"]]}).keep_events(np.array([False]))
    assert risk.distinguishability(empty, cands, "single_visit").tolist() == [3]
    assert risk.distinguishability(empty, cands, "all_visits").tolist() == [3]


def test_population_scope_needs_population():
    with pytest.raises(ValueError, match="population"):
        risk.original_distinguishability(one_visit(FIG1_S), Adversary("population", "all_visits"))


def test_released_population_is_the_candidate_pool():
    """Heatherly's DEMO_S: the population was anonymized too, so candidates are the released population."""
    released_pop = one_visit({"a": ["250"], "b": ["250"], "c": ["272"]})
    cohort = one_visit({"a": ["250"]})
    release = Release("x", cohort, population=released_pop)
    original_pop = one_visit({"a": ["250"], "b": ["251"], "c": ["272"]})
    v = risk.verify(release, Adversary("population", "single_visit"), 2, original_pop)
    assert v.distinguishability.tolist() == [2]


def test_summary_and_cdf():
    dis = np.array([1, 1, 2, 5, 9])
    s = risk.summarize(dis, 5)
    assert (s.share_unique, s.share_below_k, s.median) == (0.4, 0.6, 2.0)
    c = risk.cdf(dis)
    assert c["distinguishability"].tolist() == [1, 2, 5, 9]
    assert c["share"].tolist() == [0.4, 0.6, 0.8, 1.0]
    assert np.isnan(risk.summarize(np.array([], dtype=int), 5).median)


def test_all_adversaries_equal_one_by_one():
    population = records(
        {
            "a": [["1", "2"], ["3"]],
            "b": [["1"], ["2", "3"]],
            "c": [["1", "2", "3"]],
            "d": [["4"]],
            "e": [["1", "2"], ["1"]],
        }
    )
    cohort = population.subset(["a", "c", "e"])
    together = risk.all_adversaries(cohort, population)
    assert set(together) == set(ALL_ADVERSARIES)
    for adv in ALL_ADVERSARIES:
        one = risk.original_distinguishability(cohort, adv, population)
        assert together[adv].tolist() == one.tolist()
        cands = population if adv.scope == "population" else cohort
        assert one.tolist() == reference_distinguishability(cohort, cands, adv.knowledge)


def test_riskiest_patterns_name_codes_not_patients():
    original = records(FIG13_A)
    table = risk.riskiest_patterns(original, original, "single_visit", n=10)
    assert list(table.columns) == ["distinguishability", "records", "items", "codes", "descriptions"]
    assert "patient_id" not in table.columns
    assert not table.astype(str).apply(lambda col: col.str.contains("49532")).to_numpy().any()
    # Alice's visit singles her out: 427.31, 401.00, 401.01 at distinguishability 1
    first = table.iloc[0]
    assert first["distinguishability"] == 1
    assert table["distinguishability"].is_monotonic_increasing
    alice = table[table["codes"] == "401.00; 401.01; 427.31"]
    assert alice["distinguishability"].tolist() == [1]
    assert "atrial fibrillation" in alice["descriptions"].iloc[0].lower()
    # one row per record at its riskiest known set: 4 records in all
    assert table["records"].sum() == 4


def test_deterministic_and_vocabulary_independent():
    """The same data under a reordered vocabulary gives the same result."""
    pop = records({"a": [["1", "2"]], "b": [["2"]], "c": [["1", "2", "3"]]})
    other = Records.from_frame(pop.to_frame(), items=["3", "2", "1"])
    for knowledge in ("single_visit", "all_visits"):
        x = risk.distinguishability(pop, pop, knowledge)
        y = risk.distinguishability(other, other, knowledge)
        assert x.tolist() == y.tolist() == [2, 3, 1]


# ------------------------------------------------------------------------------------------- CLI
def _write_fig1(tmp_path):
    rows = [(p, c) for p, codes in FIG1_P.items() for c in codes]
    events = tmp_path / "events.csv"
    pd.DataFrame(rows, columns=["patient_id", "code"]).to_csv(events, index=False)
    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": ["Alan", "Tom", "Bella"]}).to_csv(cohort, index=False)
    return events, cohort


def test_cli_writes_distinguishability_and_summary(tmp_path, capsys):
    from engine.commands.cli import main

    events, cohort = _write_fig1(tmp_path)
    out = tmp_path / "dis.csv"
    args = ["risk", "--events", str(events), "--cohort", str(cohort), "--scope", "population"]
    code = main([*args, "--knowledge", "all_visits", "--k", "2", "--count-repeats", "--out", str(out)])
    assert code == 0
    got = pd.read_csv(out, dtype={"patient_id": str})
    assert got.to_dict("list") == {"patient_id": ["Alan", "Tom", "Bella"], "distinguishability": [4, 1, 2]}
    printed = capsys.readouterr().out
    assert "share unique (distinguishability 1): 33.33%" in printed
    assert "share below k = 2: 33.33%" in printed
    # cohort defaults to the population, and without repeats Tom is no longer unique
    code = main(
        ["risk", "--events", str(events), "--scope", "cohort", "--knowledge", "all_visits", "--out", str(out)]
    )
    assert code == 0
    got = pd.read_csv(out, dtype={"patient_id": str})
    assert len(got) == len(FIG1_P)
    assert dict(zip(got["patient_id"], got["distinguishability"], strict=True))["Tom"] == 2


def test_cli_bad_input_exits_with_one_line(tmp_path, capsys):
    from engine.commands.cli import main

    events, _ = _write_fig1(tmp_path)
    out = tmp_path / "dis.csv"
    bad_cohort = tmp_path / "bad_cohort.csv"
    pd.DataFrame({"patient_id": ["Alan", "Nobody"]}).to_csv(bad_cohort, index=False)
    base = [
        "risk",
        "--events",
        str(events),
        "--scope",
        "cohort",
        "--knowledge",
        "single_visit",
        "--out",
        str(out),
    ]
    assert main([*base, "--cohort", str(bad_cohort)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "bad_cohort.csv" in err and "Traceback" not in err
    no_code = tmp_path / "no_code.csv"
    pd.DataFrame({"patient_id": ["a"], "diagnosis": ["250"]}).to_csv(no_code, index=False)
    assert main([*base[:2], str(no_code), *base[3:]]) == 2
    assert "code" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # --k is checked by the parser (engine.adversary.k_argument)
        main([*base, "--k", "0"])
    assert exit_.value.code == 2
    assert "--k" in capsys.readouterr().err
    assert main([*base[:-1], str(tmp_path / "missing_dir" / "x.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


# ------------------------------------------------------------- releases that show their visits
FINDING1 = pd.DataFrame(
    [("P1", 1, "401.1"), ("P1", 1, "250.00"), ("P2", 1, "401.1"), ("P2", 2, "250.00")],
    columns=["patient_id", "visit", "code"],
)


def test_finding1_release_with_visits_is_matched_within_visits():
    """Issue 12, finding 1: P1's visit {401.1, 250.00} is held by no visit of P2, so a file that shows
    the visits singles P1 out at k = 2; without visits P2's whole record holds both codes."""
    recs = Records.from_frame(FINDING1)
    adv = Adversary("cohort", "single_visit")
    shown = Release("unchanged", recs, shows_visits=True)
    v = risk.verify(shown, adv, 2)
    assert not v.ok
    assert v.distinguishability.tolist() == [1, 2]
    assert v.failing["patient_id"].tolist() == ["P1"]
    hidden = shown.with_visits(False)
    w = risk.verify(hidden, adv, 2)
    assert w.ok and w.distinguishability.tolist() == [2, 2]
    # the original data's single-visit risk is unchanged (whole-record matching)
    assert risk.original_distinguishability(recs, adv).tolist() == [2, 2]
    assert risk.distinguishability(
        recs, recs, "single_visit", matching=risk.Matching(within_visits=True)
    ).tolist() == [1, 2]
    # the verification names the release it belongs to
    assert v.release_fingerprint == shown.fingerprint != hidden.fingerprint == w.release_fingerprint


def test_within_visits_counts_patients_not_visits():
    """A candidate with two visits that both hold the known set counts once."""
    cands = records({"a": [["1", "2"], ["1", "2"]], "b": [["1"], ["2"]], "c": [["1", "2", "3"]]})
    target = records({"t": [["1", "2"]]})
    assert risk.distinguishability(
        target, cands, "single_visit", matching=risk.Matching(within_visits=True)
    ).tolist() == [2]
    assert risk.distinguishability(target, cands, "single_visit").tolist() == [3]
    single = records({"t": [["1"]]})
    assert risk.distinguishability(
        single, cands, "single_visit", matching=risk.Matching(within_visits=True)
    ).tolist() == [3]


def test_within_visits_generalized_items_match_inside_a_visit():
    item_codes = {G401: frozenset({"401.00", "401.01"})}
    cands = records({"a": [["401.00", "427.31"]], "b": [["401.01"], ["427.31"]], "c": [[G401, "427.31"]]})
    target = records({"t": [[G401, "427.31"]]})
    got = risk.distinguishability(
        target, cands, "single_visit", matching=risk.Matching(item_codes=item_codes, within_visits=True)
    )
    assert got.tolist() == [2]
    assert got.tolist() == reference_distinguishability(
        target, cands, "single_visit", item_codes=item_codes, within_visits=True
    )


def test_heatherly_figure13_is_2_anonymous_only_without_visit_boundaries():
    """Figure 13b is printed without visit boundaries. Read within visits, 49532's visit
    {427.31, {401.00,401.01}} is held by no other visit (794456 holds the two items in two visits)."""
    release = fig13_release()
    v = risk.verify(release.with_visits(True), Adversary("cohort", "single_visit"), 2)
    assert v.distinguishability.tolist() == [1, 3, 2, 2]
    assert v.failing["patient_id"].tolist() == ["49532"]


def test_risk_page_says_which_backend_and_kernel_ran() -> None:
    """Issue 15: the Risk page names the backend and, per adversary, the kernel that counted."""
    from pathlib import Path

    import pytest
    from apptest_support import page_app

    from engine.adversary import ALL_ADVERSARIES

    if not (Path(__file__).resolve().parent.parent / "sample_data" / "events.parquet").exists():
        pytest.skip("the shipped sample is not there yet")
    at = page_app("pages/risk.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    line = next(c.value for c in at.caption if c.value.startswith("Backend: "))
    assert f"in process, {risk.thread_count()} threads" in line
    for adv in ALL_ADVERSARIES:
        assert f"{adv.label}: " in line
    assert line.count("walk") + line.count("index") + line.count("posting lengths") == len(ALL_ADVERSARIES)


def test_matching_is_one_frozen_object_and_follows_the_release() -> None:
    """`risk.Matching` carries the five settings of every kernel entry point: built from a release it
    takes the release's item codes, repeat counts and visit grouping; it cannot be changed after; a
    bad cap is refused when it is made; `original_distinguishability`'s `count_repeats=` (kept for the
    GCCens view) equals the matching's."""
    import dataclasses

    recs = records({"a": [["401.00"]], "b": [["401.00"], ["401.00"]], "c": [["401.01", "250"]]})
    label = set_item_label({"401.00", "401.01"})
    rel = Release("t", recs, item_codes={label: frozenset({"401.00", "401.01"})}, counts_repeats=True)
    m = risk.Matching.of_release(rel.with_visits(True), threads=2, cap=3)
    assert (m.item_codes, m.count_repeats, m.within_visits, m.threads, m.cap) == (
        rel.item_codes,
        True,
        True,
        2,
        3,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.cap = 4  # type: ignore[misc]
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="cap must be a positive whole number"):
            risk.Matching(cap=bad)
    adv = Adversary("cohort", "all_visits")
    repeats = risk.original_distinguishability(recs, adv, None, risk.Matching(count_repeats=True))
    assert repeats.tolist() != risk.original_distinguishability(recs, adv).tolist()
