"""Studies (issue 13): typed settings per method, explicit immutable releases, save and reopen,
re-verification under the study's attacker, and the headless rebuild (`python -m engine study run`)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engine.adversary import Adversary
from engine.commands.cli import main
from engine.records import Records
from engine.study.runs import (
    CodeSelection,
    GCCensSettings,
    HeatherlySettings,
    LDASettings,
    ProfilesSettings,
    RunInputs,
    SettingsError,
    settings_from_dict,
    settings_to_dict,
)
from engine.study.study import Study, StudyError, data_ref, make_release, rebuild, verification_matrix
from engine.synth.generator import write_sample
from tests.pseudonym_support import KEY, PSEUDONYMS

ALL_SETTINGS = [
    GCCensSettings(k=3, scope="cohort", codes=CodeSelection("top", 6), cap=4),
    GCCensSettings(caps=(("250", 2), ("401", 3))),
    HeatherlySettings(k=4, scope="population", constraints="none", complete=False),
    ProfilesSettings(algorithm="ACLIP", knowledge="all_visits", max_suppressed=10),
    LDASettings(codes=CodeSelection("chosen", chosen=("401.1", "250.00")), w_icd=0.25, alignment="baseline"),
]


@pytest.mark.parametrize("settings", ALL_SETTINGS, ids=lambda s: s.method)
def test_settings_round_trip_through_json(settings):
    text = json.dumps(settings_to_dict(settings))
    assert settings_from_dict(json.loads(text)) == settings


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"method": "GCCens", "k": 1}, "k must be a whole number from 2 to 1,000,000"),
        ({"method": "Heatherly", "scope": "ward"}, "scope must be one of cohort, biobank, population"),
        ({"method": "Profiles", "algorithm": "COAT"}, "algorithm must be one of UGACLIP, ACLIP"),
        ({"method": "LDA", "w_icd": 1.5}, "LDA: w_icd must be a number from 0 to 1, not 1.5"),
        ({"method": "GCCens", "colour": "red"}, "GCCens: unknown parameter(s) 'colour'"),
        ({"method": "Mondrian"}, "unknown method 'Mondrian'"),
    ],
)
def test_settings_are_validated_once_with_a_named_parameter(data, words):
    with pytest.raises(SettingsError, match=words.replace("(", r"\(").replace(")", r"\)")):
        settings_from_dict(data)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 600-patient synthetic population with its biobank and cohort, written as files."""
    from engine.commands.inputs import load_groups

    d = tmp_path_factory.mktemp("small")
    paths = write_sample(d, 600, seed=3, labs=False)
    g = load_groups(str(paths["events"]), cohort=str(paths["cohort"]), biobank=str(paths["biobank"]))
    inputs = RunInputs(g.population, g.cohort, g.biobank)
    data = data_ref("small", g.events, inputs, biobank="biobank", sources=g.sources)
    return paths, inputs, data


def test_a_release_records_settings_data_files_and_verdict(small):
    _, inputs, data = small
    adv = Adversary("cohort", "single_visit")
    made = make_release("DEMO_D k=3", HeatherlySettings(k=3), inputs, data, adv, 3, pseudonyms=PSEUDONYMS)
    assert made.verification.ok, made.verification.message()
    assert made.entry.exportable
    assert set(dict(made.entry.files)) == set(made.files)
    assert made.entry.verification.records == inputs.cohort.n_patients
    study = Study(data, adv, 3, pseudonym_key=KEY).add(made.entry)
    assert study.current() == (made.entry,)
    with pytest.raises(StudyError, match="already in the study"):
        study.add(made.entry)


def test_an_unverified_release_records_no_files(small):
    _, inputs, data = small
    # Heatherly's procedure without the completion pass leaves records below k at k = 10
    made = make_release(
        "raw",
        HeatherlySettings(k=10, complete=False),
        inputs,
        data,
        Adversary("cohort", "single_visit"),
        10,
        pseudonyms=PSEUDONYMS,
    )
    assert not made.verification.ok
    assert made.files == {} and made.entry.files == () and not made.entry.exportable
    assert made.entry.verification.below_k > 0


