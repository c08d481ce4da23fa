"""Issue 24: the first opening of the Lab orders page in a server process.

The shipped sample's lab orders are named in the page's keys by the bytes of their file (and the read's
options), not by hashing the 6.9 million rows they parse to; an upload's lab orders keep their
content fingerprint (every value of every row). Timings: bench/labs_first_open.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.io.loaders import Source, load_dataset, load_uploaded
from ui import cache
from ui import fingerprints as fp
from ui.context import Context

LABS = b"patient_id,day,lab\nP1,1,Glucose\nP1,1,Sodium\nP2,5,Glucose\nP1,1,Glucose\nP1,2,HbA1c\n"


def _files(data_dir: Path, labs: bytes = LABS) -> dict:
    return {
        "events": data_dir / "events_good.csv",
        "cohort": data_dir / "cohort_good.csv",
        "labs": Source("labs.csv", labs),
    }


def _no_content_hash(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = fp._fingerprint
    monkeypatch.setattr(fp, "_fingerprint", lambda f: calls.append(len(f)) or original(f))
    return calls


def test_deferred_lab_orders_are_named_by_their_file_without_being_read(data_dir, monkeypatch):
    calls = _no_content_hash(monkeypatch)
    ds = load_dataset(**_files(data_dir), defer_labs=True).data
    key = fp.labs_fingerprint(ds)
    assert not ds.labs_read and calls == []  # neither parsed nor hashed
    assert key.startswith("lab orders file:")
    again = load_dataset(**_files(data_dir), defer_labs=True).data
    assert fp.labs_fingerprint(again) == key  # the same bytes and options: the same name
    cohort = ds.with_cohort(np.array(["P1"], dtype=object))
    assert fp.labs_fingerprint(cohort) == key  # a dataset made from it shares its lab orders


def test_the_file_name_changes_with_every_byte_and_with_the_read_options(data_dir):
    base = fp.labs_fingerprint(load_dataset(**_files(data_dir), defer_labs=True).data)
    one_byte = LABS.replace(b"P2,5", b"P2,6")
    assert fp.labs_fingerprint(load_dataset(**_files(data_dir, one_byte), defer_labs=True).data) != base
    dropped = load_dataset(**_files(data_dir), defer_labs=True, drop_duplicates=True).data
    assert fp.labs_fingerprint(dropped) != base  # another frame (the repeated row dropped)
    assert len(dropped.labs) == 4


def test_uploaded_lab_orders_keep_their_content_fingerprint(data_dir, monkeypatch):
    calls = _no_content_hash(monkeypatch)
    events = (data_dir / "events_good.csv").read_bytes()
    ds = load_uploaded(("events.csv", events), labs=("labs.csv", LABS)).data
    assert ds.labs_fingerprint is None
    assert fp.labs_fingerprint(ds) == fp.frame_fingerprint(ds.labs.copy())
    assert calls == [5, 5]  # every row hashed: the upload's frame, then the equal copy


@pytest.mark.parametrize("drop", [False, True])
def test_the_page_keys_the_shipped_lab_orders_on_their_file(data_dir, monkeypatch, drop):
    """The view's patient-days of the shipped sample: keyed on the file, its frame never hashed, and the
    patient-days those of the frame read (`population_days`, as the page calls it)."""
    from engine.labs.reident import patient_days
    from ui.views import labs as view

    calls = _no_content_hash(monkeypatch)
    name = f"test labs first open {drop}"
    loaded = cache.load_shipped(
        name,
        "options",
        lambda: load_dataset(**_files(data_dir), defer_labs=True, drop_duplicates=drop),
        size=1,
    )
    ds = loaded.data
    ctx = Context(ds, "population", "cohort", None, None, None, 5)  # type: ignore[arg-type]
    days, which = view.population_days(ctx, ds.labs, ds.group_ids("population"))
    assert calls == [] and which == "all"
    expected = patient_days(ds.labs)
    assert days.fingerprint == expected.fingerprint
    held = cache.held("lab days", (fp.labs_fingerprint(ds), "all"), data=ctx)
    assert held is days  # shared by the server's sessions under the file's name


# ------------------------------------------------------------------------------ read ahead in the server
def test_a_deferred_value_warms_once_after_the_thread_it_waits_for():
    import threading

    from engine.dataset import Deferred

    computed: list[int] = []
    thens: list[int] = []
    release = threading.Event()
    page = threading.Thread(target=release.wait)  # the script run that loaded the sample
    page.start()
    value = Deferred(lambda: computed.append(1) or 42)
    warming = value.warm(page, thens.append)
    assert value.warm(page, thens.append) is warming  # once per value
    warming.join(0.2)
    assert warming.is_alive() and computed == [] and not value.done  # nothing before the page ends
    release.set()
    warming.join(10)
    assert computed == [1] and thens == [42] and value.get() == 42 and computed == [1]


def test_a_failed_warm_up_leaves_the_error_to_the_values_users():
    import threading

    from engine.dataset import Deferred

    def fail() -> int:
        raise ValueError("bad lab orders")

    done = threading.Thread(target=lambda: None)
    done.start()
    value: Deferred[int] = Deferred(fail)
    value.warm(done).join(10)
    assert value.done
    with pytest.raises(ValueError, match="bad lab orders"):
        value.get()


def test_the_sample_is_read_ahead_only_in_a_server_or_when_asked(monkeypatch):
    import sys

    from ui import sidebar

    monkeypatch.delenv("COHORTSHIELD_WARM_LABS", raising=False)
    monkeypatch.delitem(sys.modules, "streamlit.web.bootstrap", raising=False)
    assert not sidebar.warm_labs_here()  # the tests (AppTest), a script
    monkeypatch.setitem(sys.modules, "streamlit.web.bootstrap", sys)
    assert sidebar.warm_labs_here()  # `streamlit run`
    monkeypatch.setenv("COHORTSHIELD_WARM_LABS", "0")
    assert not sidebar.warm_labs_here()
    monkeypatch.setenv("COHORTSHIELD_WARM_LABS", "1")
    monkeypatch.delitem(sys.modules, "streamlit.web.bootstrap")
    assert sidebar.warm_labs_here()


def test_the_engine_does_not_read_the_lab_orders_ahead_by_itself(monkeypatch):
    """Only the app asks for the warm-up (`ui.sidebar`): the command line's load starts no thread."""
    import sys
    import threading

    from engine.io import loaders

    monkeypatch.setitem(sys.modules, "streamlit.web.bootstrap", sys)
    monkeypatch.setenv("COHORTSHIELD_WARM_LABS", "1")
    before = set(threading.enumerate())
    loaders.load_sample_checked(unknown_codes="warn", drop_duplicates=True)
    assert not [t for t in set(threading.enumerate()) - before if t.name == "cohortshield-warm"]


