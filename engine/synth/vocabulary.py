"""Constants of the synthetic generator (`engine.synth.generator`): codes, chronic conditions, SNPs, lab panels.

Every ICD-9-CM code here is a real code present in the phecode map v1.2 (`engine.vocab`); the
test suite checks it. Prevalences are log-odds at age 50 in a hospital population, age slopes are
per decade, loadings act on shared latent factors (comorbidity clusters), and SNP effects are
per-allele odds ratios (Heatherly 2013 Table 4's six SNPs with their PheWAS phenotypes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from engine.vocab import phecode_map

# latent comorbidity factors, one standard-normal draw per patient each
FACTORS = ("metabolic", "cardiac", "mental", "respiratory", "musculoskeletal", "autoimmune")


@dataclass(frozen=True)
class SNP:
    """A SNP of Heatherly's Table 4: minor-allele frequency (European ancestry, approximate)."""

    rsid: str
    maf: float
    locus: str


SNPS: tuple[SNP, ...] = (
    SNP("rs1333049", 0.47, "9p21"),
    SNP("rs2200733", 0.12, "4q25"),
    SNP("rs2476601", 0.09, "PTPN22"),
    SNP("rs3135388", 0.15, "HLA-DRB1*1501 tag"),
    SNP("rs6457620", 0.42, "HLA-DR region"),
    SNP("rs17234657", 0.14, "5p13.1"),
)
SNP_IDS: tuple[str, ...] = tuple(s.rsid for s in SNPS)


@dataclass(frozen=True)
class Condition:
    """A chronic condition: once present it is coded at its onset visit and recurs at later visits.

    `prevalence` is the probability at age 50 for an average patient (factors 0, typical use);
    `age_slope` the change of log-odds per decade of age; `loadings` factor -> weight;
    `recurrence` the chance the code is billed again at each later visit; `snp_or` rsid ->
    per-minor-allele odds ratio (planted association); `labs` lab panels the condition prompts.
    """

    name: str
    codes: dict[str, float]
    prevalence: float
    age_slope: float = 0.0
    loadings: dict[str, float] = field(default_factory=dict)
    recurrence: float = 0.4
    snp_or: dict[str, float] = field(default_factory=dict)
    labs: tuple[str, ...] = ()


