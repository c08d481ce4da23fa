"""Heatherly's bins on an OMOP CDM's own hierarchy (issue 37): the utility constraint `cdm` (`cdm:DEPTH`)
groups the codes by their concept at that depth of the CDM's chosen-parent tree
(`ConceptParents.hierarchy`, `Hierarchy.groups_at`; depth 2 by default, as UGACLIP's CDM policy), so
every item Heatherly's frequency bins generalize holds codes under one such concept; refused by name
without the CDM's vocabulary tables. Before, the constraints were PheWAS codes or ICD-9-CM levels only:
on SNOMED concepts `phecode` and `icd9:LEVEL` know no code, so no code could be generalized at all."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from engine.anonymize.population import parse_constraints, utility_groups
from engine.io.concepts import ConceptParents
from tests.test_omop_snomed import small_events, write_folder


@pytest.fixture(scope="module")
def cdm(tmp_path_factory):
    from engine.synth.omop_vocabulary import snomed_cdm

    return write_folder(snomed_cdm(small_events(), seed=1), tmp_path_factory.mktemp("hcdm") / "cdm")


@pytest.fixture(scope="module")
def dataset(cdm):
    from engine.io.omop import read_omop

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    assert ds.concepts is not None
    return ds


def _under_one_concept(item_codes, tree, depth: int) -> list[str]:
    """The generalized items (two or more codes) whose codes do NOT all lie under one concept at
    `depth` of the CDM's tree (or, for codes shallower than that, under one parent)."""
    bad = []
    for item, codes in item_codes.items():
        if len(codes) < 2:
            continue
        codes = sorted(codes)
        top = codes[0]
        for c in codes[1:]:
            top = tree.lca(top, c)
        floor = min(depth, *(tree.depth(c) - 1 for c in codes))
        if top == tree.root or tree.depth(top) < floor:
            bad.append(item)
    return bad


def test_utility_groups_follow_the_cdm_tree():
    """`cdm:2`: codes under one concept two levels down share a group (a poly-parent concept under the
    parent with more codes below it); a code the CDM does not name, or one directly under the root, is a
    group of its own; without concepts the choice is refused."""
    concepts = ConceptParents(
        {"S:3": ["S:2"], "S:4": ["S:2", "S:5"], "S:6": ["S:5"], "S:2": ["S:1"], "S:5": ["S:1", "S:7"]},
        {f"S:{i}": i for i in range(1, 8)},
        {},
    )
    codes = ["S:3", "S:4", "S:6", "S:1", "LOCAL:9", "LOCAL:8"]
    tree = concepts.hierarchy(codes)
    g = dict(zip(codes, utility_groups(codes, "cdm:2", concepts).tolist(), strict=True))
    assert tree.parent("S:4") == "S:2"  # two data codes below S:2, one below S:5
    top = {c: next(a for a in [c, *tree.ancestors(c)] if tree.depth(a) == 2) for c in ("S:3", "S:4", "S:6")}
    for a in top:
        for b in top:
            assert (g[a] == g[b]) == (top[a] == top[b])
    assert g["S:3"] == g["S:4"]
    assert len({g["S:1"], g["LOCAL:9"], g["LOCAL:8"], g["S:3"], g["S:6"]}) == 5
    with pytest.raises(ValueError, match="concept_ancestor"):
        utility_groups(codes, "cdm")
    for bad in ("cdm:0", "cdm:", "cdm:x", "cdm:\u0663", "cdm:-1"):
        with pytest.raises(ValueError, match="unknown utility constraints"):
            parse_constraints(bad)
    assert parse_constraints("cdm:4") == "cdm:4"


