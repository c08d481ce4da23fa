"""`--min-cell N|cms|aou|ohdsi|none` on every command that writes counts of patients in cells (issue 28;
one helper: engine.disclosure.cells.add_min_cell_option / min_cell_of). Covered: `phewas` (cases and
controls per phecode), `labs uniqueness` (patients per number of lab days, with complementary
suppression against the total the command prints), `anonymize ugaclip|aclip --report` (original and
released records per disease of the utility policy). Not counts of people in cells: release files and
their code maps (records, published by the rule), `risk` (per-record verdicts, records below k),
`labs recall` (Recall@n, shares of trials), the other anonymize reports (loss, retention and risk
figures; the LDA's cluster sizes are the release file's own counts)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.commands.cli import main
from engine.disclosure.cells import SUPPRESSED, SmallCellPolicy, suppress_cumulative
from engine.labs import reident as L
from tests.test_labs import structured_labs

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="module")
def labs_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("labs") / "labs.csv"
    structured_labs(250, 20, 5, seed=9).to_csv(path, index=False)
    return path


def _written_counts(col: pd.Series) -> list[object]:
    return [SUPPRESSED if str(v) == SUPPRESSED else int(v) for v in col]


@pytest.fixture(scope="module")
def tail_csv(tmp_path_factory) -> Path:
    """40 patients with 1, 2, 3 or 4 days of labs (20, 12, 5, 3 of them): at least d days 40, 20, 8, 3."""
    rows = []
    for p, n_days in enumerate([1] * 20 + [2] * 12 + [3] * 5 + [4] * 3):
        rows += [{"patient_id": f"P{p}", "day": d, "lab": f"L{(p + d) % 7}"} for d in range(n_days)]
    path = tmp_path_factory.mktemp("tail") / "labs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_suppress_cumulative_by_hand():
    cms = SmallCellPolicy.parse("cms")
    got = suppress_cumulative([30, 25, 24, 12, 3, 1], cms, total=30)
    assert got.tolist() == [True, True, True, False, True, True]  # 24 leaves 6 from the total
    assert suppress_cumulative([40, 20, 8, 3], cms, total=40).tolist() == [False, False, True, True]
    assert not suppress_cumulative([40, 20, 8, 3], SmallCellPolicy.parse("none")).any()


@pytest.mark.parametrize("rule", ["cms", "11", "ohdsi", "aou"])
@pytest.mark.parametrize("which", ["labs_csv", "tail_csv"])
def test_labs_uniqueness_suppresses_small_cells_and_a_complement(request, which, tmp_path, capsys, rule):
    labs_csv = request.getfixturevalue(which)
    out = tmp_path / "u.csv"
    assert main(["labs", "uniqueness", "--labs", str(labs_csv), "--min-cell", rule, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    got = pd.read_csv(out, dtype=str)
    assert list(got.columns) == ["days", "patients", "share_unique"]
    truth = L.uniqueness(L.patient_days(pd.read_csv(labs_csv, dtype={"patient_id": str}))).by_days()
    policy = SmallCellPolicy.parse(rule)
    cells = _written_counts(got["patients"])
    hidden = np.array([c == SUPPRESSED for c in cells])
    small = np.array([policy.is_small(int(x)) for x in truth["patients"]])
    assert (hidden >= small).all()  # every small cell suppressed
    assert all(c == int(x) for c, x, h in zip(cells, truth["patients"], hidden, strict=True) if not h)
    # the cells are "at least d days": the exact counts are differences of two published cells, or of
    # one and the printed total (or 0 below the last row): each is zero or not small
    total = int(truth["patients"].iloc[0]) if len(truth) else 0
    assert f"{total} patients" in printed
    shown = [total, *[int(c) for c in cells if c != SUPPRESSED], 0]
    for i, x in enumerate(shown):
        for y in shown[i + 1 :]:
            assert not policy.is_small(x - y), (x, y)
    assert "small cells" in printed
    if which == "tail_csv" and rule in ("cms", "11"):
        assert hidden.tolist() == [False, False, True, True]


def test_labs_uniqueness_without_the_option_writes_every_count(labs_csv, tmp_path):
    out = tmp_path / "u.csv"
    assert main(["labs", "uniqueness", "--labs", str(labs_csv), "--out", str(out)]) == 0
    assert SUPPRESSED not in set(pd.read_csv(out, dtype=str)["patients"])


def test_ugaclip_report_suppresses_small_disease_counts(tmp_path, capsys):
    from tests.test_profiles_cli import _inputs

    ev, ids = _inputs(tmp_path)
    out, cmap, rep = tmp_path / "out.csv", tmp_path / "map.csv", tmp_path / "rep.json"
    args = ["anonymize", "ugaclip", "--events", str(ev), "--cohort", str(ids), "--k", "5"]
    args += ["--knowledge", "single_visit", "--out", str(out), "--codemap", str(cmap), "--report", str(rep)]
    assert main(args) == 0
    plain = json.loads(rep.read_text())["utility_constraints"]
    assert main([*args, "--min-cell", "cms"]) == 0
    report = json.loads(rep.read_text())
    shown = report["utility_constraints"]
    assert len(shown) == len(plain) > 0
    n = 0
    for before, after in zip(plain, shown, strict=True):
        for col in ("original_records", "released_records"):
            if 1 <= int(before[col]) <= 10:
                assert after[col] == SUPPRESSED
                n += 1
            else:
                assert after[col] == before[col]
    assert (
        n > 0 and report["small_cells"]["primary"] == n and report["small_cells"]["policy"]["name"] == "cms"
    )


PROFILE_ARGS = ["--events", "e.csv", "--cohort", "c.csv", "--k", "5", "--knowledge", "all_visits", "--out"]
PROFILE_ARGS += ["o.csv", "--codemap", "m.csv"]


@pytest.mark.parametrize(
    "command",
    [
        ["labs", "uniqueness", "--labs", "x.csv", "--out", "y.csv"],
        ["anonymize", "ugaclip", *PROFILE_ARGS],
        ["anonymize", "aclip", *PROFILE_ARGS],
        ["phewas", "--events", "e.csv", "--genotypes", "g.csv", "--out", "o.csv"],
    ],
)
def test_a_bad_min_cell_is_one_line_exit_2(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--min-cell", "seven"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--min-cell" in err[0]