def test_study_saves_and_reopens_identically(small):
    _, inputs, data = small
    adv = Adversary("population", "all_visits")
    made = make_release("GCCens", GCCensSettings(k=2), inputs, data, adv, 2, pseudonyms=PSEUDONYMS)
    study = Study(data, adv, 2, pseudonym_key=KEY).add(made.entry)
    again = Study.from_json(study.to_json())
    # a verdict read from a file is kept aside, never believed nor written again (issue 23)
    assert again.releases[0].verification is None and again.releases[0].claimed == made.entry.verification
    assert not again.releases[0].exportable
    assert json.loads(again.to_json())["releases"][0]["verification"] is None
    reverified = again.reverified(rebuild(again, inputs, data))
    assert reverified == study
    assert reverified.to_json() == study.to_json()


def test_study_file_errors_are_plain(tmp_path):
    with pytest.raises(StudyError, match="invalid JSON"):
        Study.from_json("{nope", "a.json")
    with pytest.raises(StudyError, match="not a CohortShield study"):
        Study.from_json(json.dumps({"format": "other"}), "a.json")


def test_releases_of_other_data_are_kept_but_not_current(small):
    _, inputs, data = small
    adv = Adversary("cohort", "single_visit")
    made = make_release("DEMO_D", HeatherlySettings(k=2), inputs, data, adv, 2, pseudonyms=PSEUDONYMS)
    study = Study(data, adv, 2, pseudonym_key=KEY).add(made.entry)
    other = replace(data, groups=(("cohort", "0" * 64),))
    moved = study.with_data(other)
    assert moved.current() == () and moved.others() == (made.entry,)
    with pytest.raises(StudyError, match="other data or groups"):
        moved.add(replace(made.entry, name="again"))


def test_rebuild_is_byte_identical_and_names_a_difference(small):
    _, inputs, data = small
    adv = Adversary("cohort", "single_visit")
    study = Study(data, adv, 3, pseudonym_key=KEY)
    for name, s in [("DEMO_D", HeatherlySettings(k=3)), ("ACLIP", ProfilesSettings(algorithm="ACLIP", k=3))]:
        study = study.add(make_release(name, s, inputs, data, adv, 3, pseudonyms=PSEUDONYMS).entry)
    checks = rebuild(study, inputs, data)
    assert [c.identical for c in checks] == [True, True]
    tampered = replace(study, releases=(replace(study.releases[0], files=(("release.csv", "0" * 64),)),))
    (check,) = rebuild(tampered, inputs, data)
    assert not check.identical
    assert any("differs from the recorded" in line or "not recorded" in line for line in check.differences())


def test_rebuild_refuses_other_data(small):
    _, inputs, data = small
    study = Study(replace(data, events_fingerprint="f" * 64), pseudonym_key=KEY)
    with pytest.raises(StudyError, match="not the study's"):
        rebuild(study, inputs, data)


def test_verification_matrix_covers_the_four_adversaries_and_the_whole_record(small):
    _, inputs, data = small
    made = make_release("DEMO_D", HeatherlySettings(k=3), inputs, data, Adversary(), 3, pseudonyms=PSEUDONYMS)
    m = verification_matrix(made.release, inputs.population, 3)
    assert len(m) == 6  # and both whole-record adversaries (issue 39)
    assert bool(m.loc[m["adversary"] == "cohort / single visit", "verified"].item())
    # the whole record is a stronger attacker than one visit: never fewer records below k
    sv = int(m.loc[m["adversary"] == "cohort / single visit", "below k"].item())
    av = int(m.loc[m["adversary"] == "cohort / all visits", "below k"].item())
    assert av >= sv


def test_cli_study_run_rebuilds_and_reports(small, tmp_path, capsys):
    paths, inputs, data = small
    adv = Adversary("cohort", "single_visit")
    made = make_release("DEMO_D", HeatherlySettings(k=3), inputs, data, adv, 3, pseudonyms=PSEUDONYMS)
    study_file = tmp_path / "study.json"
    study_file.write_text(Study(data, adv, 3, pseudonym_key=KEY).add(made.entry).to_json())
    args = [
        "study",
        "run",
        str(study_file),
        "--events",
        str(paths["events"]),
        "--cohort",
        str(paths["cohort"]),
    ]
    args += ["--biobank", str(paths["biobank"])]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "DEMO_D: byte-identical" in out and "1 of 1 releases rebuilt byte-identical" in out
    # another cohort list: the data is not the study's
    other = tmp_path / "cohort_smaller.csv"
    ids = Records.from_frame(inputs.cohort.to_frame()).patient_ids[:-1]
    other.write_text("patient_id\n" + "\n".join(map(str, ids)) + "\n")
    args[args.index(str(paths["cohort"]))] = str(other)
    assert main(args) == 2
    assert "not the study's" in capsys.readouterr().err