@pytest.mark.parametrize("constraint,depth", [("cdm", 2), ("cdm:3", 3)])
def test_heatherly_on_a_snomed_cdm_generalizes_along_its_parents(dataset, constraint, depth):
    """`HeatherlySettings(constraints="cdm")` on the SNOMED CDM: items generalized, each inside one
    concept at the depth of the CDM's tree; the release verified by engine.risk; recorded in the
    settings' description."""
    from engine import risk
    from engine.study.runs import HeatherlySettings, RunInputs

    events = dataset.events
    settings = HeatherlySettings(k=3, constraints=constraint, complete=True)
    settings.validate()
    result = settings.run_result(RunInputs(events, events, concepts=dataset.concepts))
    release = result.release
    assert result.verification.ok
    assert risk.verify(release, settings.adversary, 3).ok
    merged = {i: c for i, c in release.item_codes.items() if len(c) >= 2}
    assert merged, "no code generalized"
    tree = dataset.concepts.hierarchy([str(x) for x in events.items])
    assert _under_one_concept(merged, tree, depth) == []
    assert settings.describe()["utility constraints"] == constraint
    assert release.params["constraints"] == constraint


def test_cdm_constraints_refused_without_a_cdm(dataset):
    from engine.study.runs import HeatherlySettings, RunInputs, SettingsError

    events = dataset.events
    with pytest.raises(SettingsError, match="concept_ancestor"):
        HeatherlySettings(k=3, constraints="cdm").run_result(RunInputs(events, events))


def test_cli_generalize_with_cdm_constraints(cdm, dataset, tmp_path):
    """`anonymize generalize --constraints cdm` on the CDM: a verified release whose generalized items
    stay inside one concept two levels below the root; on a long-form file: exit 2, named."""
    from engine.commands.cli import main

    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": dataset.events.patient_ids}).to_csv(cohort, index=False)
    out, codemap, report = tmp_path / "out.csv", tmp_path / "map.csv", tmp_path / "report.json"
    code = main(["anonymize", "generalize", "--events", str(cdm), "--source", "omop", "--omop-codes",
                 "standard", "--cohort", str(cohort), "--k", "3", "--constraints", "cdm", "--complete",
                 "--out", str(out), "--codemap", str(codemap), "--report", str(report)])  # fmt: skip
    assert code == 0
    got = json.loads(report.read_text())
    assert got["verification"]["ok"] and got["parameters"]["constraints"] == "cdm"
    cm = pd.read_csv(codemap, dtype=str)
    sizes = cm.groupby("released_item")["original_code"].agg(set)
    merged = {i: frozenset(c) for i, c in sizes.items() if len(c) >= 2}
    assert merged
    tree = dataset.concepts.hierarchy([str(x) for x in dataset.events.items])
    assert _under_one_concept(merged, tree, 2) == []

    events = tmp_path / "events.csv"
    small_events(40).to_csv(events, index=False)
    cohort2 = tmp_path / "cohort2.csv"
    small_events(40)[["patient_id"]].drop_duplicates().to_csv(cohort2, index=False)
    code = main(["anonymize", "generalize", "--events", str(events), "--cohort", str(cohort2), "--k", "3",
                 "--constraints", "cdm", "--out", str(tmp_path / "o2.csv")])  # fmt: skip
    assert code == 2


def test_memo_keys_carry_the_hierarchy(dataset):
    """Two CDM hierarchies over the same codes: `anonymize` memoizes the utility groups and the bins by
    content (`_memoized`), so the hierarchy's fingerprint is in the key: with a flat one (no parents)
    nothing is generalized, after a run along the real one."""
    from engine.anonymize.population import anonymize

    events, c = dataset.events, dataset.concepts
    flat = ConceptParents({k: [] for k in c.parents}, c.concept_id, c.names)
    codes = [str(x) for x in events.items]
    assert len(np.unique(utility_groups(codes, "cdm", flat))) == len(codes)
    ids = events.patient_ids
    real = anonymize(events, ids, 3, constraints="cdm", concepts=c).release
    assert any(len(v) >= 2 for v in real.item_codes.values())
    after = anonymize(events, ids, 3, constraints="cdm", concepts=flat).release
    assert not any(len(v) >= 2 for v in after.item_codes.values())


