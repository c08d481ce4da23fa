"""Every page works on the real shapes (issue 14): the sample variants (ICD-10-CM, mixed ICD-9/10, OMOP
DuckDB, MEDS) chosen in the sidebar, and a billing export with its own headers loaded through the import
view, each rendered on every page without an exception; the profiles editor starts from the utility
policy of the data's vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import PAGES, full_app, page_path, run_view
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"
VARIANT_FILES = {
    "icd10cm": SAMPLE / "icd10cm" / "events.parquet",
    "mixed": SAMPLE / "mixed" / "events.parquet",
    "omop": SAMPLE / "omop" / "cdm.duckdb",
    "meds": SAMPLE / "meds",
}
BILLING = ROOT / "tests" / "data" / "io" / "billing_export.csv"
TIMEOUT = 300


def _variant_app(variant: str) -> AppTest:
    if not VARIANT_FILES[variant].exists():
        pytest.skip(f"{VARIANT_FILES[variant]} missing (python -m engine sample --formats {variant})")
    at = full_app(timeout=TIMEOUT)
    at.session_state["sample_variant"] = variant
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("variant", list(VARIANT_FILES))
def test_every_page_on_each_sample_variant(variant: str) -> None:
    at = _variant_app(variant)
    ctx = at.session_state["context"]
    assert ctx.dataset.name.startswith("sample (") and ctx.cohort.n_patients > 0
    assert at.sidebar.selectbox(key="sample_variant").value == variant
    for page in PAGES:
        at.switch_page(page_path(page)).run()
        assert not at.exception, (page, [e.value for e in at.exception])
    if variant == "omop":  # the cohort is the sample's, renumbered, within the 5,000 patients held
        warnings = at.session_state["load_report"].report.of_kind("group_outside_variant")
        assert warnings and "first appearance" in warnings[0].expected


def test_every_page_on_a_billing_export_through_the_import_view() -> None:
    at = full_app(timeout=TIMEOUT)
    at.session_state["dataset_choice"] = "Import a source"
    at.session_state["import_kind"] = "long"
    at.session_state["import_location"] = str(BILLING)
    at.session_state["import_normalize"] = True
    at.run()
    at.button(key="import_load").click().run()
    assert not at.exception, [e.value for e in at.exception]
    ctx = at.session_state["context"]
    assert ctx.dataset.events.n_patients == 3 and ctx.dataset.spellings["250.00"] == ("25000",)
    at.sidebar.number_input(key="k").set_value(2).run()
    for page in PAGES:
        at.switch_page(page_path(page)).run()
        assert not at.exception, (page, [e.value for e in at.exception])
    # the import stays loaded across pages and is what the study records (its DataRef's load options)
    assert at.session_state["context"].dataset.events.n_patients == 3
    from ui.cache import PREFIX

    memo = at.session_state[PREFIX + "study data"]  # ui.study.data_of's memo (this session's: an import)
    options = dict(next(reversed(memo.values())).load_options)
    assert options["source"] == "long" and options["normalize_codes"] == "true"
    assert options["mapping"].startswith("patient_id=MRN,code=DX_CODE,visit=ENC_DATE")
    assert options["location"].endswith("billing_export.csv")


@pytest.mark.skipif(not VARIANT_FILES["icd10cm"].exists(), reason="ICD-10-CM sample variant missing")
def test_profiles_editor_starts_from_the_icd10cm_policy() -> None:
    at = run_view("ui.views.profiles", "anonymize", sample_variant="icd10cm", k=10)
    assert at.session_state["profiles_utility_policy_default"] == "the PNAS default policy in ICD-10-CM"
    policy = at.session_state["profiles_utility_policy"]
    assert len(policy) == 18
    asthma = policy.set_index("disease").loc["Asthma", "icd9_codes"].split()
    assert "J45.909" in asthma and not any(c.startswith("493") for c in asthma)


def test_default_policy_follows_the_vocabulary() -> None:
    from engine.io.imports import default_utility_policy

    p9, l9 = default_utility_policy(["250.00", "401.9"])
    p10, l10 = default_utility_policy(["E11.9", "I10"])
    both, lb = default_utility_policy(["250.00", "E11.9"])
    assert "ICD-9-CM" in l9 and "ICD-10-CM" in l10 and "mixed" in lb
    assert "493.00" in p9.diseases["Asthma"] and "J45.909" in p10.diseases["Asthma"]
    assert both.diseases["Asthma"] == p9.diseases["Asthma"] | p10.diseases["Asthma"]
