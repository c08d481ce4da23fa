"""A page's job runs in a worker of the app's pool (issue 38, finding 4), which has no Streamlit session:
what the job needs of the session must travel with it. Bug report: `ui.study.data_of` read the sidebar's
load options from `st.session_state` inside the job and got the defaults there: a release made in a job
recorded `unknown_codes: keep` when the user had chosen "drop", so its study reopened on other data (a
forked worker had the session's copy)."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import page_app

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _written(at, prefix: str) -> str:
    return next(m.value for m in at.markdown if m.value.startswith(prefix)).removeprefix(prefix)


@pytest.mark.parametrize("options", [{}, {"unknown_codes": "drop"}, {"drop_duplicates": True}])
def test_the_data_a_job_names_are_the_pages(options: dict) -> None:
    at = page_app(view=("job_views", "data_of_in_a_job"), state=options)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert _written(at, "job: ") == _written(at, "here: ")