def test_study_records_and_reruns_cdm_constraints(cdm, dataset, tmp_path, capsys):
    """`study add ... generalize --constraints cdm` records the choice in the study's settings and
    `study run` rebuilds the release along the CDM's hierarchy (the concepts read with the events)."""
    from engine.commands.cli import main
    from engine.study.study import Study

    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": dataset.events.patient_ids}).to_csv(cohort, index=False)
    study = tmp_path / "study.json"
    data = ["--events", str(cdm), "--source", "omop", "--omop-codes", "standard", "--cohort", str(cohort)]
    assert main(["study", "new", str(study), *data, "--scope", "cohort", "--knowledge", "single_visit",
                 "--k", "3"]) == 0, capsys.readouterr().err  # fmt: skip
    assert main(["study", "add", str(study), "--name", "h", "generalize", *data, "--constraints", "cdm",
                 "--complete"]) == 0, capsys.readouterr().err  # fmt: skip
    assert Study.from_json(study.read_text()).get("h").settings.constraints == "cdm"
    assert main(["study", "run", str(study), *data]) == 0, capsys.readouterr()


def test_three_scopes_with_cdm_constraints(dataset):
    """`compare_scopes(..., constraints="cdm", concepts=)` (what the app's three-scope view calls): each
    scope's release is `anonymize`'s along the CDM's tree, verified."""
    from engine.anonymize.population import anonymize, compare_scopes

    events, c = dataset.events, dataset.concepts
    cohort = events.take(np.arange(100))
    got = compare_scopes({"cohort": cohort, "population": events}, cohort.patient_ids, 3, constraints="cdm",
                         complete=True, concepts=c)  # fmt: skip
    for scope, res in got.results.items():
        assert res.verification.ok
        group = cohort if scope == "cohort" else events
        alone = anonymize(
            group, cohort.patient_ids, 3, scope=scope, constraints="cdm", complete=True, concepts=c
        )
        assert res.release.item_codes == alone.release.item_codes
        assert any(len(v) >= 2 for v in res.release.item_codes.values())


def test_heatherly_view_offers_the_cdm_hierarchy_on_a_cdm(cdm, monkeypatch):
    """AppTest: the Heatherly Anonymize view on a CDM imported in standard concepts offers "OMOP CDM's own
    hierarchy" as the utility constraints; chosen, the three scopes are anonymized along it (each
    generalized item inside one concept two levels down) and verified."""
    from engine.anonymize.population import compare_scopes, scope_summary
    from engine.io.imports import ImportSpec
    from tests.apptest_support import run_view
    from ui.import_view import APPLIED
    from ui.views.heatherly import CDM_CONSTRAINTS

    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(cdm.parent))
    spec = ImportSpec(source="omop", location=str(cdm), omop_codes="standard")
    state = {"dataset_choice": "Import a source", APPLIED: (spec, "", None), "hea_complete": True}
    at = run_view("ui.views.heatherly", "anonymize", **state, hea_constraints=CDM_CONSTRAINTS)
    ctx = at.session_state["context"]
    assert CDM_CONSTRAINTS in at.selectbox(key="hea_constraints").options
    summary = next(
        d.value for d in at.dataframe if "release" in d.value.columns and "verified" in d.value.columns
    )
    assert summary["verified"].all()
    groups = {"cohort": ctx.cohort, "population": ctx.population}
    want = compare_scopes(groups, ctx.cohort.patient_ids, int(ctx.k), constraints="cdm", complete=True,
                          concepts=ctx.dataset.concepts)  # fmt: skip
    pd.testing.assert_frame_equal(summary.reset_index(drop=True), scope_summary(want).reset_index(drop=True))
    tree = ctx.dataset.concepts.hierarchy([str(x) for x in ctx.population.items])
    for res in want.results.values():
        merged = {i: c for i, c in res.release.item_codes.items() if len(c) >= 2}
        assert merged and _under_one_concept(merged, tree, 2) == []
