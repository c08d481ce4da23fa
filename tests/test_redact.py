"""No secret in any output (issue 25): one function hides a database password in every URL form, and
every place a URL is recorded or shown goes through it."""

from __future__ import annotations

import pytest

from engine.io.redact import redact, redact_text

SECRET = "S3cr3t"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://alice:{SECRET}@db/cdm",
        f"postgresql://alice:{SECRET}@x@db/cdm",  # a password holding `@`
        f"postgresql://alice:a/{SECRET}?x@db:5432/cdm",
        f"postgresql://alice@db/cdm?password={SECRET}&sslmode=require",
        f"postgresql://db/cdm?user=alice&PASSWD={SECRET}",
        f"postgresql://db/cdm?pwd={SECRET}",
        f"mssql+pyodbc:///?odbc_connect=DRIVER%3D%7BX%7D%3BUID%3Du%3BPWD%3D{SECRET}%3B",
        f"postgresql+psycopg://alice:{SECRET}@db/cdm?sslpassword={SECRET}",
        f"not a url: password={SECRET}",
        # issue 40 (low): a percent-encoded key, and an ODBC string whose first pair is the password
        f"postgresql://db/cdm?%70assword={SECRET}",
        f"postgresql://db/cdm?%50%57%44={SECRET}",
        f"mssql+pyodbc:///?odbc_connect=PWD={SECRET};DRIVER=x",
        f"mssql+pyodbc:///?odbc_connect=PWD%3D{SECRET}%3BDRIVER%3Dx",
        f"mssql+pyodbc:///?odbc_connect=Pwd%253D{SECRET}",
    ],
)
def test_every_form_is_hidden(url: str) -> None:
    assert SECRET not in redact(url)
    assert SECRET not in redact_text(f"could not connect to {url}: refused")


def test_what_is_no_secret_is_kept() -> None:
    assert (
        redact("postgresql://alice:pw@db:5432/cdm?service=prod")
        == "postgresql://alice:***@db:5432/cdm?service=prod"
    )
    assert redact("sqlite:///data/cdm.sqlite") == "sqlite:///data/cdm.sqlite"
    assert redact("duckdb_file.duckdb") == "duckdb_file.duckdb"


def test_the_import_spec_and_the_database_label_hide_it() -> None:
    from engine.io.imports import ImportSpec
    from engine.io.sql import redacted

    url = f"postgresql://alice:{SECRET}@x@db/cdm?password={SECRET}"
    assert SECRET not in str(ImportSpec(source="omop", location=url).to_options())
    assert SECRET not in redacted(url)


# ------------------------------------------------------------------ every output, end to end
def _sqlite_cdm(tmp_path):
    import sqlite3
    from pathlib import Path

    import pandas as pd

    src = Path(__file__).resolve().parent / "data" / "omop"
    db = tmp_path / "cdm.sqlite"
    con = sqlite3.connect(db)
    for f in sorted(src.glob("*.csv")):
        pd.read_csv(f, dtype=str, keep_default_na=False).to_sql(f.stem, con, index=False)
    con.close()
    ids = pd.read_csv(src / "person.csv", dtype=str)["person_id"].tolist()
    (tmp_path / "cohort.csv").write_text("patient_id\n" + "\n".join(ids[:4]) + "\n")
    return db


def _outputs(tmp_path, url: str) -> dict[str, str]:
    """Every output of a study made from `url` through the CLI: stdout and stderr of each command,
    the study file, report.json/.html/.md, the PDF's text, every bundle member."""
    import io
    import subprocess
    import sys
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    study, out = tmp_path / "study.json", tmp_path / "report"
    data = ["--events", url, "--source", "omop", "--cohort", str(tmp_path / "cohort.csv")]
    got: dict[str, str] = {}
    for args in (
        [
            "study",
            "new",
            *data,
            "--scope",
            "cohort",
            "--knowledge",
            "single_visit",
            "--k",
            "2",
            str(study),
        ],
        ["study", "add", "--name", "g", str(study), "gccens", *data],
        ["study", "report", "--out", str(out), *data, str(study)],
    ):
        r = subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True, cwd=root)
        assert r.returncode == 0, r.stderr
        got[f"{args[1]} stdout"], got[f"{args[1]} stderr"] = r.stdout, r.stderr
    got["study file"] = study.read_text()
    for name in ("report.json", "report.html", "report.md"):
        got[name] = (out / name).read_text()
    from pypdf import PdfReader

    got["report.pdf"] = "\n".join(p.extract_text() for p in PdfReader(out / "report.pdf").pages)
    zf = zipfile.ZipFile(io.BytesIO((out / "bundle.zip").read_bytes()))
    for n in zf.namelist():
        got[f"bundle {n}"] = zf.read(n).decode("utf-8", errors="replace")
    return got


@pytest.mark.slow
def test_no_output_holds_the_password(tmp_path) -> None:
    """Issue 25, finding 2: the URL's password in the query (`?password=`) was in clear in the study
    file, the report, the bundle and the CLI's output; now hidden everywhere, the dataset's name too."""
    db = _sqlite_cdm(tmp_path)
    got = _outputs(tmp_path, f"sqlite:///{db}?password={SECRET}")
    assert "***" in got["study file"]
    assert not [k for k, v in got.items() if SECRET in v]
