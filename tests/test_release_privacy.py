"""The privacy of every file a release writes (issue 23, "Dates and ages" and release ids).

Data with MRN-like patient ids (`MRN1000041`), ISO visit dates (`2019-04-01`), ages up to 97 and
columns no method uses (`name`, `ssn`, `zip`), loaded through the command line's loader
(`engine.commands.inputs.load_groups`). For every method (GCCens, Heatherly, UGACLIP, ACLIP, LDA) and
both exports (one set per patient, and with visits where the records have them), the bytes of
`release.csv` and `code_map.csv` (`engine.io.export.release_files`) hold no source id, no date, no age
above 89 (ages leave as `90+`) and no value of an unused column; patients are `R001`, ... in release-id
order; two releases of one key cannot be joined by id; one key gives the same bytes; and the files
read back (`read_release_bytes`) measure exactly what the release measured (a property test).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from engine import risk
from engine.commands.inputs import GroupInputs, load_groups
from engine.io import export
from engine.io.pseudonyms import Pseudonyms
from engine.records import Records
from engine.release import Release
from engine.study.runs import (
    CodeSelection,
    GCCensSettings,
    HeatherlySettings,
    LDASettings,
    ProfilesSettings,
    RunInputs,
)

KEY = "a7" * 32
OTHER_KEY = "4d" * 32
K = 2
CODES = ["250.00", "250.01", "272.4", "401.1", "401.9", "724.2", "493.90", "427.31", "311", "530.81"]
EXTRA = ("name", "ssn", "zip")
DATE = re.compile(rb"(19|20)\d\d-[01]\d-[0-3]\d")
RELEASE_ID = re.compile(r"R\d{3,}")

METHODS = {
    "GCCens": GCCensSettings(k=K, scope="cohort", codes=CodeSelection("all")),
    "Heatherly": HeatherlySettings(k=K, scope="cohort", constraints="phecode"),
    "UGACLIP": ProfilesSettings(algorithm="UGACLIP", k=K),
    "ACLIP": ProfilesSettings(algorithm="ACLIP", k=K),
    "LDA": LDASettings(k=K, codes=CodeSelection("all")),
}


def events_frame(n: int = 30, seed: int = 23) -> pd.DataFrame:
    """n patients `MRN1000041`, ...; 1-3 visits labelled by their ISO date; 1-3 codes per visit; the
    age at each visit (first visits at 40-97, so some patients are 90 and over); name, ssn, zip."""
    rng = np.random.default_rng(seed)
    p = np.linspace(3, 1, len(CODES))
    rows = []
    for i in range(n):
        pid = f"MRN{1000041 + i}"
        age0 = int(rng.integers(40, 98))
        day = date(2019, 4, 1) + timedelta(days=int(rng.integers(0, 60)))
        for v in range(int(rng.integers(1, 4))):
            visit_day = day + timedelta(days=400 * v)
            age = min(age0 + v, 97)
            for c in rng.choice(CODES, size=int(rng.integers(1, 4)), replace=False, p=p / p.sum()):
                rows.append(
                    (
                        pid,
                        visit_day.isoformat(),
                        str(c),
                        age,
                        f"Zelda Q{i:03d}x",
                        f"987-65-{4300 + i}",
                        f"{60600 + i}",
                    )
                )
    return pd.DataFrame(rows, columns=["patient_id", "visit", "code", "age", *EXTRA])


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, GroupInputs]:
    """The events written as a CSV with the extra columns and read by the command line's loader."""
    frame = events_frame()
    path = Path(tmp_path_factory.mktemp("privacy")) / "events.csv"
    frame.to_csv(path, index=False)
    return frame, load_groups(str(path))


@dataclass(frozen=True)
class Written:
    release: Release
    verification: risk.Verification
    files: dict[str, bytes]


def written(release: Release, adversary, population=None, key: str = KEY, spellings=None) -> Written:
    """The release verified under `adversary` at K and its files as the export gate writes them."""
    v = risk.verify(release, adversary, K, population)
    assert v.ok, v.message()
    files = export.release_files(release, v, adversary, K, spellings, pseudonyms=Pseudonyms(key))
    return Written(release, v, files)


@pytest.fixture(scope="module")
def releases(loaded) -> dict[tuple[str, bool], Written]:
    """Every method's release, exported without and (where its records have visits) with visits."""
    _, g = loaded
    out = {}
    for name, s in METHODS.items():
        for visits in (False, True):
            release = run_with_visits(s, RunInputs(g.population, g.cohort), visits)
            if release is not None:
                out[(name, visits)] = written(release, s.adversary, spellings=g.spellings)
    return out


