"""Original spellings in the export's code map (issue 14): after normalization, the code map of any
export keeps each code's spelling in the source (`25000` for `250.00`)."""

from __future__ import annotations

import io

import pandas as pd

from engine.adversary import Adversary
from engine.io.export import read_release_bytes, release_files
from engine.io.mapping import ColumnMapping, read_long
from engine.records import Records
from engine.release import Release
from engine.risk import verify
from tests.pseudonym_support import KEY, PSEUDONYMS
from tests.xlsx_support import IO_DIR

BILLING = IO_DIR / "billing_export.csv"
MAP = "patient_id=MRN,code=DX_CODE,visit=ENC_DATE"


def _dataset(normalize: bool = True):
    data = read_long(BILLING.name, BILLING.read_bytes(), ColumnMapping.parse(MAP), normalize=normalize)
    return data.dataset("billing")


def test_dataset_keeps_each_codes_spellings() -> None:
    ds = _dataset()
    assert ds.spellings is not None
    assert ds.spellings["250.00"] == ("25000",) and ds.spellings["I48.91"] == ("I4891",)
    assert ds.spellings["I10"] == ("I10",)  # written as is
    # without normalization nothing was rewritten: no spellings, the code map keeps two columns
    events = pd.DataFrame({"patient_id": ["a"], "code": ["250.00"]})
    plain = read_long("e.csv", events.to_csv(index=False).encode()).dataset("plain")
    assert plain.spellings is None


def test_code_map_rows_per_spelling() -> None:
    records = Records.from_frame(pd.DataFrame({"patient_id": ["a", "b"], "code": ["250.0x", "250.0x"]}))
    release = Release("t", records, item_codes={"250.0x": frozenset({"250.00", "250.01"})})
    assert release.exported_code_map().columns.tolist() == ["released_item", "original_code"]
    cmap = release.exported_code_map({"250.00": ("25000", "250.00")})
    assert cmap.values.tolist() == [
        ["250.0x", "250.00", "250.00"],  # spellings sorted as text
        ["250.0x", "250.00", "25000"],
        ["250.0x", "250.01", "250.01"],  # no recorded spelling: its own
    ]


def test_exported_code_map_file_keeps_the_original_spelling() -> None:
    ds = _dataset()
    events = ds.events
    # every code generalized to one item: the three patients are alike, verified at k = 3
    release = Release(
        "all",
        events.relabel(["*"] * events.n_items),
        item_codes={"*": frozenset(map(str, events.items))},
        source=events,
    )
    adversary = Adversary("cohort", "all_visits")
    v = verify(release, adversary, 3, events)
    assert v.ok
    files = release_files(release, v, adversary, 3, ds.spellings, pseudonyms=PSEUDONYMS)
    cmap = pd.read_csv(io.BytesIO(files["code_map.csv"]), dtype=str, keep_default_na=False)
    assert cmap.columns.tolist() == ["released_item", "original_code", "source_spelling", "note"]
    row = cmap[cmap["original_code"] == "250.00"]
    assert row["source_spelling"].tolist() == ["25000"]
    assert set(cmap["source_spelling"]) >= {"E119", "I4891", "V4581", "E8490", "J45909"}
    # the release file reads back with its code map
    back = read_release_bytes(files["release.csv"], files["code_map.csv"])
    assert back.codes_of("*") >= {"250.00", "E11.9"}
    # without spellings the file is as before (no third column)
    plain = pd.read_csv(
        io.BytesIO(release_files(release, v, adversary, 3, pseudonyms=PSEUDONYMS)["code_map.csv"]), dtype=str
    )
    assert plain.columns.tolist() == ["released_item", "original_code", "note"]


# ---------------------------------------------------------------------------- every loader, the CLI
# four patients alike once normalized: 250.00 (written 25000 or 250.00) and 401.9 (ICD9:401.9, 4019)
SPELLED = (
    "patient_id,code\nP1,25000\nP1,ICD9:401.9\nP2,250.00\nP2,401.9\n"
    "P3,25000\nP3,4019\nP4,250.00\nP4,ICD9:401.9\n"
)
SPELLINGS = {"250.00": ("250.00", "25000"), "401.9": ("401.9", "4019", "ICD9:401.9")}


def _spelled(tmp_path):
    events, cohort = tmp_path / "events.csv", tmp_path / "cohort.csv"
    events.write_text(SPELLED)
    cohort.write_text("patient_id\nP1\nP2\nP3\nP4\n")
    return events, cohort


def test_events_loader_and_load_dataset_keep_the_spellings(tmp_path) -> None:
    from engine.io.loaders import load_dataset, load_events

    events, cohort = _spelled(tmp_path)
    assert load_events(events, normalize=True).spellings == SPELLINGS
    loaded = load_dataset(events, cohort=cohort, normalize=True)
    assert loaded.data.spellings == SPELLINGS and loaded.spellings == SPELLINGS
    # nothing rewritten without normalization (dotted codes only): no spellings
    dotted = tmp_path / "dotted.csv"
    dotted.write_text("patient_id,code\nP1,250.00\n")
    assert load_events(dotted).spellings is None and load_dataset(dotted).data.spellings is None


