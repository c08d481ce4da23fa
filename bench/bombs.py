"""Small inputs that would take gigabytes (issues 25 and 40): peak memory and time of each refusal.

Each bomb is built in a temporary folder, then read in a fresh subprocess, whose peak resident memory
(`VmHWM` of /proc/self/status: the exec'd reader's own, not the builder's) and time are printed, by
the code of `--code` (default:
this checkout; give an older worktree, `git worktree add /tmp/old <commit>`, to measure before).
The child runs under an address-space cap (`--mem-cap`, GiB) and a time limit (`--timeout`, s), so
that the old code's blow-ups end there instead of taking the server down.

    .venv/bin/python bench/bombs.py [--code /tmp/old] [--only csv_columns,json_spaces] [--scale 1.0]

Issue 40's cases (scale 1.0: the issue's sizes): `parquet_rle_app` (a Parquet of 20 M run-length
encoded rows, 0.1 MB, uploaded in the app: `load_uploaded`), `parquet_rle_cli` (the same file given
to `python -m engine risk`), `meds_shard` (a MEDS shard of 50 M run-length encoded rows),
`package_sha` (a package whose study.json records the real sha256 of its 1.9 GiB input) and
`package_duplicates` (100,000 members, one name twice; the old check was quadratic: measure the old
code at `--scale 0.2`, 20,000 members, to stay within a minute; the new refuses the count first, so set
`COHORTSHIELD_MAX_ZIP_MEMBERS=1000000` to time its duplicate check) and `xlsx_padded` (50,000 rows of 2
cells whose sheet declares 10,000 columns, `A1:NTP50001`: openpyxl padded each row to them).

Measured on a shared 2-core machine (times include the child's imports), before (8eef457) -> after:
    parquet_rle_app     0.2 MB   4.25 GB 43.9 s MemoryError -> 0.12 GB 2.4 s, max_expansion (2,223 times)
    parquet_rle_cli     0.2 MB   4.15 GB 78.9 s MemoryError -> 0.17 GB 4.9 s, exit 2
    meds_shard          0.6 MB   4.22 GB 87.1 s ArrowMemoryError -> 0.13 GB 4.7 s, max_expansion (1,827)
    package_sha         1.9 MB   > 150 s -> 0.12 GB 3.6 s, max_member_bytes (2,030,043,136 bytes)
      --scale 0.25      0.5 MB   1.05 GB 18.8 s accepted -> 0.11 GB 4.3 s, max_expansion (1,028 times)
    package_duplicates  9.8 MB   (20,000 members: 41.5 s) -> 0.12 GB 4.2 s, max_zip_members (100,002);
                                 with the limit raised, the duplicate named: 0.18 GB 5.3 s
    xlsx_padded         0.5 MB   > 150 s -> 0.17 GB, read like the honest workbook (5.65 s vs 5.62 s)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GiB = 1 << 30


def _study_bytes(code: Path) -> bytes:
    """A real study file (and package inputs) made by the code under test."""
    script = (
        "import sys; from engine.io.loaders import load_uploaded; from engine.study.runs import RunInputs\n"
        "from engine.study.study import Study, data_ref; from engine.adversary import Adversary\n"
        "ev=b'patient_id,code\\np1,250.00\\np2,250.00\\n'; co=b'patient_id\\np1\\n'\n"
        "ds=load_uploaded(('events.csv',ev),cohort=('cohort.csv',co)).data\n"
        "i=RunInputs(ds.events, ds.group_records('cohort'))\n"
        "s=Study(data_ref(ds.name, ds.events, i, sources=ds.sources), Adversary('cohort','single_visit'), 2)\n"
        "sys.stdout.write(s.to_json())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, cwd=code, check=True)
    return out.stdout


def _rle_parquet(path: Path, rows: int, columns: dict[str, object]) -> None:
    """`rows` rows repeating one value per column, in row groups of 1 M: dictionary- and run-length
    encoded, a few hundred bytes a row group."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    block = min(rows, 1 << 20)
    table = pa.table({k: pa.array([v] * block) for k, v in columns.items()})
    with pq.ParquetWriter(path, table.schema, compression="zstd") as w:
        left = rows
        while left > 0:
            w.write_table(table.slice(0, min(block, left)), row_group_size=block)
            left -= block


