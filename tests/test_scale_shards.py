"""Sharded runs (engine/scale/shards.py, issue 15): the supports of the targets' known sets counted shard by
shard and added equal the in-process kernel, for all four adversaries, with released (generalized)
items, repeat counts, suppressed events and matching within visits."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import risk
from engine.adversary import ALL_ADVERSARIES
from engine.records import Records
from engine.scale import shards
from engine.synth.generator import generate
from tests.test_risk_properties import SETTINGS, cases, tuning


def _compare(targets, cands, n_shards, *, item_codes=None, repeats=False, within=False, knowledge=None):
    with tempfile.TemporaryDirectory() as d:
        paths = shards.write_shards(cands, d, n_shards)
        for know in (knowledge,) if knowledge else ("single_visit", "all_visits"):
            kw = dict(item_codes=item_codes, count_repeats=repeats, within_visits=within)
            want = risk.distinguishability(targets, cands, know, matching=risk.Matching(**kw))
            got = shards.sharded_distinguishability(targets, paths, know, matching=risk.Matching(**kw))
            assert got.tolist() == want.tolist(), (know, kw)


@SETTINGS
@given(case=cases(), n_shards=st.integers(1, 4), mode=st.sampled_from(["default", "walk", "pairs"]))
def test_sharded_equals_in_process_all_adversaries(case, n_shards, mode):
    """Each kernel (the trie walk, the index) adds up over shards to its in-process count."""
    pop, cohort, release = case
    with tuning(mode):
        _sharded_cases(pop, cohort, release, n_shards)


def _sharded_cases(pop, cohort, release, n_shards) -> None:
    for repeats in (False, True):
        for adv in ALL_ADVERSARIES:
            cands = risk.candidates_for(adv, cohort, pop)
            _compare(cohort, cands, n_shards, repeats=repeats, knowledge=adv.knowledge)
    # released items (generalized, suppressed), released population, repeats, within visits
    for adv in ALL_ADVERSARIES:
        cands = risk.candidates_for(adv, release.records, pop, release.population)
        for within in (False, True):
            _compare(
                release.records,
                cands,
                n_shards,
                item_codes=release.item_codes,
                repeats=release.counts_repeats,
                within=within,
                knowledge=adv.knowledge,
            )


def test_sharded_synthetic_population_with_progress(tmp_path: Path) -> None:
    data = generate(3000, seed=3)
    pop = Records.from_frame(data.events)
    cohort = pop.subset(data.cohort["patient_id"].astype(str))
    seen: list[tuple[int, int]] = []
    paths = shards.write_shards(pop, tmp_path, 5)
    assert sum(shards.read_shard(p)[1] for p in paths) == pop.n_patients
    for adv in ALL_ADVERSARIES:
        cands = risk.candidates_for(adv, cohort, pop)
        use = paths if adv.scope == "population" else shards.write_shards(cands, tmp_path / "c", 3)
        for repeats in (False, True):
            want = risk.distinguishability(
                cohort, cands, adv.knowledge, matching=risk.Matching(count_repeats=repeats)
            )
            got = shards.sharded_distinguishability(
                cohort,
                use,
                adv.knowledge,
                progress=lambda f, m: seen.append(tuple(map(int, m.split()[1].rstrip(":").split("/")))),
                matching=risk.Matching(count_repeats=repeats),
            )
            assert got.tolist() == want.tolist(), (adv, repeats)
    # one report per shard, in order: 2 population adversaries x 2 repeat settings on 5 shards
    assert [d for d, n in seen if n == 5] == [1, 2, 3, 4, 5] * 4
    # within visits on the whole population
    want = risk.distinguishability(cohort, pop, "single_visit", matching=risk.Matching(within_visits=True))
    got = shards.sharded_distinguishability(
        cohort, paths, "single_visit", matching=risk.Matching(within_visits=True)
    )
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_shards_from_events_file_equal_in_process(tmp_path: Path, suffix: str) -> None:
    data = generate(800, seed=5)
    ev = data.events[["patient_id", "visit", "code"]]
    src = tmp_path / f"events{suffix}"
    ev.to_csv(src, index=False) if suffix == ".csv" else ev.to_parquet(src, index=False)
    paths = shards.write_shards_from_events(src, tmp_path / "shards", 4, batch_rows=997)
    pop = Records.from_frame(ev)
    assert sum(shards.read_shard(p)[1] for p in paths) == pop.n_patients
    for know in ("single_visit", "all_visits"):
        for repeats in (False, True):
            want = risk.distinguishability(pop, pop, know, matching=risk.Matching(count_repeats=repeats))
            got = shards.sharded_distinguishability(
                pop, paths, know, matching=risk.Matching(count_repeats=repeats)
            )
            assert got.tolist() == want.tolist()


def test_events_file_errors_name_file_row_column(tmp_path: Path) -> None:
    src = tmp_path / "ev.csv"
    src.write_text("patient_id,visit,code\np1,1,250\np2,1,\n")
    with pytest.raises(ValueError, match=r"ev\.csv, row 2, column 'code': empty value"):
        shards.write_shards_from_events(src, tmp_path / "s", 2)
    src.write_text("pid,code\np1,250\n")
    with pytest.raises(ValueError, match=r"ev\.csv: no column 'patient_id'"):
        shards.write_shards_from_events(src, tmp_path / "s", 2)


def test_shard_of_is_fixed_and_partitions() -> None:
    ids = np.array([f"p{i}" for i in range(1000)], dtype=object)
    a = shards.shard_of(ids, 7)
    assert a.tolist() == shards.shard_of(ids.copy(), 7).tolist()
    assert set(a.tolist()) == set(range(7))
    with pytest.raises(ValueError, match="positive"):
        shards.shard_of(ids, 0)


def test_patients_without_events_still_count(tmp_path: Path) -> None:
    recs = Records.from_frame(
        pd.DataFrame({"patient_id": ["a", "b", "c"], "visit": [1, 1, 1], "code": ["250", "401", "250"]})
    )
    emptied = recs.keep_events(np.array([True, False, True]))  # b keeps no event
    paths = shards.write_shards(emptied, tmp_path, 2)
    assert sum(shards.read_shard(p)[1] for p in paths) == 3
    for know in ("single_visit", "all_visits"):
        want = risk.distinguishability(emptied, emptied, know)
        assert shards.sharded_distinguishability(emptied, paths, know).tolist() == want.tolist()


def test_cli_sharded_and_dask_equal_in_process(tmp_path: Path, capsys) -> None:
    from engine.commands.cli import main

    data = generate(600, seed=7)
    events = tmp_path / "events.csv"
    data.events[["patient_id", "visit", "code"]].to_csv(events, index=False)
    cohort = tmp_path / "cohort.csv"
    data.cohort[["patient_id"]].to_csv(cohort, index=False)
    assert main(["shards", str(events), str(tmp_path / "shards"), "3"]) == 0
    assert "wrote 3 shards of 600 patients" in capsys.readouterr().out
    base = ["risk", "--events", str(events), "--cohort", str(cohort), "--scope", "population"]
    outs = {}
    for name, extra in (
        ("in process", []),
        ("3 shards, one at a time", ["--shards", str(tmp_path / "shards")]),
        (
            "Dask (a local cluster of 2 workers)",
            ["--shards", str(tmp_path / "shards"), "--dask-workers", "2"],
        ),
    ):
        out = tmp_path / f"{len(outs)}.csv"
        assert main([*base, "--knowledge", "single_visit", *extra, "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        assert f"backend: {name}" in printed
        assert ("shard 3/3" in printed) == bool(extra)
        assert "candidates: 600 patients" in printed
        outs[name] = pd.read_csv(out)
    first, *rest = outs.values()
    for other in rest:
        pd.testing.assert_frame_equal(first, other)
    assert main([*base, "--knowledge", "all_visits", "--scheduler", "tcp://x:1", "--out", str(out)]) == 2
    assert "--scheduler and --dask-workers need --shards" in capsys.readouterr().err
    assert main([*base, "--knowledge", "all_visits", "--shards", str(tmp_path), "--out", str(out)]) == 2
    assert "no shard-*.parquet file" in capsys.readouterr().err


@SETTINGS
@given(case=cases(), n_shards=st.integers(1, 4), cap=st.integers(1, 4))
def test_capped_sharded_equals_in_process_capped(case, n_shards, cap):
    """Capped counts (`cap`) add over shards: min(full distinguishability, cap) exactly, in process
    and sharded (a small population leaves some shards empty)."""
    pop, cohort, _ = case
    with tempfile.TemporaryDirectory() as d:
        paths = shards.write_shards(pop, d, n_shards)
        for know in ("single_visit", "all_visits"):
            for within in (False, True) if know == "single_visit" else (False,):
                full = risk.distinguishability(
                    cohort, pop, know, matching=risk.Matching(count_repeats=True, within_visits=within)
                )
                kw = dict(count_repeats=True, within_visits=within, cap=cap)
                assert (
                    risk.distinguishability(cohort, pop, know, matching=risk.Matching(**kw)).tolist()
                    == np.minimum(full, cap).tolist()
                )
                got = shards.sharded_distinguishability(cohort, paths, know, matching=risk.Matching(**kw))
                assert got.tolist() == np.minimum(full, cap).tolist(), (know, within)


def test_cli_up_to_k_prints_the_kernel_and_equals_capped(tmp_path: Path, capsys) -> None:
    """`--up-to-k`: the CSV holds min(distinguishability, k), in process and sharded, and the run
    says which kernel counted (in process once; sharded per shard)."""
    from engine.commands.cli import main

    data = generate(600, seed=7)
    events = tmp_path / "events.csv"
    data.events[["patient_id", "visit", "code"]].to_csv(events, index=False)
    assert main(["shards", str(events), str(tmp_path / "shards"), "2"]) == 0
    base = ["risk", "--events", str(events), "--scope", "population", "--knowledge", "single_visit"]
    full_out = tmp_path / "full.csv"
    assert main([*base, "--out", str(full_out)]) == 0
    printed = capsys.readouterr().out
    assert "kernel: walk\n" in printed or "kernel: index\n" in printed
    full = pd.read_csv(full_out)["distinguishability"].to_numpy()
    for extra in ([], ["--shards", str(tmp_path / "shards")]):
        out = tmp_path / f"capped{len(extra)}.csv"
        assert main([*base, "--k", "4", "--up-to-k", *extra, "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        assert pd.read_csv(out)["distinguishability"].tolist() == np.minimum(full, 4).tolist()
        if extra:
            assert (
                "shard 2/2: " in printed
                and "shard-00001.parquet (kernel: compiled walk, counts capped at 4)" in printed
            )
        else:
            assert "kernel: compiled walk, counts capped at 4" in printed
        assert "a median of k means k or more" in printed


def _population_order(paths) -> list[str]:
    """Patient ids in the order `sharded_population_distinguishability` reports them (patients
    without events, absent from the shards, as None)."""
    out: list[str | None] = []
    for p in paths:
        recs, n = shards.read_shard(p)
        ids = [] if recs is None else [str(x) for x in recs.patient_ids]
        out += ids + [None] * (n - len(ids))
    return out


@SETTINGS
@given(case=cases(), n_shards=st.integers(1, 4), cap=st.sampled_from([None, 1, 2, 3, 5]))
def test_sharded_population_against_itself_equals_in_process(case, n_shards, cap):
    """The whole population held in shards against itself (never in memory at once) equals the
    in-process kernel, for full and capped counts (capped: sets decided in earlier shards are not
    counted again), both knowledge kinds, with repeats and within visits."""
    pop = case[0].keep_events(np.arange(case[0].n_events) % 7 != 3)  # some patients lose every event
    with tempfile.TemporaryDirectory() as d:
        paths = shards.write_shards(pop, d, n_shards)
        order = _population_order(paths)
        assert len(order) == pop.n_patients
        for know in ("single_visit", "all_visits"):
            for repeats, within in ((False, False), (True, False), (False, True)):
                kw = dict(count_repeats=repeats, within_visits=within, cap=cap)
                want = dict(
                    zip(
                        pop.patient_ids.astype(str),
                        risk.distinguishability(pop, pop, know, matching=risk.Matching(**kw)),
                        strict=True,
                    )
                )
                got = shards.sharded_population_distinguishability(paths, know, matching=risk.Matching(**kw))
                assert len(got) == pop.n_patients
                empty = min(pop.n_patients, cap or pop.n_patients)
                for pid, value in zip(order, got.tolist(), strict=True):
                    assert value == (want[pid] if pid is not None else empty), (know, kw, pid)
                events_of = {str(pop.patient_ids[p]) for p in np.unique(pop.event_patient)}
                assert sorted(p for p in order if p is not None) == sorted(events_of)


def _same_records(a: Records, b: Records) -> None:
    for name in ("patient_ids", "items", "visit_ptr", "visit_ids", "event_ptr", "event_item"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    assert a.has_visits == b.has_visits and a.event_age is None and b.event_age is None


@SETTINGS
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["p1", "p2", "p10", "é", "0"]),
            st.integers(-3, 3),
            st.sampled_from(["250", "401.1", "V70", "E9"]),
        ),
        min_size=1,
        max_size=40,
    ),
    visits=st.booleans(),
    vocab=st.booleans(),
)
def test_records_from_table_equals_from_frame(rows, visits, vocab):
    """The Arrow loader of shards builds the same records as `Records.from_frame` (patients in first
    appearance order, visits sorted numerically, ties in input order, vocabulary sorted as text)."""
    import pyarrow as pa

    frame = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    if not visits:
        frame = frame.drop(columns="visit")
    items = np.array(["0", "250", "401.1", "E9", "V70", "Z"], dtype=object) if vocab else None
    want = Records.from_frame(frame, items=items)
    _same_records(shards.records_from_table(pa.Table.from_pandas(frame, preserve_index=False), items), want)