CONDITIONS: tuple[Condition, ...] = (
    Condition(
        "hypertension",
        {"401.9": 0.6, "401.1": 0.4},
        0.30,
        0.45,
        {"metabolic": 1.0, "cardiac": 0.3},
        0.55,
        labs=("BMP",),
    ),
    Condition(
        "hyperlipidemia",
        {"272.4": 0.6, "272.0": 0.3, "272.2": 0.1},
        0.25,
        0.35,
        {"metabolic": 0.9},
        0.45,
        labs=("Lipid",),
    ),
    Condition(
        "type 2 diabetes",
        {"250.00": 0.75, "250.02": 0.1, "250.40": 0.05, "250.60": 0.05, "250.01": 0.05},
        0.11,
        0.35,
        {"metabolic": 1.2},
        0.6,
        labs=("Diabetes", "BMP", "Urine microalbumin"),
    ),
    Condition("obesity", {"278.00": 0.6, "278.01": 0.4}, 0.08, 0.0, {"metabolic": 1.0}, 0.3),
    Condition(
        "coronary disease",
        {"414.01": 0.75, "414.00": 0.05, "411.1": 0.1, "413.9": 0.1},
        0.05,
        0.6,
        {"metabolic": 0.6, "cardiac": 1.0},
        0.5,
        {"rs1333049": 1.7},
        ("Cardiac", "Lipid"),
    ),
    Condition(
        "atrial fibrillation",
        {"427.31": 1.0},
        0.025,
        0.8,
        {"cardiac": 1.0},
        0.5,
        {"rs2200733": 2.0},
        ("Coagulation", "Thyroid"),
    ),
    Condition(
        "heart failure",
        {"428.0": 0.8, "428.30": 0.1, "428.32": 0.1},
        0.02,
        0.8,
        {"cardiac": 1.0, "metabolic": 0.5},
        0.55,
        labs=("BNP", "BMP"),
    ),
    Condition(
        "chronic kidney disease",
        {"585.9": 0.6, "585.3": 0.4},
        0.03,
        0.6,
        {"metabolic": 0.8},
        0.5,
        labs=("BMP", "Renal", "Anemia"),
    ),
    Condition("hypothyroidism", {"244.9": 1.0}, 0.06, 0.3, recurrence=0.4, labs=("Thyroid",)),
    Condition("reflux", {"530.81": 1.0}, 0.10, 0.2, recurrence=0.35),
    Condition("depression", {"311": 0.6, "296.30": 0.2, "296.20": 0.2}, 0.09, 0.0, {"mental": 1.2}, 0.4),
    Condition("anxiety", {"300.00": 0.7, "300.02": 0.3}, 0.08, -0.1, {"mental": 1.2}, 0.35),
    Condition(
        "asthma", {"493.90": 0.7, "493.20": 0.1, "493.92": 0.2}, 0.07, -0.1, {"respiratory": 1.0}, 0.35
    ),
    Condition(
        "COPD",
        {"496": 0.6, "491.21": 0.2, "492.8": 0.2},
        0.04,
        0.7,
        {"respiratory": 1.0},
        0.45,
        labs=("Blood gas",),
    ),
    Condition(
        "osteoarthritis",
        {"715.90": 0.4, "715.96": 0.3, "715.16": 0.3},
        0.08,
        0.6,
        {"musculoskeletal": 1.0},
        0.3,
    ),
    Condition(
        "back pain", {"724.2": 0.5, "724.5": 0.3, "724.4": 0.2}, 0.12, 0.1, {"musculoskeletal": 1.0}, 0.3
    ),
    Condition("osteoporosis", {"733.00": 1.0}, 0.04, 0.8, {"musculoskeletal": 0.5}, 0.3, labs=("Vitamin D",)),
    Condition("prostate hyperplasia", {"600.00": 1.0}, 0.04, 0.8, recurrence=0.3, labs=("PSA",)),
    Condition(
        "rheumatoid arthritis",
        {"714.0": 1.0},
        0.012,
        0.3,
        {"autoimmune": 1.0},
        0.55,
        {"rs2476601": 2.2, "rs6457620": 2.0},
        ("Inflammation", "Rheumatology"),
    ),
    Condition(
        "multiple sclerosis",
        {"340": 1.0},
        0.008,
        0.0,
        {"autoimmune": 0.5},
        0.6,
        {"rs3135388": 3.0},
        ("Vitamin D",),
    ),
    Condition(
        "Crohn's disease",
        {"555.9": 0.6, "555.0": 0.2, "555.1": 0.1, "555.2": 0.1},
        0.011,
        -0.2,
        {"autoimmune": 0.5},
        0.55,
        {"rs17234657": 2.2},
        ("Inflammation", "Stool", "Anemia"),
    ),
    Condition("migraine", {"346.90": 0.7, "346.10": 0.3}, 0.05, -0.3, {"mental": 0.3}, 0.3),
    Condition("sleep apnea", {"327.23": 1.0}, 0.04, 0.3, {"metabolic": 0.7}, 0.35),
    Condition("anemia", {"285.9": 0.7, "280.9": 0.3}, 0.06, 0.2, recurrence=0.35, labs=("Anemia",)),
    Condition("tobacco use", {"305.1": 1.0}, 0.12, -0.1, {"mental": 0.3, "respiratory": 0.6}, 0.35),
    Condition("allergic rhinitis", {"477.9": 1.0}, 0.07, -0.2, {"respiratory": 0.5}, 0.3),
    Condition("glaucoma", {"365.9": 1.0}, 0.02, 0.8, recurrence=0.4),
    Condition("epilepsy", {"345.90": 1.0}, 0.01, 0.0, recurrence=0.5, labs=("Drug levels",)),
    Condition("psoriasis", {"696.1": 1.0}, 0.02, 0.0, {"autoimmune": 0.3}, 0.35),
    Condition(
        "peripheral vascular disease", {"443.9": 1.0}, 0.02, 0.8, {"metabolic": 0.5, "cardiac": 0.5}, 0.4
    ),
)

