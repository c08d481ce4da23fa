"""AppTest of issue 12's app-side findings: the cohort of an upload (2), session caches keyed on the
whole content (4), downloads only through the export gate (5), untrusted text shown literally (7),
cap 0 on many codes (8)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from apptest_support import full_app, page_app, page_path
from streamlit.testing.v1 import AppTest

CODES = ["401.1", "250.00", "272.4", "724.2", "530.81", "311", "493.90", "244.9"]


def _upload_events(n_patients: int = 300, seed: int = 0) -> pd.DataFrame:
    """Events of n patients over a few real ICD-9-CM codes, two visits each."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_patients):
        for visit in (1, 2):
            for code in rng.choice(CODES, size=2, replace=False):
                rows.append((f"U{p:04d}", visit, code))
    return pd.DataFrame(rows, columns=["patient_id", "visit", "code"])


def _csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


def _upload(at: AppTest, role: str, name: str, data: bytes) -> None:
    at.sidebar.file_uploader(key=f"upload_{role}").upload(name, data, "text/csv")


def _warnings(at: AppTest, where: str = "main") -> list[str]:
    root = at.sidebar if where == "sidebar" else at.main
    return [w.value for w in root.warning]


# ------------------------------------------------------------------------------------ finding 2
def test_loading_a_cohort_list_after_the_events_selects_it():
    """Events first, the 60-patient cohort list after: the cohort is the list, not the population,
    and no release holds a patient outside it."""
    events = _upload_events(300)
    cohort_ids = events["patient_id"].drop_duplicates().iloc[::5].tolist()
    assert len(cohort_ids) == 60
    at = full_app()
    at.run()
    at.sidebar.radio(key="dataset_choice").set_value("Upload files").run()
    _upload(at, "events", "events.csv", _csv_bytes(events))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["context"].cohort.n_patients == 300
    # the whole population as cohort is flagged in the sidebar and on the pages that release data
    assert any("whole population" in w for w in _warnings(at, "sidebar"))
    for page in ("pages/anonymize.py", "pages/report.py"):
        at.switch_page(page_path(page)).run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("whole population (300 patients)" in w for w in _warnings(at)), page

    _upload(at, "cohort", "cohort.csv", _csv_bytes(pd.DataFrame({"patient_id": cohort_ids})))
    at.switch_page(page_path("pages/anonymize.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.selectbox(key="cohort_group").value == "cohort"
    ctx = at.session_state["context"]
    assert ctx.cohort.n_patients == 60 and ctx.population.n_patients == 300
    assert not any("whole population" in w for w in _warnings(at) + _warnings(at, "sidebar"))
    released = at.session_state["releases"]["GCCens"].release
    assert set(map(str, released.records.patient_ids)) <= set(cohort_ids)

    # choosing the population as cohort afterwards is the user's choice, and is flagged again
    at.sidebar.selectbox(key="cohort_group").set_value("population").run()
    assert at.sidebar.selectbox(key="cohort_group").value == "population"
    assert any("whole population" in w for w in _warnings(at))


def test_whole_population_cohort_is_flagged_on_every_release_page():
    for page in ("pages/anonymize.py", "pages/tradeoffs.py", "pages/risk.py", "pages/report.py"):
        at = page_app(page)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert not any("whole population" in w for w in _warnings(at)), page
        at.sidebar.selectbox(key="cohort_group").set_value("population").run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("The cohort is the whole population" in w for w in _warnings(at)), page


# ------------------------------------------------------------------------------------ finding 4
N_GENOTYPED = 60_000  # Streamlit hashes frames of 50,000 rows or more on a sample of 10,000


def _phewas_inputs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Events of 60,000 patients (401.1 more frequent with each risk allele) and two genotype
    frames that differ in one value only, in a row Streamlit's sampled hash never reads."""
    rng = np.random.default_rng(12)
    ids = [f"G{i:05d}" for i in range(N_GENOTYPED)]
    genotype = rng.integers(0, 3, size=N_GENOTYPED)
    hypertensive = rng.random(N_GENOTYPED) < 0.10 + 0.03 * genotype
    events = pd.DataFrame({"patient_id": ids, "visit": 1, "code": np.where(hypertensive, "401.1", "250.00")})
    first = pd.DataFrame({"patient_id": ids, "rs1": genotype.astype(float)})
    sampled = set(first.sample(n=10_000, random_state=0).index)  # what Streamlit's hash reads
    middle = N_GENOTYPED // 2
    row = next(
        r for r in range(middle, N_GENOTYPED) if r not in sampled and hypertensive[r] and genotype[r] == 2
    )
    second = first.copy()
    second.loc[row, "rs1"] = 0.0
    return events, first, second


def _significant(at: AppTest) -> pd.DataFrame:
    return at.dataframe[-1].value.set_index("phecode")


def test_phewas_results_follow_every_row_of_the_genotypes_per_session():
    from engine import phewas
    from engine.records import Records

    events, first, second = _phewas_inputs()
    state = {"dataset_choice": "Upload files", "phewas_heatherly": False}
    sessions = []
    for genotypes in (first, second):  # two sessions, same events, different genotype files
        at = page_app("pages/phewas.py", state=state)
        at.run()
        _upload(at, "events", "events.csv", _csv_bytes(events))
        _upload(at, "genotypes", "genotypes.csv", _csv_bytes(genotypes))
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        sessions.append(at)
    shown = [_significant(at) for at in sessions]
    cohort = Records.from_frame(events)
    settings = phewas.PhewasSettings()
    for genotypes, table in zip((first, second), shown, strict=True):
        truth = phewas.phewas_of_records(cohort, genotypes, settings).set_index("phecode")
        assert table.loc["401.1", "p"] == pytest.approx(truth.loc["401.1", "p"], rel=1e-9, abs=0)
    assert shown[0].loc["401.1", "p"] != pytest.approx(shown[1].loc["401.1", "p"], rel=1e-9, abs=0)

    # one session: a corrected genotype file replaces the first one's result
    at = sessions[0]
    _upload(at, "genotypes", "genotypes_fixed.csv", _csv_bytes(second))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert _significant(at).loc["401.1", "p"] == pytest.approx(shown[1].loc["401.1", "p"], rel=1e-9, abs=0)
