"""`--explain` on an OMOP CDM coded in standard concepts (issue 37): the generalizations it proposes climb
the CDM's own hierarchy (`engine.io.concepts.ConceptParents`, one parent kept per concept by
`Hierarchy.from_poly_parents`), as the methods recode.

Found: `explain.categories_of` maps ICD codes only (ICD-9-CM 3-digit / ICD-10-CM category), so on SNOMED,
CPT4 or RxNorm labels every fix offered was a suppression. The property of tests/test_explain.py (the
change, applied to the release in every record, brings the record to k by `engine.risk`) must hold along
a poly-hierarchy too: random CDM-like data below.
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.adversary import ALL_ADVERSARIES, Adversary
from engine.estimate import explain
from engine.io.concepts import ConceptParents
from engine.records import Records
from tests.test_explain import check
from tests.test_omop_snomed import small_events, write_folder

SETTINGS = settings(max_examples=40, deadline=None)


@pytest.fixture(scope="module")
def cdm(tmp_path_factory):
    from engine.synth.omop_vocabulary import snomed_cdm

    return write_folder(snomed_cdm(small_events(), seed=1), tmp_path_factory.mktemp("xcdm") / "cdm")


@pytest.fixture(scope="module")
def dataset(cdm):
    from engine.io.omop import read_omop

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    assert ds.concepts is not None  # a CDM with its vocabulary tables
    return ds


def _generalizations(found: list[explain.Explanation]) -> list[explain.Change]:
    return [c for e in found for c in e.changes if c.action == explain.GENERALIZE]


@pytest.mark.parametrize("adversary", ALL_ADVERSARIES, ids=lambda a: a.label)
def test_explain_on_a_snomed_cdm_generalizes_along_its_own_hierarchy(dataset, adversary):
    """On the SNOMED CDM with its concept tables, fixes generalize a concept to its parent one level up
    in the CDM's chosen-parent tree (what a method recodes to), every one verified by engine.risk; before,
    no GENERALIZE change was ever proposed (the categories were ICD-only)."""
    cohort = dataset.events
    found = explain.explain_records(cohort, adversary, 5, cohort, concepts=dataset.concepts)
    assert found and all(e.verified for e in found if e.fixable)
    moves = _generalizations(found)
    assert moves, "no generalization proposed on the CDM"
    tree = dataset.concepts.hierarchy([str(x) for x in cohort.items])
    for ch in moves:
        assert ch.to in tree and ch.to != tree.root
        assert all(tree.parent(c) == ch.to for c in ch.codes)
        assert set(ch.held) <= set(ch.codes)
    described = {c: text for e in found for c, text in e.descriptions.items()}
    assert described and all(text == dataset.concepts.names.get(c, "") for c, text in described.items())


def test_without_concepts_the_cdm_gets_suppressions_only(dataset):
    """The same data without the CDM's tables (a long-form file of its labels): no category is known,
    so suppression is all that is offered, as before (ICD behaviour unchanged)."""
    cohort = dataset.events
    found = explain.explain_records(cohort, Adversary("cohort", "all_visits"), 5, cohort)
    assert found and not _generalizations(found)


def test_categories_of_icd_unchanged_by_the_option():
    codes = ["250.00", "250.01", "401.1", "E11.9", "042"]
    assert explain.categories_of(codes) == {"250.00": "250", "250.01": "250", "401.1": "401", "E11.9": "E11"}


# ------------------------------------------------------------------ the property on a poly-hierarchy
TOPS = ["SNOMED:100", "SNOMED:101"]
MIDS = ["SNOMED:200", "SNOMED:201", "SNOMED:202"]
LEAVES = ["SNOMED:300", "SNOMED:301", "SNOMED:302", "SNOMED:303", "SNOMED:304"]
# data codes: the leaves, one inner concept (a code may be both a data code and a category) and a local
# code the CDM does not know (no category)
CODES = [*LEAVES, "SNOMED:201", "LOCAL:9"]


@st.composite
def cdm_data(draw) -> tuple[pd.DataFrame, pd.DataFrame, ConceptParents]:
    """(cohort events, population events, the CDM's hierarchy): each inner or leaf concept has one to
    three parents of the level above (a poly-hierarchy), concept ids in a random order (the tie rule)."""
    parents: dict[str, list[str]] = {}
    for level, above in ((MIDS, TOPS), (LEAVES, MIDS)):
        for c in level:
            parents[c] = draw(st.lists(st.sampled_from(above), min_size=1, max_size=len(above), unique=True))
    ids = draw(st.permutations(range(len(TOPS + MIDS + LEAVES))))
    concept_id = {c: 1000 + i for c, i in zip(TOPS + MIDS + LEAVES, ids, strict=True)}
    names = {c: f"concept {c[7:]}" for c in concept_id}
    n_cohort = draw(st.integers(2, 8))
    n_extra = draw(st.integers(0, 5))
    rows = []
    for p in range(n_cohort + n_extra):
        for v in range(draw(st.integers(1, 3))):
            for c in draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=3, unique=True)):
                rows.append((f"P{p}", f"v{v}", c))
    frame = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    cohort = frame[frame["patient_id"].isin([f"P{p}" for p in range(n_cohort)])]
    return cohort.reset_index(drop=True), frame, ConceptParents(parents, concept_id, names)


@given(d=cdm_data(), adv=st.sampled_from(ALL_ADVERSARIES), k=st.integers(2, 4))
@SETTINGS
def test_suggested_change_along_a_poly_hierarchy_brings_the_record_to_k(d, adv: Adversary, k: int) -> None:
    """tests/test_explain.py's property on CDM-like data: every proposed change, applied to the whole
    release (categories of the CDM's chosen-parent tree recoded in every record), brings its record
    to k by engine.risk, with the figure and cost stated; each category is the code's parent there."""
    cohort_frame, pop_frame, concepts = d
    check(cohort_frame, pop_frame, adv, k, concepts=concepts)
    cohort, population = Records.from_frame(cohort_frame), Records.from_frame(pop_frame)
    items = sorted(set(cohort.items.astype(str)) | set(population.items.astype(str)))
    tree = concepts.hierarchy(items)
    for e in explain.explain_records(cohort, adv, k, population, concepts=concepts):
        for ch in _generalizations([e]):
            assert all(tree.parent(c) == ch.to for c in ch.codes)


@given(d=cdm_data(), adv=st.sampled_from(ALL_ADVERSARIES))
@SETTINGS
def test_one_preparation_with_concepts_serves_every_k(d, adv) -> None:
    """`prepare(..., concepts=)` once, then every k and record: the same as built from nothing."""
    cohort_frame, pop_frame, concepts = d
    cohort, population = Records.from_frame(cohort_frame), Records.from_frame(pop_frame)
    ready = explain.prepare(cohort, adv, population, concepts=concepts)
    for k in (4, 2, 3):
        fresh = explain.explain_records(cohort, adv, k, population, concepts=concepts)
        assert explain.explain_records(cohort, adv, k, population, prepared=ready) == fresh


def test_cli_risk_explain_on_a_cdm_generalizes_along_its_hierarchy(cdm, dataset, tmp_path):
    """`risk --explain` on an OMOP source read in standard concepts: the explanations' changes include
    generalizations to the CDM's concepts, named by their concept_name (before: suppressions only)."""
    from engine.commands.cli import main

    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": dataset.events.patient_ids}).to_csv(cohort, index=False)
    out = tmp_path / "explain.csv"
    code = main(["risk", "--events", str(cdm), "--source", "omop", "--omop-codes", "standard",
                 "--cohort", str(cohort), "--scope", "cohort", "--knowledge", "all_visits", "--k", "5",
                 "--out", str(tmp_path / "r.csv"), "--explain", str(out)])  # fmt: skip
    assert code == 0
    got = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert len(got) and got["change"].str.contains("generalize SNOMED:").any()
    names = dataset.concepts.names
    assert any(f"{c} {names[c]}" in got["singles out"].str.cat(sep="; ") for c in names)


def test_risk_page_explains_a_cdm_record_along_its_hierarchy(cdm, monkeypatch):
    """AppTest: the Risk page on a CDM imported in standard concepts proposes, for a record below k,
    the change `explain` finds with the CDM's hierarchy (a generalization to a parent concept), named
    by the concepts' names; before, the page explained without the concepts (suppressions only)."""
    import numpy as np

    from engine import risk
    from engine.io.imports import ImportSpec
    from tests.apptest_support import page_app, shown
    from ui.import_view import APPLIED

    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(cdm.parent))
    spec = ImportSpec(source="omop", location=str(cdm), omop_codes="standard")
    at = page_app(
        "pages/risk.py", state={"dataset_choice": "Import a source", APPLIED: (spec, "", None)}, timeout=240
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    ctx = at.session_state["context"]
    concepts = ctx.dataset.concepts
    assert concepts is not None
    dis = risk.original_distinguishability(ctx.cohort, ctx.adversary, ctx.population)
    below = np.flatnonzero(dis < ctx.k).tolist()
    found = explain.explain_records(
        ctx.cohort, ctx.adversary, ctx.k, ctx.population, rows=below, concepts=concepts
    )
    e = next(e for e in found if _generalizations([e]))
    at.selectbox(key="risk_explain_record").set_value(e.row).run()
    assert not at.exception, [x.value for x in at.exception]
    assert any(f"Cheapest change: {e.change_text()}" in shown(md.value) for md in at.markdown)
