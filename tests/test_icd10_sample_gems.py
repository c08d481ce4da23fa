"""The shipped ICD-10-CM sample follows CMS' General Equivalence Mappings (issue 26, finding 7).

The finding: R65.21 (severe sepsis with septic shock) was in 44% of the cohort, because the earlier
phecode-preserving crosswalk sent every ICD-9-CM code of a phecode to one ICD-10-CM code. The tests read
the vendored GEMs file themselves (not through engine/synth/icd10.py), so they check the sample, not the
module against itself.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"
GEMS = SAMPLE / "reference" / "icd9toicd10cmgem.csv"


@lru_cache(maxsize=1)
def _gems() -> pd.DataFrame:
    return pd.read_csv(GEMS, dtype=str, keep_default_na=False)


@lru_cache(maxsize=1)
def _targets_of() -> dict[str, set[str]]:
    """Dotless ICD-9-CM code -> its usable GEMs targets, dotted: no-map rows left out, of a combination
    entry scenario 1's choice list 1, and only codes of the CMS FY2026 list (simple-icd-10-cm)."""
    g = _gems()
    g = g[(g["no_map"] == "0") & g["scenario"].isin(["0", "1"]) & g["choice_list"].isin(["0", "1"])]
    out: dict[str, set[str]] = {}
    for a, b in zip(g["icd9cm"], g["icd10cm"], strict=True):
        dotted = b if len(b) <= 3 else f"{b[:3]}.{b[3:]}"
        if _in_fy2026(dotted):
            out.setdefault(a, set()).add(dotted)
    return out


def _in_fy2026(code: str) -> bool:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import simple_icd_10_cm as cm
    return bool(cm.is_valid_item(code)) and not cm.is_chapter_or_block(code)


def _fallback(cw: pd.DataFrame, targets: dict[str, set[str]]) -> dict[str, set[str]]:
    """Dotted ICD-9-CM code GEMs does not map -> the ICD-10-CM codes the crosswalk gives it."""
    out: dict[str, set[str]] = {}
    for a, b in zip(cw["icd9"], cw["icd10cm"], strict=True):
        if not targets.get(a.replace(".", "")):
            out.setdefault(a, set()).add(b)
    return out


def _sources(codes10, codes9, targets: dict[str, set[str]], fallback: dict[str, set[str]]):
    """Dotted ICD-10-CM code -> the dotted ICD-9-CM codes (of `codes9`) it may stand for: those with
    the code among their GEMs targets, and those GEMs does not map that the crosswalk's fallback
    sends to it."""
    out: dict[str, set[str]] = {c10: set() for c10 in codes10}
    for c9 in codes9:
        for c10 in targets.get(c9.replace(".", ""), set()) | fallback.get(c9, set()):
            if c10 in out:
                out[c10].add(c9)
    return out


@pytest.fixture(scope="module")
def sample():
    icd9 = pd.read_parquet(SAMPLE / "events.parquet")
    icd10 = pd.read_parquet(SAMPLE / "icd10cm" / "events.parquet")
    cohort = set(pd.read_csv(SAMPLE / "cohort.csv", dtype=str)["patient_id"])
    cw = pd.read_csv(SAMPLE / "icd10cm" / "crosswalk.csv", dtype=str, keep_default_na=False)
    return icd9, icd10, cohort, cw


