"""Write sample_data/reference/utility_policy_default_icd10cm.csv: the 18 diseases of Loukides et al.
2010 (PNAS) Table 1 as ICD-10-CM codes, the counterpart of utility_policy_default.csv (ICD-9-CM).

Each disease is given here as ICD-10-CM heads (categories or subcategories) minus excluded heads, with
the clinical reasoning; the file lists every code of the CMS FY2026 tabular list (simple-icd-10-cm) at
or below each head, and the provenance column names the heads and the phecodes v1.2 (ICD-10-CM map,
`phecode_map_v1_2_icd10cm.csv`) the listed codes map to. Run: python bench/make_policy_icd10cm.py
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

from engine.vocab import REFERENCE_DIR, icd10cm_item, phecode_sort_key, phecodes_of_item

OUT = REFERENCE_DIR / "utility_policy_default_icd10cm.csv"

# disease -> (heads, excluded heads, clinical reasoning)
DISEASES: list[tuple[str, tuple[str, ...], tuple[str, ...], str]] = [
    (
        "Asthma",
        ("J45",),
        (),
        "J45 asthma, every type and severity, with or without exacerbation or status asthmaticus (ICD-9 493.xx).",
    ),
    (
        "Attention deficit with hyperactivity",
        ("F90.1", "F90.2"),
        (),
        "F90.1 predominantly hyperactive and F90.2 combined type: the types WITH hyperactivity (ICD-9 314.01); F90.0 inattentive type (314.00) and F90.8/F90.9 other/unspecified type left out, as the ICD-9 list leaves out 314.1-314.9.",
    ),
    (
        "Bipolar I disorder",
        ("F31",),
        ("F31.8",),
        "F31 bipolar disorder: current episode hypomanic, manic, depressed, mixed, in remission, unspecified (ICD-9 296.0x, 296.4x-296.7); F31.8x left out: F31.81 is bipolar II and F31.89 other bipolar disorder.",
    ),
    (
        "Bladder cancer",
        ("C67", "D09.0", "Z85.51"),
        (),
        "Malignant neoplasm of bladder C67.x (ICD-9 188.x), carcinoma in situ of bladder D09.0 (233.7), personal history of malignant neoplasm of bladder Z85.51 (V10.51).",
    ),
    (
        "Breast cancer",
        ("C50", "D05", "Z85.3"),
        (),
        "Malignant neoplasm of breast C50.x, female and male (ICD-9 174.x, 175.x), carcinoma in situ D05.x (233.0), personal history Z85.3 (V10.3).",
    ),
    (
        "Coronary disease",
        ("I20", "I21", "I22", "I23", "I24", "I25", "Z95.1", "Z95.5", "Z98.61"),
        ("I25.3", "I25.4"),
        "Ischemic heart diseases I20-I25 (ICD-9 410-414): angina, acute MI, subsequent MI, complications, other acute and chronic IHD; aneurysm of heart I25.3 and coronary artery aneurysm / dissection I25.4x left out (as 414.1x); status after CABG Z95.1 and after coronary angioplasty Z95.5, Z98.61 (V45.81, V45.82).",
    ),
    ("Dental caries", ("K02",), (), "K02 dental caries, every site and depth (ICD-9 521.0x)."),
    (
        "Diabetes mellitus type 1",
        ("E10",),
        (),
        "E10 type 1 diabetes mellitus with every complication (ICD-9 250.x1, 250.x3).",
    ),
    (
        "Diabetes mellitus type 2",
        ("E11",),
        (),
        "E11 type 2 diabetes mellitus with every complication (ICD-9 250.x0, 250.x2); ICD-10-CM codes diabetes of unspecified type as E11, as ICD-9 250.x0 did.",
    ),
    (
        "Lung cancer",
        ("C33", "C34", "D02.1", "D02.2", "Z85.11"),
        (),
        "Malignant neoplasm of trachea C33 and of bronchus and lung C34.x (ICD-9 162.x), carcinoma in situ of trachea D02.1 and of bronchus and lung D02.2x (231.2), personal history of malignant neoplasm of bronchus and lung Z85.11x (V10.11).",
    ),
    ("Pancreatic cancer", ("C25",), (), "C25 malignant neoplasm of pancreas, every part (ICD-9 157.x)."),
    (
        "Platelet phenotypes",
        ("D69", "D47.3"),
        (),
        "D69 purpura and other hemorrhagic conditions: allergic purpura D69.0, qualitative platelet defects D69.1, other nonthrombocytopenic purpura D69.2, immune and other primary thrombocytopenia D69.3-D69.4x, secondary D69.5x, unspecified D69.6, other / unspecified D69.8-D69.9 (ICD-9 287.x); essential thrombocythemia D47.3 (238.71).",
    ),
    (
        "Preterm birth",
        ("O60.1", "P07.2", "P07.3"),
        (),
        "Preterm labor with preterm delivery O60.1x (ICD-9 644.2x), extreme immaturity P07.2x and other preterm newborns P07.3x (765.0x, 765.1x, whose fifth digit is birth weight); low birth weight P07.0x-P07.1x left out: it records weight, not gestation.",
    ),
    (
        "Prostate cancer",
        ("C61", "D07.5", "Z85.46"),
        (),
        "Malignant neoplasm of prostate C61 (ICD-9 185), carcinoma in situ D07.5 (233.4), personal history Z85.46 (V10.46).",
    ),
    (
        "Psoriasis",
        ("L40",),
        (),
        "L40 psoriasis: vulgaris, pustular, guttate, arthropathic (L40.5x, ICD-9 696.0), other and unspecified (696.1, 696.8).",
    ),
    (
        "Renal cancer",
        ("C64", "C65", "Z85.52"),
        (),
        "Malignant neoplasm of kidney except renal pelvis C64.x (ICD-9 189.0) and of renal pelvis C65.x (189.1), personal history of malignant neoplasm of kidney Z85.52x (V10.52).",
    ),
    (
        "Schizophrenia",
        ("F20",),
        ("F20.81",),
        "F20 schizophrenia, every form (ICD-9 295.xx); schizophreniform disorder F20.81 left out (as 295.4x); schizoaffective disorder is F25, outside F20 (as 295.7x).",
    ),
    (
        "Sickle-cell disease",
        ("D57",),
        ("D57.3",),
        "D57 sickle-cell disorders: Hb-SS with and without crisis D57.0x-D57.1, Hb-SC D57.2x, sickle-cell thalassemia D57.4x (ICD-9 282.41-282.42), other D57.8x (282.6x); sickle-cell trait D57.3 left out (carrier state, as 282.5).",
    ),
]


def codes_of(heads: tuple[str, ...], excluded: tuple[str, ...]) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import simple_icd_10_cm as cm
    out: list[str] = []
    for head in heads:
        for c in [head, *cm.get_descendants(head)]:
            if not any(c == x or c.startswith(x) for x in excluded):
                out.append(c)
    return sorted(dict.fromkeys(out))


def main() -> None:
    rows = []
    seen: dict[str, str] = {}
    for disease, heads, excluded, reasoning in DISEASES:
        codes = codes_of(heads, excluded)
        for c in codes:
            if c in seen:
                raise SystemExit(f"{c} is in {seen[c]} and {disease}: diseases must be disjoint")
            seen[c] = disease
        phecodes = sorted({p for c in codes for p in phecodes_of_item(icd10cm_item(c))}, key=phecode_sort_key)
        provenance = (
            "ICD-10-CM FY2026 (simple-icd-10-cm): "
            + ", ".join(heads)
            + (" minus " + ", ".join(excluded) if excluded else "")
            + " and every code below them; phecode map v1.2 ICD-10-CM: "
            + (", ".join(phecodes) or "none")
        )
        rows.append((disease, " ".join(codes), reasoning, provenance))
    with Path(OUT).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["disease", "icd10cm_codes", "comment", "provenance"])
        w.writerows(rows)
    print(f"wrote {OUT} ({len(rows)} diseases, {len(seen)} codes)")


if __name__ == "__main__":
    main()
