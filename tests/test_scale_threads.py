"""The risk kernel's thread count (issue 15): every core by default, COHORTSHIELD_THREADS, a function
argument and `--threads` on the `risk` command; results identical for every count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import risk
from engine.adversary import ALL_ADVERSARIES
from engine.commands.cli import main
from engine.records import Records
from tests.test_risk_properties import MODES, SETTINGS, cases, tuning

DATA = Path(__file__).parent / "data"


def test_thread_count_defaults_to_cores_and_reads_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(risk.THREADS_ENV, raising=False)
    monkeypatch.setattr(risk.os, "cpu_count", lambda: 7)
    assert risk.thread_count() == 7
    monkeypatch.setenv(risk.THREADS_ENV, "3")
    assert risk.thread_count() == 3
    assert risk.thread_count(5) == 5  # the argument wins
    monkeypatch.setenv(risk.THREADS_ENV, "many")
    with pytest.raises(ValueError, match=r"COHORTSHIELD_THREADS.*'many'"):
        risk.thread_count()
    with pytest.raises(ValueError, match="positive"):
        risk.thread_count(0)


def test_threads_are_used(monkeypatch) -> None:
    """More than one thread really runs the chunks in a pool (tiny chunks: many jobs)."""
    made: list[int] = []
    real = risk.ThreadPoolExecutor

    def spy(n):
        made.append(n)
        return real(n)

    monkeypatch.setattr(risk, "ThreadPoolExecutor", spy)
    rows = [(f"p{p}", v, c) for p in range(30) for v in range(2) for c in ("250", "401", str(p % 4))]
    pop = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    with tuning("pairs"):
        one = risk.distinguishability(pop, pop, "single_visit", matching=risk.Matching(threads=1))
        three = risk.distinguishability(pop, pop, "single_visit", matching=risk.Matching(threads=3))
    assert made == [3]
    assert one.tolist() == three.tolist()


@SETTINGS
@given(case=cases(), mode=st.sampled_from(MODES))
def test_results_identical_for_1_2_3_threads(case, mode):
    pop, cohort, release = case
    for repeats in (False, True):
        with tuning(mode):
            got = {
                t: {
                    adv: risk.original_distinguishability(
                        cohort, adv, pop, matching=risk.Matching(count_repeats=repeats, threads=t)
                    )
                    for adv in ALL_ADVERSARIES
                }
                for t in (1, 2, 3)
            }
        for adv in ALL_ADVERSARIES:
            assert got[1][adv].tolist() == got[2][adv].tolist() == got[3][adv].tolist(), (adv, repeats)
    # a release: generalized items, repeats, visits matched within visits
    for within in (False, True):
        with tuning(mode):
            res = [
                risk.distinguishability(
                    release.records,
                    release.records,
                    "single_visit",
                    matching=risk.Matching(
                        item_codes=release.item_codes,
                        count_repeats=release.counts_repeats,
                        within_visits=within,
                        threads=t,
                    ),
                ).tolist()
                for t in (1, 2, 3)
            ]
        assert res[0] == res[1] == res[2]


def test_cli_threads(tmp_path: Path, capsys) -> None:
    outs = []
    for t in ("1", "2"):
        out = tmp_path / f"risk{t}.csv"
        argv = ["risk", "--events", str(DATA / "events_good.csv"), "--scope", "cohort"]
        rc = main([*argv, "--knowledge", "single_visit", "--threads", t, "--out", str(out)])
        assert rc == 0
        outs.append(pd.read_csv(out))
    pd.testing.assert_frame_equal(outs[0], outs[1])
    rc = main([*argv, "--knowledge", "single_visit", "--threads", "0", "--out", str(tmp_path / "x.csv")])
    assert rc != 0
    assert "--threads must be a positive whole number, not 0" in capsys.readouterr().err
    assert np.isfinite(outs[0]["distinguishability"]).all()
