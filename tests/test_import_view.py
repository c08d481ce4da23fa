"""The import view (ui/import_view.py) and the sample-variant picker: a billing export with its own
headers loads through the column mapping, every source kind loads, bad input is a named error, and
the import is kept in the study's load options."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.io.imports import ImportSpec
from tests.apptest_support import page_app
from tests.xlsx_support import IO_DIR

ROOT = Path(__file__).resolve().parent.parent
I2B2_DIR = ROOT / "tests" / "data" / "i2b2"
OMOP_DIR = ROOT / "tests" / "data" / "omop"


@pytest.fixture(autouse=True)
def _data_roots(monkeypatch) -> None:
    """The test files are a data root here (the default roots are sample_data/ and data/)."""
    import os

    monkeypatch.setenv(
        "COHORTSHIELD_DATA_ROOTS", os.pathsep.join((str(ROOT / "tests" / "data"), str(ROOT / "sample_data")))
    )


def _cohort(state: dict):
    at = page_app("pages/cohort.py", state={"dataset_choice": "Import a source", **state})
    at.run()
    assert not at.exception, at.exception
    return at


def _load(at):
    at.button(key="import_load").click().run()
    assert not at.exception, at.exception
    return at


def test_billing_export_loads_through_the_mapping() -> None:
    at = _cohort({"import_kind": "long", "import_location": str(IO_DIR / "billing_export.csv")})
    # the preview shows the raw rows; the mapping is seeded with the suggestions
    assert list(at.dataframe[0].value.columns)[:3] == ["MRN", "DX_CODE", "ENC_DATE"]
    assert at.selectbox(key="import_map_patient_id").value == "MRN"
    assert at.selectbox(key="import_map_code").value == "DX_CODE"
    assert at.selectbox(key="import_map_visit").value == "ENC_DATE"
    assert any("--map patient_id=MRN,code=DX_CODE,visit=ENC_DATE" in c.value for c in at.code)
    # undotted codes are refused without normalization, naming file, rows and column
    _load(at)
    assert "context" not in at.session_state
    errors = at.session_state["load_report"].report.errors
    assert errors and errors[0].file == "billing_export.csv" and errors[0].column == "DX_CODE"
    # with normalization they load, and the report says what was rewritten
    at.checkbox(key="import_normalize").check().run()
    _load(at)
    ctx = at.session_state["context"]
    assert ctx.dataset.events.n_patients == 3
    assert "'25000' -> '250.00'" in " ".join(
        at.session_state["_import_normalization"]["examples"].astype(str)
    )
    from ui import import_view  # the options the study keeps

    spec = at.session_state["_import_applied"][0]
    assert spec.mapping.startswith("patient_id=MRN,code=DX_CODE,visit=ENC_DATE") and spec.normalize
    assert ImportSpec.from_options(spec.to_options()) == spec
    assert import_view.KIND_LABELS["long"]


def test_excel_sheet_and_mapping() -> None:
    at = _cohort(
        {
            "import_kind": "excel",
            "import_location": str(IO_DIR / "billing_export.xlsx"),
            "import_normalize": True,
        }
    )
    assert at.selectbox(key="import_sheet").value
    _load(at)
    assert at.session_state["context"].dataset.events.n_patients == 3


@pytest.mark.parametrize(
    ("kind", "location", "patients"),
    [
        ("omop", str(OMOP_DIR), 5),
        ("i2b2", str(I2B2_DIR), 4),
        ("meds", str(ROOT / "tests" / "data" / "meds"), 3),
    ],
)
def test_standard_sources_load(kind: str, location: str, patients: int) -> None:
    at = _cohort({"import_kind": kind, "import_location": location, "import_normalize": True})
    assert at.dataframe[0].value.shape[0] > 0  # the preview
    _load(at)
    assert at.session_state["context"].dataset.events.n_patients == patients


def test_unreachable_database_is_a_named_error(monkeypatch) -> None:
    # a free URL is never opened by the app (issue 25): only the administrator's named connections
    at = _cohort({"import_kind": "omop", "import_location": "postgresql+psycopg://u:secret@127.0.0.1:1/cdm"})
    assert at.error and "connections an administrator names" in at.error[0].value
    assert "secret" not in at.error[0].value
    monkeypatch.setenv("COHORTSHIELD_CONNECTIONS", '{"cdm": "postgresql+psycopg://u:secret@127.0.0.1:1/cdm"}')
    at = _cohort({"import_kind": "omop", "import_connection": "cdm"})
    # the preview cannot connect: one error line, the password hidden
    assert at.error and "cannot open the database" in at.error[0].value and "secret" not in at.error[0].value


def test_bad_mapping_column_is_named() -> None:
    at = _cohort({"import_kind": "long", "import_location": str(IO_DIR / "billing_export.csv")})
    at.selectbox(key="import_map_code").set_value("(none)").run()
    assert any("code must be mapped" in w.value for w in at.warning)
    assert "import_load" not in [b.key for b in at.button]  # nothing can be loaded until it is fixed
    assert "_import_applied" not in at.session_state


def test_import_spec_round_trip_hides_the_password() -> None:
    spec = ImportSpec(source="omop", location="postgresql+psycopg://officer:s3cret@db/cdm", schema="cdm")
    options = spec.to_options()
    assert options == {
        "source": "omop",
        "schema": "cdm",
        "location": "postgresql+psycopg://officer:***@db/cdm",
    }
    assert ImportSpec.from_options({"unknown_codes": "keep"}) is None  # the sample or plain uploads
    with pytest.raises(ValueError, match="code must be mapped"):
        ImportSpec.from_options({"source": "long", "mapping": "patient_id=MRN"})
    billing = ImportSpec(mapping="patient_id=MRN,code=DX_CODE", normalize=True, location="x.csv")
    assert ImportSpec.from_options(billing.to_options()) == billing


def test_before_load_the_page_says_what_to_do() -> None:
    at = _cohort({"import_kind": "omop"})
    assert any("press Load" in i.value for i in at.info)
    assert "context" not in at.session_state and "_import_applied" not in at.session_state