@pytest.mark.parametrize("drop", [False, True])
def test_lab_orders_read_ahead_are_the_pages_patient_days(data_dir, monkeypatch, drop):
    """`ui.sidebar.read_labs_ahead`: the lab orders read and their patient-days built into the app's
    cache after the loading thread ends; the page's patient-days are those very ones (built once),
    equal to building them from the frame."""
    import threading

    from engine.io.loaders import warm_sample_labs
    from engine.labs import reident as L
    from ui import sidebar
    from ui.views import labs as view

    loaded = cache.load_shipped(
        f"test labs read ahead {drop}",
        "options",
        lambda: load_dataset(**_files(data_dir), defer_labs=True, drop_duplicates=drop),
        size=1,
    )
    ds = loaded.data
    for name in ("lab days", "lab population days"):
        cache.clear(name)  # the same file's patient-days, held by another test under the same key
    built: list[int] = []
    real = L.patient_days
    monkeypatch.setattr(L, "patient_days", lambda labs: built.append(len(labs)) or real(labs))
    done = threading.Thread(target=lambda: None)
    done.start()
    warming = sidebar.read_labs_ahead(ds, after=done)
    assert warming is not None
    warming.join(30)
    assert ds.labs_read and built == [len(ds.labs)]  # read ahead, outside any script run
    ctx = Context(ds, "population", "cohort", None, None, None, 5)  # type: ignore[arg-type]
    days, which = view.population_days(ctx, ds.labs, ds.group_ids("population"))
    assert which == "all" and built == [len(ds.labs)]  # the page built nothing again
    assert days.fingerprint == real(ds.labs).fingerprint
    assert (
        warm_sample_labs(
            load_uploaded(("e.csv", b"patient_id,code\nP1,250.00\n"), labs=("l.csv", LABS)).data, done
        )
        is None
    )


def test_a_sample_variant_reads_its_lab_orders_when_first_asked_for():
    """The ICD-10-CM and mixed variants carry the sample's lab orders: deferred as the sample's, so
    switching to a variant does not read 6.9 M orders before its first page."""
    from engine.io.imports import load_sample_variant
    from engine.io.loaders import load_sample_checked

    ds = load_sample_variant("icd10cm", unknown_codes="warn").data
    assert not ds.labs_read
    labs = ds.labs
    assert ds.labs_read and labs is not None
    pd.testing.assert_frame_equal(labs, load_sample_checked(unknown_codes="warn").data.labs)


@pytest.mark.e2e
@pytest.mark.xdist_group("browser")
def test_a_server_reading_the_lab_orders_ahead_serves_the_pages_meanwhile(tmp_path):
    """`streamlit run` with the read-ahead on (as in production): the Cohort page, then Lab orders
    opened while the lab orders may still be read, draw without an exception."""
    from browser_support import WAIT_MS, act, chromium, no_exception, settle, streamlit_server
    from playwright.sync_api import expect

    with streamlit_server(tmp_path, env={"COHORTSHIELD_WARM_LABS": "1"}) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        page.goto(url)
        expect(page.get_by_role("heading", name="Cohort").first).to_be_visible(timeout=WAIT_MS)
        settle(page)
        nav = page.locator('[data-testid="stSidebarNav"]')
        act(page, nav.get_by_text("Lab orders", exact=True).click)
        expect(page.get_by_role("heading", name="Lab orders").first).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_text("Uniqueness of lab sets").first).to_be_visible(timeout=WAIT_MS)
        settle(page)
        no_exception(page)
