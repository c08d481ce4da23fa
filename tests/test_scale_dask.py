"""The shard-and-add plan on dask.distributed (engine/scale/distributed.py, issue 15): a 2-worker LocalCluster
gives exactly the in-process results for all four adversaries. The cluster runs its workers as threads
of the test process (processes=False) to keep the suite fast; the tasks are the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import risk
from engine.adversary import ALL_ADVERSARIES
from engine.records import Records
from engine.scale import shards
from engine.synth.generator import generate

distributed = pytest.importorskip("dask.distributed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def test_two_worker_local_cluster_equals_in_process(client, tmp_path: Path) -> None:
    from engine.scale.distributed import dask_distinguishability

    assert len(client.scheduler_info()["workers"]) == 2
    data = generate(2000, seed=11)
    pop = Records.from_frame(data.events)
    cohort = pop.subset(data.cohort["patient_id"].astype(str))
    pop_paths = shards.write_shards(pop, tmp_path / "pop", 4)
    coh_paths = shards.write_shards(cohort, tmp_path / "cohort", 3)
    seen: list[str] = []
    for adv in ALL_ADVERSARIES:
        cands = risk.candidates_for(adv, cohort, pop)
        paths = pop_paths if adv.scope == "population" else coh_paths
        for repeats in (False, True):
            want = risk.distinguishability(
                cohort, cands, adv.knowledge, matching=risk.Matching(count_repeats=repeats)
            )
            got = dask_distinguishability(
                cohort,
                paths,
                adv.knowledge,
                client=client,
                progress=lambda f, m: seen.append(m.split(": ", 1)[1]),
                matching=risk.Matching(count_repeats=repeats),
            )
            assert got.tolist() == want.tolist(), (adv, repeats)
    # within visits, released population's shards
    want = risk.distinguishability(cohort, pop, "single_visit", matching=risk.Matching(within_visits=True))
    got = dask_distinguishability(
        cohort, pop_paths, "single_visit", client=client, matching=risk.Matching(within_visits=True)
    )
    assert got.tolist() == want.tolist()
    assert sorted(set(seen)) == sorted(str(p) for p in pop_paths + coh_paths)  # progress per shard


def test_own_local_cluster_is_started_and_closed(tmp_path: Path) -> None:
    from engine.scale.distributed import dask_distinguishability

    data = generate(300, seed=2)
    pop = Records.from_frame(data.events)
    paths = shards.write_shards(pop, tmp_path, 2)
    got = dask_distinguishability(pop, paths, "all_visits", n_workers=2, processes=False)
    assert got.tolist() == risk.distinguishability(pop, pop, "all_visits").tolist()


def test_local_cluster_capped_equals_in_process_capped(client, tmp_path: Path) -> None:
    """`cap` on Dask: each task counts its shard up to the cap; the capped sums equal the in-process
    capped counts, min(distinguishability, cap)."""
    from engine.scale.distributed import dask_distinguishability

    data = generate(1500, seed=5)
    pop = Records.from_frame(data.events)
    cohort = pop.subset(data.cohort["patient_id"].astype(str))
    paths = shards.write_shards(pop, tmp_path / "pop", 3)
    for know in ("single_visit", "all_visits"):
        full = risk.distinguishability(cohort, pop, know)
        got = dask_distinguishability(cohort, paths, know, client=client, matching=risk.Matching(cap=5))
        assert got.tolist() == [min(int(v), 5) for v in full], know
