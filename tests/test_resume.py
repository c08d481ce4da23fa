"""Work that survives a reload (issue 25, finding 5): the study, the sidebar's choices and the uploads are
saved per user on the server (`engine.store`, `ui/resume.py`) and offered back to a new session of the
same user; uploads survive a switch of the dataset mode."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from apptest_support import full_app, page_path, shown
from streamlit.testing.v1 import AppTest

from engine.audit.log import os_user
from engine.store import open_store

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_THERE = (ROOT / "sample_data" / "events.parquet").exists()
needs_sample = pytest.mark.skipif(not SAMPLE_THERE, reason="the shipped sample is not there yet")
ME = f"local:{os_user()}"
STUDY_OF_NOTHING = '{"releases": []}'


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The app's store for this test only (never the checkout's)."""
    path = tmp_path / "store" / "store.sqlite3"
    monkeypatch.setenv("COHORTSHIELD_STORE", str(path))
    return path


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _go(at: AppTest, page: str) -> None:
    at.switch_page(page_path(page)).run()
    _ok(at)


def _offered(at: AppTest) -> bool:
    return any("Resume your study from" in m.value for m in at.markdown)


def _releases(at: AppTest) -> dict[str, tuple]:
    return {r.name: r.files for r in at.session_state["study"].releases}


def _events_csv(n: int = 40) -> bytes:
    codes = ["401.1", "250.00", "272.4", "724.2"]
    rows = [(f"U{p:03d}", v, codes[(p + v) % 4]) for p in range(n) for v in (1, 2)]
    return pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(index=False).encode()


@needs_sample
def test_a_new_session_of_the_same_user_resumes_releases_k_scope_and_recipient(store_path: Path) -> None:
    at = full_app()
    at.run()
    _ok(at)
    assert not _offered(at)  # nothing stored yet
    _go(at, "pages/anonymize.py")
    at.button(key="gcc_study_add").click().run()
    _ok(at)
    at.radio(key="gcc_capmode").set_value("Universal cap").run()
    at.button(key="gcc_study_add").click().run()
    _ok(at)
    at.sidebar.radio(key="adversary_scope").set_value("population").run()
    at.sidebar.number_input(key="k").set_value(4).run()
    _go(at, "pages/report.py")
    at.text_input(key="report_recipient").set_value("IRB 2024-17").run()
    _ok(at)
    made = _releases(at)
    assert len(made) == 2 and all(files for files in made.values())
    assert at.session_state["study"].determination.recipient == "IRB 2024-17"

    fresh = full_app()  # a reload: a new session of the same user
    fresh.run()
    _ok(fresh)
    assert _offered(fresh)
    assert any("2 releases" in m.value for m in fresh.markdown)
    assert "study" not in fresh.session_state or not fresh.session_state["study"].releases
    fresh.button(key="resume_yes").click().run()
    _ok(fresh)
    assert not _offered(fresh)
    assert any("2 of 2 release(s) rebuilt" in s.value for s in fresh.success), [
        s.value for s in fresh.success
    ]
    assert _releases(fresh) == made
    assert fresh.session_state["k"] == 4
    assert fresh.session_state["adversary_scope"] == "population"
    _go(fresh, "pages/report.py")
    assert fresh.text_input(key="report_recipient").value == "IRB 2024-17"
    assert fresh.session_state["study"].determination.recipient == "IRB 2024-17"
    assert _releases(fresh) == made
    assert all(e.exportable for e in fresh.session_state["study"].releases)


@needs_sample
def test_another_user_sees_no_offer(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    open_store(str(store_path)).save(ME, STUDY_OF_NOTHING, {"k": 9}, {})
    mine = full_app()
    mine.run()
    assert _offered(mine)
    monkeypatch.setattr("engine.audit.log.os_user", lambda: "someone-else")
    other = full_app()
    other.run()
    _ok(other)
    assert not _offered(other)
    assert other.session_state["k"] == 5


@needs_sample
def test_discard_removes_the_stored_study(store_path: Path) -> None:
    store = open_store(str(store_path))
    store.save(ME, STUDY_OF_NOTHING, {"k": 9}, {"events": ("e.csv", b"patient_id,code\n")})
    at = full_app()
    at.run()
    assert _offered(at)
    at.button(key="resume_no").click().run()
    _ok(at)
    assert not _offered(at)
    assert at.session_state["k"] == 5  # nothing of the stored study was taken
    assert store.load(ME) is None
    again = full_app()
    again.run()
    assert not _offered(again)


@needs_sample
def test_saves_after_a_change_only(store_path: Path) -> None:
    store = open_store(str(store_path))
    at = full_app()
    at.run()
    assert store.load(ME) is None  # a first run changes nothing: nothing written
    at.sidebar.number_input(key="k").set_value(6).run()
    first = store.load(ME)
    assert first is not None and first.choices["k"] == 6
    at.run()
    _go(at, "pages/glossary.py")
    same = store.load(ME)
    assert same is not None and same.saved_at == first.saved_at  # runs that changed nothing
    at.sidebar.number_input(key="k").set_value(7).run()
    assert store.load(ME).choices["k"] == 7  # type: ignore[union-attr]


def test_uploads_survive_a_dataset_mode_switch_and_a_reload(store_path: Path) -> None:
    data = _events_csv()
    at = full_app()
    at.run()
    at.sidebar.radio(key="dataset_choice").set_value("Upload files").run()
    at.sidebar.file_uploader(key="upload_events").upload("my_events.csv", data, "text/csv")
    at.run()
    _ok(at)
    assert at.session_state["context"].dataset.events.n_patients == 40
    at.sidebar.radio(key="dataset_choice").set_value("Shipped sample").run()
    _ok(at)
    at.sidebar.radio(key="dataset_choice").set_value("Upload files").run()
    _ok(at)
    ctx = at.session_state["context"]
    assert ctx.dataset.events.n_patients == 40, "the upload was dropped by the mode switch"
    assert any(
        "Kept from earlier" in shown(c.value) and "my_events.csv" in shown(c.value)
        for c in at.sidebar.caption
    )

    stored = open_store(str(store_path)).load(ME)
    assert stored is not None and stored.files["events"].data == data
    fresh = full_app()
    fresh.run()
    assert any("my_events.csv" in shown(c.value) for c in fresh.caption)
    fresh.button(key="resume_yes").click().run()
    _ok(fresh)
    assert fresh.session_state["dataset_choice"] == "Upload files"
    assert fresh.session_state["context"].dataset.events.n_patients == 40

    fresh.sidebar.button(key="resume_delete_files").click().run()
    _ok(fresh)
    left = open_store(str(store_path)).load(ME)
    assert left is not None and left.files == {}
