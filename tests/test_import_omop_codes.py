"""Issue 37, finding (f): the app's import of an OMOP CDM offers the code choice (the ICD source
values, the standard concepts, or the standard conditions mapped back to ICD) and the domains, and the
study records them (`engine.io.imports.ImportSpec`)."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.io.imports import ImportSpec
from tests.apptest_support import page_app
from tests.test_omop_snomed import small_events, write_folder


@pytest.fixture(scope="module")
def cdm(tmp_path_factory):
    from engine.synth.omop_vocabulary import snomed_cdm

    return write_folder(snomed_cdm(small_events(60), seed=1), tmp_path_factory.mktemp("imp") / "cdm")


def test_import_spec_records_the_omop_codes_and_domains():
    spec = ImportSpec(source="omop", location="cdm", omop_codes="standard", domains=("condition", "drug"))
    options = spec.to_options()
    assert options["omop_codes"] == "standard" and options["domains"] == "condition,drug"
    assert ImportSpec.from_options(options) == spec
    assert "omop_codes" not in ImportSpec(source="omop", location="cdm").to_options()  # today's files


def test_import_view_reads_standard_concepts_of_the_chosen_domains(cdm, monkeypatch):
    """AppTest: the OMOP import with standard concepts of conditions and drugs loads SNOMED and RxNorm
    items and the CDM's own hierarchy, and the load options say so."""
    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(cdm.parent))
    at = page_app(
        "pages/cohort.py",
        state={"dataset_choice": "Import a source", "import_kind": "omop", "import_location": str(cdm)},
    )
    at.run()
    assert not at.exception, at.exception
    at.radio(key="import_omop_codes").set_value("standard").run()
    at.multiselect(key="import_domains").set_value(["condition", "drug"]).run()
    at.button(key="import_load").click().run()
    assert not at.exception, at.exception
    ds = at.session_state["context"].dataset
    vocabularies = {str(x).split(":")[0] for x in ds.events.items}
    assert vocabularies == {"SNOMED", "RxNorm"}
    assert ds.concepts is not None
    from ui.import_view import APPLIED

    spec = at.session_state[APPLIED][0]  # what the study's load options record
    assert spec.to_options()["omop_codes"] == "standard" and spec.domains == ("condition", "drug")


def test_lda_view_offers_the_cdm_hierarchy_for_a_cdm_import(cdm, monkeypatch):
    """AppTest: on a CDM imported in standard concepts the LDA view offers the CDM's own hierarchy,
    its release is the CDM hierarchy's LDA and is verified; on the shipped sample it is not offered."""
    from tests.apptest_support import page_text, run_prompts
    from ui.import_view import APPLIED
    from ui.views.lda import CODE_MODES, ICD_CHOICES

    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(cdm.parent))
    spec = ImportSpec(source="omop", location=str(cdm), omop_codes="standard")
    at = page_app(
        view=("ui.views.lda", "render_anonymize"),
        state={"dataset_choice": "Import a source", APPLIED: (spec, "", None), "lda_mode": CODE_MODES[3]},
    )
    at.run()
    assert not at.exception, at.exception
    assert ICD_CHOICES[4] in at.selectbox(key="lda_icd").options
    at.selectbox(key="lda_icd").set_value(ICD_CHOICES[4]).run()
    if run_prompts(at):
        at.button(key="lda_run_start").click().run()
    assert not at.exception, at.exception
    assert "Verified" in page_text(at)
    ctx = at.session_state["context"]  # the view's data: its concepts came with the import
    assert ctx.dataset.concepts is not None
    from engine.study.runs import CodeSelection, LDASettings, RunInputs

    lo, hi = int(at.session_state["lda_lo"]), int(at.session_state["lda_hi"])
    settings = LDASettings(
        k=int(ctx.k), codes=CodeSelection("all"), icd_hierarchy="cdm", age_low=lo, age_high=hi
    )
    res = settings.run_result(RunInputs(ctx.cohort, ctx.cohort, concepts=ctx.dataset.concepts))
    assert res.params["icd_hierarchy"].startswith("cdm concept_ancestor")
    shown = {m.label: m.value for m in at.metric}
    assert shown["Clusters (MDAV)"] == f"{len(res.clusters):,}"  # the page ran the CDM hierarchy's LDA
    assert shown["ICD loss, ILM (method-internal)"] == f"{res.release().loss['ILM']:.1%}"

    sample = page_app(view=("ui.views.lda", "render_anonymize"))
    sample.run()
    assert ICD_CHOICES[4] not in sample.selectbox(key="lda_icd").options


