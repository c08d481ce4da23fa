"""ICD-10-CM: the hierarchy from simple-icd-10-cm, item labels that name their vocabulary, the
phecode map for ICD-10-CM and PheWAS on ICD-10-CM and mixed data."""

from __future__ import annotations

import pytest

from engine.hierarchy import ICD10_LEVELS, Hierarchy
from engine.vocab import (
    ICD9CM,
    ICD10CM,
    code_of_item,
    icd10cm_item,
    item_label,
    vocabulary_of_item,
)


@pytest.fixture(scope="module")
def icd10() -> Hierarchy:
    return Hierarchy.icd10cm()


def test_icd10cm_levels_and_labels(icd10: Hierarchy) -> None:
    h = icd10
    assert h.ancestors("E11.9") == ["E11", "E08-E13", "E00-E89", "Any"]
    assert [h.level(x) for x in ("E11.65", "E11.6", "E11", "E08-E13", "E00-E89", "Any")] == [
        "5-character",
        "4-character",
        "category",
        "block",
        "chapter",
        "Any",
    ]
    assert h.ancestors("S72.001A") == ["S72.001", "S72.00", "S72.0", "S72", "S70-S79", "S00-T88", "Any"]
    assert h.level("S72.001A") == "7-character" and h.level("S72.001") == "6-character"
    assert h.ancestors("I48.91") == ["I48.9", "I48", "I30-I5A", "I00-I99", "Any"]
    assert h.level_order == ICD10_LEVELS
    # the 22 chapters, labelled by their range, in the order of the tabular list
    chapters = h.children("Any")
    assert len(chapters) == 22 and chapters[:4] == ["A00-B99", "C00-D49", "D50-D89", "E00-E89"]


def test_icd10cm_one_category_block_is_a_range(icd10: Hierarchy) -> None:
    # E36 is both a block and its only category in the CMS tabular list
    assert icd10.ancestors("E36.01") == ["E36.0", "E36", "E36-E36", "E00-E89", "Any"]
    assert icd10.level("E36-E36") == "block" and icd10.level("E36") == "category"


def test_icd10cm_leaves_are_the_billable_codes(icd10: Hierarchy) -> None:
    assert icd10.is_leaf("E11.9") and icd10.is_leaf("I48.91") and icd10.is_leaf("S72.001A")
    assert not icd10.is_leaf("E11") and not icd10.is_leaf("I48.9")
    assert icd10.leaves("I48.9") == ["I48.91", "I48.92"]
    assert icd10.n_leaves("I48") == 9
    # simple-icd-10-cm 1.5.0 ships the FY2026 (April 2026) CMS release
    assert icd10.domain_size == 74731


def test_icd10cm_lca_and_loss(icd10: Hierarchy) -> None:
    h = icd10
    assert h.lca("I48.91", "I48.0") == "I48"
    assert h.lca("E11.9", "E10.9") == "E08-E13"
    assert h.lca("E11.9", "I48.91") == "Any"
    assert h.loss("I48.91", "I48") == pytest.approx(9 / h.domain_size)
    assert h.suppression_loss("E11.9") == pytest.approx(1.0)
    assert h.combined_loss("I48.91", "I48.92") == pytest.approx(2 * 2 / h.domain_size)
    assert h.roll_up(["E11.65", "S72.001A", "I48.91", "not-a-code"], "category") == [
        "E11",
        "S72",
        "I48",
        "not-a-code",
    ]


def test_icd10cm_selected_levels() -> None:
    h = Hierarchy.icd10cm(("category", "chapter", "Any"))
    assert h.ancestors("E11.65") == ["E11", "E00-E89", "Any"]
    assert h.level("E11.65") == "5-character"  # a leaf keeps its own level name
    assert "E11.6" not in h and "E08-E13" not in h
    with pytest.raises(ValueError, match="ICD-10-CM levels"):
        Hierarchy.icd10cm(("category", "section", "Any"))


def test_v_codes_of_the_two_vocabularies_are_distinct_labels(icd10: Hierarchy) -> None:
    # ICD-10-CM V45.5 (car driver, collision with railway train) and ICD-9-CM V45.5 (contraceptive
    # device) are different codes; the ICD-10-CM one is written with its prefix
    assert icd10.ancestors("V45.5XXA") == [
        "ICD10CM:V45.5",
        "ICD10CM:V45",
        "ICD10CM:V40-V49",
        "V00-Y99",
        "Any",
    ]
    mixed = Hierarchy.icd9_icd10cm()
    assert mixed.children("Any") == ["ICD-9-CM", "ICD-10-CM"]
    assert mixed.ancestors("V45.81") == ["V45.8", "V45", "V40-V49", "V01-V91", "ICD-9-CM", "Any"]
    assert mixed.ancestors("V45.5XXA")[-2:] == ["ICD-10-CM", "Any"]
    assert mixed.lca("250.00", "E11.9") == "Any"
    assert mixed.lca("250.00", "272.4") == "240-279"
    assert mixed.level("ICD-10-CM") == "vocabulary"
    assert mixed.domain_size == Hierarchy.icd9().domain_size + icd10.domain_size


def test_the_hierarchy_follows_the_vocabularies_of_the_data() -> None:
    from engine.hierarchy import icd_hierarchy_for

    assert icd_hierarchy_for(["250.00", "V45.81"]).name == "ICD-9-CM"
    assert icd_hierarchy_for(["E11.9", "ICD10CM:V45.5"]).name == "ICD-10-CM"
    assert icd_hierarchy_for(["250.00", "E11.9"]).name == "ICD-9-CM + ICD-10-CM"
    assert icd_hierarchy_for([]).name == "ICD-9-CM"


