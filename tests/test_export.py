"""The export gate (engine/io/export.py): only a verification of exactly this release, under the named
adversary and k >= 2, lets it out; cells a spreadsheet would evaluate are neutralized; the bytes
read back are the release that was verified."""

from __future__ import annotations

import gzip
from dataclasses import replace

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import risk
from engine.adversary import Adversary
from engine.io import export
from engine.records import Records
from engine.release import Release, set_item_label
from tests.pseudonym_support import PSEUDONYMS, source_frame

ADV = Adversary("cohort", "single_visit")
G = set_item_label(["401.0", "401.1"])


def release(rows, shows_visits=False, **kw) -> Release:
    recs = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    return Release("t", recs, item_codes={G: frozenset({"401.0", "401.1"})}, shows_visits=shows_visits, **kw)


SAFE = release([(p, 1, c) for p in ("a", "b", "c") for c in (G, "250")])


def test_gate_passes_the_verified_release():
    v = risk.verify(SAFE, ADV, 2)
    export.gate(SAFE, v, ADV, 2)
    files = export.release_files(SAFE, v, ADV, 2, pseudonyms=PSEUDONYMS)
    assert set(files) == {"release.csv", "code_map.csv"}


def test_gate_refuses_unverified_and_failing():
    with pytest.raises(export.ExportRefused, match="not been verified"):
        export.gate(SAFE, None, ADV, 2)
    v = risk.verify(SAFE, ADV, 4)
    assert not v.ok
    with pytest.raises(export.ExportRefused, match="Not verified"):
        export.release_files(SAFE, v, ADV, 4, pseudonyms=PSEUDONYMS)


def test_gate_refuses_the_verification_of_another_release():
    other = release([(p, 1, c) for p in ("a", "b", "c") for c in (G,)])
    with pytest.raises(export.ExportRefused, match="another release"):
        export.gate(SAFE, risk.verify(other, ADV, 2), ADV, 2)
    # the same records exported with their visits are another release (another file)
    with pytest.raises(export.ExportRefused, match="another release"):
        export.gate(SAFE.with_visits(True), risk.verify(SAFE, ADV, 2), ADV, 2)


def test_gate_refuses_another_adversary_or_k():
    v = risk.verify(SAFE, ADV, 2)
    with pytest.raises(
        export.ExportRefused, match="cohort / single visit adversary, not the cohort / all visits"
    ):
        export.gate(SAFE, v, Adversary("cohort", "all_visits"), 2)
    with pytest.raises(export.ExportRefused, match="k = 2, not at k = 3"):
        export.gate(SAFE, v, ADV, 3)


def test_gate_refuses_k_1():
    """Issue 12, finding 8: `--k 1` wrote the original data as a "Verified" release."""
    v = risk.verify(SAFE, ADV, 1)
    assert v.ok
    with pytest.raises(export.ExportRefused, match="k = 1 protects nobody"):
        export.release_files(SAFE, v, ADV, 1, pseudonyms=PSEUDONYMS)


def test_formula_cells_are_neutralized():
    """Issue 12, finding 7: cells starting with = + - @ (tab, CR) get a leading apostrophe."""
    bad = ["=1+1", "+x", "-x", "@x", "\tx", "'x"]
    rel = release([(p, 1, c) for p in ("a", "b") for c in bad])
    files = export.release_files(rel, risk.verify(rel, ADV, 2), ADV, 2, pseudonyms=PSEUDONYMS)
    text = files["release.csv"].decode()
    got = pd.read_csv(pd.io.common.BytesIO(files["release.csv"]), dtype=str, keep_default_na=False)
    assert set(got["code"]) == {"'=1+1", "'+x", "'-x", "'@x", "'\tx", "''x"}
    assert "\n=1+1" not in text and ",=1+1" not in text
    cmap = pd.read_csv(pd.io.common.BytesIO(files["code_map.csv"]), dtype=str, keep_default_na=False)
    assert set(cmap["released_item"]) == set(cmap["original_code"]) == set(got["code"])
    assert cmap["note"].iloc[0] == export.NEUTRALIZE_RULE
    back = export.read_release_bytes(files["release.csv"], files["code_map.csv"])
    assert set(back.records.items) == set(bad)
    assert back.exported_frame()["code"].tolist() == rel.exported_frame()["code"].tolist()


def test_safe_csv_bytes_for_any_table():
    frame = pd.DataFrame({"code": ['=HYPERLINK("x")', "250"], "p": [-0.5, 1.0], "@n": ["-1", "ok"]})
    text = export.safe_csv_bytes(frame).decode()
    assert text.splitlines() == ["code,p,'@n", '"\'=HYPERLINK(""x"")",-0.5,\'-1', "250,1.0,ok"]