def test_vendored_gems_file_has_the_sha256_its_readme_states() -> None:
    readme = (SAMPLE / "reference" / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `icd9toicd10cmgem.csv`"))
    stated = re.findall(r"file sha256 `([0-9a-f]{64})`", row)
    assert len(stated) == 1, row
    assert hashlib.sha256(GEMS.read_bytes()).hexdigest() == stated[0]
    assert list(_gems().columns) == [
        "icd9cm",
        "icd10cm",
        "flags",
        "approximate",
        "no_map",
        "combination",
        "scenario",
        "choice_list",
    ]


def test_each_icd10cm_code_is_no_more_prevalent_than_the_icd9cm_codes_gems_maps_to_it(sample) -> None:
    """The finding: in the cohort, the patients holding an ICD-10-CM code are at most the patients
    holding an ICD-9-CM code that GEMs maps to it (a code GEMs does not map counts through the
    crosswalk's fallback), so no code is more prevalent than its ICD-9-CM sources together (R65.21 was
    in 44% of the cohort, far more than its GEMs source 785.52)."""
    icd9, icd10, cohort, cw = sample
    targets = _targets_of()
    in9 = icd9[icd9["patient_id"].isin(cohort)]
    in10 = icd10[icd10["patient_id"].isin(cohort)]
    holders9 = in9.groupby("code")["patient_id"].agg(set).to_dict()
    holders10 = in10.groupby("code")["patient_id"].agg(set).to_dict()
    sources = _sources(holders10, holders9, targets, _fallback(cw, targets))
    too_many = {}
    for c10, patients in holders10.items():
        bound = set().union(*(holders9[c] for c in sources[c10]))
        if len(patients) > len(bound):
            too_many[c10] = (round(len(patients) / len(cohort), 3), round(len(bound) / len(cohort), 3))
    assert not too_many, sorted(too_many.items(), key=lambda kv: -kv[1][0])[:10]


def test_every_event_keeps_its_place_and_gets_a_gems_target_of_its_icd9cm_code(sample) -> None:
    icd9, icd10, _, cw = sample
    pd.testing.assert_frame_equal(icd10.drop(columns="code"), icd9.drop(columns="code"))
    targets = _targets_of()
    pairs = pd.DataFrame({"c9": icd9["code"], "c10": icd10["code"]}).drop_duplicates()
    sources = _sources(set(pairs["c10"]), set(pairs["c9"]), targets, _fallback(cw, targets))
    bad = [(a, b) for a, b in zip(pairs["c9"], pairs["c10"], strict=True) if a not in sources[b]]
    assert not bad, bad[:10]
    # GEMs maps most of the sample's events; the rest (no-map rows, codes GEMs lacks) are the fallback
    mapped = icd9["code"].str.replace(".", "", regex=False).isin(set(targets))
    assert mapped.mean() > 0.95


def test_a_patients_repeated_code_stays_one_icd10cm_code(sample) -> None:
    """One ICD-9-CM code of one patient becomes one ICD-10-CM code in every visit (repeats stay
    repeats), while its patients are spread over its GEMs targets."""
    icd9, icd10, _, _ = sample
    both = pd.DataFrame({"p": icd9["patient_id"], "c9": icd9["code"], "c10": icd10["code"]})
    per_patient = both.groupby(["p", "c9"])["c10"].nunique()
    assert (per_patient == 1).all()
    per_code = both.groupby("c9")["c10"].nunique()
    assert (per_code > 1).any()  # e.g. a one-to-many GEMs entry spread over its targets


@pytest.mark.slow
def test_phewas_on_the_icd10cm_sample_finds_the_planted_associations(sample) -> None:
    from engine.records import Records
    from engine.synth.calibration import planted_associations

    _, icd10, _, _ = sample
    biobank = pd.read_csv(SAMPLE / "biobank.csv", dtype=str)["patient_id"].to_numpy(dtype=object)
    genotypes = pd.read_parquet(SAMPLE / "genotypes.parquet")
    records = Records.from_frame(icd10).subset(biobank)
    found = planted_associations(records, genotypes)
    assert (found["p"] < 1e-3).all(), found


def test_calibration_counts_prevalence_per_patient_and_gems_coverage_per_code_and_event() -> None:
    from engine.synth.calibration import gems_coverage, most_prevalent_codes
    from engine.synth.icd10 import FALLBACK

    events = pd.DataFrame({"patient_id": ["a", "a", "b", "c"], "code": ["401.9", "401.9", "401.9", "428.00"]})
    # 401.9 held by a and b of four patients (a's repeat counts once), 428.00 by c
    assert most_prevalent_codes(events, ["a", "b", "c", "d"], 5) == [("401.9", 0.5), ("428.00", 0.25)]
    cw = pd.DataFrame(
        {"icd9": ["401.9", "428.00"], "rule": ["GEMs: the one target", f"not in GEMs; {FALLBACK}: x"]}
    )
    assert gems_coverage(events, cw) == (0.5, 0.75)
