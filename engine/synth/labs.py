"""Synthetic lab orders (Johnson et al. 2018): patient_id, day, lab.

Labs are ordered as panels (a CBC brings its ten components) plus single tests drawn from a Zipf
ranking of a vocabulary of a few hundred real test names, so a few common panels dominate and a long
tail of rare tests makes patients distinguishable. Orders follow persistent, patient-specific habits
(what makes one day re-identify its patient, Johnson 2.5 / Figure 4):

- each patient holds a habitual set of panels, ordered on most of their days (HABIT_RATE), other
  panels only now and then (OFF_HABIT x their rate); the set is drawn so that each panel keeps its
  marginal rate per day (base rate, or PROMPTED_RATE when one of the patient's conditions asks for it:
  diabetes -> HbA1c and microalbumin, atrial fibrillation -> PT/INR, ...);
- how closely a patient's days follow the set varies (adherence ~ Beta(ADHERENCE)): a day's panel
  rate is adherence x habitual rate + (1 - adherence) x marginal rate, so some patients re-identify
  easily and others hardly at all (the gap between Recall@1 and Recall@10);
- each patient has a few personal single tests, each ordered on a small share of their days
  (ROUTINE_RATE), plus single tests drawn afresh: few on a day of a one-day patient (FRESH_PER_DAY),
  more per day the more days the patient has (x days ** FRESH_DAYS_POWER: Johnson 3.1's range "from
  everyday office visits to patients who may remain in the intensive care unit for weeks").

Uniqueness by days (Johnson 3.2 / Figure 3: 56.1% of patients unique, 72.3% at >= 2 days, 98.4% at
>= 9) is set by the single tests, Recall@n (Figure 4) by the panel habits: issue #36 finding 3 found
the sample unique far too often (70.8%, 89.6%, 99.8%: a single test drawn afresh on a third of all
days and two personal tests on a fifth of them made every multi-day set rare), so the personal tests
are more but each rarely ordered, and the fresh draws grow with the days instead of being flat.

Days per patient follow the patient's use of care with a heavy tail (Johnson 3.1: mean 8.81 days,
sd 20.6, 81.6% at 10 days or fewer). Calibrated figures: `sample_data/CALIBRATION.md`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.synth.vocabulary import CONDITIONS

PANELS: dict[str, tuple[str, ...]] = {
    "CBC": ("WBC", "RBC", "Hemoglobin", "Hematocrit", "MCV", "MCH", "MCHC", "RDW", "Platelet count", "MPV"),
    "Differential": (
        "Neutrophils %",
        "Lymphocytes %",
        "Monocytes %",
        "Eosinophils %",
        "Basophils %",
        "Neutrophils absolute",
        "Lymphocytes absolute",
        "Monocytes absolute",
        "Eosinophils absolute",
        "Basophils absolute",
    ),
    "BMP": (
        "Sodium",
        "Potassium",
        "Chloride",
        "CO2",
        "BUN",
        "Creatinine",
        "Glucose",
        "Calcium",
        "Anion gap",
        "eGFR",
    ),
    "Hepatic": (
        "ALT",
        "AST",
        "Alkaline phosphatase",
        "Total bilirubin",
        "Direct bilirubin",
        "Albumin",
        "Total protein",
    ),
    "Lipid": (
        "Total cholesterol",
        "HDL cholesterol",
        "LDL cholesterol calculated",
        "Triglycerides",
        "Non-HDL cholesterol",
    ),
    "Coagulation": ("PT", "INR", "aPTT"),
    "Urinalysis": (
        "Urine color",
        "Urine appearance",
        "Urine specific gravity",
        "Urine pH",
        "Urine protein",
        "Urine glucose",
        "Urine ketones",
        "Urine blood",
        "Urine nitrite",
        "Urine leukocyte esterase",
        "Urine bilirubin",
        "Urine urobilinogen",
    ),
    "Urine microscopy": (
        "Urine WBC",
        "Urine RBC",
        "Urine bacteria",
        "Urine squamous epithelial cells",
        "Urine hyaline casts",
    ),
    "Thyroid": ("TSH", "Free T4"),
    "Diabetes": ("Hemoglobin A1c", "Glucose, point of care"),
    "Urine microalbumin": ("Urine microalbumin", "Urine creatinine", "Microalbumin/creatinine ratio"),
    "Cardiac": ("Troponin I", "CK", "CK-MB"),
    "BNP": ("NT-proBNP",),
    "Renal": ("Phosphorus", "Magnesium", "PTH intact", "Uric acid"),
    "Anemia": (
        "Iron",
        "TIBC",
        "Ferritin",
        "Transferrin saturation",
        "Reticulocyte count",
        "Vitamin B12",
        "Folate",
    ),
    "Blood gas": (
        "pH arterial",
        "pCO2 arterial",
        "pO2 arterial",
        "HCO3 arterial",
        "Base excess arterial",
        "O2 saturation arterial",
        "Lactate",
    ),
    "Vitamin D": ("25-hydroxy vitamin D",),
    "PSA": ("PSA total",),
    "Inflammation": ("ESR", "C-reactive protein"),
    "Rheumatology": ("Rheumatoid factor", "Anti-CCP antibody", "ANA screen"),
    "Stool": ("Fecal calprotectin", "C. difficile toxin PCR", "Stool culture"),
    "Drug levels": ("Valproic acid level", "Phenytoin level", "Levetiracetam level"),
    "Type and screen": ("ABO group", "Rh type", "Antibody screen"),
    "Hepatitis": (
        "Hepatitis B surface antigen",
        "Hepatitis B core antibody",
        "Hepatitis C antibody",
        "Hepatitis A IgM",
    ),
    "Pancreas": ("Lipase", "Amylase"),
}

# single tests, most frequently ordered first (their Zipf rank)
SINGLES: tuple[str, ...] = (
    "Glucose, point of care",
    "Magnesium",
    "Phosphorus",
    "Urine culture",
    "Blood culture",
    "Lactate",
    "Hemoglobin A1c",
    "TSH",
    "Urine hCG",
    "Influenza A/B PCR",
    "Strep A rapid antigen",
    "D-dimer",
    "Procalcitonin",
    "Troponin I",
    "Ferritin",
    "Vitamin B12",
    "Folate",
    "Fibrinogen",
    "LDH",
    "Haptoglobin",
    "Ammonia",
    "Cortisol",
    "Prolactin",
    "Testosterone total",
    "Estradiol",
    "FSH",
    "LH",
    "hCG quantitative",
    "HIV-1/2 antigen/antibody",
    "RPR",
    "Chlamydia trachomatis NAAT",
    "Neisseria gonorrhoeae NAAT",
    "Trichomonas NAAT",
    "Hepatitis C RNA",
    "HIV-1 RNA viral load",
    "CD4 count",
    "Vancomycin trough",
    "Gentamicin level",
    "Tacrolimus level",
    "Cyclosporine level",
    "Digoxin level",
    "Lithium level",
    "Carbamazepine level",
    "Acetaminophen level",
    "Salicylate level",
    "Ethanol level",
    "Urine drug screen",
    "Osmolality serum",
    "Osmolality urine",
    "Urine sodium",
    "Urine potassium",
    "Urine chloride",
    "Urine protein/creatinine ratio",
    "24-hour urine protein",
    "Sputum culture",
    "Wound culture",
    "MRSA nasal PCR",
    "Respiratory viral panel PCR",
    "RSV PCR",
    "SARS-CoV-2 PCR",
    "Mononucleosis screen",
    "Lyme antibody",
    "Cryptococcal antigen",
    "Fungal culture",
    "AFB culture",
    "Quantiferon TB",
    "Blood smear review",
    "Peripheral smear pathologist review",
    "Hemoglobin electrophoresis",
    "G6PD",
    "Sickle cell screen",
    "Factor V Leiden",
    "Prothrombin gene mutation",
    "Antithrombin III",
    "Protein C activity",
    "Protein S activity",
    "Lupus anticoagulant",
    "Anticardiolipin antibody",
    "Beta-2 glycoprotein antibody",
    "Heparin anti-Xa",
    "Platelet antibody",
    "Heparin-induced platelet antibody",
    "Factor VIII activity",
    "von Willebrand antigen",
    "Complement C3",
    "Complement C4",
    "Anti-dsDNA",
    "Anti-Smith antibody",
    "SSA antibody",
    "SSB antibody",
    "ANCA screen",
    "Anti-GBM antibody",
    "HLA-B27",
    "Cryoglobulin",
    "Immunoglobulin G",
    "Immunoglobulin A",
    "Immunoglobulin M",
    "Immunoglobulin E",
    "Serum protein electrophoresis",
    "Immunofixation serum",
    "Free kappa light chains",
    "Free lambda light chains",
    "Beta-2 microglobulin",
    "CEA",
    "CA 19-9",
    "CA-125",
    "AFP",
    "Chromogranin A",
    "Calcitonin",
    "Thyroglobulin",
    "Thyroid peroxidase antibody",
    "Free T3",
    "Total T3",
    "Reverse T3",
    "ACTH",
    "Aldosterone",
    "Plasma renin activity",
    "Metanephrines plasma",
    "Catecholamines urine",
    "5-HIAA urine",
    "Growth hormone",
    "IGF-1",
    "C-peptide",
    "Insulin",
    "Fructosamine",
    "Beta-hydroxybutyrate",
    "Lipoprotein(a)",
    "Apolipoprotein B",
    "Homocysteine",
    "hs-CRP",
    "Vitamin A",
    "Vitamin E",
    "Vitamin B1",
    "Vitamin B6",
    "Zinc",
    "Copper",
    "Ceruloplasmin",
    "Selenium",
    "Lead level",
    "Mercury level",
    "Arsenic level",
    "Carboxyhemoglobin",
    "Methemoglobin",
    "Ionized calcium",
    "Venous blood gas pH",
    "Venous pCO2",
    "Cholinesterase",
    "Aldolase",
    "Myoglobin",
    "Lactate dehydrogenase isoenzymes",
    "GGT",
    "5-nucleotidase",
    "Alpha-1 antitrypsin",
    "Celiac tissue transglutaminase IgA",
    "Gliadin antibody",
    "H. pylori stool antigen",
    "Stool ova and parasites",
    "Giardia antigen",
    "Fecal occult blood",
    "Fecal fat",
    "Stool elastase",
    "Semen analysis",
    "Karyotype",
    "Cystic fibrosis carrier screen",
    "CSF glucose",
    "CSF protein",
    "CSF cell count",
    "CSF culture",
    "CSF oligoclonal bands",
    "CSF IgG index",
    "Synovial fluid cell count",
    "Synovial fluid crystals",
    "Pleural fluid LDH",
    "Pleural fluid protein",
    "Peritoneal fluid cell count",
    "Body fluid culture",
    "Bone marrow aspirate",
    "Flow cytometry",
    "JAK2 V617F mutation",
    "BCR-ABL PCR",
    "Erythropoietin",
    "Haptoglobin phenotype",
    "Direct antiglobulin test",
    "Cold agglutinins",
    "Osmotic fragility",
    "Kleihauer-Betke",
    "Fetal fibronectin",
    "Group B strep culture",
    "Rubella IgG",
    "Varicella IgG",
    "Measles IgG",
    "Hepatitis B surface antibody",
    "Toxoplasma IgG",
    "CMV IgG",
    "EBV capsid IgG",
    "Parvovirus B19 IgG",
    "West Nile virus IgM",
    "Histoplasma antigen",
    "Aspergillus galactomannan",
    "Beta-D-glucan",
    "Legionella urine antigen",
    "Pneumococcal urine antigen",
    "Bordetella pertussis PCR",
)

PANEL_BASE_RATE: dict[str, float] = {  # chance per lab day without a prompting condition
    "CBC": 0.62,
    "Differential": 0.40,
    "BMP": 0.52,
    "Hepatic": 0.35,
    "Lipid": 0.06,
    "Coagulation": 0.15,
    "Urinalysis": 0.20,
    "Urine microscopy": 0.07,
    "Thyroid": 0.05,
    "Diabetes": 0.03,
    "Urine microalbumin": 0.01,
    "Cardiac": 0.05,
    "BNP": 0.02,
    "Renal": 0.04,
    "Anemia": 0.02,
    "Blood gas": 0.03,
    "Vitamin D": 0.02,
    "PSA": 0.01,
    "Inflammation": 0.04,
    "Rheumatology": 0.005,
    "Stool": 0.005,
    "Drug levels": 0.002,
    "Type and screen": 0.04,
    "Hepatitis": 0.01,
    "Pancreas": 0.04,
}
PROMPTED_RATE = 0.45  # chance per lab day of a panel the patient's condition prompts
# Ordering habits (persist across a patient's days, so one day says who ordered it; Johnson 2.5):
HABIT_RATE = 0.95  # chance per lab day of a panel in the patient's habitual set
OFF_HABIT = 0.15  # chance per lab day of a panel outside the set, as a share of its marginal rate
ADHERENCE = (0.25, 0.15)  # Beta parameters of how closely a patient's days follow their habits
ROUTINE_TESTS = 4.0  # mean size of a patient's personal set of single tests (1 + Poisson)
ROUTINE_ZIPF = 1.15  # Zipf exponent of the personal single tests
ROUTINE_RATE = 0.042  # chance per lab day of each personal single test
FRESH_PER_DAY = 0.03  # Poisson mean of single tests drawn afresh on a lab day of a one-day patient
FRESH_DAYS_POWER = 0.5  # ... times (the patient's lab days) ** FRESH_DAYS_POWER: long stays, more variety
SINGLES_ZIPF = 1.15
DAYS_SHAPE = 0.45  # gamma shape of the extra lab days (heavy tail, Johnson sd 20.6)
LAB_DAYS_SCALE = 1.42  # expected lab days per visit of the diagnosis generator


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an integer array (sort-based; faster than hashing at this scale)."""
    x = np.sort(x, kind="stable")
    if len(x) == 0:
        return x
    keep = np.empty(len(x), dtype=bool)
    keep[0] = True
    np.not_equal(x[1:], x[:-1], out=keep[1:])
    return x[keep]


