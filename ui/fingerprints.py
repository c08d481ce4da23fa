"""Content fingerprints for the UI's cache keys: every row counted, never a sample.

Streamlit's own hashing samples large arguments (a DataFrame of 50,000 rows or more is hashed on
10,000 of them, a numpy array of 500,000 elements or more on a sample too), so two uploads differing
outside the sample would share a cache entry (issue 12, finding 4). Every cached function that takes
data derived from an upload therefore receives the data under a leading-underscore parameter (which
Streamlit does not hash) and one of these fingerprints as its key, and is scoped to the session:

    @st.cache_data(scope="session")
    def f(genotypes_key: str, _genotypes: pd.DataFrame): ...
    f(frame_fingerprint(genotypes), genotypes)

`Records` have their own `fingerprint` (ui.context.HASH_FUNCS hashes them by it).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import streamlit as st

from engine.release import Release
from ui import state
from ui.state import ABSENT

_MEMO = "_frame_fingerprints"
_MEMO_SIZE = 8
state.declare(__name__, held={_MEMO: ABSENT})


def _update_column(h: Any, column: pd.Series) -> None:
    """Feed one column's every value to the hash: numpy buffers as bytes, anything else through
    Arrow (strings, nullable types: validity bitmap, offsets and data), or `repr` as a last resort."""
    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biufcmM":
        h.update(np.ascontiguousarray(column.to_numpy()).tobytes())
        return
    try:
        array = pa.Array.from_pandas(column)  # Arrow-backed columns: their own buffers, no copy
    except (pa.ArrowException, TypeError, ValueError):
        h.update("\x1f".join(map(repr, column.tolist())).encode())
        return
    for chunk in array.chunks if isinstance(array, pa.ChunkedArray) else [array]:
        h.update(f"{chunk.type}:{chunk.offset}:{len(chunk)}:{chunk.null_count};".encode())
        for buffer in chunk.buffers():
            h.update(b"-" if buffer is None else buffer)


def frame_fingerprint(frame: pd.DataFrame) -> str:
    """sha256 over a frame's columns, dtypes, index and every value of every row.

    Memoized in this session per frame object (frames held by a loaded Dataset are never modified),
    so a large table is read once, not on every rerun."""
    memo: dict[int, tuple[pd.DataFrame, str]] = st.session_state.setdefault(_MEMO, {})
    hit = memo.get(id(frame))
    if hit is not None and hit[0] is frame:
        return hit[1]
    h = hashlib.sha256()
    h.update(repr((frame.shape, [str(c) for c in frame.columns], [str(t) for t in frame.dtypes])).encode())
    _update_column(h, frame.index.to_series())
    for i in range(frame.shape[1]):
        h.update(b"\x1e")
        _update_column(h, frame.iloc[:, i])
    fp = h.hexdigest()
    memo[id(frame)] = (frame, fp)  # the frame is held, so its id cannot be reused while memoized
    while len(memo) > _MEMO_SIZE:
        memo.pop(next(iter(memo)))
    return fp


def ids_fingerprint(ids: Any) -> str:
    """sha256 of a sequence of patient ids (every id, in order)."""
    return hashlib.sha256("\x1f".join(map(str, ids)).encode()).hexdigest()


def release_key(release: Release) -> str:
    """Everything a computation on a release may read: `Release.content_fingerprint` (the method,
    records, population, item map, parameters, structure, export, suppressions and source)."""
    return release.content_fingerprint
