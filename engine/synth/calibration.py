"""Calibration of the synthetic generator against the figures the papers report (issue #2).

Each function measures generated data the way the paper measured its own and returns `Figure` rows
(paper value beside generated value); `bench/calibrate.py` assembles them into
`sample_data/CALIBRATION.md`. Uniqueness of diagnosis codes is computed with `engine.risk`, of lab
orders with `engine.labs.reident` (Johnson's exact-set rule), so the table measures what the app shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.adversary import Knowledge
from engine.records import Records
from engine.risk import Matching, distinguishability
from engine.synth.generator import SyntheticData
from engine.synth.labs import sorted_unique
from engine.synth.repeats import POPULATION_MEANS, SAMPLE_MEANS, TAMERSOY_CODES, repeat_counts, repeated_codes

# planted associations: SNP -> phecode the PheWAS must find (Heatherly Table 4 / Denny 2010)
PLANTED: dict[str, tuple[str, str]] = {
    "rs1333049": ("411", "coronary disease (ICD-9 411-414)"),
    "rs2200733": ("427.2", "atrial fibrillation (427.31)"),
    "rs2476601": ("714.1", "rheumatoid arthritis (714.0)"),
    "rs3135388": ("335", "multiple sclerosis (340)"),
    "rs6457620": ("714.1", "rheumatoid arthritis (714.0)"),
    "rs17234657": ("555.1", "Crohn's disease (555.x)"),
}


@dataclass(frozen=True)
class Figure:
    """One row of the calibration table: `paper` is None when the paper gives no number."""

    source: str
    figure: str
    paper: float | None
    generated: float
    unit: str = ""
    note: str = ""

    @property
    def off(self) -> str:
        if self.paper is None:
            return ""
        diff = self.generated - self.paper
        if self.unit == "%":
            return f"{diff:+.1f} points"
        rel = diff / self.paper if self.paper else float("nan")
        return f"{diff:+.2f} ({rel:+.0%})"


def figures_frame(figures: list[Figure]) -> pd.DataFrame:
    """The table as a frame: source, figure, paper, generated, off, note."""

    def fmt(v: float | None, unit: str) -> str:
        if v is None:
            return "-"
        return f"{v:.1f}%" if unit == "%" else f"{v:,.2f}"

    return pd.DataFrame(
        {
            "source": [f.source for f in figures],
            "figure": [f.figure for f in figures],
            "paper": [fmt(f.paper, f.unit) for f in figures],
            "generated": [fmt(f.generated, f.unit) for f in figures],
            "off": [f.off for f in figures],
            "note": [f.note for f in figures],
        }
    )


# ------------------------------------------------------------------------------------ diagnoses
def group_records(data: SyntheticData) -> dict[str, Records]:
    """Records of the population, the biobank and the cohort."""
    pop = Records.from_frame(data.events)
    return {
        "population": pop,
        "biobank": pop.subset(data.biobank["patient_id"].to_numpy(dtype=object)),
        "cohort": pop.subset(data.cohort["patient_id"].to_numpy(dtype=object)),
    }


def diagnosis_figures(groups: dict[str, Records]) -> list[Figure]:
    """Heatherly Table 1: Diagnosis Count per patient in SD (13,432,263 / 1,366,786), BioVU
    (2,647,056 / 104,904) and DEMO (272,080 / 5,994), the generated side measured as the paper's DC
    (Figure 15: distinct (record, code) pairs, `engine.utility.retention.diagnosis_count`), not
    events; events per patient follow, without a paper value; group sizes relative to the population."""
    from engine.utility.retention import diagnosis_count

    paper = {"population": 13_432_263 / 1_366_786, "biobank": 2_647_056 / 104_904, "cohort": 272_080 / 5_994}
    names = {"population": "SD", "biobank": "BioVU", "cohort": "DEMO"}
    out = []
    for g, r in groups.items():
        out.append(
            Figure(
                "Heatherly Table 1",
                f"Diagnosis Count per patient (distinct record-code pairs), {g} ({names[g]})",
                paper[g],
                diagnosis_count(r) / r.n_patients,
            )
        )
    for g, r in groups.items():
        out.append(
            Figure(
                "generator",
                f"code events per patient (repeats counted; not the paper's DC), {g}",
                None,
                r.n_events / r.n_patients,
            )
        )
    n = groups["population"].n_patients
    out.append(
        Figure(
            "Heatherly Table 1",
            "biobank share of the population",
            100 * 104_904 / 1_366_786,
            100 * groups["biobank"].n_patients / n,
            "%",
            "the brief asks for 30-40%, far above BioVU's 7.7%, so the sample's biobank is large enough for a PheWAS",
        )
    )
    return out


def uniqueness_figures(cohort: Records) -> list[Figure]:
    """PNAS (Loukides 2010, Fig. 2): within the ~2,700-patient GWAS cohort, >= 40% unique and 75%
    unpublishable (< 5) by one visit's codes; 96% and 99% by all codes. Candidates = the cohort."""
    out = []
    paper: tuple[tuple[Knowledge, float, float], ...] = (
        ("single_visit", 40.0, 75.0),
        ("all_visits", 96.0, 99.0),
    )
    for knowledge, uniq, unpub in paper:
        dis = distinguishability(cohort, cohort, knowledge)
        label = knowledge.replace("_", " ")
        note = "paper: 'at least 40%'" if knowledge == "single_visit" else ""
        out.append(
            Figure(
                "Loukides 2010 (PNAS)",
                f"cohort unique, {label}",
                uniq,
                100 * float(np.mean(dis <= 1)),
                "%",
                note,
            )
        )
        out.append(
            Figure(
                "Loukides 2010 (PNAS)",
                f"cohort distinguishability < 5, {label}",
                unpub,
                100 * float(np.mean(dis < 5)),
                "%",
            )
        )
    return out


