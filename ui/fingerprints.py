"""Content fingerprints for the UI's cache keys: every row counted, never a sample.

Streamlit's own hashing samples large arguments (a DataFrame of 50,000 rows or more is hashed on
10,000 of them, a numpy array of 500,000 elements or more on a sample too), so two uploads differing
outside the sample would share a cache entry (issue 12, finding 4). The app's memo (`ui.cache`) hashes
nothing itself: every key names the data by one of these fingerprints (or `Records.fingerprint`):

    cache.memo("phewas", (frame_fingerprint(genotypes), ...), lambda: ..., size=8, data=ctx)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from engine.dataset import Dataset
from engine.release import Release
from ui import cache

_FRAMES = 8  # frames whose fingerprint is held (per session)


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


def frame_fingerprint(frame: pd.DataFrame, *, data: Any = None) -> str:
    """sha256 over a frame's columns, dtypes, index and every value of every row.

    Memoized per frame object (frames held by a loaded Dataset are never modified), so a large table
    is read once, not on every rerun: in this session, or once for the server when `data` (what the
    frame comes from, for `ui.cache`) is the shipped sample's (its 6.9 million lab orders took a second
    in every new session, issue 24). The entry holds the frame, so its id cannot be reused while memoized."""
    held, fp = cache.memo(
        "frame fingerprints", id(frame), lambda: (frame, _fingerprint(frame)), size=_FRAMES, data=data
    )
    assert held is frame
    return fp


def labs_fingerprint(dataset: Dataset, *, data: Any = None) -> str:
    """A fingerprint of the whole content of a dataset's lab orders: the shipped sample's from the
    bytes of their file and the read's options (`Dataset.labs_fingerprint`, known without reading or
    hashing 6.9 million rows: issue 24), any other's (an upload's) from every value of every row
    (`frame_fingerprint`, `data` as there). The two kinds are named apart."""
    known = dataset.labs_fingerprint
    if known is not None:
        return f"lab orders file:{known}"
    return frame_fingerprint(dataset.labs, data=data)


def _fingerprint(frame: pd.DataFrame) -> str:
    h = hashlib.sha256()
    h.update(repr((frame.shape, [str(c) for c in frame.columns], [str(t) for t in frame.dtypes])).encode())
    _update_column(h, frame.index.to_series())
    for i in range(frame.shape[1]):
        h.update(b"\x1e")
        _update_column(h, frame.iloc[:, i])
    return h.hexdigest()


def ids_fingerprint(ids: Any) -> str:
    """sha256 of a sequence of patient ids (every id, in order)."""
    return hashlib.sha256("\x1f".join(map(str, ids)).encode()).hexdigest()


def release_key(release: Release) -> str:
    """Everything a computation on a release may read: `Release.content_fingerprint` (the method,
    records, population, item map, parameters, structure, export, suppressions and source)."""
    return release.content_fingerprint


def value_fingerprint(value: Any) -> str:
    """sha256 of a figure's or table's inputs (issue 40, finding 7): numpy arrays, frames and series
    by every value, mappings and sequences item by item in order, scalars by type and repr. Any other
    type is a TypeError (a key that named it by identity could serve another input's result)."""
    h = hashlib.sha256()
    _update_value(h, value)
    return h.hexdigest()


def _update_value(h: Any, value: Any) -> None:
    if value is None or isinstance(value, str | bytes | bool | int | float | np.generic):
        h.update(f"{type(value).__name__}:{value!r};".encode())
    elif isinstance(value, np.ndarray):
        h.update(f"array:{value.dtype}:{value.shape};".encode())
        if value.dtype.kind == "O":
            h.update("\x1f".join(map(repr, value.ravel().tolist())).encode())
        else:
            h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, pd.DataFrame):
        h.update(f"frame:{_fingerprint(value)};".encode())
    elif isinstance(value, pd.Series):
        h.update(f"series:{value.name!r}:{_fingerprint(value.to_frame())};".encode())
    elif isinstance(value, Mapping):
        h.update(f"mapping:{len(value)}(".encode())
        for k, v in value.items():
            _update_value(h, k)
            _update_value(h, v)
        h.update(b")")
    elif isinstance(value, list | tuple):
        h.update(f"{type(value).__name__}:{len(value)}(".encode())
        for v in value:
            _update_value(h, v)
        h.update(b")")
    else:
        raise TypeError(f"no content fingerprint for {type(value).__name__}")
