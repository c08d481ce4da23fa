"""Issue 12, findings 3, 6 and 8 (`--events` a folder): no input is silently changed, and what the
loaders find reaches the command line and every JSON report.

3. Loader warnings reach stderr and `input_warnings` of the JSON reports; `--keep-unknown` (default) /
   `--drop-unknown`; a patient whose only hypertension code is the unknown `401.10` is no hypertension
   control in the PheWAS.
6. Readers never change a value: Parquet integer ids exact, `NA`-like ids an error unless accepted, a
   headerless id list read by content, the utility-policy reader validating like the events reader.
8. `--events` pointing at a folder: a one-line error naming the path.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.commands.cli import main
from engine.io.errors import DataError, InputFileError
from engine.io.loaders import Source, load_events, load_genotypes, load_ids, load_labs
from engine.records import Records
from engine.utility.phewas import phecode_table, phenotype_matrix, run_phewas, unmapped_codes
from engine.utility.queries import read_utility_policy, utility_policy_from_frame

EVENTS = "events_unknown_401_10.csv"  # 401.10, a duplicate row, ssn column, 'Code', non-ISO dates


def _cohort(tmp_path: Path) -> Path:
    p = tmp_path / "cohort.csv"
    p.write_text("patient_id\n" + "\n".join(f"P{i}" for i in range(1, 7)) + "\n")
    return p


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _errors(exc: pytest.ExceptionInfo[DataError], kind: str):
    found = [f for f in exc.value.report.errors if f.kind == kind]
    assert found, [str(f) for f in exc.value.report.errors]
    return found


# ------------------------------------------------------------------------- finding 3: warnings
def test_f3_cli_prints_every_loader_warning(data_dir: Path, tmp_path: Path, capsys) -> None:
    argv = ["risk", "--events", str(data_dir / EVENTS), "--scope", "cohort", "--knowledge", "single_visit"]
    assert main([*argv, "--out", str(tmp_path / "r.csv")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert all(line.startswith("warning: file events_unknown_401_10.csv") for line in err)
    text = "\n".join(err)
    assert "1 code(s) unknown to the ICD-9-CM vocabulary; their 1 rows kept: 401.10 (1 rows)" in text
    assert "row 5" in text and "1 row(s) repeat an earlier row exactly (kept)" in text
    assert "column(s) not used (ignored, never released): ssn" in text
    assert "column 'Code' read as 'code'" in text
    assert "dates not in ISO form ('03/12/2010', '04/02/2010')" in text
    assert len(err) == 5


@pytest.mark.parametrize(
    "command",
    [
        ["anonymize", "generalize", "--k", "2"],
        ["anonymize", "gccens", "--k", "2"],
        ["anonymize", "aclip", "--k", "2", "--knowledge", "all_visits", "--codemap", "{tmp}/m.csv"],
        ["anonymize", "lda", "--k", "2", "--drop-unknown"],
    ],
    ids=["generalize", "gccens", "aclip", "lda"],
)
def test_f3_every_json_report_has_the_input_warnings(data_dir: Path, tmp_path: Path, command) -> None:
    report = tmp_path / "report.json"
    argv = [c.replace("{tmp}", str(tmp_path)) for c in command]
    argv += ["--events", str(data_dir / EVENTS), "--cohort", str(_cohort(tmp_path))]
    main([*argv, "--out", str(tmp_path / "out.csv"), "--report", str(report)])
    warnings = json.loads(report.read_text())["input_warnings"]
    kinds = {w["kind"] for w in warnings}
    assert {"unknown_code", "duplicate_rows", "extra_columns", "renamed_column", "visit_order"} <= kinds
    [unknown] = [w for w in warnings if w["kind"] == "unknown_code"]
    assert unknown["counts"] == {"401.10": 1} and unknown["rows"] == [2] and unknown["column"] == "Code"
    assert unknown["file"] == EVENTS
    assert ("dropped" if "--drop-unknown" in command else "kept") in unknown["message"]


def test_f3_drop_unknown_drops_and_says_so(data_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out.csv"
    argv = ["anonymize", "gccens", "--k", "2", "--events", str(data_dir / EVENTS)]
    argv += ["--cohort", str(_cohort(tmp_path)), "--out", str(out)]
    assert main([*argv, "--drop-unknown"]) == 0
    assert "their 1 rows dropped: 401.10 (1 rows)" in capsys.readouterr().err
    assert "401.10" not in out.read_text()
    assert main([*argv, "--keep-unknown"]) == 0
    assert "their 1 rows kept: 401.10 (1 rows)" in capsys.readouterr().err


def test_f3_unknown_code_is_no_hypertension_control() -> None:
    """25 hypertension cases, 10 patients with only prostate cancer, X with only the typo 401.10:
    X is neither a case nor a control of 401.1 (on main X was the 11th control)."""
    rows = [(f"H{i}", "401.1") for i in range(25)] + [(f"C{i}", "185") for i in range(10)] + [("X", "401.10")]
    records = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "code"]))
    pm = phenotype_matrix(records)
    j = phecode_table().index()["401.1"]
    x = int(np.flatnonzero(records.patient_ids.astype(str) == "X")[0])
    assert pm.counts[x, j] == 0 and pm.excluded[x, j] == 1
    geno = pd.DataFrame({"patient_id": records.patient_ids.astype(str), "rs1": 1.0})
    res = run_phewas(pm, geno)
    hyp = res[res["phecode"] == "401.1"].iloc[0]
    assert (hyp["n_cases"], hyp["n_controls"]) == (25, 10)
    assert unmapped_codes(records).to_dict("records") == [
        {"code": "401.10", "patients": 1, "excluded_from": "401.1 401.3"}
    ]
    # the same rule for released items standing for the unknown code
    item = "{401.1,401.10}"
    rel = Records.from_frame(pd.DataFrame([("X", item)], columns=["patient_id", "code"]))
    pr = phenotype_matrix(rel, {item: frozenset({"401.1", "401.10"})})
    assert pr.counts[0, j] == 0 and pr.excluded[0, j] == 1


# ------------------------------------------------------------------------- finding 6: no change
def test_f6_parquet_integer_ids_are_exact() -> None:
    big = [9007199254740993, 9007199254740992]  # 2^53 + 1 and 2^53: equal as float64
    t = pa.table({"patient_id": pa.array(big, pa.int64()), "code": ["401.1", "250.00"]})
    ids = load_events(Source("e.parquet", _parquet(t))).data["patient_id"].tolist()
    assert ids == ["9007199254740993", "9007199254740992"]
    huge = pa.table({"patient_id": pa.array([2**63 + 5, 7], pa.uint64()), "code": ["401.1", "185"]})
    assert load_events(Source("e.parquet", _parquet(huge))).data["patient_id"].tolist() == [
        "9223372036854775813",
        "7",
    ]
    # an integer column with a null stays integer: the null is a blank-id error, the others exact
    nulls = pa.table({"patient_id": pa.array([big[0], None], pa.int64()), "code": ["401.1", "185"]})
    with pytest.raises(DataError) as exc:
        load_events(Source("e.parquet", _parquet(nulls)))
    assert _errors(exc, "blank_value")[0].rows == (3,)
    ids_list = pa.table({"patient_id": pa.array(big, pa.int64())})
    assert load_ids(Source("ids.parquet", _parquet(ids_list))).data.tolist() == [str(b) for b in big]


@settings(max_examples=30, deadline=None)
@given(
    ids=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=12, unique=True),
    signed=st.booleans(),
    null=st.booleans(),
)
@example(ids=[2**53 + 1, 2**53], signed=True, null=False)
@example(ids=[2**63 + 5, 7], signed=False, null=True)
def test_f6_parquet_integer_ids_round_trip_exactly(ids: list[int], signed: bool, null: bool) -> None:
    """Any int64 / uint64 id column (with or without nulls in other rows' files) reads back as the
    exact decimal text of every id."""
    values = [i - 2**63 for i in ids] if signed else ids
    typ = pa.int64() if signed else pa.uint64()
    col = pa.array(values + ([None] if null else []), typ)
    t = pa.table({"patient_id": col, "code": ["401.1"] * len(col)})
    if null:  # the null is an error of its own row; the other ids are still read exactly
        with pytest.raises(DataError) as exc:
            load_events(Source("e.parquet", _parquet(t)))
        assert _errors(exc, "blank_value")[0].rows == (len(values) + 2,)
        t = t.slice(0, len(values))
    got = load_events(Source("e.parquet", _parquet(t)), na_ids="accept").data["patient_id"].tolist()
    assert got == [str(v) for v in values]


@settings(max_examples=30, deadline=None)
@given(
    numbers=st.lists(st.integers(0, 10**6), min_size=1, max_size=15, unique=True),
    prefix=st.sampled_from(["PATIENT_", "P", "", "id-", "MRN"]),
    width=st.integers(1, 7),
)
@example(numbers=[3, 4], prefix="PATIENT_", width=4)
@example(numbers=[0], prefix="PATIENT_", width=1)  # a one-line list: its id is data, not a header
def test_f6_headerless_id_lists_keep_every_id(numbers: list[int], prefix: str, width: int) -> None:
    """A one-column list without a header keeps every line as an id (first line included)."""
    ids = [f"{prefix}{n:0{width}d}" for n in numbers]
    got = load_ids(Source("c.csv", ("\n".join(ids) + "\n").encode())).data.tolist()
    assert got == ids


def test_f6_float_ids_beyond_2_53_are_refused() -> None:
    t = pa.table({"patient_id": pa.array([9007199254740993.0, 1.0]), "code": ["401.1", "185"]})
    with pytest.raises(DataError) as exc:
        load_events(Source("e.parquet", _parquet(t)))
    [f] = _errors(exc, "id_inexact")
    assert f.rows == (2,) and f.column == "patient_id" and f.file == "e.parquet"


@pytest.mark.parametrize(
    ("loader", "text"),
    [
        (load_events, "patient_id,code\nP1,401.1\nNA,250.00\nnull,185\nNaN,185\n"),
        (load_labs, "patient_id,day,lab\nP1,1,A1C\nNA,2,A1C\nnull,3,LDL\nNaN,3,LDL\n"),
        (load_genotypes, "patient_id,rs1\nP1,0\nNA,1\nnull,2\nNaN,NA\n"),
        (load_ids, "patient_id\nP1\nNA\nnull\nNaN\n"),
    ],
    ids=["events", "labs", "genotypes", "ids"],
)
def test_f6_na_like_ids_are_an_error_unless_accepted(loader, text: str) -> None:
    with pytest.raises(DataError) as exc:
        loader(Source("f.csv", text.encode()))
    [f] = _errors(exc, "na_id")
    assert (f.file, f.rows, f.column) == ("f.csv", (3, 4, 5), "patient_id")
    assert "'NA'" in f.message and "'null'" in f.message and "'NaN'" in f.message
    loaded = loader(Source("f.csv", text.encode()), na_ids="accept")
    data = loaded.data if isinstance(loaded.data, np.ndarray) else loaded.data["patient_id"].to_numpy()
    assert {"NA", "null", "NaN"} <= set(data.tolist())
    assert loaded.report.of_kind("na_id")[0].severity == "warning"


def test_f6_cli_na_ids(tmp_path: Path, capsys) -> None:
    ev = tmp_path / "ev.csv"
    ev.write_text("patient_id,code\nNA,401.1\nP1,401.1\n")
    argv = ["risk", "--events", str(ev), "--scope", "cohort", "--knowledge", "all_visits"]
    argv += ["--out", str(tmp_path / "r.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: file ev.csv, row 2, column 'patient_id': 1 cell(s) hold text")
        and "--accept-na-ids" in err
    )
    assert main([*argv, "--accept-na-ids"]) == 0
    assert (tmp_path / "r.csv").read_text().splitlines()[1:] == ["NA,2", "P1,2"]


def test_f6_headerless_id_list_is_read_by_content(tmp_path: Path, capsys) -> None:
    listed = load_ids(Source("c.csv", b"PATIENT_0003\nPATIENT_0004\nPATIENT_0005\n"))
    assert listed.data.tolist() == ["PATIENT_0003", "PATIENT_0004", "PATIENT_0005"]
    assert listed.report.findings == []
    one = load_ids(Source("c.csv", b"PATIENT_0003\n"), population=np.array(["PATIENT_0003", "PATIENT_0009"]))
    assert one.data.tolist() == ["PATIENT_0003"]
    for header in (b"patient_id", b"Patient ID", b"MRN", b"PATIENT_ID"):  # still headers
        assert load_ids(Source("c.csv", header + b"\nPATIENT_0004\n")).data.tolist() == ["PATIENT_0004"]
    # on the command line: the cohort keeps its first patient
    ev = tmp_path / "ev.csv"
    ev.write_text("patient_id,code\n" + "".join(f"PATIENT_000{i},401.1\n" for i in range(3, 7)))
    cohort = tmp_path / "cohort.csv"
    cohort.write_text("PATIENT_0003\nPATIENT_0004\n")
    argv = ["risk", "--events", str(ev), "--cohort", str(cohort), "--scope", "cohort"]
    assert main([*argv, "--knowledge", "all_visits", "--out", str(tmp_path / "r.csv")]) == 0
    assert "cohort: 2 patients" in capsys.readouterr().out


def test_f6_rows_longer_than_the_header_are_refused() -> None:
    with pytest.raises(DataError) as exc:
        load_events(Source("e.csv", b"patient_id,code\nP1,401.1,x\nP2,250.00,y\n"))
    [f] = _errors(exc, "parse_error")
    assert f.rows == (2, 3) and "more fields than the header (2)" in f.message


def test_f6_policy_rows_with_extra_fields_are_refused() -> None:
    with pytest.raises(DataError) as exc:
        read_utility_policy(io.StringIO("disease,icd9_codes\nAsthma,493.00,extra\n"), name="policy.csv")
    [f] = _errors(exc, "parse_error")
    assert (f.file, f.rows) == ("policy.csv", (2,))


def test_f6_policy_codes_are_validated() -> None:
    text = "disease,icd9_codes\nHypertension,4011 401.9\nNonsense,1\nTypo,401.10\n"
    with pytest.raises(DataError) as exc:
        read_utility_policy(io.StringIO(text), name="policy.csv")
    [f] = _errors(exc, "code_syntax")
    assert (f.file, f.rows, f.column) == ("policy.csv", (2, 3), "icd9_codes")
    assert "'4011' looks undotted: '401.1'" in f.message and "'1' lost its leading zeros: '001'" in f.message
    ok = read_utility_policy(io.StringIO("disease,icd9_codes\nTypo,401.10 401.1\n"), name="p.csv")
    [w] = ok.report.of_kind("unknown_code")
    assert (w.severity, w.rows, w.counts) == ("warning", (2,), {"401.10": 1})
    editor = pd.DataFrame({"disease": ["x"], "icd9_codes": ["25000"]})
    with pytest.raises(DataError, match=r"file editor, row 2, column 'icd9_codes'.*'25000' looks undotted"):
        utility_policy_from_frame(editor, "editor")


def test_f6_header_only_policy_is_refused() -> None:
    with pytest.raises(DataError) as exc:
        read_utility_policy(io.StringIO("disease,icd9_codes,comment\n"), name="policy.csv")
    assert _errors(exc, "empty_file")[0].file == "policy.csv"
    with pytest.raises(DataError, match="no diseases in the policy"):
        utility_policy_from_frame(pd.DataFrame({"disease": [None], "icd9_codes": [None]}), "editor")


# ------------------------------------------------------------------------- finding 8: folders
def test_f8_events_folder_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    with pytest.raises(InputFileError, match="is a folder, not a file"):
        load_events(tmp_path)
    argv = ["risk", "--events", str(tmp_path), "--scope", "cohort", "--knowledge", "all_visits"]
    assert main([*argv, "--out", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path}: is a folder, not a file\n"


def test_f6_phewas_release_reader_refuses_reshaped_rows(tmp_path: Path, capsys) -> None:
    """The released-events and code-map readers of `phewas` validate like the events reader."""
    (tmp_path / "ev.csv").write_text("patient_id,code\nP1,401.1\nP2,185\n")
    (tmp_path / "geno.csv").write_text("patient_id,rs1\nP1,0\nP2,1\n")
    (tmp_path / "rel.csv").write_text("patient_id,code\nP1,401.1,401.9\nP2,185,x\n")
    (tmp_path / "map.csv").write_text("released_item,original_code\n401.1,401.1\n")
    argv = ["phewas", "--events", str(tmp_path / "ev.csv"), "--genotypes", str(tmp_path / "geno.csv")]
    argv += ["--released", str(tmp_path / "rel.csv"), "--codemap", str(tmp_path / "map.csv")]
    assert main([*argv, "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: file rel.csv, rows 2, 3: 2 row(s) have more fields than the header (2)")


def test_f3_warnings_show_untrusted_text_literally(tmp_path: Path, capsys) -> None:
    """A column name holding a terminal escape is printed as an escape, never sent to the terminal."""
    ev = tmp_path / "ev.csv"
    ev.write_bytes(b"patient_id,code,\x1b[2Jssn\nP1,401.1,x\nP2,401.1,y\n")
    argv = ["risk", "--events", str(ev), "--scope", "cohort", "--knowledge", "all_visits"]
    assert main([*argv, "--out", str(tmp_path / "r.csv")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "column(s) not used (ignored, never released): \\x1b[2Jssn" in err
