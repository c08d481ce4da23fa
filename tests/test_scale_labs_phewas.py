"""The shards that hold a population's diagnoses serve lab-order uniqueness (Johnson 2018 section 2.2)
and PheWAS case/control counts too (issue 15): computed one shard at a time, they equal the
in-process measures."""

from __future__ import annotations

import tempfile

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from engine.labs import reident as L
from engine.records import Records
from engine.scale import shards
from engine.synth.generator import generate
from engine.utility import phewas as P
from tests.test_risk_properties import SETTINGS

LABS = ["CBC", "BMP", "A1C", "TSH", "LIPID"]


@st.composite
def lab_orders(draw) -> pd.DataFrame:
    n = draw(st.integers(1, 12))
    rows = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, 4), st.sampled_from(LABS)),
            min_size=1,
            max_size=60,
        )
    )
    return pd.DataFrame(
        {
            "patient_id": [f"p{p}" for p, _, _ in rows],
            "day": [d for _, d, _ in rows],
            "lab": [lab for *_, lab in rows],
        }
    )


@SETTINGS
@given(labs=lab_orders(), n_shards=st.integers(1, 4))
def test_sharded_uniqueness_equals_in_process(labs, n_shards):
    """Per patient: the same number of lab days and the same number of patients sharing the exact
    lab set, whichever shards the patients fall in (a lab absent from some shards included)."""
    want = L.uniqueness(L.patient_days(labs))
    with tempfile.TemporaryDirectory() as d:
        paths = shards.write_lab_shards(labs, d, n_shards)
        seen: list[int] = []
        got = shards.sharded_uniqueness(paths, progress=lambda f, _: seen.append(f))
    assert seen == [i / n_shards for i in range(1, n_shards + 1)]
    assert sorted(got.patient_ids.tolist()) == sorted(want.patient_ids.tolist())
    w = pd.DataFrame({"days": want.days, "size": want.class_size}, index=want.patient_ids)
    g = pd.DataFrame({"days": got.days, "size": got.class_size}, index=got.patient_ids)
    pd.testing.assert_frame_equal(g.sort_index(), w.sort_index())
    assert got.share_unique == want.share_unique


@SETTINGS
@given(seed=st.integers(0, 3), n_shards=st.integers(1, 4), min_count=st.sampled_from([1, 2]))
def test_sharded_phewas_equals_in_process(seed, n_shards, min_count):
    """Case and control genotype counts add over shards: the PheWAS table is identical (counts, odds
    ratios, p-values), for the whole population and for a cohort of it."""
    data = generate(400, seed=seed, labs=False)
    pop = Records.from_frame(data.events)
    settings = P.PhewasSettings(min_code_count=min_count, min_cases=3)
    cohort_ids = data.cohort["patient_id"].astype(str).tolist()
    with tempfile.TemporaryDirectory() as d:
        paths = shards.write_shards(pop, d, n_shards)
        for ids in (None, cohort_ids):
            recs = pop if ids is None else pop.subset(ids)
            want = P.phewas_of_records(recs, data.genotypes, settings)
            got = shards.sharded_phewas(paths, data.genotypes, settings, cohort=ids)
            assert len(want) > 0
            pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))


def test_lab_shards_follow_the_event_shards(tmp_path) -> None:
    """Lab shard i and event shard i hold the same patients (one hash), so one folder serves both."""
    data = generate(300, seed=1, labs=True)
    pop = Records.from_frame(data.events)
    ev = shards.write_shards(pop, tmp_path, 3)
    lab = shards.write_lab_shards(data.labs, tmp_path, 3)
    for e, lp in zip(ev, lab, strict=True):
        e_ids = set(shards.read_shard(e)[0].patient_ids.astype(str))
        l_ids = set(pd.read_parquet(lp)["patient_id"].astype(str))
        assert l_ids and l_ids <= e_ids  # every generated patient has diagnoses
        assert (shards.shard_of(np.array(sorted(e_ids)), 3) == ev.index(e)).all()


def test_cli_shards_then_labs_and_phewas_from_the_shards(tmp_path, capsys) -> None:
    """`python -m engine shards EVENTS DIR N --labs LABS` writes both kinds of shard; `labs
    uniqueness --shards` and `phewas --shards` (with and without --cohort) write the same CSV as from
    the files in memory; bad arguments get one-line errors."""
    from engine.commands.cli import main

    data = generate(500, seed=2, labs=True)
    events, labs, geno = tmp_path / "events.csv", tmp_path / "labs.csv", tmp_path / "geno.csv"
    cohort = tmp_path / "cohort.csv"
    data.events[["patient_id", "visit", "code"]].to_csv(events, index=False)
    data.labs.to_csv(labs, index=False)
    data.genotypes.to_csv(geno, index=False)
    data.cohort[["patient_id"]].to_csv(cohort, index=False)
    d = tmp_path / "shards"
    assert main(["shards", str(events), str(d), "3", "--labs", str(labs)]) == 0
    out = capsys.readouterr().out
    assert "wrote 3 shards of 500 patients" in out
    assert f"wrote 3 lab shards of {data.labs['patient_id'].nunique()} patients" in out
    assert len(list(d.glob("labs-*.parquet"))) == 3

    a, b = tmp_path / "u_files.csv", tmp_path / "u_shards.csv"
    assert main(["labs", "uniqueness", "--labs", str(labs), "--out", str(a)]) == 0
    assert main(["labs", "uniqueness", "--shards", str(d), "--out", str(b)]) == 0
    assert "shard 3/3" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_csv(b), pd.read_csv(a))

    for extra in ([], ["--cohort", str(cohort)]):
        a, b = tmp_path / "p_files.csv", tmp_path / "p_shards.csv"
        common = ["--genotypes", str(geno), "--min-cases", "5", *extra]
        assert main(["phewas", "--events", str(events), *common, "--out", str(a)]) == 0
        assert main(["phewas", "--shards", str(d), *common, "--out", str(b)]) == 0
        assert "backend: 3 shards, one at a time" in capsys.readouterr().out
        want = pd.read_csv(a)
        assert len(want) > 0
        pd.testing.assert_frame_equal(pd.read_csv(b), want)

    assert main(["shards", str(events), str(d), "0"]) == 2
    assert "number of shards must be a positive whole number, not 0" in capsys.readouterr().err
    assert main(["labs", "uniqueness", "--shards", str(tmp_path), "--out", str(b)]) == 2
    assert "no labs-*.parquet file" in capsys.readouterr().err
    rel = ["--released", str(events), "--codemap", str(events)]
    assert main(["phewas", "--shards", str(d), "--genotypes", str(geno), *rel, "--out", str(b)]) == 2
    assert "--released needs --events" in capsys.readouterr().err
