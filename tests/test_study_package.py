"""Study packages (issue 13, "Save and reopen"): a study file that carries its input files when the
user includes them, reopened without uploading them again; every input checked against the sha256
the study recorded."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from engine.adversary import Adversary
from engine.io.loaders import load_uploaded
from engine.study.package import StudyInput, read_study_file, write_package
from engine.study.runs import RunInputs
from engine.study.study import Study, StudyError, data_ref
from tests.pseudonym_support import KEY, PSEUDONYMS

EVENTS = b"patient_id,code,visit\np1,250.00,1\np1,401.1,2\np2,250.00,1\np3,401.1,1\np4,250.00,1\n"
COHORT = b"patient_id\np1\np2\n"


def _study(events: bytes = EVENTS, cohort: bytes = COHORT) -> Study:
    ds = load_uploaded(("events.csv", events), cohort=("cohort.csv", cohort)).data
    inputs = RunInputs(ds.events, ds.group_records("cohort"))
    data = data_ref(ds.name, ds.events, inputs, sources=ds.sources)
    return Study(data, Adversary("cohort", "single_visit"), 2)


def _inputs(events: bytes = EVENTS, cohort: bytes = COHORT) -> dict[str, StudyInput]:
    return {
        "events": StudyInput("events", "events.csv", events),
        "cohort": StudyInput("cohort", "cohort.csv", cohort),
    }


def test_a_package_reopens_with_its_inputs_byte_for_byte():
    study = _study()
    pkg = write_package(study, _inputs())
    again, inputs = read_study_file(pkg, "s.zip")
    assert again.to_json() == study.to_json()
    assert {r: (i.name, i.data) for r, i in inputs.items()} == {
        "events": ("events.csv", EVENTS),
        "cohort": ("cohort.csv", COHORT),
    }
    assert write_package(study, _inputs()) == pkg  # deterministic bytes
    # the inputs load to the same data the study names
    ds = load_uploaded(
        ("events.csv", inputs["events"].data), cohort=("cohort.csv", inputs["cohort"].data)
    ).data
    assert ds.events.fingerprint == study.data.events_fingerprint


def test_a_plain_study_file_still_reads_with_no_inputs():
    study = _study()
    again, inputs = read_study_file(study.to_json().encode(), "s.json")
    assert again.to_json() == study.to_json() and inputs == {}


def test_a_package_refuses_inputs_the_study_was_not_made_from():
    study = _study()
    other = EVENTS + b"p5,401.1,1\n"
    with pytest.raises(StudyError, match=r"'events.csv' \(events\) differs from the file the study was made"):
        write_package(study, _inputs(events=other))
    with pytest.raises(StudyError, match=r"input file\(s\) 'cohort.csv' are not included"):
        write_package(study, {"events": _inputs()["events"]})


def _rewrite(pkg: bytes, member: str, body: bytes | None) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(pkg))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if info.filename == member:
                if body is not None:
                    dst.writestr(info, body)
            else:
                dst.writestr(info, src.read(info))
    return out.getvalue()


def test_a_changed_or_damaged_package_is_refused_with_the_member_named():
    study = _study()
    pkg = write_package(study, _inputs())
    manifest = json.loads(zipfile.ZipFile(io.BytesIO(pkg)).read("manifest.json"))
    events_member = next(m["member"] for m in manifest["inputs"] if m["role"] == "events")
    tampered = _rewrite(pkg, events_member, EVENTS.replace(b"p4", b"p9"))
    with pytest.raises(StudyError, match=r"tampered.zip: the input 'events.csv' \(events\) differs"):
        read_study_file(tampered, "tampered.zip")
    with pytest.raises(StudyError, match=f"names '{events_member}', which the package lacks"):
        read_study_file(_rewrite(pkg, events_member, None), "cut.zip")
    with pytest.raises(StudyError, match="not a study package"):
        read_study_file(_rewrite(pkg, "study.json", None), "nostudy.zip")
    with pytest.raises(StudyError, match="damaged study package"):
        read_study_file(pkg[:60], "short.zip")


def test_member_names_are_never_paths():
    """A manifest naming '../x' is looked up in the zip by name only (never opened as a path)."""
    study = _study()
    pkg = write_package(study, _inputs())
    manifest = json.loads(zipfile.ZipFile(io.BytesIO(pkg)).read("manifest.json"))
    manifest["inputs"][0]["member"] = "../../etc/passwd"
    with pytest.raises(StudyError, match="which the package lacks"):
        read_study_file(_rewrite(pkg, "manifest.json", json.dumps(manifest).encode()), "evil.zip")


def test_the_cli_rebuilds_a_package_from_the_files_it_carries(tmp_path, capsys):
    """`python -m engine study run STUDY.zip` needs no --events: it reads the package's files as the
    app reads uploads, in the study's groups, and rebuilds every release byte-identical."""
    from engine.commands.cli import main
    from engine.study.runs import GCCensSettings
    from engine.study.study import make_release

    events = b"".join(
        [b"patient_id,code,visit\n"]
        + [
            f"p{i},{c},{v}\n".encode()
            for i in range(40)
            for v, c in enumerate(("250.00", "401.1")[: 1 + i % 2])
        ]
    )
    cohort = b"patient_id\n" + b"".join(f"p{i}\n".encode() for i in range(0, 40, 2))
    ds = load_uploaded(("events.csv", events), cohort=("cohort.csv", cohort)).data
    inputs = RunInputs(ds.events, ds.group_records("cohort"))
    data = data_ref(ds.name, ds.events, inputs, sources=ds.sources)
    adv = Adversary("cohort", "single_visit")
    made = make_release("GCCens", GCCensSettings(k=2), inputs, data, adv, 2, pseudonyms=PSEUDONYMS)
    study = Study(data, adv, 2, pseudonym_key=KEY).add(made.entry)
    pkg = tmp_path / "study.zip"
    pkg.write_bytes(write_package(study, _inputs(events, cohort)))
    assert main(["study", "run", str(pkg)]) == 0
    out = capsys.readouterr().out
    assert "GCCens: byte-identical" in out and "1 of 1 releases rebuilt byte-identical" in out
    # the JSON alone names what it needs
    plain = tmp_path / "study.json"
    plain.write_text(study.to_json())
    assert main(["study", "run", str(plain)]) == 2
    assert "give its files with --events" in capsys.readouterr().err
