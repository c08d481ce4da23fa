"""`python -m engine phewas`: original and released, round trip through the exported files."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.commands.cli import main
from engine.records import Records
from engine.release import Release, release_from_frames, set_item_label


def _files(tmp_path, n=300, seed=5):
    rng = np.random.default_rng(seed)
    rows, geno = [], []
    for i in range(n):
        pid = f"P{i:03d}"
        g = int(rng.binomial(2, 0.35))
        geno.append((pid, g))
        rows.append((pid, 1, "401.1" if i % 3 else "401.9"))
        rows.append((pid, 2, "414.01" if rng.random() < 0.1 + 0.15 * g else "724.2"))
    ev = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    ev.to_csv(tmp_path / "events.csv", index=False)
    pd.DataFrame(geno, columns=["patient_id", "rsX"]).to_csv(tmp_path / "geno.csv", index=False)
    return ev


def test_release_round_trip_through_exports():
    item = set_item_label(["401.1", "401.9"])
    rel = Release(
        "m",
        Records.from_frame(
            pd.DataFrame({"patient_id": ["a", "b"], "visit": [1, 1], "code": [item, "724.2"]})
        ),
        item_codes={item: frozenset({"401.1", "401.9"})},
    )
    back = release_from_frames(rel.to_frame().astype(str), rel.code_map())
    assert back.item_codes == rel.item_codes
    assert back.records.patient_visits(0) == rel.records.patient_visits(0)
    with pytest.raises(ValueError, match="released_item"):
        release_from_frames(rel.to_frame(), pd.DataFrame({"item": ["x"]}))


def test_cli_original_and_released(tmp_path, capsys):
    ev = _files(tmp_path)
    item = set_item_label(["401.1", "401.9"])
    released = ev.assign(code=ev["code"].replace({"401.1": item, "401.9": item}))
    released.to_csv(tmp_path / "released.csv", index=False)
    pd.DataFrame(
        {
            "released_item": [item, item, "414.01", "724.2"],
            "original_code": ["401.1", "401.9", "414.01", "724.2"],
        }
    ).to_csv(tmp_path / "codemap.csv", index=False)
    out = tmp_path / "out.csv"
    code = main(
        [
            "phewas",
            "--events", str(tmp_path / "events.csv"),
            "--genotypes", str(tmp_path / "geno.csv"),
            "--released", str(tmp_path / "released.csv"),
            "--codemap", str(tmp_path / "codemap.csv"),
            "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    res = pd.read_csv(out, dtype={"phecode": str})
    row = res[res.phecode == "411.4"].iloc[0]
    # generalization inside phecode 401.1 changes nothing for coronary disease
    assert row.p == pytest.approx(row.p_released) and row.p < 0.01
    assert "tests" in capsys.readouterr().out


def test_cli_bad_inputs_exit_2(tmp_path, capsys):
    _files(tmp_path)
    (tmp_path / "bad.csv").write_bytes(b"patient_id,code\nP1,\xff\xfe\n")
    args = ["phewas", "--events", str(tmp_path / "bad.csv"), "--genotypes", str(tmp_path / "geno.csv")]
    assert main([*args, "--out", str(tmp_path / "o.csv")]) == 2
    assert "bad.csv" in capsys.readouterr().err
    args = ["phewas", "--events", str(tmp_path / "events.csv"), "--genotypes", str(tmp_path / "geno.csv")]
    assert main([*args, "--released", str(tmp_path / "events.csv"), "--out", str(tmp_path / "o.csv")]) == 2
    assert "go together" in capsys.readouterr().err