def test_profiles_view_starts_from_the_cdm_utility_policy(cdm, monkeypatch):
    """AppTest: on a CDM imported in standard concepts the UGACLIP view's utility policy starts from
    the CDM's hierarchy (`runs.cdm_utility_policy`, constraints named by concept_name), not from PNAS
    Table 1's ICD codes that no SNOMED item matches; the run is verified."""
    from engine.study.runs import cdm_utility_policy
    from tests.apptest_support import page_text, run_prompts
    from ui.import_view import APPLIED

    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(cdm.parent))
    spec = ImportSpec(source="omop", location=str(cdm), omop_codes="standard")
    at = page_app(
        view=("ui.views.profiles", "render_anonymize"),
        state={"dataset_choice": "Import a source", APPLIED: (spec, "", None)},
    )
    at.run()
    if run_prompts(at):
        for b in at.button:
            if b.key and b.key.startswith("profiles_run_") and b.key.endswith("_start"):
                b.click()
        at.run()
    assert not at.exception, at.exception
    ctx = at.session_state["context"]
    expected = cdm_utility_policy(ctx.dataset.concepts, [str(x) for x in ctx.cohort.items])
    assert any("the CDM's hierarchy" in c.value for c in at.caption)
    assert list(at.session_state["profiles_utility_policy"]["disease"]) == list(expected.diseases)
    assert "Verified" in page_text(at)


def test_cohort_page_describes_concepts_by_name(cdm, monkeypatch):
    """AppTest (b): the Cohort page's most frequent codes of a CDM imported in standard concepts are
    described by their concept_name, not '— (not an ICD-9-CM or ICD-10-CM code)'."""
    from ui.import_view import APPLIED

    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(cdm.parent))
    spec = ImportSpec(source="omop", location=str(cdm), omop_codes="standard")
    at = page_app("pages/cohort.py", state={"dataset_choice": "Import a source", APPLIED: (spec, "", None)})
    at.run()
    assert not at.exception, at.exception
    names = at.session_state["context"].dataset.concepts.names
    tops = [d.value for d in at.dataframe if "description" in d.value.columns]
    assert tops and all(list(t["description"]) == [names[c] for c in t["code"]] for t in tops)


def test_profiles_view_says_a_utility_policy_matching_no_code(cdm, monkeypatch):
    """AppTest (issue 37): PNAS Table 1's ICD policy kept on a SNOMED CDM matches no code: the view
    warns "the utility policy matches no code of these data: 0 of 18 constraints apply" and its measures
    never read "18/18"."""
    from engine.utility.queries import default_utility_policy
    from tests.apptest_support import page_text, run_prompts
    from ui.import_view import APPLIED

    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(cdm.parent))
    spec = ImportSpec(source="omop", location=str(cdm), omop_codes="standard")
    at = page_app(
        view=("ui.views.profiles", "render_anonymize"),
        state={"dataset_choice": "Import a source", APPLIED: (spec, "", None)},
    )
    at.run()
    pnas = default_utility_policy()
    at.session_state["profiles_utility_policy"] = pnas.to_frame()  # the editor keeps it: same default
    at.run()
    if run_prompts(at):
        for b in at.button:
            if b.key and b.key.startswith("profiles_run_") and b.key.endswith("_start"):
                b.click()
        at.run()
    assert not at.exception, at.exception
    n = len(pnas.diseases)
    said = f"the utility policy matches no code of these data: 0 of {n} constraints apply"
    assert any(said in w.value for w in at.warning), [w.value for w in at.warning]
    measures = [d.value for d in at.dataframe if "utility constraints satisfied" in d.value.columns]
    assert measures and all(set(m["utility constraints satisfied"]) == {said} for m in measures)
    assert f"{n}/{n}" not in page_text(at)


def test_import_view_offers_measurements_observations_and_the_drug_level(cdm, monkeypatch):
    """AppTest (issue 37): the domain picker offers measurement and observation, and with drugs the
    RxNorm level; the chosen ones load LOINC items and clinical drugs, and the study records them."""
    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(cdm.parent))
    at = page_app(
        "pages/cohort.py",
        state={"dataset_choice": "Import a source", "import_kind": "omop", "import_location": str(cdm)},
    )
    at.run()
    at.radio(key="import_omop_codes").set_value("standard").run()
    picker = at.multiselect(key="import_domains")
    offered = " ".join(map(str, picker.options))
    assert "measurement (the LOINC concept measured; values are not part of the known set)" in offered
    assert "observation" in offered
    picker.set_value(["condition", "drug", "measurement", "observation"]).run()
    at.radio(key="import_drug_level").set_value("clinical").run()
    at.button(key="import_load").click().run()
    assert not at.exception, at.exception
    ds = at.session_state["context"].dataset
    items = {str(x) for x in ds.events.items}
    assert {x.split(":")[0] for x in items} == {"SNOMED", "RxNorm", "LOINC"}
    concept = pd.read_parquet(cdm / "concept.parquet")
    klass = dict(
        zip("RxNorm:" + concept["concept_code"].astype(str), concept["concept_class_id"], strict=True)
    )
    assert {klass[x] for x in items if x.startswith("RxNorm:")} == {"Clinical Drug"}
    from ui.import_view import APPLIED

    options = at.session_state[APPLIED][0].to_options()
    assert options["domains"] == "condition,drug,measurement,observation"
    assert options["drug_level"] == "clinical"
    assert ImportSpec.from_options(options).drug_level == "clinical"
