"""AppTest: the app starts on the shipped sample, every page of app.py renders without exception,
the sidebar's choices drive the Cohort page and survive page switches, and uploads are validated.

The interactive tests build the app with `apptest_support.full_app` (see there why not
`AppTest.from_file`); `test_app_py_itself` still runs app.py from its file once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import APP, PAGES, full_app, page_path, shown
from conftest import DATA_DIR, sample_missing_reason
from streamlit.testing.v1 import AppTest

COHORT_PAGE = "pages/cohort.py"
TIMEOUT = 180

pytestmark = pytest.mark.skipif(sample_missing_reason() is not None, reason=sample_missing_reason() or "")


def _app() -> AppTest:
    return full_app(timeout=TIMEOUT)


def _metrics(at: AppTest) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in at.metric:
        out.setdefault(m.label, []).append(m.value)
    return out


@pytest.fixture(scope="module")
def app() -> AppTest:
    at = _app()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_app_py_itself() -> None:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Cohort"]
    assert at.sidebar.number_input(key="k").value == 5


def test_app_starts_on_the_cohortpage_path(app: AppTest) -> None:
    assert [t.value for t in app.title] == ["Cohort"]
    assert app.sidebar.radio(key="dataset_choice").value == "Shipped sample"
    assert app.sidebar.selectbox(key="population_group").value == "population"
    assert app.sidebar.selectbox(key="cohort_group").value == "cohort"
    assert app.sidebar.radio(key="adversary_scope").value == "cohort"
    assert app.sidebar.radio(key="adversary_knowledge").value == "single_visit"
    assert app.sidebar.number_input(key="k").value == 5
    ctx = app.session_state["context"]
    assert ctx.population.n_patients > ctx.cohort.n_patients > 0
    m = _metrics(app)
    assert m["Patients"] == [f"{ctx.population.n_patients:,}", f"{ctx.cohort.n_patients:,}"]
    assert not app.error
    assert any("passed validation" in s.value for s in app.success) or app.warning
    # every chart and table has its data for download: summary, top codes x2, rank/frequency, distribution
    labels = [b.label for b in app.main.download_button]
    assert len(labels) >= 5 and all("CSV" in label for label in labels)
    assert len(app.get("plotly_chart")) == 2


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders(app: AppTest, page: str) -> None:
    app.switch_page(page_path(page)).run()
    assert not app.exception, [e.value for e in app.exception]


def test_cohort_numbers_follow_the_sidebar() -> None:
    at = _app()
    at.run()
    before = _metrics(at)["Patients"]
    at.sidebar.selectbox(key="cohort_group").set_value("biobank").run()
    after = _metrics(at)["Patients"]
    assert not at.exception
    assert after[0] == before[0] and after[1] != before[1]
    assert after[1] == f"{at.session_state['context'].cohort.n_patients:,}"
    # a cohort larger than the population is refused with a message, not a traceback
    at.sidebar.selectbox(key="population_group").set_value("cohort").run()
    assert not at.exception
    assert any("must lie within the population" in e.value for e in at.sidebar.error)
    assert "context" not in at.session_state


def test_choices_survive_page_switches() -> None:
    other = "pages/risk.py"
    at = _app()
    at.run()
    at.sidebar.number_input(key="k").set_value(7).run()
    at.sidebar.radio(key="adversary_knowledge").set_value("all_visits").run()
    at.sidebar.selectbox(key="cohort_group").set_value("biobank").run()
    at.switch_page(page_path(other)).run()
    at.switch_page(page_path(COHORT_PAGE)).run()
    assert not at.exception
    assert at.sidebar.number_input(key="k").value == 7
    assert at.sidebar.radio(key="adversary_knowledge").value == "all_visits"
    ctx = at.session_state["context"]
    assert (ctx.k, ctx.adversary.knowledge, ctx.cohort_group) == (7, "all_visits", "biobank")


def _upload(at: AppTest, role: str, path: Path) -> None:
    at.sidebar.file_uploader(key=f"upload_{role}").upload(path.name, path.read_bytes(), "text/csv")


def test_uploads_are_validated_and_described() -> None:
    at = _app()
    at.run()
    at.sidebar.radio(key="dataset_choice").set_value("Upload files").run()
    assert not at.exception and "context" not in at.session_state
    _upload(at, "events", DATA_DIR / "events_unknown_codes.csv")
    _upload(at, "cohort", DATA_DIR / "cohort_good.csv")
    at.run()
    assert not at.exception
    assert _metrics(at)["Patients"] == ["2", "2"]
    assert _metrics(at)["Visits"] == ["4", "4"]
    # k above the cohort size is an error in the sidebar
    assert any("exceeds the cohort size" in e.value for e in at.sidebar.error)
    # unknown codes: the Cohort page offers keep / drop, with the counts
    assert at.radio(key="unknown_codes").value == "keep"
    at.radio(key="unknown_codes").set_value("drop").run()
    assert not at.exception
    assert _metrics(at)["Visits"] == ["2", "2"]  # the two visits holding only 999.99 are empty now
    assert _metrics(at)["Distinct codes"] == ["2", "2"]


def test_bad_upload_shows_file_row_column() -> None:
    at = _app()
    at.run()
    at.sidebar.radio(key="dataset_choice").set_value("Upload files").run()
    _upload(at, "events", DATA_DIR / "events_bad_codes.csv")
    at.run()
    assert not at.exception
    errors = [shown(e.value) for e in at.sidebar.error]  # as displayed: the file name is escaped
    assert any("events_bad_codes.csv" in e and "rows 4, 5, 6" in e and "column 'code'" in e for e in errors)
    assert "context" not in at.session_state
    assert any("Loading stopped" in e.value for e in at.main.error)


# ------------------------------------------------------------------------------ Cohort page builders
def test_cohort_view_figures_on_a_small_cohort() -> None:
    import pandas as pd

    from engine.records import Records
    from ui import cohort_view as cv

    r = Records.from_frame(
        pd.DataFrame(
            {
                "patient_id": ["A", "A", "A", "B", "B", "C"],
                "visit": [1, 1, 2, 1, 2, 1],
                "code": ["401.1", "250.00", "401.1", "401.1", "401.1", "272.4"],
            }
        )
    )
    d = cv.describe(r)
    assert (d["patients"], d["visits"], d["diagnoses (events)"], d["distinct codes"]) == (3, 5, 6, 3)
    assert d["codes per patient, mean"] == pytest.approx(4 / 3)  # A: 2, B: 1, C: 1
    assert d["diagnoses per patient, median"] == 2.0  # A: 3, B: 2, C: 1
    freq = cv.code_frequencies(r)
    assert freq["code"].tolist() == ["401.1", "250.00", "272.4"]  # 2 patients, then ties by code
    assert freq["patients"].tolist() == [2, 1, 1] and freq["events"].tolist() == [4, 1, 1]
    top = cv.top_codes(r, 1)
    assert top["description"].iloc[0] != "" and top["% of patients"].iloc[0] == pytest.approx(66.67)
    dist = cv.distribution_data(cv.per_patient(r).assign(group="g"), "visits")
    assert dist[["value", "patients"]].values.tolist() == [[1, 1], [2, 2]]
    assert dist["% of patients"].sum() == pytest.approx(100)


def test_a_deep_link_runs_through_the_entry_point() -> None:
    """A page run in Streamlit's legacy pages/ mode (a URL opened before any session ran app.py; in
    AppTest, `from_file` + `switch_page`) is sent through app.py and back, sidebar included."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.switch_page("pages/report.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Report"]
    assert at.sidebar.number_input(key="k").value == 5


def test_a_deep_link_recovers_when_another_session_left_legacy_mode_meanwhile(monkeypatch) -> None:
    """Found by bench/load.py: eight sessions opened at once on a fresh server. A page's first run
    starts in the legacy pages/ mode (no session had called st.navigation yet); before it asks for
    the sidebar's Context, another session's app.py calls st.navigation, which turns the process's
    legacy flag off. The page must still go through app.py (it showed "Load a dataset..." and no
    sidebar, for good)."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner import script_runner

    legacy = script_runner._mpa_v1

    def raced(main_script_path: str) -> None:
        PagesManager.uses_pages_directory = False  # another session's st.navigation, meanwhile
        legacy(main_script_path)

    monkeypatch.setattr(script_runner, "_mpa_v1", raced)
    for page, title in (("pages/report.py", "Report"), ("pages/glossary.py", "Glossary")):
        at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
        assert [t.value for t in at.title] == [title]
        assert at.sidebar.number_input(key="k").value == 5  # the sidebar was drawn