def run_with_visits(s, inputs: RunInputs, visits: bool) -> Release | None:
    """The method's release exported with or without visits (None: its records have none). A method
    with a `with_visits` setting (Heatherly, UGACLIP / ACLIP) anonymizes for that export; another's
    release is shown as it is (`Release.with_visits`)."""
    if visits and hasattr(s, "with_visits"):
        s = dataclasses.replace(s, with_visits=True)
    release = s.run(inputs)
    if visits and not release.records.has_visits:
        return None
    return release.with_visits(visits)


def age_bounds_above_89(label: str) -> list[int]:
    """The ages an age label names above 89 other than as the top code `90+` (`[65-96]` -> [96])."""
    return [int(n) for n in re.findall(r"\d+(?![\d+])", label) if int(n) > 89]


def test_every_method_and_export_is_covered(releases) -> None:
    # every method without visits, and with visits every method whose records have them (the LDA's
    # records are (code, age) pairs, one set per patient)
    assert sorted(releases) == sorted(
        [(m, False) for m in METHODS] + [(m, True) for m in METHODS if m != "LDA"]
    )


def test_no_source_id_date_age_or_extra_column_value_in_any_byte(loaded, releases) -> None:
    frame, _ = loaded
    forbidden = {
        "source id": set(frame["patient_id"]),
        "visit date": set(frame["visit"]),
        **{column: set(frame[column].astype(str)) for column in EXTRA},
    }
    for case, w in releases.items():
        for file_name, data in w.files.items():
            text = data.decode("utf-8")
            assert "MRN" not in text, (case, file_name)
            assert not DATE.search(data), (case, file_name, DATE.search(data))
            for what, values in forbidden.items():
                found = sorted(v for v in values if v in text)
                assert not found, (case, file_name, what, found[:3])


def test_no_age_above_89_leaves(releases) -> None:
    for case, w in releases.items():
        rel = export._read_text_csv(w.files[export.RELEASE_FILE])
        cmap = export._read_text_csv(w.files[export.CODE_MAP_FILE])
        items = cmap[["released_item", "original_code"]].stack().tolist()
        if case[0] == "LDA":
            ages = [*rel["age"], *(x.partition("|")[2] for x in items)]
            assert not [a for a in ages if age_bounds_above_89(a)], case
            assert any("90+" in a for a in ages)  # the data's 90-97 leave as the top code
            assert w.release.params["ages_top_coded_at"] == 90 and w.release.loss["ages_top_coded"] > 0
        else:  # the other methods release codes only: no age column, no code|age item
            assert "age" not in rel.columns and not [x for x in items if "|" in x], case


def test_patients_are_release_ids_in_order(releases) -> None:
    for case, w in releases.items():
        rel = export._read_text_csv(w.files[export.RELEASE_FILE])
        ids = rel["patient_id"].tolist()
        assert ids and all(RELEASE_ID.fullmatch(i) for i in ids), case
        assert ids == sorted(ids), case  # rows in release-id order
        n = len(set(ids))
        assert sorted(set(ids)) == [f"R{i:03d}" for i in range(1, n + 1)], case
        if case[1]:  # visits numbered 1, 2, ... per patient, never the source's dates
            assert rel["visit"].str.fullmatch(r"[1-9]\d*").all(), case
            first = rel.groupby("patient_id", sort=False)["visit"].apply(lambda v: sorted(set(map(int, v))))
            assert all(v == list(range(1, len(v) + 1)) for v in first), case


def test_two_releases_under_one_key_cannot_be_joined_by_id(releases) -> None:
    """The salt is the release's content: the release id of a patient in one release says nothing of
    their id in another. A join by id links each release id to whichever patient drew that number,
    which is the same patient no more often than chance (a random numbering of n patients leaves ~1 in
    place on average; forbidding that would itself tell something)."""
    pseudonyms = Pseudonyms(KEY)
    a = export.release_ids(releases[("GCCens", False)].release, pseudonyms)
    b = export.release_ids(releases[("Heatherly", False)].release, pseudonyms)
    c = export.release_ids(releases[("LDA", False)].release, pseudonyms)
    for x, y in ((a, b), (a, c), (b, c)):
        common = sorted(set(x) & set(y))
        assert len(common) >= 20
        same = [p for p in common if x[p] == y[p]]
        assert len(same) <= len(common) // 4, same  # a join by id finds almost nobody
    # the same release under another key is numbered otherwise
    other = export.release_ids(releases[("GCCens", False)].release, Pseudonyms(OTHER_KEY))
    assert other != a and sorted(other) == sorted(a)


def test_one_key_gives_the_same_bytes(loaded, releases) -> None:
    _, g = loaded
    for name in ("GCCens", "LDA"):
        s = METHODS[name]
        again = written(s.run(RunInputs(g.population, g.cohort)), s.adversary, spellings=g.spellings)
        assert again.files == releases[(name, False)].files
        other = written(again.release, s.adversary, key=OTHER_KEY, spellings=g.spellings)
        assert other.files[export.RELEASE_FILE] != again.files[export.RELEASE_FILE]
        assert other.files[export.CODE_MAP_FILE] == again.files[export.CODE_MAP_FILE]  # names no patient


