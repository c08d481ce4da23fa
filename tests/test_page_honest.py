"""AppTest of issue 12's app-side findings: the cohort of an upload (2), session caches keyed on the
whole content (4), downloads only through the export gate (5), untrusted text shown literally (7),
cap 0 on many codes (8)."""

from __future__ import annotations

import numpy as np
import pandas as pd
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