def lab_vocabulary() -> np.ndarray:
    """All test names (sorted, distinct)."""
    names = {t for tests in PANELS.values() for t in tests} | set(SINGLES)
    return np.array(sorted(names), dtype=object)


def labs_for_patients(
    ids: np.ndarray, has: np.ndarray, expected_days: np.ndarray, rng: np.random.Generator
) -> pd.DataFrame:
    """Lab orders for patients `ids` with condition matrix `has` (n, len(CONDITIONS)).

    Days per patient: 1 + Poisson(expected_days * Gamma(DAYS_SHAPE)); day numbers start at a random
    day in ten years and advance by 1 + geometric gaps (stays cluster on consecutive days). Rows are
    sorted by patient, day, lab and carry each (patient, day, lab) once.
    """
    n = len(ids)
    vocab = lab_vocabulary()
    lab_index = {t: i for i, t in enumerate(vocab)}
    extra = np.asarray(expected_days, dtype=float) - 1.0
    n_days = 1 + rng.poisson(np.maximum(extra, 0.05) * rng.gamma(DAYS_SHAPE, 1.0 / DAYS_SHAPE, n))
    day_patient = np.repeat(np.arange(n), n_days)
    first = np.cumsum(n_days) - n_days
    in_stay = rng.random(len(day_patient)) < 0.5
    gap = np.where(in_stay, 1, 1 + rng.geometric(1 / 60.0, len(day_patient)))
    gap[first] = 0
    t = np.cumsum(gap)
    start = rng.integers(0, 3650, n)
    day = t - np.repeat(t[first], n_days) + start[day_patient]
    n_pd = len(day_patient)
    # panels: each patient holds a habitual set, ordered on most of their days; others now and then.
    # A panel's marginal rate is its base rate, or the prompted rate when a condition asks for it;
    # habit share h solves h * HABIT_RATE + (1 - h) * OFF_HABIT * rate = rate.
    prompted = {name: np.zeros(n, dtype=bool) for name in PANELS}
    for c, cond in enumerate(CONDITIONS):
        for panel in cond.labs:
            prompted[panel] |= has[:, c]
    adherence = rng.beta(*ADHERENCE, n)
    rows_day, rows_lab = [], []
    for name, tests in PANELS.items():
        base = PANEL_BASE_RATE[name]
        rate = np.where(prompted[name], max(PROMPTED_RATE, base), base)
        habit_share = np.clip(rate * (1 - OFF_HABIT) / (HABIT_RATE - OFF_HABIT * rate), 0.0, 1.0)
        habit = rng.random(n) < habit_share
        habitual = np.where(habit, HABIT_RATE, OFF_HABIT * rate)  # its mean over patients is `rate`
        day_rate = (adherence * habitual + (1 - adherence) * rate)[day_patient]
        d = np.flatnonzero(rng.random(n_pd) < day_rate)
        idx = np.array([lab_index[t] for t in tests], dtype=np.int64)
        rows_day.append(np.repeat(d, len(idx)))
        rows_lab.append(np.tile(idx, len(d)))
    singles = np.array([lab_index[t] for t in SINGLES], dtype=np.int64)
    rank = np.arange(1, len(singles) + 1, dtype=float)
    # personal single tests (a flatter ranking: idiosyncratic), each reused on most of the days
    own_cum = np.cumsum(rank**-ROUTINE_ZIPF)
    n_own = 1 + rng.poisson(ROUTINE_TESTS - 1, n)
    own_start = np.cumsum(n_own) - n_own
    own = np.searchsorted(own_cum, rng.random(int(n_own.sum())) * own_cum[-1], side="right")
    own = own.clip(0, len(singles) - 1)
    per_day = n_own[day_patient]
    slot_day = np.repeat(np.arange(n_pd), per_day)
    slot = np.arange(len(slot_day)) - np.repeat(np.cumsum(per_day) - per_day, per_day)
    use = rng.random(len(slot_day)) < ROUTINE_RATE
    rows_day.append(slot_day[use])
    rows_lab.append(singles[own[own_start[day_patient[slot_day[use]]] + slot[use]]])
    # single tests drawn afresh (the common Zipf ranking)
    cum = np.cumsum(rank**-SINGLES_ZIPF)
    k = rng.poisson(FRESH_PER_DAY * n_days[day_patient].astype(float) ** FRESH_DAYS_POWER)
    fresh = np.searchsorted(cum, rng.random(int(k.sum())) * cum[-1], side="right").clip(0, len(singles) - 1)
    rows_day.append(np.repeat(np.arange(n_pd), k))
    rows_lab.append(singles[fresh])
    # a day with no order gets the most common single test
    all_days = np.concatenate(rows_day)
    empty = np.flatnonzero(np.bincount(all_days, minlength=n_pd) == 0)
    rows_day.append(empty)
    rows_lab.append(np.full(len(empty), singles[0]))
    key = sorted_unique(np.concatenate(rows_day) * len(vocab) + np.concatenate(rows_lab))
    pd_idx, lab = key // len(vocab), key % len(vocab)
    return pd.DataFrame(
        {
            "patient_id": pd.array(ids[day_patient[pd_idx]], dtype="str"),
            "day": day[pd_idx].astype(np.int64),
            "lab": pd.array(vocab[lab], dtype="str"),
        }
    )