# ------------------------------------------------------------------------------------ ICD-10-CM variant
def most_prevalent_codes(events: pd.DataFrame, patients, n: int = 5) -> list[tuple[str, float]]:
    """The n codes held by the largest shares of `patients` (events: `patient_id`, `code`), with those
    shares, most prevalent first (ties by code): how the ICD-10-CM variant's codes compare with the
    ICD-9-CM codes they come from (issue 26)."""
    ids = pd.unique(np.asarray(patients, dtype=object))
    held = events.loc[events["patient_id"].isin(ids), ["patient_id", "code"]].drop_duplicates()
    counts = held["code"].astype(str).value_counts()
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return [(code, count / len(ids)) for code, count in top]


def gems_coverage(events: pd.DataFrame, crosswalk: pd.DataFrame) -> tuple[float, float]:
    """(share of the distinct ICD-9-CM codes, share of the events) that the ICD-10-CM crosswalk
    (`engine.synth.icd10.crosswalk`) maps through GEMs rather than its phecode fallback."""
    from engine.synth.icd10 import FALLBACK

    fallback = set(crosswalk.loc[crosswalk["rule"].str.contains(FALLBACK, regex=False), "icd9"])
    code = events["code"].astype(str)
    codes = set(code)
    return 1 - len(codes & fallback) / len(codes), float(1 - code.isin(fallback).mean())


# ------------------------------------------------------------------------------------ repeats
def repeat_figures(n_population: int = 301_423, n_sample: int = 2_676, seed: int = 0) -> list[Figure]:
    """Tamersoy 2010: mean repeats per record of 250/272/401/724 in P and S, and the share of S
    unique against P with repeat counts (Figure 4: about 9%)."""
    counts, sample = repeat_counts(n_population, n_sample, TAMERSOY_CODES, seed)
    out = []
    for j, code in enumerate(TAMERSOY_CODES):
        out.append(
            Figure(
                "Tamersoy 2010",
                f"mean repeats of {code}, population",
                POPULATION_MEANS[j],
                float(counts[:, j].mean()),
            )
        )
        out.append(
            Figure(
                "Tamersoy 2010",
                f"mean repeats of {code}, sample",
                SAMPLE_MEANS[j],
                float(counts[sample, j].mean()),
            )
        )
    events, sample_ids = repeated_codes(n_population, n_sample, TAMERSOY_CODES, seed)
    pop = Records.from_frame(events)
    smp = pop.subset(sample_ids)
    dis = distinguishability(smp, pop, "all_visits", Matching(count_repeats=True))
    out.append(
        Figure(
            "Tamersoy 2010",
            f"sample unique against population (repeat counts; {n_population:,} / {n_sample:,})",
            9.0,
            100 * float(np.mean(dis <= 1)),
            "%",
            "paper: 'about 9%', read from Figure 4",
        )
    )
    out.append(
        Figure(
            "Tamersoy 2010",
            "sample unique, exact-count rule of the worked example",
            9.0,
            100 * float(np.mean(exact_count_matches(counts, sample) <= 1)),
            "%",
            "candidates with exactly the target's count of each code it holds (Figure 1: dis(250,250,272) = 1)",
        )
    )
    return out


