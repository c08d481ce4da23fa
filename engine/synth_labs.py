"""Synthetic lab orders (Johnson et al. 2018): patient_id, day, lab.

Labs are ordered as panels (a CBC brings its ten components) plus single tests drawn from a Zipf
ranking of a vocabulary of a few hundred real test names, so a few common panels dominate and a long
tail of rare tests makes patients distinguishable; most single tests come from the patient's own
routine set (the same tests day after day), the rest afresh. A patient's conditions raise the chance of their
panels (diabetes -> HbA1c and microalbumin, atrial fibrillation -> PT/INR, ...). Days per patient
follow the patient's use of care with a heavy tail (Johnson 3.1: mean 8.81 days, sd 20.6, 81.6% at
10 days or fewer). Calibrated figures: `sample_data/CALIBRATION.md`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.synth_vocab import CONDITIONS

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
SINGLES_PER_DAY = 0.7  # Poisson mean of single tests per lab day
SINGLES_ZIPF = 1.15
ROUTINE_TESTS = 3.0  # mean size of a patient's routine set of single tests (1 + Poisson)
ROUTINE_SHARE = 0.75  # share of single tests drawn from the routine set rather than afresh
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
    # panels: base rate, or the prompted rate when a condition of the patient asks for the panel
    prompted = {name: np.zeros(n, dtype=bool) for name in PANELS}
    for c, cond in enumerate(CONDITIONS):
        for panel in cond.labs:
            prompted[panel] |= has[:, c]
    rows_day, rows_lab = [], []
    for name, tests in PANELS.items():
        rate = np.where(
            prompted[name][day_patient], max(PROMPTED_RATE, PANEL_BASE_RATE[name]), PANEL_BASE_RATE[name]
        )
        d = np.flatnonzero(rng.random(n_pd) < rate)
        idx = np.array([lab_index[t] for t in tests], dtype=np.int64)
        rows_day.append(np.repeat(d, len(idx)))
        rows_lab.append(np.tile(idx, len(d)))
    singles = np.array([lab_index[t] for t in SINGLES], dtype=np.int64)
    w = 1.0 / np.arange(1, len(singles) + 1) ** SINGLES_ZIPF
    cum = np.cumsum(w / w.sum())
    k = rng.poisson(SINGLES_PER_DAY, n_pd)
    chosen = np.searchsorted(cum, rng.random(int(k.sum())) * cum[-1], side="right").clip(0, len(singles) - 1)
    # a share of single tests comes from the patient's own routine (the same tests day after day)
    n_own = 1 + rng.poisson(ROUTINE_TESTS - 1, n)
    own_start = np.cumsum(n_own) - n_own
    own = np.searchsorted(cum, rng.random(int(n_own.sum())) * cum[-1], side="right").clip(0, len(singles) - 1)
    single_day = np.repeat(np.arange(n_pd), k)
    owner = day_patient[single_day]
    routine = rng.random(len(chosen)) < ROUTINE_SHARE
    pick = own_start[owner] + np.floor(rng.random(len(chosen)) * n_own[owner]).astype(np.int64)
    chosen = np.where(routine, own[pick], chosen)
    rows_day.append(single_day)
    rows_lab.append(singles[chosen])
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