def test_item_labels_name_their_vocabulary() -> None:
    assert item_label(ICD9CM, "V45.81") == "V45.81"
    assert item_label(ICD10CM, "E11.9") == "E11.9"
    assert item_label(ICD10CM, "V45.5") == "ICD10CM:V45.5"
    assert item_label(ICD10CM, "V45.5XXA") == "V45.5XXA"
    assert icd10cm_item("V10-V19") == "ICD10CM:V10-V19"
    cases = {
        "250.00": ICD9CM,
        "V45.81": ICD9CM,
        "E849.0": ICD9CM,
        "240-279": ICD9CM,
        "E11.9": ICD10CM,
        "I48.91": ICD10CM,
        "C7A.010": ICD10CM,
        "QA0.0101": ICD10CM,
        "ICD10CM:V45": ICD10CM,
        "E08-E13": ICD10CM,
        "{401.0,401.1}": None,
        "phe:250.2": None,
    }
    assert {c: vocabulary_of_item(c) for c in cases} == cases
    assert code_of_item("ICD10CM:V45.5") == "V45.5" and code_of_item("E11.9") == "E11.9"


# ------------------------------------------------------------------------------ phecode map
def test_vendored_icd10cm_map_gives_the_known_phecodes() -> None:
    from engine.vocab import phecode_map_icd10cm, phecodes_of_item, phenotype_names

    assert phecodes_of_item("E11.9") == ("250.2",)
    assert phecodes_of_item("I48.91") == ("427.21",)
    names = phenotype_names()
    assert names["250.2"] == "Type 2 diabetes" and names["427.21"] == "Atrial fibrillation"
    assert set(phecodes_of_item("A07.8")) == {"008", "008.7", "136"}  # one code, three phecodes
    assert phecodes_of_item("V45.81") == ("411.4",)  # the ICD-9-CM V45.81 ...
    assert phecodes_of_item("V45.5XXA") == ()  # ... is not the ICD-10-CM V45.5XXA
    m = phecode_map_icd10cm()
    assert len(m) == 83331 and m["icd10cm"].nunique() == 57010  # 57,145 spellings upstream
    # upstream writes some placeholders in lower case; data (and CMS) write them in upper case
    assert phecodes_of_item("H21.1X1") == ("379.5",)


def test_phecode_table_counts_icd10cm_codes_toward_rolled_up_phecodes() -> None:
    from engine.utility.phewas import phecode_table

    table = phecode_table()
    idx = table.index()
    assert table.code_phecodes["E11.9"] == frozenset({idx["250.2"], idx["250"]})
    assert table.code_phecodes["I48.91"] == frozenset({idx["427.21"], idx["427.2"], idx["427"]})
    assert table.code_leaves["I48.91"] == frozenset({idx["427.21"]})
    # an ICD-10-CM code absent from the map leaves the controls of its own category's phecodes
    assert idx["250.2"] in table.leaves_of("E11.99")
    # and never those of the ICD-9-CM category of the same spelling (V45 is not ICD-10-CM's V45)
    assert table.leaves_of("V45.9XXA") == frozenset()
    assert table.leaves_of("V45.99") == table.category_leaves["V45"] != frozenset()


def _mixed_cohort(n: int = 240):
    """Half the patients coded in ICD-9-CM, half in ICD-10-CM; diabetes (250.00 / E11.9) in every
    third patient, atrial fibrillation (427.31 / I48.91) in every fifth; genotype 2 for diabetics."""
    import pandas as pd

    from engine.records import Records

    rows, geno = [], []
    for i in range(n):
        pid = f"P{i:03d}"
        icd10 = i % 2 == 1
        diabetic, af = i % 3 == 0, i % 5 == 0
        rows.append((pid, 1, "I10" if icd10 else "401.1"))
        if diabetic:
            rows.append((pid, 2, "E11.9" if icd10 else "250.00"))
        if af:
            rows.append((pid, 3, "I48.91" if icd10 else "427.31"))
        geno.append((pid, 2.0 if diabetic else float(i % 2)))
    events = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    return Records.from_frame(events), pd.DataFrame(geno, columns=["patient_id", "rsX"])


def test_phewas_counts_both_vocabularies_toward_one_phecode() -> None:
    import numpy as np

    from engine.utility.phewas import PhewasSettings, phenotype_matrix, run_phewas

    records, geno = _mixed_cohort()
    pm = phenotype_matrix(records)
    col = {p: j for j, p in enumerate(pm.phecodes)}
    cases = pm.cases(1).toarray().astype(bool)
    diabetic = np.array([int(p[1:]) % 3 == 0 for p in pm.patient_ids])
    af = np.array([int(p[1:]) % 5 == 0 for p in pm.patient_ids])
    icd10 = np.array([int(p[1:]) % 2 == 1 for p in pm.patient_ids])
    assert (cases[:, col["250.2"]] == diabetic).all()
    assert (cases[diabetic & icd10, col["250.2"]]).all() and (cases[diabetic & ~icd10, col["250.2"]]).all()
    assert (cases[:, col["427.2"]] == af).all()
    assert cases[af & icd10, col["427.21"]].all()  # I48.91 -> 427.21 (427.31 maps there too)
    res = run_phewas(pm, geno, PhewasSettings(min_cases=20))
    t2d = res[(res["phecode"] == "250.2")].iloc[0]
    assert t2d["n_cases"] == diabetic.sum() and t2d["p"] < 1e-10
