"""Issue 24: the read of the shipped sample's lab orders (`engine.io.loaders._labs`, 6.9 million rows
of Parquet), the first cost of the first opening of the Lab orders page in a server process. The
current read against the one it replaced (tests/reference_labs_read.py) in the same run.

Each figure is one call in a fresh process ("first": the file's bytes in memory and pyarrow's Parquet
reader imported, as after the app's first load; then "again": the same call repeated in that process,
its best of three). Old and new processes alternate; medians over `--repeat` processes. The frames and
reports are compared once (tests/test_labs_read_fast.py proves the equality). Target: well under 1 s.

`--pause S` idles S seconds before each process, as a server does before a user opens the page: on
this project's VMs the memory a process then touches for the first time costs several times more
(page faults), so "first" after a pause is the figure a user meets; back to back it is the best case.

    .venv/bin/python -m bench.labs_read [--repeat 5] [--pause 0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

_RUN = """
import io, json, time
import pyarrow as pa, pyarrow.parquet as pq
from engine.io.loaders import SAMPLE_DIR, _labs, as_source
from engine.io.validation import ValidationReport
from tests.reference_labs_read import _labs as old_labs

buf = io.BytesIO()
pq.write_table(pa.table({"a": ["x"], "b": [1]}), buf)
pq.read_table(io.BytesIO(buf.getvalue())).to_pandas()  # pyarrow's reader loaded, as after a first load
src = as_source(SAMPLE_DIR / "labs.parquet")
read = {"old": old_labs, "new": _labs}[WHICH]
times = []
for _ in range(4):
    t = time.perf_counter()
    frame = read(src, ValidationReport(), False, "error")
    times.append(time.perf_counter() - t)
print(json.dumps({"rows": len(frame), "first": times[0], "again": min(times[1:])}))
"""


def run(which: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _RUN.replace("WHICH", repr(which))], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def same() -> bool:
    """The new read's frame and report equal the old one's on the sample."""
    import pandas as pd

    from engine.io.loaders import SAMPLE_DIR, _labs, as_source
    from engine.io.validation import ValidationReport
    from tests.reference_labs_read import _labs as old_labs

    src = as_source(SAMPLE_DIR / "labs.parquet")
    r_old, r_new = ValidationReport(), ValidationReport()
    old, new = old_labs(src, r_old, False, "error"), _labs(src, r_new, False, "error")
    assert old is not None and new is not None
    pd.testing.assert_frame_equal(old, new)
    return r_old.findings == r_new.findings


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds idle before each process")
    args = parser.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    got: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for i in range(args.repeat):
        for which in ("old", "new") if i % 2 == 0 else ("new", "old"):
            time.sleep(args.pause)
            got[which].append(run(which))
    rows = int(got["new"][0]["rows"])
    print(
        f"lab orders: {rows:,} rows (sample_data/labs.parquet); medians of {args.repeat} processes each, "
        f"{args.pause:g} s idle before each"
    )
    print(f"{'call':<8} {'old s':>7} {'new s':>7} {'ratio':>6}")
    for key in ("first", "again"):
        old = statistics.median(g[key] for g in got["old"])
        new = statistics.median(g[key] for g in got["new"])
        print(f"{key:<8} {old:>7.3f} {new:>7.3f} {old / new:>6.2f}")
    print("same frame and report:", same())
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