# Frequent codes of general practice, most frequent first: they head the Zipf ranking of the
# codes billed at visits besides the chronic conditions (the rest of the map follows in a fixed
# pseudo-random order).
COMMON_CODES: tuple[str, ...] = (
    "786.50",
    "780.79",
    "789.00",
    "465.9",
    "786.05",
    "719.46",
    "729.5",
    "599.0",
    "780.4",
    "784.0",
    "786.2",
    "462",
    "466.0",
    "473.9",
    "692.9",
    "782.3",
    "787.01",
    "788.1",
    "780.6",
    "V04.81",
    "382.9",
    "079.99",
    "564.00",
    "558.9",
    "787.91",
    "723.1",
    "719.41",
    "726.10",
    "V58.61",
    "845.00",
    "847.0",
    "959.9",
    "780.52",
    "786.09",
    "V45.81",
    "626.2",
    "616.10",
    "110.1",
    "702.0",
    "706.1",
    "216.9",
    "303.90",
    "784.7",
    "366.9",
    "V06.1",
    "V05.3",
    "174.9",
    "185",
    "153.9",
    "162.9",
    "362.01",
    "357.2",
    "440.20",
    "433.10",
    "434.91",
    "435.9",
    "424.1",
    "410.90",
)


@lru_cache(maxsize=1)
def code_vocabulary() -> np.ndarray:
    """Codes the generator may bill: the phecode map's most specific codes (no child in the map),
    ordered by a fixed Zipf rank: `COMMON_CODES` first, then the rest in a fixed shuffled order
    (seed 20130101, independent of the data seed, so every sample shares one institution's code
    frequencies)."""
    codes = phecode_map()["icd9"].to_numpy(dtype=object)
    flat = {c.replace(".", "") for c in codes}
    # a code is a leaf when no other code extends its undotted form
    prefixes: set[str] = set()
    for f in flat:
        for i in range(3, len(f)):
            prefixes.add(f[:i])
    leaves = sorted(c for c in set(codes) if c.replace(".", "") not in prefixes)
    chronic = {c for cond in CONDITIONS for c in cond.codes}
    head = [c for c in COMMON_CODES if c in set(leaves)]
    rest = [c for c in leaves if c not in set(head) and c not in chronic]
    order = np.random.default_rng(20130101).permutation(len(rest))
    return np.array(head + [rest[i] for i in order] + sorted(chronic), dtype=object)


@lru_cache(maxsize=1)
def code_age_range() -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) age at which each code of `code_vocabulary()` may be billed: perinatal
    conditions (760-779) and liveborn infants (V30-V39) at age 0-1, other pregnancy-related codes
    (the map's pregnancy flag) at 14-45, every other code at any age."""
    import pandas as pd

    from engine.vocab import PHECODE_MAP_FILE

    raw = pd.read_csv(PHECODE_MAP_FILE, dtype=str, keep_default_na=False)
    pregnancy = set(raw.loc[raw["pregnancy_related"].str.strip() == "1", "ICD9"].str.strip())
    vocab = code_vocabulary()
    lo = np.zeros(len(vocab), dtype=np.int64)
    hi = np.full(len(vocab), 200, dtype=np.int64)
    for i, c in enumerate(vocab):
        head = c.split(".")[0]
        if ("760" <= head <= "779" and head.isdigit()) or ("V30" <= head <= "V39"):
            hi[i] = 1
        elif c in pregnancy:
            lo[i], hi[i] = 14, 45
    return lo, hi
