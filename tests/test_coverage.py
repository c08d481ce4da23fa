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