def _package(path: Path, study: dict, members: list[tuple[str, object]]) -> None:
    """A study package: study.json, a manifest naming `inputs/0` as the events, then `members`
    (name, bytes or an iterable of blocks)."""
    manifest = {
        "format": "cohortshield-study-package/1",
        "inputs": [{"role": "events", "name": "events.csv", "member": "inputs/0", "sha256": "0" * 64}],
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("study.json", json.dumps(study))
        zf.writestr("manifest.json", json.dumps(manifest))
        for name, body in members:
            if isinstance(body, bytes):
                zf.writestr(name, body)
                continue
            member = zipfile.ZipInfo(name)
            member.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(member, "w", force_zip64=True) as fh:
                for block in body:  # type: ignore[attr-defined]
                    fh.write(block)


def build(case: str, folder: Path, code: Path, scale: float) -> tuple[Path, str]:
    """(the bomb's file, the Python that reads it as the app or CLI would)."""
    big = int(scale * GiB)
    if case in ("parquet_rle_app", "parquet_rle_cli"):
        path = folder / "events.parquet"
        _rle_parquet(path, int(20_000_000 * scale), {"patient_id": "p1", "visit": 1, "code": "250.00"})
        read = (
            "from engine.io.loaders import load_uploaded; load_uploaded(('events.parquet', open(P,'rb').read()))"
            if case == "parquet_rle_app"
            else "from engine.commands.cli import main\n"
            "raise SystemExit(main(['risk', '--events', P, '--scope', 'cohort', '--knowledge', 'single_visit', '--out', P + '.csv']))"
        )
    elif case == "meds_shard":
        import pyarrow as pa

        path = folder / "shard.parquet"
        rows = int(50_000_000 * scale)
        block = 1 << 20
        table = pa.table(
            {
                "subject_id": pa.array([1] * block, pa.int64()),
                "time": pa.array([0] * block, pa.timestamp("us")),
                "code": pa.array(["ICD//9//25000"] * block),
            }
        )
        import pyarrow.parquet as pq

        with pq.ParquetWriter(path, table.schema, compression="zstd") as w:
            for start in range(0, rows, block):
                w.write_table(table.slice(0, min(block, rows - start)), row_group_size=block)
        read = "from engine.io.meds import read_meds; read_meds(P)"
    elif case == "package_sha":
        import hashlib

        size, block = int(1.9 * big), b"\0" * (16 << 20)
        h = hashlib.sha256()
        for _ in range(size // len(block)):
            h.update(block)
        study = json.loads(_study_bytes(code))
        study["data"]["inputs"] = {"events.csv": h.hexdigest()}
        path = folder / "bomb.zip"
        _package(path, study, [("inputs/0", (block for _ in range(size // len(block))))])
        read = "from engine.study.package import read_study_file; read_study_file(open(P,'rb').read(), P)"
    elif case == "package_duplicates":
        n = int(100_000 * scale)
        members = [(f"inputs/{i}", b"x") for i in range(1, n)] + [("inputs/1", b"x")]
        path = folder / "many.zip"
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate name it is asked to write
            _package(path, json.loads(_study_bytes(code)), members)
        read = "from engine.study.package import read_study_file; read_study_file(open(P,'rb').read(), P)"
    elif case == "xlsx_padded":
        import re

        from openpyxl import Workbook

        rows = int(50_000 * scale)
        wb = Workbook()
        wb.active.append(["patient_id", "code"])
        for i in range(rows):
            wb.active.append([f"p{i}", "250.00"])
        buf = io.BytesIO()
        wb.save(buf)
        path = folder / "padded.xlsx"
        with zipfile.ZipFile(buf) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                body = src.read(info)
                if info.filename == "xl/worksheets/sheet1.xml":  # 10,000 columns declared, 2 written
                    body = re.sub(
                        rb"<dimension [^>]*/>", f'<dimension ref="A1:NTP{rows + 1}"/>'.encode(), body
                    )
                dst.writestr(info.filename, body)
        read = "from engine.io.loaders import load_events; load_events(P)"
    elif case == "package_member":
        study = _study_bytes(code)
        manifest = {
            "format": "cohortshield-study-package/1",
            "inputs": [{"role": "events", "name": "events.csv", "member": "inputs/0", "sha256": "0" * 64}],
        }
        path = folder / "bomb.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("study.json", study)
            zf.writestr("manifest.json", json.dumps(manifest))
            member = zipfile.ZipInfo("inputs/0")
            member.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(member, "w", force_zip64=True) as fh:
                block = b"\0" * (16 << 20)
                for _ in range(2 * big // len(block)):
                    fh.write(block)
        read = "from engine.study.package import read_study_file; read_study_file(open(P,'rb').read(), P)"
    elif case == "json_spaces":
        path = folder / "study.json"
        with path.open("wb") as fh:
            fh.write(_study_bytes(code).rstrip())
            block = b" " * (16 << 20)
            for _ in range(big // len(block)):
                fh.write(block)
        # the command line's path (`study run`): the size is checked before the file is read
        read = "from engine.commands.cli import main; raise SystemExit(main(['study', 'run', P]))"
    elif case == "lda_age_high":
        d = json.loads(_study_bytes(code))
        d["releases"] = [
            {
                "name": "r",
                "settings": {"method": "LDA", "k": 2, "age_high": 1_000_000},
                "data": d["data"],
                "files": {},
                "verification": None,
            }
        ]
        path = folder / "lda.json"
        path.write_text(json.dumps(d))
        read = (
            "from engine.study.study import Study; s = Study.from_json(open(P,'rb').read(), P)\n"
            "from engine.hierarchy import Hierarchy\n"
            "r = s.releases[0].settings; Hierarchy.ages(r.age_low, r.age_high, top_code_90=True)"
        )
    elif case == "xlsx_shared_strings":
        path = folder / "bomb.xlsx"
        cells = max(1, big // (1 << 20))
        text = "a" * (1 << 20)
        sst = (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
            f'count="{cells}" uniqueCount="{cells}">' + f"<si><t>{text}</t></si>" * cells + "</sst>"
        )
        rows = "".join(f'<row r="{i + 1}"><c r="A{i + 1}" t="s"><v>{i}</v></c></row>' for i in range(cells))
        sheet = (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><worksheet '
            'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
            f"<sheetData>{rows}</sheetData></worksheet>"
        )
        from openpyxl import Workbook

        buf = io.BytesIO()
        Workbook().save(buf)
        src = zipfile.ZipFile(buf)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                body = src.read(info)
                if info.filename == "xl/worksheets/sheet1.xml":
                    body = sheet.encode()
                if info.filename == "[Content_Types].xml":
                    body = body.replace(
                        b"</Types>",
                        b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/'
                        b'vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>',
                    )
                if info.filename == "xl/_rels/workbook.xml.rels":
                    body = body.replace(
                        b"</Relationships>",
                        b'<Relationship Id="rIdS" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
                        b'relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>',
                    )
                dst.writestr(info.filename, body)
            dst.writestr("xl/sharedStrings.xml", sst)
        read = (
            "from engine.io.excel import read_xlsx; from engine.io.validation import ValidationReport\n"
            "r = ValidationReport(); read_xlsx('bomb.xlsx', open(P,'rb').read(), r)\n"
            "if r.errors: raise ValueError(r.errors[0].message[:200])"
        )
    elif case == "csv_columns":
        path = folder / "wide.csv"
        n = int(1_000_000 * scale)
        path.write_text(",".join(f"c{i}" for i in range(n)) + "\n" + ",".join("1" * n) + "\n")
        read = "from engine.io.loaders import load_events; load_events(P)"
    elif case == "csv_line":
        path = folder / "line.csv"
        with path.open("wb") as fh:
            fh.write(b"patient_id,code\np1,")
            block = b"x" * (16 << 20)
            for _ in range(big // len(block)):
                fh.write(block)
            fh.write(b"\n")
        read = "from engine.io.loaders import load_events; load_events(P)"
    else:
        raise SystemExit(f"no case {case!r}")
    return path, read


CASES = (
    "package_member",
    "json_spaces",
    "lda_age_high",
    "xlsx_shared_strings",
    "csv_columns",
    "csv_line",
    "parquet_rle_app",
    "parquet_rle_cli",
    "meds_shard",
    "package_sha",
    "package_duplicates",
    "xlsx_padded",
)

CHILD = """
import resource, sys, time
cap = int(sys.argv[2])
if cap:
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
P = sys.argv[1]
t = time.perf_counter()
try:
    exec(sys.stdin.read())
    outcome = "accepted"
except BaseException as exc:
    outcome = f"{type(exc).__name__}: {str(exc)[:160]}"
hwm = next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM"))  # kB, this exec only
print("RESULT", f"peak {int(hwm) / (1 << 20):.2f} GB", round(time.perf_counter() - t, 2), "s",
      outcome.replace(chr(10), " "), flush=True)
"""


def run(case: str, code: Path, scale: float, timeout: float, mem_cap: float) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path, read = build(case, Path(tmp), code, scale)
        size = path.stat().st_size
        try:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(path), str(int(mem_cap * GiB))],
                input=read,
                capture_output=True,
                text=True,
                cwd=code,
                env={**os.environ, "PYTHONPATH": str(code)},
                timeout=timeout,
            )
            line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")), out.stderr[-200:])
        except subprocess.TimeoutExpired:
            line = f"RESULT >{timeout:.0f} timed out"
        return f"{case:22s} file {size / (1 << 20):9.1f} MB  {line[7:]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose engine reads the bombs")
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument(
        "--scale", type=float, default=1.0, help="1.0: the sizes of issue 25 (1 GiB, 1 M columns)"
    )
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument(
        "--mem-cap", type=float, default=6.0, help="address-space cap of the child, GiB (0: none)"
    )
    args = ap.parse_args()
    print(f"code: {args.code}  scale {args.scale}")
    for case in args.only.split(","):
        # one process per case: ru_maxrss of children is a running maximum, so each case gets its own
        out = (
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--code",
                    str(args.code),
                    "--scale",
                    str(args.scale),
                    "--timeout",
                    str(args.timeout),
                    "--mem-cap",
                    str(args.mem_cap),
                    "--case",
                    case,
                ],
                capture_output=True,
                text=True,
            )
            if "--case" not in sys.argv
            else None
        )
        if out is not None:
            print(out.stdout.strip() or out.stderr[-300:], flush=True)


if __name__ == "__main__":
    if "--case" in sys.argv:
        i = sys.argv.index("--case")
        case = sys.argv.pop(i + 1)
        sys.argv.pop(i)
        ap = argparse.ArgumentParser()
        ap.add_argument("--code", type=Path, default=ROOT)
        ap.add_argument("--scale", type=float, default=1.0)
        ap.add_argument("--timeout", type=float, default=180.0)
        ap.add_argument("--mem-cap", type=float, default=6.0)
        a = ap.parse_args()
        print(run(case, a.code, a.scale, a.timeout, a.mem_cap))
    else:
        main()
