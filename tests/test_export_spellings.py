"""Original spellings in the export's code map (issue 14): after normalization, the code map of any
export keeps each code's spelling in the source (`25000` for `250.00`)."""

from __future__ import annotations

import io

import pandas as pd

from engine.adversary import Adversary
from engine.export import read_release_bytes, release_files
from engine.io.mapping import ColumnMapping, read_long
from engine.records import Records
from engine.release import Release
from engine.risk import verify
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
    files = release_files(release, v, adversary, 3, ds.spellings)
    cmap = pd.read_csv(io.BytesIO(files["code_map.csv"]), dtype=str, keep_default_na=False)
    assert cmap.columns.tolist() == ["released_item", "original_code", "source_spelling", "note"]
    row = cmap[cmap["original_code"] == "250.00"]
    assert row["source_spelling"].tolist() == ["25000"]
    assert set(cmap["source_spelling"]) >= {"E119", "I4891", "V4581", "E8490", "J45909"}
    # the release file reads back with its code map
    back = read_release_bytes(files["release.csv"], files["code_map.csv"])
    assert back.codes_of("*") >= {"250.00", "E11.9"}
    # without spellings the file is as before (no third column)
    plain = pd.read_csv(io.BytesIO(release_files(release, v, adversary, 3)["code_map.csv"]), dtype=str)
    assert plain.columns.tolist() == ["released_item", "original_code", "note"]