# ------------------------------------------------ relabelling changes nothing the risk engine measures
def renamed_source(release: Release) -> Records | None:
    """The release's source cohort with patients renamed by their release ids (what the read-back file
    calls them), for the single-visit attacker's known visits; visits keep their order."""
    if release.source is None:
        return None
    ids = export.release_ids(release, Pseudonyms(KEY))
    frame = release.source.to_frame()
    frame["patient_id"] = frame["patient_id"].astype(str).map(ids)
    return Records.from_frame(frame.dropna(subset=["patient_id"]))


def measured_alike(w: Written, adversary) -> None:
    back = export.read_release_bytes(w.files[export.RELEASE_FILE], w.files[export.CODE_MAP_FILE])
    assert back.shows_visits == w.release.shows_visits
    source = renamed_source(w.release)
    if source is not None and not back.shows_visits and adversary.knowledge == "single_visit":
        back = back.checked(source)
    v = risk.verify(back, adversary, K)
    # the file has a row for every patient with a released item; a patient with none (every event
    # censored) is in no file, and matches no known set of another patient in either form
    ids = export.release_ids(w.release, Pseudonyms(KEY))
    original = dict(
        zip(map(str, w.verification.patient_ids), w.verification.distinguishability.tolist(), strict=True)
    )
    shown = {ids[p]: d for p, d in original.items() if p in ids}
    read = dict(zip(map(str, v.patient_ids), v.distinguishability.tolist(), strict=True))
    assert read == shown  # patient by patient, through the crosswalk
    assert sorted(read.values()) == sorted(shown.values())
    assert v.ok == w.verification.ok


def test_every_written_release_reads_back_to_the_same_measures(releases) -> None:
    for (name, _), w in releases.items():
        measured_alike(w, METHODS[name].adversary)


@st.composite
def small_cohorts(draw) -> pd.DataFrame:
    n = draw(st.integers(4, 9))
    rows = []
    for i in range(n):
        age0 = draw(st.integers(60, 97))
        for v in range(draw(st.integers(1, 3))):
            for c in draw(st.lists(st.sampled_from(CODES[:6]), min_size=1, max_size=3, unique=True)):
                day = date(2019, 4, 1) + timedelta(days=365 * v)
                rows.append((f"MRN{1000041 + i}", day.isoformat(), c, min(age0 + v, 97)))
    return pd.DataFrame(rows, columns=["patient_id", "visit", "code", "age"])


PROPERTY_METHODS = {
    "GCCens": GCCensSettings(k=K, scope="cohort", codes=CodeSelection("all")),
    "Heatherly": HeatherlySettings(k=K, scope="cohort", constraints="none"),
    "UGACLIP": ProfilesSettings(algorithm="UGACLIP", k=K),
    "ACLIP": ProfilesSettings(algorithm="ACLIP", k=K),
    "LDA": LDASettings(k=K, codes=CodeSelection("all")),
}


@pytest.mark.parametrize(
    ("method", "visits"),
    [(m, v) for m in sorted(PROPERTY_METHODS) for v in (False, True) if (m, v) != ("LDA", True)],
)
@settings(max_examples=12)
@given(events=small_cohorts())
@example(  # ages 93 and 95 become one 90+ pair, the ISO dates visit numbers
    events=pd.DataFrame(
        [
            ("MRN1000041", "2019-04-01", "401.1", 93),
            ("MRN1000042", "2019-04-01", "401.1", 95),
            ("MRN1000043", "2020-04-01", "250.00", 61),
            ("MRN1000044", "2020-04-01", "250.00", 62),
        ],
        columns=["patient_id", "visit", "code", "age"],
    ),
)
def test_relabelling_changes_nothing_the_risk_engine_measures(events, method: str, visits: bool) -> None:
    """The files read back (`read_release_bytes`, patients by release id, visits numbered) and verified
    by `risk.verify` give each patient the distinguishability the release gave them, and the verdict."""
    s = PROPERTY_METHODS[method]
    cohort = Records.from_frame(events)
    try:
        release = run_with_visits(s, RunInputs(cohort, cohort), visits)
    except ValueError:  # e.g. fewer trajectories than k: no release to write
        event("no release (ValueError)")
        return
    if release is None:
        event("no visits to show")
        return
    v = risk.verify(release, s.adversary, K)
    if not v.ok:  # the gate writes nothing (e.g. the visit-grouped form of a release made without)
        event(f"{method}: refused by the gate")
        with pytest.raises(export.ExportRefused):
            export.release_files(release, v, s.adversary, K, pseudonyms=Pseudonyms(KEY))
        return
    event(f"{method} {'with' if visits else 'without'} visits: written")
    w = written(release, s.adversary)
    text = b"".join(w.files.values())
    assert b"MRN" not in text and not DATE.search(text)
    measured_alike(w, s.adversary)
