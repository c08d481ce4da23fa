"""The GCCens view's release measures (ui/views/gccens.py `_release_measures`): since issue 24 its CUL
statistics are the ones `gccens_run` measured on the release (`loss["cul"]`, `loss["cul_vs_original"]`),
not computed again; they equal what the view computed before (tests/reference_gccens_measures.py), on
random cohorts and on the sample, and a release without them is measured as before."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest
import reference_gccens_measures as R
from hypothesis import given, settings
from hypothesis import strategies as st
from test_censor_properties import cohorts

from engine.anonymize.censor import gccens_run, prepare
from engine.utility.censoring import censoring_loss
from ui.views.gccens import _statistics


def same_statistics(a, b) -> None:
    for (name, x), y in zip(a.as_dict().items(), b.as_dict().values(), strict=True):
        assert x == y or (math.isnan(x) and math.isnan(y)), name


def check(release) -> None:
    loss, stats, orig = R.compute(release)
    pd.testing.assert_frame_equal(censoring_loss(release), loss)
    got = _statistics(release, loss)
    same_statistics(got[0], stats)
    same_statistics(got[1], orig)
    bare = replace(release, loss={k: v for k, v in release.loss.items() if not k.startswith("cul")})
    for new, old in zip(_statistics(bare, loss), (stats, orig), strict=True):  # measured as before
        same_statistics(new, old)


@settings(max_examples=60)
@given(cohorts(), st.sampled_from(["cohort", "population"]), st.sampled_from(["faithful", "targeted"]))
def test_the_views_statistics_equal_the_reference(case, scope, variant):
    pop, sample, k, cap = case
    check(gccens_run(prepare(sample, pop, scope), k, cap=cap, variant=variant))


@pytest.mark.parametrize("codes", [("250", "272", "401", "724"), None])
def test_the_samples_releases_statistics_equal_the_reference(sample_dataset, codes):
    from engine.study.runs import CodeSelection, GCCensSettings, RunInputs

    inputs = RunInputs(sample_dataset.events, sample_dataset.group_records("cohort"))
    selection = CodeSelection("paper") if codes else CodeSelection("all")
    for k, cap in ((3, None), (5, 2)):
        check(GCCensSettings(k=k, scope="cohort", codes=selection, cap=cap).run(inputs))
