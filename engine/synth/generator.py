"""Synthetic sample data: a population with visits, ICD-9-CM codes and ages, nested biobank and
research cohort, genotypes with planted associations, and lab orders (issue #2).

The real data behind the papers cannot be shared; this generator stands in for it, calibrated to
the figures the papers report (see `engine.synth.calibration` and `sample_data/CALIBRATION.md`):

- Heatherly 2013 (Table 1, Figure 14): population (SD, 9.83 diagnoses per patient), a biobank with
  DNA (BioVU) and a research cohort selected by phenotype from the biobank (DEMO). Heavy users are
  over-represented in the biobank and the cohort, as in the paper (25.2 and 45.4 per patient).
- Codes: chronic conditions (`engine.synth.vocabulary.CONDITIONS`) driven by age and shared latent
  factors (comorbidity clusters), billed at onset and again at later visits (repeats); other codes
  billed at visits from a Zipf ranking of the phecode map's most specific codes.
- Genotypes: the six SNPs of Heatherly's Table 4 in Hardy-Weinberg equilibrium, each raising the
  odds of its phenotype per minor allele (planted association), a few per cent missing.
- Labs: `engine.synth.labs` (Johnson 2018), driven by the patient's conditions.

Everything is vectorized numpy and deterministic from `seed` (numpy PCG64 streams).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import digamma

from engine.records import concat_ranges
from engine.synth.labs import LAB_DAYS_SCALE, labs_for_patients, sorted_unique
from engine.synth.vocabulary import CONDITIONS, FACTORS, SNPS, code_age_range, code_vocabulary

__all__ = [
    "PARAMETERS",
    "SHIPPED_PARAMETERS",
    "CodeParameters",
    "SyntheticData",
    "cohort_draw",
    "events_frame",
    "generate",
    "generate_labs",
    "group_sizes",
    "lab_frame",
    "patient_ids",
    "write_sample",
]

# ---- calibrated parameters (see sample_data/CALIBRATION.md) -----------------------------------
UTILIZATION_SHAPE = 0.55  # gamma shape of the per-patient use of care (mean 1): heavy tail
VISITS_PER_USE = 5.2  # visits beyond the first = Poisson(VISITS_PER_USE * use)
YEARS_BETWEEN_VISITS = 0.25  # mean gap (exponential) between visits, in years
RECURRENCE_SCALE = 0.5  # multiplies every condition's recurrence
ZIPF_EXPONENT = 1.2  # common ranking: p(rank r) ~ 1 / (r + ZIPF_OFFSET) ** ZIPF_EXPONENT
TAIL_POWER = 3.0
ZIPF_OFFSET = 10.0
USE_LOADING = 0.6  # log-odds of a chronic condition per unit log(use)
PREVALENCE_SHIFT = -0.6  # log-odds added to every condition: the use loading inflates prevalences
BIOBANK_SHARE = 0.35  # expected share of the population in the biobank
COHORT_SIZE_AT_30K = 2700  # PNAS VNEC: 2,762 patients
COHORT_SIZE_EXPONENT = 0.2  # cohort size = 2700 * (n / 30000) ** 0.2: 5,800 at 1.37 M (DEMO: 5,994)


@dataclass(frozen=True)
class CodeParameters:
    """The code draw and the groups' selection of heavy users (the parameters issue 16 retuned).

    acute_per_visit: other codes per visit = Poisson(acute_per_visit).
    zipf_cutoff: exponential cut-off of the common ranking (rank scale).
    tail_exponent: Zipf exponent of the flat ranking that reaches rare codes.
    tail_rate, tail_max: share of codes from the flat ranking = min(tail_rate * use ** TAIL_POWER, tail_max).
    biobank_use_power: the biobank is drawn without replacement with weights n_visits ** power.
    cohort_use_power: the cohort is drawn from eligible patients with weights n_visits ** power.
    """

    acute_per_visit: float
    zipf_cutoff: float
    tail_exponent: float
    tail_rate: float
    tail_max: float
    biobank_use_power: float
    cohort_use_power: float


# The parameters the shipped sample_data/ was generated with (issue 2's calibration); kept so that
# `generate(30_000, 0, parameters=SHIPPED_PARAMETERS)` still rebuilds it byte for byte.
SHIPPED_PARAMETERS = CodeParameters(
    acute_per_visit=0.62,
    zipf_cutoff=100.0,
    tail_exponent=1.0,
    tail_rate=0.002,
    tail_max=0.8,
    biobank_use_power=1.5,
    cohort_use_power=0.5,
)
# Issue 16: heavier users in the biobank and the cohort (Heatherly's Diagnosis Count 25.2 and 45.4
# per patient) and more diverse codes (DEMO: 8,734 distinct codes), see sample_data/CALIBRATION.md.
# The per-patient draws (use of care, visits, conditions) are unchanged, so lab orders are too.
PARAMETERS = CodeParameters(
    acute_per_visit=1.3,
    zipf_cutoff=40.0,
    tail_exponent=0.9,
    tail_rate=0.001,
    tail_max=0.8,
    biobank_use_power=5.0,
    cohort_use_power=4.0,
)
GENOTYPE_MISSING = 0.03
LABS_AUTO_MAX = 200_000  # generate() makes lab orders by default up to this many patients
MAX_AGE = 100
COHORT_CONDITIONS = (
    "coronary disease",
    "atrial fibrillation",
    "heart failure",
    "rheumatoid arthritis",
    "multiple sclerosis",
    "Crohn's disease",
    "type 2 diabetes",
    "hypertension",
    "hyperlipidemia",
)


@dataclass(frozen=True, eq=False)
class SyntheticData:
    """Generated frames in the formats of ARCHITECTURE section 2.

    events: patient_id, visit (1.. in time order), code (ICD-9-CM), age (whole years, non-decreasing
    across visits); biobank / cohort: patient_id; genotypes: patient_id + one nullable Int8 column
    per SNP for the biobank; labs: patient_id, day, lab.
    """

    events: pd.DataFrame
    biobank: pd.DataFrame
    cohort: pd.DataFrame
    genotypes: pd.DataFrame
    labs: pd.DataFrame


def patient_ids(n: int) -> np.ndarray:
    """`P000001`, `P000002`, ... (at least six digits, wider when n needs it)."""
    width = max(6, len(str(n)))
    return np.array([f"P{i:0{width}d}" for i in range(1, n + 1)], dtype=object)


def _zipf_cdf(n: int, exponent: float, cutoff: float = np.inf) -> np.ndarray:
    r = np.arange(1, n + 1)
    w = np.exp(-r / cutoff) / (r + ZIPF_OFFSET) ** exponent
    c = np.cumsum(w)
    return c / c[-1]


def _draw_acute(
    tail_share: np.ndarray,
    ages: np.ndarray,
    n_codes: int,
    rng: np.random.Generator,
    q: CodeParameters = PARAMETERS,
) -> np.ndarray:
    """Codes billed at visits besides chronic conditions, by Zipf rank: from the steep (common)
    ranking, or with probability `tail_share` (rising with the patient's use of care) from the flat
    one that reaches rare, specialist codes. A code not billable at the visit's age
    (`code_age_range`) is redrawn from the common ranking; after 8 rounds the visit gets 465.9."""
    common = _zipf_cdf(n_codes, ZIPF_EXPONENT, q.zipf_cutoff)
    tail = _zipf_cdf(n_codes, q.tail_exponent)
    u = rng.random(len(ages))
    from_tail = rng.random(len(ages)) < tail_share
    codes = np.where(
        from_tail, np.searchsorted(tail, u, side="right"), np.searchsorted(common, u, side="right")
    )
    codes = np.minimum(codes, n_codes - 1)
    lo, hi = code_age_range()
    for _ in range(8):
        bad = np.flatnonzero((ages < lo[codes]) | (ages > hi[codes]))
        if len(bad) == 0:
            break
        codes[bad] = np.minimum(np.searchsorted(common, rng.random(len(bad)), side="right"), n_codes - 1)
    else:
        fallback = int(np.flatnonzero(code_vocabulary() == "465.9")[0])
        codes[(ages < lo[codes]) | (ages > hi[codes])] = fallback
    return codes


@dataclass(frozen=True, eq=False)
class _Patients:
    age0: np.ndarray  # age at first visit
    use: np.ndarray  # utilization multiplier, mean 1
    factors: np.ndarray  # (n, len(FACTORS))
    genotypes: np.ndarray  # (n, 6) int8 minor-allele counts (complete; missingness added on output)
    n_visits: np.ndarray
    visit_patient: np.ndarray  # (n_visits_total,)
    visit_index: np.ndarray  # 0-based index of the visit within its patient
    visit_age: np.ndarray
    has: np.ndarray  # (n, n_conditions) bool


def _patients(n: int, rng: np.random.Generator) -> _Patients:
    age0 = np.clip(np.round(rng.beta(1.6, 1.9, n) * 95), 0, 90).astype(np.int64)
    use = rng.gamma(UTILIZATION_SHAPE, 1.0 / UTILIZATION_SHAPE, n)
    factors = rng.standard_normal((n, len(FACTORS)))
    maf = np.array([s.maf for s in SNPS])
    genotypes = rng.binomial(2, maf, size=(n, len(SNPS))).astype(np.int8)
    n_visits = 1 + rng.poisson(VISITS_PER_USE * use)
    visit_patient = np.repeat(np.arange(n), n_visits)
    visit_index = concat_ranges(np.zeros(len(n_visits), dtype=np.int64), n_visits)
    gaps = rng.exponential(YEARS_BETWEEN_VISITS, len(visit_patient))
    gaps[visit_index == 0] = 0.0
    t = np.cumsum(gaps)
    first = np.cumsum(n_visits) - n_visits
    elapsed = t - np.repeat(t[first], n_visits)  # years since the first visit
    frac = rng.random(n)  # where in the year of age the first visit falls
    visit_age = np.minimum(
        age0[visit_patient] + np.floor(frac[visit_patient] + elapsed).astype(np.int64), MAX_AGE
    )
    # chronic conditions: logistic in age (at the last visit), factors, use and genotype
    last_age = visit_age[np.cumsum(n_visits) - 1]
    mean_log_use = digamma(UTILIZATION_SHAPE) - np.log(UTILIZATION_SHAPE)
    snp_col = {s.rsid: j for j, s in enumerate(SNPS)}
    has = np.zeros((n, len(CONDITIONS)), dtype=bool)
    for c, cond in enumerate(CONDITIONS):
        logit = (
            PREVALENCE_SHIFT
            + np.log(cond.prevalence / (1 - cond.prevalence))
            + cond.age_slope * (last_age - 50) / 10.0
        )
        logit = logit + USE_LOADING * (np.log(use) - mean_log_use)
        for f, w in cond.loadings.items():
            logit = logit + w * factors[:, FACTORS.index(f)] - 0.5 * w * w  # keep mean prevalence
        for rsid, odds in cond.snp_or.items():
            j = snp_col[rsid]
            logit = logit + np.log(odds) * (genotypes[:, j] - 2 * maf[j])
        has[:, c] = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
    return _Patients(age0, use, factors, genotypes, n_visits, visit_patient, visit_index, visit_age, has)


def _events(
    p: _Patients, rng: np.random.Generator, q: CodeParameters = PARAMETERS
) -> tuple[np.ndarray, np.ndarray]:
    """(visit, code index) of every diagnosis, one per distinct code per visit, sorted by visit."""
    vocab = code_vocabulary()
    index = {c: i for i, c in enumerate(vocab)}
    n_chronic_codes = len({c for cond in CONDITIONS for c in cond.codes})
    n_acute_codes = len(vocab) - n_chronic_codes
    n_visits_total = len(p.visit_patient)
    ev_visit, ev_code = [], []
    vp, vi = p.visit_patient, p.visit_index
    for c, cond in enumerate(CONDITIONS):
        who = np.flatnonzero(p.has[:, c])
        if len(who) == 0:
            continue
        codes = np.array([index[k] for k in cond.codes], dtype=np.int64)
        w = np.array(list(cond.codes.values()))
        pick = codes[
            np.searchsorted(np.cumsum(w) / w.sum(), rng.random(len(who)), side="right").clip(
                0, len(codes) - 1
            )
        ]
        onset = np.zeros(len(p.n_visits), dtype=np.int64)
        onset[who] = np.floor(rng.random(len(who)) ** 1.5 * p.n_visits[who]).astype(np.int64)
        code_of = np.full(len(p.n_visits), -1, dtype=np.int64)
        code_of[who] = pick
        has_v = p.has[vp, c] & (vi >= onset[vp])
        billed = has_v & (
            (vi == onset[vp]) | (rng.random(n_visits_total) < RECURRENCE_SCALE * cond.recurrence)
        )
        v = np.flatnonzero(billed)
        ev_visit.append(v)
        ev_code.append(code_of[vp[v]])
    chronic_per_visit = np.bincount(np.concatenate(ev_visit), minlength=n_visits_total) if ev_visit else 0
    n_acute = rng.poisson(q.acute_per_visit, n_visits_total)
    n_acute = np.where((chronic_per_visit == 0) & (n_acute == 0), 1, n_acute)
    acute_visit = np.repeat(np.arange(n_visits_total), n_acute)
    tail_share = np.minimum(q.tail_rate * p.use[vp[acute_visit]] ** TAIL_POWER, q.tail_max)
    acute_codes = _draw_acute(tail_share, p.visit_age[acute_visit], n_acute_codes, rng, q)
    ev_visit.append(acute_visit)
    ev_code.append(acute_codes.astype(np.int64))
    key = sorted_unique(np.concatenate(ev_visit) * len(vocab) + np.concatenate(ev_code))
    return key // len(vocab), key % len(vocab)


def _weighted_sample(weights: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of `size` items drawn without replacement with probability ~ weights (exponential
    keys; ties impossible in practice, broken by index), returned sorted."""
    keys = rng.exponential(1.0, len(weights)) / np.maximum(weights, 1e-300)
    return np.sort(np.argsort(keys, kind="stable")[:size])


def group_sizes(n: int) -> tuple[int, int]:
    """(biobank size, target cohort size) for a population of `n`: `BIOBANK_SHARE` of it, and
    `COHORT_SIZE_AT_30K * (n / 30000) ** COHORT_SIZE_EXPONENT` (fewer when fewer are eligible)."""
    return max(1, round(BIOBANK_SHARE * n)), round(COHORT_SIZE_AT_30K * (n / 30000) ** COHORT_SIZE_EXPONENT)


def cohort_draw(
    biobank: np.ndarray,
    has: np.ndarray,
    n_visits: np.ndarray,
    rng: np.random.Generator,
    q: CodeParameters = PARAMETERS,
) -> np.ndarray:
    """The research cohort (indices): biobank members with one of `COHORT_CONDITIONS`, heavier users
    more likely (weights n_visits ** q.cohort_use_power)."""
    names = [c.name for c in CONDITIONS]
    cols = np.array([names.index(c) for c in COHORT_CONDITIONS], dtype=np.int64)
    eligible = biobank[has[np.ix_(biobank, cols)].any(axis=1)]
    size = min(len(eligible), group_sizes(len(n_visits))[1])
    return eligible[_weighted_sample(n_visits[eligible].astype(float) ** q.cohort_use_power, size, rng)]


def _groups(
    p: _Patients, rng: np.random.Generator, q: CodeParameters = PARAMETERS
) -> tuple[np.ndarray, np.ndarray]:
    """Biobank (heavier users over-represented) and the phenotype-selected cohort, as indices."""
    n_biobank = group_sizes(len(p.n_visits))[0]
    biobank = _weighted_sample(p.n_visits.astype(float) ** q.biobank_use_power, n_biobank, rng)
    return biobank, cohort_draw(biobank, p.has, p.n_visits, rng, q)


def _genotype_frame(ids: np.ndarray, g: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    cols = {"patient_id": pd.array(ids, dtype="str")}
    for j, s in enumerate(SNPS):
        col = pd.array(g[:, j], dtype="Int8")
        col[rng.random(len(ids)) < GENOTYPE_MISSING] = pd.NA
        cols[s.rsid] = col
    return pd.DataFrame(cols)


def events_frame(p: _Patients, ids: np.ndarray, ev_visit: np.ndarray, ev_code: np.ndarray) -> pd.DataFrame:
    """The events frame (patient_id, visit, code, age) of diagnoses (visit, code index) of `p`,
    whose patients are named `ids`."""
    ev_patient = p.visit_patient[ev_visit]
    return pd.DataFrame(
        {
            "patient_id": pd.array(ids[ev_patient], dtype="str"),
            "visit": (p.visit_index[ev_visit] + 1).astype(np.int64),
            "code": pd.array(code_vocabulary()[ev_code], dtype="str"),
            "age": p.visit_age[ev_visit].astype(np.int64),
        }
    )


def lab_frame(
    ids: np.ndarray, has: np.ndarray, n_visits: np.ndarray, rng: np.random.Generator
) -> pd.DataFrame:
    """Lab orders (patient_id, day, lab) of patients `ids` (`engine.synth.labs`), an empty frame of
    the same columns when there are none (the rng is then left untouched)."""
    if len(ids) == 0:
        return pd.DataFrame(
            {
                "patient_id": pd.array([], dtype="str"),
                "day": np.array([], dtype=np.int64),
                "lab": pd.array([], dtype="str"),
            }
        )
    return labs_for_patients(ids, has, n_visits * LAB_DAYS_SCALE, rng)


def generate(
    n_patients: int,
    seed: int = 0,
    *,
    labs: bool | None = None,
    parameters: CodeParameters = PARAMETERS,
) -> SyntheticData:
    """Generate a population of `n_patients` with nested biobank and cohort (Heatherly Figure 14).

    Deterministic: the same (n_patients, seed, parameters) gives identical frames. `parameters`:
    the code draw and group selection (`PARAMETERS`, issue 16's calibration; `SHIPPED_PARAMETERS`
    rebuilds the shipped sample_data/). Lab orders cost about 220 rows
    per patient, so by default (`labs=None`) they are generated only up to `LABS_AUTO_MAX` patients
    and left empty above (the 1.37-million-patient benchmarks need diagnoses only; Johnson-scale
    labs come from `generate_labs`); `labs=True` / `False` forces them on / off.
    """
    if n_patients < 1:
        raise ValueError("n_patients must be at least 1")
    ss = np.random.SeedSequence([seed, 2])
    r_pat, r_ev, r_grp, r_gt, r_lab = (np.random.default_rng(s) for s in ss.spawn(5))
    p = _patients(n_patients, r_pat)
    ev_visit, ev_code = _events(p, r_ev, parameters)
    ids = patient_ids(n_patients)
    events = events_frame(p, ids, ev_visit, ev_code)
    biobank, cohort = _groups(p, r_grp, parameters)
    genotypes = _genotype_frame(ids[biobank], p.genotypes[biobank], r_gt)
    if labs is None:
        labs = n_patients <= LABS_AUTO_MAX
    labs_of = ids if labs else ids[:0]
    lab_orders = lab_frame(labs_of, p.has[: len(labs_of)], p.n_visits[: len(labs_of)], r_lab)
    return SyntheticData(
        events=events,
        biobank=pd.DataFrame({"patient_id": pd.array(ids[biobank], dtype="str")}),
        cohort=pd.DataFrame({"patient_id": pd.array(ids[cohort], dtype="str")}),
        genotypes=genotypes,
        labs=lab_orders,
    )


def generate_labs(n_patients: int, seed: int = 0) -> pd.DataFrame:
    """Lab orders (patient_id, day, lab) for `n_patients` (Johnson 2018's scale: 731,850 patients),
    with conditions drawn as in `generate` but without diagnoses."""
    ss = np.random.SeedSequence([seed, 3])
    r_pat, r_lab = (np.random.default_rng(s) for s in ss.spawn(2))
    p = _patients(n_patients, r_pat)
    return labs_for_patients(patient_ids(n_patients), p.has, p.n_visits * LAB_DAYS_SCALE, r_lab)


def write_sample(
    out_dir: str | Path,
    n_patients: int = 30_000,
    seed: int = 0,
    *,
    labs: bool | None = None,
    parameters: CodeParameters = PARAMETERS,
) -> dict[str, Path]:
    """Write events.parquet, biobank.csv, cohort.csv, genotypes.parquet, labs.parquet to `out_dir`
    (`labs` as in `generate`: an empty labs.parquet when they are skipped)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = generate(n_patients, seed, labs=labs, parameters=parameters)
    paths = {
        "events": out / "events.parquet",
        "biobank": out / "biobank.csv",
        "cohort": out / "cohort.csv",
        "genotypes": out / "genotypes.parquet",
        "labs": out / "labs.parquet",
    }
    kw = {"index": False, "compression": "zstd"}
    data.events.to_parquet(paths["events"], **kw)
    data.genotypes.to_parquet(paths["genotypes"], **kw)
    data.labs.to_parquet(paths["labs"], **kw)
    data.biobank.to_csv(paths["biobank"], index=False)
    data.cohort.to_csv(paths["cohort"], index=False)
    return paths
