"""AppTest of the GCCens tabs (Anonymize and Trade-offs pages) on the shipped sample (issue #4's UI).

The real sidebar and this method's views run through `apptest_support.page_app`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import page_app, run_prompts, run_view, shown
from apptest_support import page_text as _text
from streamlit.testing.v1 import AppTest

from ui.views.gccens import CODE_MODES

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _app(page: str, scope: str = "population", **state) -> AppTest:
    """The view on Tamersoy's four codes unless `state` says otherwise (the Anonymize tab opens on all
    codes, which in the population scope of the sample waits for "Run": tests/test_defaults_verify.py)."""
    return run_view("ui.views.gccens", page, adversary_scope=scope, **{"gcc_mode": CODE_MODES[0], **state})


def test_anonymize_tab_verifies_and_offers_the_release() -> None:
    at = _app("anonymize")
    text = _text(at)
    assert "Verified" in text, text[:2000]
    labels = {m.label for m in at.metric}
    # issue 16: against the original cohort first, Tamersoy's CUL labelled method-internal beside it
    assert {
        "Pairs retained, of the original cohort",
        "Records modified, against the original",
        "Mean CUL, capped record (Tamersoy, method-internal)",
        "Mean CUL against the original record",
    } <= labels
    assert "Faithful vs targeted" in text
    keys = {b.proto.id for b in at.get("download_button")}
    assert len(keys) >= 6  # release, report, CDF, CUL, variants, examples (+ steps)
    # the released records beside the originals: original and released columns
    frames = [d.value for d in at.dataframe]
    assert any({"original", "released", "CUL"} <= set(f.columns) for f in frames)
    # the faithful / targeted table lists both variants, both verified
    cmp = next(f for f in frames if "Variant" in f.columns)
    assert cmp["Variant"].tolist() == ["faithful", "targeted"]
    assert cmp["Verified by the risk engine"].all()


def test_anonymize_tab_universal_cap_targeted_most_frequent() -> None:
    at = _app("anonymize")
    at.radio(key="gcc_capmode").set_value("Universal cap").run()
    at.number_input(key="gcc_cap").set_value(2).run()
    assert not at.exception, [e.value for e in at.exception]
    at.radio(key="gcc_variant").set_value("targeted").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Verified" in _text(at)
    at.selectbox(key="gcc_mode").set_value("Most frequent codes").run()
    at.number_input(key="gcc_top").set_value(6).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Verified" in _text(at)


def test_all_codes_wait_for_run_after_a_change() -> None:
    """Issue 13: a live preview stays under a second; GCCens on every code of the sample takes about
    3 s, so switching to "All codes" waits for "Run", then computes; the paper codes stay live."""
    from ui import cache

    cache.clear()  # previews are shared by the process's sessions: another test's would show
    at = _app("anonymize")  # the paper's codes first
    at.selectbox(key="gcc_mode").set_value("All codes").run()
    assert not at.exception, [e.value for e in at.exception]
    asked = run_prompts(at)
    assert len(asked) == 1, asked
    # issue 26, finding 5: meanwhile the paper codes' results stay, greyed (tests/test_page_gccens_stale.py)
    assert any("Results of the previous parameters" in c.value for c in at.caption)
    at.button(key="gcc_run_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    asked = run_prompts(at)
    assert len(asked) == 1 and "(targeted, compared)" in asked[0], asked  # the compared variant
    at.button(key="gcc_run_other_start").click().run()
    assert not run_prompts(at)
    assert "Faithful vs targeted" in _text(at)
    at.selectbox(key="gcc_mode").set_value(CODE_MODES[0]).run()  # run before: shown without asking
    assert "Verified" in _text(at)


def test_anonymize_tab_cohort_scope() -> None:
    at = _app("anonymize", scope="cohort")
    assert "Verified" in _text(at)
    assert "k-anonymity within the cohort" in "\n".join(c.value for c in at.caption)


def test_tradeoffs_tab_tables_1_and_2() -> None:
    at = _app("tradeoffs")
    assert not at.exception, [e.value for e in at.exception]
    frames = [d.value for d in at.dataframe]
    t1 = next(f for f in frames if "k" in f.columns and len(f) == 24)
    t2 = next(f for f in frames if "Universal cap" in f.columns and len(f) == 8)
    assert t1["k"].tolist() == list(range(2, 26))
    assert t2["Universal cap"].tolist() == list(range(3, 11))
    verified = "Verified by the risk engine"
    assert t1[verified].all() and t2[verified].all()
    # more protection never lowers the loss for the faithful variant: mean CUL is monotone in k
    assert (t1["Mean CUL, capped record (method-internal)"].diff().dropna() >= -1e-12).all()


def test_the_view_draws_the_codes_its_release_is_made_of_on_icd10cm_data():
    """The view prepared its own problem with the ICD-9-CM paper codes and roll-up, so on the ICD-10-CM
    sample it said "None of the chosen codes occurs in the cohort" while "Add to study" released
    E11, E78, I10, M54: the view now draws the engine's preparation (GCCensSettings.prepare_input)."""
    state = {"sample_variant": "icd10cm", "gcc_mode": CODE_MODES[0]}
    at = page_app(view=("ui.views.gccens", "render_anonymize"), state=state)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not any("None of the chosen codes" in w.value for w in at.warning)
    assert any("E11, E78, I10, M54" in shown(c.value) for c in at.caption), [c.value for c in at.caption]


def test_release_measures_are_kept_per_release_content_not_per_exported_rows() -> None:
    """Found by `make test` in a loop: the view's shared memo of a release's measures was keyed on
    `Release.fingerprint` (the exported rows), so another release that exports the same rows showed
    the first one's CUL (and its patients: "patient id(s) not in these records"). Two releases with
    the same records and different suppressions must each get their own measures."""
    import pandas as pd

    from engine.records import Records
    from engine.release import Release
    from ui.views.gccens import _release_measures

    records = Records.from_frame(
        pd.DataFrame({"patient_id": ["a", "b"], "visit": [1, 1], "code": ["401", "250"]})
    )
    kept = Release("gccens", records)
    censored = Release(
        "gccens",
        records,
        suppressed=pd.DataFrame({"patient_id": ["a"], "code": ["272"], "stage": ["censor"]}),
    )
    assert kept.fingerprint == censored.fingerprint  # the same rows exported
    assert _release_measures(kept)[0]["censored"].tolist() == [0, 0]
    assert _release_measures(censored)[0]["censored"].tolist() == [1, 0]
