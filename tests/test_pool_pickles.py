"""What a pool job carries pickles (issue 38, finding 4): a `Dataset` whose lab orders are `Deferred`
(the shipped sample's), and the LDA's prepared input (`_Prepared`, which a job's memo sends back),
each holding a lock made anew on unpickling; and the copy works after."""

from __future__ import annotations

import pickle
import threading
from functools import partial

import cloudpickle
import numpy as np
import pandas as pd
import pytest

from engine.dataset import Dataset, Deferred
from engine.records import Records

_READS: list[int] = []


def _lab_orders(n: int) -> pd.DataFrame:
    _READS.append(n)
    return pd.DataFrame({"patient_id": [f"p{i}" for i in range(n)], "day": range(n), "lab": ["LDL"] * n})


def _dataset(labs) -> Dataset:
    frame = pd.DataFrame({"patient_id": ["p0", "p1", "p1"], "code": ["250.00", "401.1", "=1+1"]})
    return Dataset(name="tiny", events=Records.from_frame(frame), labs=labs)


@pytest.mark.parametrize("dumps", [cloudpickle.dumps, pickle.dumps], ids=["cloudpickle", "pickle"])
def test_a_dataset_with_deferred_lab_orders_pickles_and_reads_them_after(dumps) -> None:
    ds = _dataset(Deferred(partial(_lab_orders, 3), fingerprint="sha of the bytes"))
    _READS.clear()
    copy = pickle.loads(dumps(ds))
    assert _READS == [] and not copy.labs_read  # not read to pickle it
    assert copy.labs_fingerprint == "sha of the bytes"
    pd.testing.assert_frame_equal(copy.labs, _lab_orders(3))
    assert copy.labs_read and not ds.labs_read  # read in the copy, once
    assert _READS == [3, 3]
    pd.testing.assert_frame_equal(ds.labs, copy.labs)  # the original reads its own


def test_a_deferred_value_read_or_failed_pickles_as_it_is() -> None:
    read: Deferred[int] = Deferred(lambda: 42)
    read.get()
    after = threading.Thread(target=lambda: None)
    after.start()
    read.warm(after).join()  # a warming thread, which cannot be pickled
    copy = pickle.loads(cloudpickle.dumps(read))
    assert copy.done and copy.get() == 42

    def fail() -> int:
        raise ValueError("lab file row 3: no day")

    failed: Deferred[int] = Deferred(fail)
    with pytest.raises(ValueError):
        failed.get()
    with pytest.raises(ValueError, match="row 3"):
        pickle.loads(cloudpickle.dumps(failed)).get()


def test_the_ldas_prepared_input_pickles_and_works_after() -> None:
    from engine.anonymize.alignment import weight_fraction
    from engine.anonymize.trajectories import Trajectories, _prepared
    from engine.hierarchy import Hierarchy

    pairs = [
        [("401.1", 31), ("250.00", 32)],
        [("401.9", 30)],
        [("401.1", 32)],
        [("250.00", 30), ("401.9", 31)],
    ]
    icd = Hierarchy.icd9()
    prep = _prepared(Trajectories.from_pairs(pairs), icd, None, (30, 45), weight_fraction(0.5), "a-gs")
    x = prep.tup[0]
    want = prep.row(x).copy()
    copy = pickle.loads(pickle.dumps(prep))
    np.testing.assert_array_equal(copy.row(x), want)
    np.testing.assert_array_equal(copy.row(prep.tup[3]), prep.row(prep.tup[3]))
