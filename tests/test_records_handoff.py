"""Issue 36, the first load at the paper's scale: `Records.from_frame` takes the patient column's
factorization the events' validation made (`Events.patients`) instead of hashing every id again; the
records are the same as without it (fingerprint and every field)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.io import loaders
from engine.io.loaders import SAMPLE_DIR, as_source
from engine.io.validation import ValidationReport
from engine.records import Records

SETTINGS = settings(derandomize=True, database=None, max_examples=60, deadline=None)


def assert_same_records(got: Records, want: Records) -> None:
    assert got.fingerprint == want.fingerprint
    for name in ("patient_ids", "items", "visit_ptr", "visit_ids", "event_ptr", "event_item"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def _events(data: bytes, drop_duplicates: bool = False):
    src = loaders.Source("events.csv", data)
    return loaders._events(src, ValidationReport(), "keep", drop_duplicates, "error")


def test_sample_events_hand_their_patients_over():
    events = loaders._events(
        as_source(SAMPLE_DIR / "events.parquet"), ValidationReport(), "keep", False, "error"
    )
    assert events is not None and events.patients is not None
    got = Records.from_frame(events.frame, patients=events.patients)
    assert_same_records(got, Records.from_frame(events.frame))


def test_the_load_uses_the_handed_factorization(monkeypatch):
    """The load factorizes the patient column once (in the validation), not again for the records."""
    seen: list[object] = []
    factorize = pd.factorize

    def spy(values, *args, **kwargs):
        seen.append(getattr(values, "name", None))
        return factorize(values, *args, **kwargs)

    data = b"patient_id,code,visit\n a,250.00,1\nb,401.1,1\na,401.1,2\n"
    events = _events(data)
    monkeypatch.setattr(pd, "factorize", spy)
    Records.from_frame(events.frame, patients=events.patients)
    assert "patient_id" not in seen


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", " a", "b ", "7", "07", "c"]),
            st.sampled_from(["250.00", "401.1"]),
            st.integers(1, 3),
        ),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
)
@example([("a", "250.00", 1), ("a", "250.00", 1), ("b ", "401.1", 2)], True)
def test_handed_patients_give_the_same_records(rows, drop_duplicates):
    text = "patient_id,code,visit\n" + "".join(f"{p},{c},{v}\n" for p, c, v in rows)
    events = _events(text.encode(), drop_duplicates=drop_duplicates)
    assert events is not None
    want = Records.from_frame(events.frame)
    assert_same_records(Records.from_frame(events.frame, patients=events.patients), want)


def test_wrong_handoff_is_refused():
    frame = pd.DataFrame({"patient_id": ["a", "b"], "code": ["250.00", "401.1"]})
    with pytest.raises(ValueError):
        Records.from_frame(frame, patients=(np.array([0]), np.array(["a"], dtype=object)))