def test_read_source_input_keeps_the_spellings() -> None:
    from engine.commands.inputs import InputOptions, load_events_input

    opts = InputOptions(mapping=MAP, normalize=True)
    assert load_events_input(str(BILLING), opts).spellings == _dataset().spellings


def _code_map(path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _spelled_rows(cmap: pd.DataFrame) -> list[list[str]]:
    return cmap[["released_item", "original_code", "source_spelling"]].values.tolist()


def test_cli_gccens_code_map_keeps_the_original_spelling(tmp_path, capsys) -> None:
    from engine.commands.cli import main

    events, cohort = _spelled(tmp_path)
    out, cmap = tmp_path / "released.csv", tmp_path / "code_map.csv"
    args = ["anonymize", "gccens", "--events", str(events), "--cohort", str(cohort), "--k", "2"]
    rc = main([*args, "--normalize-codes", "--out", str(out), "--codemap", str(cmap)])
    assert rc == 0, capsys.readouterr().err
    assert set(pd.read_csv(out, dtype=str)["code"]) == {"250.00", "401.9"}
    assert _spelled_rows(_code_map(cmap)) == [
        ["250.00", "250.00", "250.00"],
        ["250.00", "250.00", "25000"],
        ["401.9", "401.9", "401.9"],
        ["401.9", "401.9", "4019"],
        ["401.9", "401.9", "ICD9:401.9"],
    ]


def test_cli_generalize_and_profiles_code_maps_keep_the_original_spelling(tmp_path, capsys) -> None:
    from engine.commands.cli import main

    events, cohort = _spelled(tmp_path)
    common = ["--events", str(events), "--cohort", str(cohort), "--k", "2", "--normalize-codes"]
    for method, extra in (("generalize", []), ("ugaclip", ["--knowledge", "all_visits"])):
        out, cmap = tmp_path / f"{method}.csv", tmp_path / f"{method}_map.csv"
        rc = main(["anonymize", method, *common, *extra, "--out", str(out), "--codemap", str(cmap)])
        assert rc == 0, capsys.readouterr().err
        got = _code_map(cmap)
        assert got.columns.tolist() == ["released_item", "original_code", "source_spelling", "note"]
        spelled = {(code, s) for _, code, s in _spelled_rows(got)}
        assert ("250.00", "25000") in spelled and ("401.9", "ICD9:401.9") in spelled, method


def test_cli_code_map_without_normalization_has_no_spelling_column(tmp_path, capsys) -> None:
    from engine.commands.cli import main

    events, cohort = tmp_path / "events.csv", tmp_path / "cohort.csv"
    events.write_text("patient_id,code\nP1,250.00\nP2,250.00\n")
    cohort.write_text("patient_id\nP1\nP2\n")
    cmap = tmp_path / "code_map.csv"
    args = ["anonymize", "gccens", "--events", str(events), "--cohort", str(cohort), "--k", "2"]
    assert main([*args, "--out", str(tmp_path / "r.csv"), "--codemap", str(cmap)]) == 0, capsys.readouterr()
    assert _code_map(cmap).columns.tolist() == ["released_item", "original_code", "note"]


def test_cli_study_run_rebuilds_a_release_with_spellings_byte_identical(tmp_path, capsys) -> None:
    from engine.commands.cli import main
    from engine.commands.inputs import InputOptions, load_groups
    from engine.study.runs import GCCensSettings, RunInputs
    from engine.study.study import Study, data_ref, make_release

    events, cohort = _spelled(tmp_path)
    g = load_groups(str(events), cohort=str(cohort), options=InputOptions(normalize=True))
    assert g.spellings == SPELLINGS
    inputs = RunInputs(g.population, g.cohort, None)
    data = data_ref("spelled", g.events, inputs, sources=g.sources, load_options={"normalize": True})
    adversary = Adversary("cohort", "all_visits")
    made = make_release(
        "G",
        GCCensSettings(k=2, scope="cohort"),
        inputs,
        data,
        adversary,
        2,
        spellings=g.spellings,
        pseudonyms=PSEUDONYMS,
    )
    assert b"25000" in made.files["code_map.csv"]  # the recorded code map carries the spellings
    study = tmp_path / "study.json"
    study.write_text(Study(data, adversary, 2, pseudonym_key=KEY).add(made.entry).to_json())
    args = ["study", "run", str(study), "--events", str(events), "--cohort", str(cohort), "--normalize-codes"]
    rc = main(args)
    out = capsys.readouterr().out
    assert rc == 0 and "G: byte-identical" in out, out