@settings(max_examples=30, deadline=None)
@example(patients=[[["250"]], [["250"], ["250"]]], shows=True, repeats=True)
@given(
    patients=st.lists(
        st.lists(
            st.lists(st.sampled_from(["250", "=1", "-x", G, "401.0"]), min_size=1, max_size=3),
            min_size=1,
            max_size=3,
        ),
        min_size=1,
        max_size=5,
    ),
    shows=st.booleans(),
    repeats=st.booleans(),
)
def test_exported_bytes_read_back_verify_equal(patients, shows, repeats):
    """Every patient has a twin (so k = 2 holds); the bytes written read back to the same rows under
    release ids (the crosswalk turns them back into the source's rows, visits numbered 1, 2, ...),
    and the same verdict for a reader of the file (within visits when they are shown): relabelling
    changes nothing the risk engine measures (issue 23)."""
    rows = [
        (f"p{i}{twin}", v + 1, c)
        for i, vs in enumerate(patients)
        for twin in ("", "_twin")
        for v, codes in enumerate(vs)
        for c in codes
    ]
    rel = release(rows, shows_visits=shows, counts_repeats=repeats)
    for adv in (ADV, Adversary("cohort", "all_visits")):
        v = risk.verify(rel, adv, 2)
        assert v.ok
        files = export.release_files(rel, v, adv, 2, pseudonyms=PSEUDONYMS)
        back = export.read_release_bytes(files["release.csv"], files["code_map.csv"])
        assert back.shows_visits == shows
        # a visits file whose repeats lie in different visits has no duplicated row: the reader cannot
        # tell from the rows alone whether repeat counts were released (the code map does not say)
        back = replace(back, counts_repeats=rel.counts_repeats)
        mine = rel.exported_frame()
        if shows:  # the source's visits 1, 2, 3 of each patient are numbered 1, 2, 3 again
            mine["visit"] = mine.groupby("patient_id")["visit"].rank(method="dense").astype(int)
        assert source_frame(rel, files["release.csv"]).values.tolist() == mine.astype(str).values.tolist()
        ids = back.records.patient_ids.astype(str)
        assert all(i.startswith("R") for i in ids) and not set(ids) & set(rel.records.patient_ids.astype(str))
        again = risk.verify(back, adv, 2)
        export.gate(back, again, adv, 2)
        to_source = {r: s for s, r in export.release_ids(rel, PSEUDONYMS).items()}
        mine_dis = dict(zip(rel.records.patient_ids.astype(str), v.distinguishability.tolist(), strict=True))
        theirs = [mine_dis[to_source[i]] for i in ids]
        if shows or adv.knowledge == "all_visits":
            assert again.distinguishability.tolist() == theirs
        else:  # without visits, the file's reader knows at most the whole record: never more candidates
            assert (again.distinguishability <= theirs).all()


def test_write_release_files_is_atomic_and_remove_stale(tmp_path):
    v = risk.verify(SAFE, ADV, 2)
    files = export.release_files(SAFE, v, ADV, 2, pseudonyms=PSEUDONYMS)
    out, cmap = tmp_path / "r.csv", tmp_path / "m.csv.gz"
    digests = export.write_release_files(files, {"release.csv": out, "code_map.csv": cmap})
    assert out.read_bytes() == files["release.csv"]
    assert gzip.decompress(cmap.read_bytes()) == files["code_map.csv"]
    assert set(digests) == {str(out), str(cmap)}
    # no temporary left; the set's manifest written last, naming both files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv.gz", "r.csv", "r.csv.sha256"]
    assert export.check_manifest({"release.csv": out, "code_map.csv": cmap}) == []
    with pytest.raises(KeyError):
        export.write_release_files(files, {"other.csv": out})
    assert export.remove_stale({"release.csv": out, "code_map.csv": cmap, "x": tmp_path / "none"}) == [
        out,
        cmap,
        tmp_path / "r.csv.sha256",
    ]
    assert list(tmp_path.iterdir()) == []


def test_check_output_path(tmp_path):
    assert export.check_output_path(tmp_path / "x.csv", "--out") == tmp_path / "x.csv"
    with pytest.raises(export.OutputPathError, match="is a folder"):
        export.check_output_path(tmp_path, "--out")
    with pytest.raises(export.OutputPathError, match="does not exist"):
        export.check_output_path(tmp_path / "missing" / "x.csv", "--out")


def test_an_interrupted_set_is_found_and_leaves_no_temporary(tmp_path, monkeypatch):
    """Issue 23, finding 4: a kill between the two replacements left a new release.csv beside the
    old code_map.csv, and a kill during the write left `.release.csv.*.tmp` behind."""
    v = risk.verify(SAFE, ADV, 2)
    files = export.release_files(SAFE, v, ADV, 2, pseudonyms=PSEUDONYMS)
    paths = {"release.csv": tmp_path / "release.csv", "code_map.csv": tmp_path / "code_map.csv"}
    export.write_release_files(files, paths)
    assert export.check_manifest(paths) == []
    newer = {n: b + b"x,y\n" for n, b in files.items()}
    real_replace, calls = export.os.replace, []

    def dies_after_the_first(src, dst):
        if calls:
            raise KeyboardInterrupt  # the process is stopped between the two replacements
        calls.append(dst)
        real_replace(src, dst)

    monkeypatch.setattr(export.os, "replace", dies_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        export.write_release_files(newer, paths)
    monkeypatch.setattr(export.os, "replace", real_replace)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    problems = export.check_manifest(paths)
    assert problems and "no manifest" in problems[0]  # the mixed set is not taken for a whole one
    # a temporary file a killed writer left (its process id is no longer alive) goes on the next write
    stale = tmp_path / ".release.csv.999999999.abc.tmp"
    stale.write_bytes(b"half")
    export.write_release_files(files, paths)
    assert not stale.exists() and export.check_manifest(paths) == []