def _saved_and_edited(study: Study, edit) -> Study:
    d = json.loads(study.to_json())
    edit(d)
    return Study.from_json(json.dumps(d), "edited.json")


def test_an_unknown_field_of_a_study_file_is_refused_by_name(small):
    """A top-level field this version does not read (a misspelled `sensitve`, say) was dropped
    silently: the study reopened without it. Now it is refused, naming the field and the file."""
    _, _, data = small
    study = Study(data, Adversary("cohort", "single_visit"), 2, pseudonym_key=KEY)
    assert _saved_and_edited(study, lambda d: None).to_json() == study.to_json()
    with pytest.raises(StudyError, match=r"edited.json: unknown field\(s\) 'sensitve'"):
        _saved_and_edited(study, lambda d: d.update(sensitve={"rho": 0.5}))


def test_a_forged_verdict_is_recomputed_and_named(small):
    """Issue 23, finding 3: a release that fails k, its recorded verdict edited to `ok: true`,
    reopened as "rebuilt byte-identical" and was reported verified."""
    _, inputs, data = small
    adv = Adversary("cohort", "single_visit")
    made = make_release(
        "raw", HeatherlySettings(k=10, complete=False), inputs, data, adv, 10, pseudonyms=PSEUDONYMS
    )
    assert not made.verification.ok
    study = Study(data, adv, 10, pseudonym_key=KEY).add(made.entry)

    def forge(d):
        d["releases"][0]["verification"]["ok"] = True
        d["releases"][0]["verification"]["below_k"] = 0

    forged = _saved_and_edited(study, forge)
    assert not forged.releases[0].exportable  # nothing read from the file is believed
    (check,) = rebuild(forged, inputs, data)
    assert check.identical  # no files either way: the hashes alone do not find it
    assert check.verdict_forged and not check.passed
    assert any("changed or is stale" in line for line in check.differences())
    reopened = forged.reverified([check])
    assert not reopened.releases[0].exportable and not reopened.releases[0].verification.ok
    saved = json.loads(reopened.to_json())["releases"][0]["verification"]
    assert saved["ok"] is False and saved["below_k"] == made.entry.verification.below_k


def test_an_edited_k_is_verified_at_the_study_k(small):
    """Issue 23, finding 3: a study made at k = 2 with its `k` edited to 5 rebuilt "byte-identical
    ... >= 2" and passed while records were below 5."""
    _, inputs, data = small
    adv = Adversary("cohort", "single_visit")
    made = make_release("DEMO_D", HeatherlySettings(k=2), inputs, data, adv, 2, pseudonyms=PSEUDONYMS)
    assert made.verification.ok
    study = Study(data, adv, 2, pseudonym_key=KEY).add(made.entry)
    edited = _saved_and_edited(study, lambda d: d.update(k=5))
    (check,) = rebuild(edited, inputs, data)
    assert check.verification.k == 5 and not check.verification.ok and check.verification.below_k > 0
    assert not check.verdict_forged  # the recorded k = 2 verdict is true; k = 5 is what fails
    assert not check.passed
    assert any("fails re-verification" in line for line in check.differences())


def test_the_pseudonym_key_stays_in_the_study_file_only(small):
    data = small[2]
    study = Study(data, Adversary(), 3, pseudonym_key=KEY)
    assert json.loads(study.to_json())["pseudonym_key"] == KEY
    assert KEY not in study.to_json(with_key=False) and KEY not in repr(study)
    with pytest.raises(StudyError, match="earlier CohortShield"):
        Study.from_json(json.dumps({"format": "cohortshield-study/1"}), "old.json")
    bad = json.loads(study.to_json())
    bad["pseudonym_key"] = "0123"
    with pytest.raises(StudyError, match="pseudonym_key"):
        Study.from_json(json.dumps(bad), "bad.json")
