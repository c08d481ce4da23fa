"""The shard-and-add plan of engine/scale/shards.py on `dask.distributed` (issue 15; ARCHITECTURE section 7).

The client builds the targets' known sets once and sends them to every worker; each task reads one
shard (a local path on a shared file system, or an object-store URL read through fsspec) and counts the
support of every known set with the engine's kernel (`engine.scale.shards.shard_support`, which calls
`engine.risk.count_known_sets`); the client adds the supports as they arrive and takes the minimum per
target record. Dask only schedules: the kernel stays the one arbiter, so results equal the in-process
run exactly. Workers need this package importable (same code, same pinned versions).

    from engine.scale.distributed import dask_distinguishability
    dis = dask_distinguishability(cohort, shard_paths, "single_visit", scheduler="tcp://host:8786")

Without `scheduler` or `client`, a `LocalCluster` of `n_workers` single-threaded processes is started
for the call and closed after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.adversary import Knowledge
from engine.io.progress import Progress
from engine.records import Records
from engine.risk import DEFAULT_MATCHING, KnownSets, Matching, known_sets
from engine.scale.shards import shard_done, shard_support


def dask_known_set_distinguishability(
    targets: Records,
    shards: Sequence[str | Path],
    knowledge: Knowledge,
    matching: Matching = DEFAULT_MATCHING,
    *,
    client=None,
    scheduler: str | None = None,
    n_workers: int = 2,
    processes: bool = True,
    progress: Progress | None = None,
) -> KnownSets:
    """`engine.scale.shards.sharded_known_set_distinguishability` with one Dask task per shard, on `client`,
    else on the scheduler at `scheduler` (e.g. "tcp://10.0.0.5:8786"), else on a LocalCluster of
    `n_workers` (`processes=False`: threads of this process). `matching.threads`: kernel threads per
    task (None: one, the workers being single-threaded); `matching.cap`: counts up to `cap`
    (`engine.risk.count_known_sets`)."""
    from engine.io.extras import require

    require("scale", "a Dask run (--scheduler, --dask-workers)")
    from dask.distributed import Client, LocalCluster, as_completed

    own_cluster = own_client = None
    if client is None:
        if scheduler:
            client = own_client = Client(scheduler)
        else:
            own_cluster = LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=processes, dashboard_address=":0"
            )
            client = own_client = Client(own_cluster)
    try:
        cap = matching.cap
        task = replace(
            matching,
            item_codes=dict(matching.item_codes) if matching.item_codes else None,
            threads=matching.threads or 1,
        )
        known, owner = known_sets(targets, knowledge, matching.count_repeats)
        [items_f, known_f] = client.scatter([targets.items, known], broadcast=True, hash=False)
        futures = {
            client.submit(
                shard_support,
                str(path),
                items_f,
                known_f,
                knowledge,
                task,
                pure=False,
            ): str(path)
            for path in shards
        }
        total = np.zeros(known.shape[0], dtype=np.int64)
        n_cand = 0
        for done, fut in enumerate(as_completed(futures), start=1):
            values, n = fut.result()
            total += values
            if cap is not None:
                np.minimum(total, cap, out=total)
            n_cand += n
            if progress is not None:
                progress(done / len(futures), shard_done(done, len(futures), futures[fut]))
        return KnownSets(known, owner, total, targets.n_patients, n_cand, cap)
    finally:
        if own_client is not None:
            own_client.close()
        if own_cluster is not None:
            own_cluster.close()


def dask_distinguishability(
    targets: Records,
    shards: Sequence[str | Path],
    knowledge: Knowledge,
    matching: Matching = DEFAULT_MATCHING,
    **kwargs,
) -> np.ndarray:
    """`engine.risk.distinguishability` against the population in `shards`, counted on Dask (keyword
    arguments as `dask_known_set_distinguishability`)."""
    return dask_known_set_distinguishability(targets, shards, knowledge, matching, **kwargs).per_record()
