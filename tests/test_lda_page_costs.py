"""What a new session opening a page on the shipped sample does not compute again (issue 24: the LDA
view opened at a new k): the study's data reference (`ui.study.data_of`: the groups' id fingerprints),
which every page's threshold caption asks for, is shared by the server's sessions on the sample; on
an upload it stays in its session (tests/test_pages_variants.py)."""

from __future__ import annotations

import pytest
from apptest_support import page_app
from conftest import sample_missing_reason

import ui.study

pytestmark = pytest.mark.skipif(sample_missing_reason() is not None, reason=str(sample_missing_reason()))


def _caption_app():
    """The sidebar and the threshold caption every releasing page shows (it asks for the study)."""
    at = page_app(view=("ui.threshold", "caption"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_new_session_on_the_sample_reuses_the_data_reference(monkeypatch):
    made = []
    real = ui.study.data_ref

    def counted(*args, **kwargs):
        made.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(ui.study, "data_ref", counted)
    first = _caption_app()  # computes it, or finds it from an earlier test's session
    before = len(made)
    second = _caption_app()  # another session on the same data and groups
    assert len(made) == before, "the second session computed the data reference again"
    assert second.session_state["study"].data == first.session_state["study"].data
    assert [c.value for c in second.caption] == [c.value for c in first.caption]


def _lda_opened_at(k: int):
    """A new session opening the Anonymize page on the LDA view at `k` (the thesis' D4 codes)."""
    from ui.views.lda import CODE_MODES

    state = {"method_render_anonymize": "Trajectories (LDA)", "k": k, "lda_mode": CODE_MODES[0]}
    at = page_app("pages/anonymize.py", state=state)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_new_session_at_a_new_k_reuses_the_cohorts_trajectories(monkeypatch):
    """The trajectories (what the LDA's runs at every k start from) are built once per cohort content
    and code selection on the sample, not once per session (`LDASettings.inputs` keeps them in the
    session); the run in this process, where its calls are counted."""
    from engine.study.runs import LDASettings

    monkeypatch.setenv("COHORTSHIELD_WORKERS", "0")
    built = []
    real = LDASettings.trajectories

    def counted(self, cohort):
        built.append(self.codes)
        return real(self, cohort)

    monkeypatch.setattr(LDASettings, "trajectories", counted)
    first = _lda_opened_at(23)  # builds them, or finds them from an earlier test's session
    before = len(built)
    second = _lda_opened_at(29)  # a k no session ran: the run itself is computed
    assert len(built) == before, "the second session built the cohort's trajectories again"
    # what the page shows at k = 29 is the run of the study's settings on the cohort, as before
    from engine.study.runs import RunInputs
    from ui.views.lda import CODE_MODES, ICD_CHOICES, settings_of

    state = second.session_state
    hier = (
        ICD_CHOICES[0],
        None,
        int(state["lda_lo"]),
        int(state["lda_hi"]),
        True,
        None,
    )  # the page's defaults
    settings = settings_of((CODE_MODES[0], 50, ()), hier, 29, float(state["lda_w"]), state["lda_method"])
    assert settings is not None and settings.codes.mode == "paper"
    cohort = state["context"].cohort
    res = settings.run_result(RunInputs(cohort, cohort))
    shown = {m.label: m.value for m in second.metric}
    assert shown["Clusters (MDAV)"] == f"{len(res.clusters):,}"
    assert shown["Pairs suppressed"] == f"{len(res.release().suppressed):,}"
    assert shown["Trajectories"] == f"{res.trajectories.summary()['trajectories']:,}"
    assert {m.label for m in first.metric} == set(shown)


def test_an_uploads_data_reference_stays_in_its_session():
    """On an upload the data reference is this session's alone (ui.cache: nothing of a user's file is
    shared), however many sessions ran on the sample before."""
    import pandas as pd

    from ui import cache

    rows = [(f"U{p:03d}", v, ("401.1", "250.00")[(p + v) % 2]) for p in range(40) for v in (1, 2)]
    upload = pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(index=False).encode()
    _caption_app()  # a session on the sample: its reference is the server's
    shared = cache.shared_size("study data")
    at = page_app(view=("ui.threshold", "caption"))
    at.session_state["dataset_choice"] = "Upload files"
    at.run()
    at.sidebar.file_uploader(key="upload_events").upload("my_events.csv", upload, "text/csv")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["context"].dataset.name == "uploaded: my_events.csv"
    assert cache.shared_size("study data") == shared, "an upload's data reference was shared"
    held = at.session_state[cache.PREFIX + "study data"]
    assert [ref.name for ref in held.values()] == ["uploaded: my_events.csv"]