def exact_count_matches(counts: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """Per sample record, population records holding each of its codes exactly as often (codes it
    lacks unconstrained): the reading under which Tamersoy's dis({250,250,272}) = 1 in Figure 1."""
    out = np.empty(len(sample), dtype=np.int64)
    present = counts[sample] > 0
    patterns, inverse = np.unique(present, axis=0, return_inverse=True)
    for k, pat in enumerate(patterns):
        cols = np.flatnonzero(pat)
        keys = (
            pd.MultiIndex.from_arrays([counts[:, c] for c in cols])
            if len(cols) > 1
            else pd.Index(counts[:, cols[0]])
        )
        freq = pd.Series(1, index=keys).groupby(level=list(range(len(cols)))).size()
        rows = sample[inverse.ravel() == k]
        q = (
            pd.MultiIndex.from_arrays([counts[rows, c] for c in cols])
            if len(cols) > 1
            else pd.Index(counts[rows, cols[0]])
        )
        out[inverse.ravel() == k] = freq.reindex(q).to_numpy()
    return out


# ------------------------------------------------------------------------------------ labs
def _distinct_labs(labs: pd.DataFrame) -> np.ndarray:
    """Distinct labs per patient (patients in order of first appearance)."""
    p_code, _ = pd.factorize(labs["patient_id"])
    l_code, l_uniq = pd.factorize(labs["lab"])
    pairs = sorted_unique(p_code.astype(np.int64) * len(l_uniq) + l_code)
    return np.bincount(pairs // len(l_uniq))


def lab_days(labs: pd.DataFrame):
    """(`engine.labs.reident.PatientDays`, distinct labs per patient) of a lab-order frame."""
    from engine.labs.reident import patient_days

    return patient_days(labs), _distinct_labs(labs)


def paper_scale_lab_days(n_patients: int = 731_850, chunk: int = 61_000):
    """Lab orders of `n_patients` built chunk by chunk (`generate_labs(m, seed=1000 + i)`, as
    bench/labs.py does), stacked into one `PatientDays`; and distinct labs per patient."""
    from engine.labs.reident import PatientDays, concat_patient_days, patient_days
    from engine.synth.generator import generate_labs

    parts, distinct = [], []
    n_chunks = -(-n_patients // chunk)
    for i in range(n_chunks):
        frame = generate_labs(min(chunk, n_patients - i * chunk), seed=1000 + i)
        part = patient_days(frame)
        distinct.append(_distinct_labs(frame))
        del frame
        ids = np.array([f"c{i:02d}-{p}" for p in part.patient_ids], dtype=object)
        parts.append(PatientDays(ids, part.labs, part.patient_ptr, part.day_labels, part.matrix))
    return concat_patient_days(parts), np.concatenate(distinct)


def lab_figures(days, distinct: np.ndarray, label: str) -> list[Figure]:
    """Johnson 2018 sections 3.1-3.2: days and distinct labs per patient; share unique overall, with
    >= 2 days and with >= 9 days (exact lab sets, `engine.labs.reident.uniqueness`)."""
    from engine.labs.reident import uniqueness

    u = uniqueness(days)
    d = u.days
    src = "Johnson 2018"
    return [
        Figure(src, f"lab days per patient ({label})", 8.81, float(d.mean())),
        Figure(src, f"patients with <= 10 lab days ({label})", 81.6, 100 * float(np.mean(d <= 10)), "%"),
        Figure(src, f"distinct labs per patient ({label})", 49.8, float(distinct.mean())),
        Figure(src, f"unique by lab set, all patients ({label})", 56.1, 100 * float(u.unique.mean()), "%"),
        Figure(
            src, f"unique, patients with >= 2 days ({label})", 72.3, 100 * float(u.unique[d >= 2].mean()), "%"
        ),
        Figure(
            src, f"unique, patients with >= 9 days ({label})", 98.4, 100 * float(u.unique[d >= 9].mean()), "%"
        ),
    ]


def reidentification_figures(
    days, label: str, trials: int = 100, simulations: int = 50, seed: int = 0
) -> list[Figure]:
    """Johnson 2018 section 3.3 / Figure 4: one-day Recall@1 and Recall@10 against 99 others, measured
    as the Lab orders page does with its defaults (labs ordered on at least `default_min_orders`
    patient-days, `draw_queries(trials, simulations, "99", "one_day", seed)`, `recall_at_n`)."""
    from engine.labs.reident import default_min_orders, draw_queries, recall_at_n

    kept = days.restrict_labs(default_min_orders(days.n_days))
    rec = recall_at_n(kept, draw_queries(kept, trials, simulations, "99", "one_day", seed))
    src = "Johnson 2018"
    note = f"{simulations} x {trials} breached days, {kept.n_labs} labs kept; random: 1% / 10%"
    return [
        Figure(src, f"one-day Recall@1 against 99 others ({label})", 25.0, 100 * rec.at(1), "%", note),
        Figure(src, f"one-day Recall@10 against 99 others ({label})", 47.0, 100 * rec.at(10), "%", note),
    ]


# ------------------------------------------------------------------------------------ trajectories
def trajectory_figures(records: Records, n_codes: int = 50, label: str = "") -> list[Figure]:
    """Thesis Table 3 (D50Pop): trajectories of (ICD, age) pairs restricted to the 50 most frequent
    3-digit ICD-9 codes (by number of records); per trajectory, distinct pairs, codes and ages.

    Conventions: codes are cut to their 3-digit category (the thesis' codes are 250, 272, 401, ...);
    a trajectory is a record with at least one pair left after the restriction.
    """
    frame = records.to_frame()
    cat = frame["code"].astype(str).str.split(".").str[0].to_numpy(dtype=object)
    pid = frame["patient_id"].to_numpy(dtype=object)
    per_code = pd.Series(pid).groupby(cat).nunique().sort_values(ascending=False, kind="stable")
    top = set(per_code.index[:n_codes])
    keep = np.fromiter((c in top for c in cat), dtype=bool, count=len(cat))
    t = pd.DataFrame({"p": pid[keep], "c": cat[keep], "a": frame["age"].to_numpy()[keep]}).drop_duplicates()
    g = t.groupby("p")
    src = "Tamersoy 2011 Table 3"
    tag = f" ({label})" if label else ""
    return [
        Figure(src, f"(ICD, age) pairs per trajectory, top {n_codes}{tag}", 9.32, float(g.size().mean())),
        Figure(
            src,
            f"distinct ICD codes per trajectory, top {n_codes}{tag}",
            5.88,
            float(g["c"].nunique().mean()),
        ),
        Figure(
            src, f"distinct ages per trajectory, top {n_codes}{tag}", 3.10, float(g["a"].nunique().mean())
        ),
    ]


# ------------------------------------------------------------------------------------ PheWAS
def planted_associations(biobank: Records, genotypes: pd.DataFrame) -> pd.DataFrame:
    """Allelic chi-square PheWAS (`engine.utility.phewas`) on the biobank: the planted (SNP, phecode) rows."""
    from engine.utility.phewas import phewas_of_records

    res = phewas_of_records(biobank, genotypes)
    rows = []
    for snp, (phecode, label) in PLANTED.items():
        hit = res[(res["snp"] == snp) & (res["phecode"] == phecode)]
        if len(hit):
            r = hit.iloc[0]
            rows.append((snp, phecode, label, int(r["n_cases"]), float(r["odds_ratio"]), float(r["p"])))
        else:
            rows.append((snp, phecode, label, 0, float("nan"), float("nan")))
    return pd.DataFrame(rows, columns=["snp", "phecode", "phenotype", "n_cases", "odds_ratio", "p"])
