"""Utility measured against the original cohort (issue 16): instances retained with caps counted,
catch-all generalized items, and code coverage, on hand-made releases."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.anonymize.censor import gccens
from engine.records import Records
from engine.release import Release
from engine.utility.coverage import catch_all, code_coverage, instances_retained


def _records(rows: dict[str, list[str]]) -> Records:
    df = pd.DataFrame([(p, c) for p, cs in rows.items() for c in cs], columns=["patient_id", "code"])
    return Records.from_frame(df)


COHORT = {"a": ["250", "250", "250", "401"], "b": ["250", "272", "724"], "c": ["272", "V45", "V45", "V45"]}


def test_universal_cap_losses_show_against_the_original_not_in_the_capped_cul():
    # a universal cap of 1 removes 4 of 11 instances; Tamersoy's CUL (against the capped record) is 0
    cohort = _records(COHORT)
    release = gccens(cohort, cohort, 1, cap=1)
    assert release.loss["cul"]["share_codes_retained"] == 1.0  # the method-internal figure
    assert release.loss["retained_vs_original"]["original"] == 11
    assert release.loss["retained_vs_original"]["released"] == 7
    assert release.loss["retained_vs_original"]["share"] == pytest.approx(7 / 11)
    assert release.loss["cul_vs_original"]["share_codes_retained"] == pytest.approx(7 / 11)
    assert "capped" in release.loss["cul_baseline"]
    assert instances_retained(release, cohort).share == pytest.approx(7 / 11)


def _generalized(rows: dict[str, list[str]], item_codes: dict[str, set[str]]) -> Release:
    return Release("hand", _records(rows), item_codes={k: frozenset(v) for k, v in item_codes.items()})


def test_catch_all_flags_an_item_holding_over_half_of_the_rows():
    release = _generalized(
        {"a": ["(250,272,724)", "401"], "b": ["(250,272,724)", "(V45,V46)"], "c": ["(250,272,724)"]},
        {"(250,272,724)": {"250", "272", "724"}, "(V45,V46)": {"V45", "V46"}},
    )
    found = catch_all(release)
    assert (found.item, found.rows, found.released_rows, found.codes) == ("(250,272,724)", 3, 5, 3)
    assert found.share == pytest.approx(0.6)
    assert found.flagged


def test_catch_all_at_exactly_half_or_without_generalized_items_is_not_flagged():
    half = _generalized({"a": ["(250,272)", "401"], "b": ["(250,272)", "724"]}, {"(250,272)": {"250", "272"}})
    assert catch_all(half).share == 0.5
    assert not catch_all(half).flagged
    plain = catch_all(Release("hand", _records(COHORT)))
    assert plain.item is None
    assert not plain.flagged


def test_code_coverage_counts_each_cohort_code_once():
    cohort = _records(COHORT)  # distinct codes: 250, 272, 401, 724, V45
    release = _generalized(
        {"a": ["250", "(401,724)"], "b": ["250", "(401,724)"], "c": []},
        {"(401,724)": {"401", "724"}, "(272,V45)": {"272", "V45"}},  # (272,V45) has no released row
    )
    cov = code_coverage(release, cohort)
    assert (cov.codes, cov.as_themselves, cov.generalized, cov.removed) == (5, 1, 2, 2)
    assert cov.shares() == pytest.approx({"as_themselves": 0.2, "generalized": 0.4, "removed": 0.4})


def _lda_release():
    """A small LDA release (items are `code|age` pairs) and the cohort of plain codes it came from."""
    from engine.anonymize.trajectories import Trajectories, lda

    df = pd.DataFrame(
        {
            "patient_id": ["a", "a", "b", "b", "c", "c", "d"],
            "code": ["401.1", "250.00", "401.1", "250.00", "401.1", "724.2", "401.9"],
            "age": [40, 41, 40, 42, 55, 56, 60],
        }
    )
    cohort = Records.from_frame(df)
    res = lda(Trajectories.from_records(cohort), 2, age_domain=(30, 61))
    return res.release(), cohort


def test_lda_distinct_codes_are_measured_on_the_code_part_of_its_pairs():
    """Issue 16: the Compare page read 0% distinct codes kept for LDA, because its released items are
    `code|age` pairs and no pair is a cohort code. Each cohort code counts as kept when a released
    pair carries it (as itself, whatever its age) or a generalized pair stands for it."""
    release, cohort = _lda_release()
    assert release.age_pairs
    cov = code_coverage(release, cohort)
    assert cov.codes == 4
    released_codes = {str(x).rpartition("|")[0] for x in release.records.items}
    assert cov.as_themselves == len(released_codes & {"401.1", "250.00", "724.2", "401.9"})
    # 250.00 and 401.1 released as themselves (250.00 at a generalized age), 401.9 only inside the
    # pair 401|[54-61], 724.2 suppressed
    assert (cov.as_themselves, cov.generalized, cov.removed) == (2, 1, 1)


def test_compare_headline_of_lda_reads_its_code_part():
    from engine.study import compare

    release, cohort = _lda_release()
    h = compare.headline(release, cohort)
    assert h.codes_kept == pytest.approx(3 / 4)
    assert h.codes_as_themselves == pytest.approx(2 / 4)
    assert h.code_set == ("250.00", "401.1", "401.9")


# ---------------------------------------------------------------- issue 35: pairs of usable items only
def _figures(cohort: Records, release: Release):
    from engine.study.compare import release_figures

    return release_figures(release, cohort)


def test_a_catch_all_item_keeps_no_pair_but_a_generalization_within_one_phecode_does():
    """Issue 35, finding 3: UGACLIP showed 99.9% and ACLIP 100% of pairs retained while one item stood
    for 4,921 codes. A pair now counts only when its item stands for codes of one phecode family."""
    cohort = _records({"a": ["401.1", "250.00"], "b": ["401.9", "272.4"], "c": ["401.1", "724.2"]})
    every = frozenset({"401.1", "401.9", "250.00", "272.4", "724.2"})
    catch = _generalized({p: ["{all}"] for p in "abc"}, {"{all}": every})
    f = _figures(cohort, catch)
    assert (f.pairs_kept, f.pairs_of, f.pairs_in_broad_items) == (0, 6, 6)
    assert f.codes_kept == 0
    # 401.1 and 401.9 share phecode 401.1 (401.0's is 401.3, the same family): their set keeps both
    within = _generalized(
        {"a": ["{401.1,401.9}", "250.00"], "b": ["{401.1,401.9}", "272.4"], "c": ["{401.1,401.9}", "724.2"]},
        {"{401.1,401.9}": {"401.1", "401.9"}},
    )
    f = _figures(cohort, within)
    assert (f.pairs_kept, f.pairs_of, f.pairs_in_broad_items) == (6, 6, 0)
    # 250.00 and 272.4 lie in two phecode families (250, 272): their set keeps neither pair
    across = _generalized(
        {"a": ["401.1", "{250.00,272.4}"], "b": ["401.9", "{250.00,272.4}"], "c": ["401.1", "724.2"]},
        {"{250.00,272.4}": {"250.00", "272.4"}},
    )
    f = _figures(cohort, across)
    assert (f.pairs_kept, f.pairs_in_broad_items) == (4, 2)
    assert f.codes_kept == 3  # 401.1, 401.9, 724.2


def test_a_release_with_a_catch_all_item_is_never_best():
    from engine import risk
    from engine.adversary import Adversary
    from engine.study import compare

    cohort = _records({p: ["401.1", "250.00", "272.4"] for p in "abcdef"})
    every = frozenset({"401.1", "250.00", "272.4"})
    catch = _generalized({p: ["{all}"] for p in "abcdef"}, {"{all}": every})
    half = _generalized(
        {p: ["401.1", "{250.00,272.4}"] for p in "abcdef"}, {"{250.00,272.4}": {"250.00", "272.4"}}
    )
    adversary = Adversary("cohort", "all_visits")
    assert risk.verify(catch, adversary, 2, None).ok and risk.verify(half, adversary, 2, None).ok
    table = compare.comparison_table(
        {"catch-all": catch, "half": half}, cohort, None, adversary, 2, utility={}
    )
    best = compare.best_rows(table)
    assert best["pairs retained"] == {"half"}
    assert "catch-all" not in best.get("distinct codes kept", set())
    row = table.set_index("release").loc["catch-all"]
    assert row["pairs retained"] == 0.0 and "catch-all" in row["warnings"]


def test_constraints_met_reads_the_default_policy_once_per_cohort(monkeypatch):
    """Bug report (issue 36): every new release's headline read the shipped utility policy again for
    the same cohort (0.18 s of 0.45 s of `compare.constraints_met` at paper scale)."""
    from engine import memo
    from engine.study import compare
    from engine.utility import queries

    reads = []
    real = queries.default_utility_policy
    monkeypatch.setattr(queries, "default_utility_policy", lambda items: reads.append(1) or real(items))
    memo.clear()
    cohort = Records.from_frame(
        pd.DataFrame({"patient_id": ["a", "a", "b", "c"], "code": ["493.00", "250.00", "493.00", "401.9"]})
    )
    first = compare.constraints_met(Release("test", cohort), cohort)
    second = compare.constraints_met(Release("test", cohort.keep_events(cohort.event_item != 0)), cohort)
    assert len(reads) == 1
    assert first[1] == second[1] and first[0] >= second[0]
