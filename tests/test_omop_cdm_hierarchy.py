"""Issue 37, continued: the CDM's own hierarchy (`concept_ancestor`) as a choice of the LDA on the
command line, in a study file and in the app, offered only for events read from a CDM with its
vocabulary tables and refused by name otherwise."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.test_omop_snomed import small_events, write_folder


@pytest.fixture(scope="module")
def cdm(tmp_path_factory):
    from engine.synth.omop_vocabulary import snomed_cdm

    return write_folder(snomed_cdm(small_events(), seed=1), tmp_path_factory.mktemp("cdmh") / "cdm")


def test_lda_settings_with_the_cdm_hierarchy(cdm):
    """`LDASettings(icd_hierarchy="cdm")` generalizes along the concepts of `RunInputs.concepts`:
    the released inner codes are SNOMED concepts of concept_ancestor, and engine.risk verifies it."""
    from engine import risk
    from engine.io.omop import read_omop
    from engine.study.runs import CodeSelection, LDASettings, RunInputs

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    assert ds.concepts is not None  # read with the events: a CDM with its vocabulary tables
    settings = LDASettings(k=3, codes=CodeSelection("all"), icd_hierarchy="cdm", age_low=0, age_high=100)
    settings.validate()
    inputs = RunInputs(ds.events, ds.events, concepts=ds.concepts)
    release = settings.run(inputs)
    assert risk.verify(release, settings.adversary, 3).ok
    _, icd, _ = settings.inputs(ds.events, concepts=ds.concepts)
    assert icd.name == "cdm concept_ancestor"
    codes = {str(c).split("|")[0] for c in release.records.items}
    inner = {c for c in codes if c in icd and not icd.is_leaf(c) and c != icd.root}
    assert inner and all(c.startswith("SNOMED:") for c in inner)


def test_cdm_hierarchy_is_refused_without_a_cdm(cdm):
    """Events that did not come from a CDM with vocabulary tables: the choice is refused by name."""
    from engine.io.errors import UserError
    from engine.io.omop import read_omop
    from engine.study.runs import LDASettings, RunInputs

    events = read_omop(cdm, codes="standard", labs=False).dataset("cdm").events
    with pytest.raises(UserError, match=r"'cdm'.*concept_ancestor"):
        LDASettings(k=3, icd_hierarchy="cdm", age_low=0, age_high=100).run(RunInputs(events, events))


def test_cli_lda_with_the_cdm_hierarchy(cdm, tmp_path):
    """`anonymize lda --icd-levels cdm` on the SNOMED CDM writes a verified release whose codes climb
    the CDM's concept_ancestor."""
    from engine.commands.cli import main
    from engine.io.omop import read_omop

    ids = read_omop(cdm, codes="standard", labs=False).dataset("cdm").events.patient_ids
    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": ids}).to_csv(cohort, index=False)
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    code = main(["anonymize", "lda", "--events", str(cdm), "--source", "omop", "--omop-codes", "standard",
                 "--cohort", str(cohort), "--codes", "all", "--k", "3", "--icd-levels", "cdm", "--out", str(out),
                 "--report", str(report)])  # fmt: skip
    assert code == 0
    got = json.loads(report.read_text())
    assert got["verification"]["ok"]
    assert got["parameters"]["settings"]["ICD hierarchy"] == "cdm"
    released = pd.read_csv(out, dtype=str)
    assert released["code"].str.startswith("SNOMED:").any()


def test_cli_cdm_hierarchy_refused_for_a_file(tmp_path, capsys):
    """A long-form file has no concept_ancestor: exit 2, the option and what it needs named."""
    from engine.commands.cli import main

    events = tmp_path / "events.csv"
    frame = small_events(40)
    frame.to_csv(events, index=False)
    cohort = tmp_path / "cohort.csv"
    frame[["patient_id"]].drop_duplicates().to_csv(cohort, index=False)
    code = main(["anonymize", "lda", "--events", str(events), "--cohort", str(cohort), "--k", "3",
                 "--icd-levels", "cdm",
                 "--out", str(tmp_path / "out.csv")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "--icd-levels cdm" in err and "concept_ancestor" in err and "Traceback" not in err


def test_study_records_the_omop_codes_and_rebuilds_the_cdm_lda(cdm, tmp_path, capsys):
    """`study new` records --omop-codes / --domains in its load options; `study add ... lda
    --icd-levels cdm` and `study run` rebuild the release along the CDM's hierarchy."""
    from engine.commands.cli import main
    from engine.io.omop import read_omop
    from engine.study.study import Study

    ids = read_omop(cdm, codes="standard", labs=False).dataset("cdm").events.patient_ids
    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": ids}).to_csv(cohort, index=False)
    study = tmp_path / "study.json"
    data = ["--events", str(cdm), "--source", "omop", "--omop-codes", "standard", "--cohort", str(cohort)]
    assert main(["study", "new", str(study), *data, "--scope", "cohort", "--knowledge", "all_visits",
                 "--k", "3"]) == 0, capsys.readouterr().err  # fmt: skip
    assert dict(Study.from_json(study.read_text()).data.load_options)["omop_codes"] == "standard"
    assert main(["study", "add", str(study), "--name", "cdm", "lda", *data, "--codes", "all",
                 "--icd-levels", "cdm"]) == 0, capsys.readouterr().err  # fmt: skip
    assert Study.from_json(study.read_text()).get("cdm").settings.icd_hierarchy == "cdm"
    assert main(["study", "run", str(study), *data]) == 0, capsys.readouterr()


def test_cdm_without_concept_ancestor_is_refused_by_name(cdm, tmp_path, capsys):
    """A CDM read in standard concepts whose concept_ancestor is missing: `--icd-levels cdm` exits 2
    naming what it needs."""
    import shutil

    from engine.commands.cli import main
    from engine.io.omop import read_omop

    folder = tmp_path / "cdm"
    shutil.copytree(cdm, folder)
    for f in folder.glob("concept_ancestor.*"):
        f.unlink()
    ids = read_omop(folder, codes="standard", labs=False).dataset("cdm").events.patient_ids
    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": ids}).to_csv(cohort, index=False)
    code = main(["anonymize", "lda", "--events", str(folder), "--source", "omop", "--omop-codes", "standard",
                 "--cohort", str(cohort), "--k", "3", "--icd-levels", "cdm", "--out", str(tmp_path / "o.csv")])  # fmt: skip
    assert code == 2
    assert "concept_ancestor" in capsys.readouterr().err


def test_ugaclip_with_the_cdm_utility_policy(cdm):
    """UGACLIP with `utility_hierarchy="cdm"`: each utility constraint is the data codes below one
    concept two levels under the CDM hierarchy's root (named by its concept_name), so every generalized
    item stays inside one; engine.risk verifies the release. Without a CDM it is refused by name."""
    from engine import risk
    from engine.io.errors import UserError
    from engine.io.omop import read_omop
    from engine.study.runs import ProfilesSettings, RunInputs

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    settings = ProfilesSettings(k=5, knowledge="single_visit", utility_hierarchy="cdm")
    settings.validate()
    items = [str(x) for x in ds.events.items]
    policy = settings.utility_policy(items, ds.concepts)
    tree = ds.concepts.hierarchy(items)
    for name, codes in policy.diseases.items():
        top = {
            next((a for a in [c, *tree.ancestors(c)] if tree.depth(a) == 2), tree.parent(c)) for c in codes
        }
        assert len(top) == 1, name
        node = top.pop()
        assert name == f"{ds.concepts.names[node]} ({node})"
    assert set().union(*policy.diseases.values()) == set(items)
    run = settings.run_result(RunInputs(ds.events, ds.events, concepts=ds.concepts))
    release = run.release.checked(ds.events)
    assert risk.verify(release, settings.adversary, 5).ok
    merged = [codes for codes in release.item_codes.values() if len(codes) > 1]
    assert merged and all(any(set(m) <= d for d in policy.diseases.values()) for m in merged)
    with pytest.raises(UserError, match=r"'cdm'.*concept_ancestor"):
        settings.run_result(RunInputs(ds.events, ds.events))


def test_cli_ugaclip_with_the_cdm_utility_hierarchy(cdm, tmp_path, capsys):
    """`anonymize ugaclip --utility-hierarchy cdm` on the SNOMED CDM writes a verified release; on its
    conditions mapped to ICD codes it exits 2 naming what it needs."""
    from engine.commands.cli import main
    from engine.io.omop import read_omop

    ids = read_omop(cdm, codes="standard", labs=False).dataset("cdm").events.patient_ids
    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": ids}).to_csv(cohort, index=False)
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    args = ["anonymize", "ugaclip", "--events", str(cdm), "--source", "omop", "--cohort", str(cohort),
            "--k", "5", "--knowledge", "single_visit", "--utility-hierarchy", "cdm", "--out", str(out),
            "--codemap", str(tmp_path / "map.csv"), "--report", str(report)]  # fmt: skip
    assert main([*args, "--omop-codes", "standard"]) == 0, capsys.readouterr().err
    got = json.loads(report.read_text())
    assert got["params"]["utility_policy"].startswith("the CDM's hierarchy")
    capsys.readouterr()
    assert main([*args, "--omop-codes", "icd"]) == 2  # the same CDM mapped to ICD: no concept hierarchy
    assert "--utility-hierarchy cdm needs" in capsys.readouterr().err


def test_cdm_utility_policy_round_trips_as_csv(cdm):
    """The CDM's policy as the CSV a study keeps (column concept_codes) reads back equal; a concept
    without its vocabulary is an error naming row and column."""
    import io

    from engine.io.errors import DataError
    from engine.io.omop import read_omop
    from engine.study.runs import cdm_utility_policy
    from engine.utility.queries import read_utility_policy

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    policy = cdm_utility_policy(ds.concepts, [str(x) for x in ds.events.items])
    text = policy.to_csv()
    assert text.splitlines()[0] == "disease,concept_codes,comment"
    assert read_utility_policy(io.StringIO(text), name="p").diseases == policy.diseases
    with pytest.raises(DataError, match=r"row 2, column 'concept_codes'.*'22298006' names no vocabulary"):
        read_utility_policy(io.StringIO("disease,concept_codes\nmi,22298006\n"), name="p")


def test_concepts_are_described_by_their_concept_name(cdm):
    """(b) A CDM's concepts are described by `concept_name` (the CDM's `ConceptParents.names`): a
    code, a generalized item of codes and an LDA pair; an ICD code keeps its own description, and a
    concept without a name still says why."""
    from engine.io.omop import read_omop
    from engine.vocab import NO_DESCRIPTION, describe
    from ui.cohort_view import top_codes

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    names = ds.concepts.names
    a, b = sorted(str(x) for x in ds.events.items)[:2]
    assert describe(a, names=names) == names[a] and names[a]
    assert describe(f"{{{a},{b}}}", names=names) == f"{a} {names[a]} or {b} {names[b]}"
    assert describe(f"{a}|40", names=names) == f"{names[a]}, age 40"
    assert describe("401.1", names=names) == describe("401.1")
    assert describe(a).startswith(NO_DESCRIPTION)
    top = top_codes(ds.events, 5, names=names)
    assert list(top["description"]) == [names[c] for c in top["code"]]


def test_phewas_joins_genotypes_by_person_source_value(tmp_path, capsys):
    """(d) The sample's genotypes are named by the source's patient ids, the CDM's person_source_value,
    while the CDM's events are named by person_id: `phewas` joins them through the person table (a
    note says so), with the same association count as the genotypes renamed to person_id by hand."""
    from engine.commands.cli import main
    from engine.io.omop import person_source_ids

    assert main(["sample", "--out", str(tmp_path), "--patients", "300", "--labs", "no",
                 "--formats", "omop-snomed"]) == 0  # fmt: skip
    cdm, genotypes = tmp_path / "omop_snomed", tmp_path / "genotypes.parquet"
    ids = person_source_ids(cdm)
    assert len(ids) == 300 and set(pd.read_parquet(genotypes)["patient_id"].astype(str)) <= set(ids.values())
    capsys.readouterr()
    out = tmp_path / "phewas.csv"
    args = ["phewas", "--events", str(cdm), "--source", "omop", "--omop-codes", "icd", "--out", str(out)]
    assert main([*args, "--genotypes", str(genotypes)]) == 0, capsys.readouterr().err
    assert "person_source_value" in capsys.readouterr().err
    by_hand = tmp_path / "by_person_id.parquet"
    inverse = {v: k for k, v in ids.items()}
    g = pd.read_parquet(genotypes)
    g.assign(patient_id=g["patient_id"].astype(str).map(inverse)).to_parquet(by_hand)
    out2 = tmp_path / "phewas2.csv"
    args[-1] = str(out2)
    assert main([*args, "--genotypes", str(by_hand)]) == 0
    assert pd.read_csv(out).equals(pd.read_csv(out2))


def test_risk_patterns_describe_concepts_by_name(cdm):
    """(b) The Risk page's riskiest patterns describe a CDM's concepts by their concept_name
    (`riskiest_patterns(names=)` and `ui.risk_charts.describe_patterns(names=)`), never '— (not an
    ICD-9-CM or ICD-10-CM code)'."""
    from engine import risk
    from engine.io.omop import read_omop
    from engine.vocab import NO_DESCRIPTION
    from ui.risk_charts import describe_patterns

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    names = ds.concepts.names
    found = risk.riskiest_patterns(ds.events, ds.events, "single_visit", n=5, names=names)
    assert len(found)
    want = ["; ".join(names[c.rsplit(" ×", 1)[0]] for c in codes.split("; ")) for codes in found["codes"]]
    assert list(found["descriptions"]) == want
    shown = describe_patterns(found, names=names)
    assert list(shown["descriptions"]) == want
    assert not any(NO_DESCRIPTION in d for d in shown["descriptions"])


def test_a_utility_policy_matching_no_code_is_said(cdm, tmp_path, capsys):
    """(issue 37) ACLIP on the SNOMED CDM with PNAS Table 1's ICD policy: every constraint holds 0
    records before and after, so it is not "18/18 satisfied" but "the utility policy matches no code of
    these data: 0 of 18 constraints apply", in the CLI's summary and the view's measures table."""
    from engine.anonymize.profiles import measures_table
    from engine.commands.cli import main
    from engine.io.omop import read_omop
    from engine.study.runs import ProfilesSettings, RunInputs
    from engine.utility.queries import satisfaction_words

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    settings = ProfilesSettings(algorithm="ACLIP", k=5, knowledge="single_visit")
    run = settings.run_result(RunInputs(ds.events, ds.events))
    n = len(run.satisfaction)
    assert n and (run.satisfaction["original_records"] == 0).all()
    said = f"the utility policy matches no code of these data: 0 of {n} constraints apply"
    assert satisfaction_words(run.satisfaction) == said
    assert measures_table({"ACLIP": run})["utility constraints satisfied"].tolist() == [said]

    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": ds.events.patient_ids}).to_csv(cohort, index=False)
    args = ["anonymize", "aclip", "--events", str(cdm), "--source", "omop", "--omop-codes", "standard",
            "--cohort", str(cohort), "--k", "5", "--knowledge", "single_visit",
            "--out", str(tmp_path / "out.csv"), "--codemap", str(tmp_path / "map.csv")]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert said in out and f"satisfied {n}/{n}" not in out


def test_code_map_describes_concepts_by_name(cdm, tmp_path, capsys):
    """(b) The code map a CDM's release writes (`anonymize ugaclip --codemap`, `export.release_files`)
    describes each original concept by its concept_name in a `description` column."""
    from engine.commands.cli import main
    from engine.io.export import read_text_csv
    from engine.io.omop import read_omop

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": ds.events.patient_ids}).to_csv(cohort, index=False)
    codemap = tmp_path / "map.csv"
    args = ["anonymize", "ugaclip", "--events", str(cdm), "--source", "omop", "--omop-codes", "standard",
            "--cohort", str(cohort), "--k", "5", "--knowledge", "single_visit", "--utility-hierarchy", "cdm",
            "--out", str(tmp_path / "out.csv"), "--codemap", str(codemap)]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    got = read_text_csv(codemap.read_bytes())
    assert "description" in got.columns, list(got.columns)
    names = ds.concepts.names
    assert list(got["description"]) == [names[c] for c in got["original_code"]]


def test_report_code_map_describes_concepts_by_name(cdm):
    """(b) The report's code map appendix describes a CDM release's concepts by their concept_name
    (`code_map_entries(names=)`, rendered "SNOMED:... (name)"); without names it is as before."""
    from engine.io.omop import read_omop
    from engine.report.render import _code_maps
    from engine.report.report import code_map_entries
    from engine.study.runs import ProfilesSettings, RunInputs

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    names = ds.concepts.names
    settings = ProfilesSettings(k=5, knowledge="single_visit", utility_hierarchy="cdm")
    release = settings.run_result(RunInputs(ds.events, ds.events, concepts=ds.concepts)).release
    entries = code_map_entries(release, names)
    assert entries and all(e["descriptions"] == [names[c] for c in e["first codes"]] for e in entries)
    assert "descriptions" not in code_map_entries(release)[0]
    first = entries[0]["first codes"][0]
    blocks = _code_maps({"releases": [{"name": "r", "folder": "r", "files": {}, "code map": entries}]})
    rows = [row for b in blocks if hasattr(b, "rows") for row in b.rows]
    assert any(f"{first} ({names[first]})" in row[3] for row in rows), rows[:2]


def test_ugaclip_steps_describe_concepts_by_name(cdm):
    """(b) UGACLIP's steps on a CDM (`trace_frame(names=)`, the view's steps table) describe each
    item and partner by the concepts' names."""
    from engine.anonymize.profiles import trace_frame
    from engine.io.omop import read_omop
    from engine.study.runs import ProfilesSettings, RunInputs
    from engine.vocab import describe

    ds = read_omop(cdm, codes="standard", labs=False).dataset("cdm")
    names = ds.concepts.names
    settings = ProfilesSettings(k=5, knowledge="single_visit", utility_hierarchy="cdm")
    release = settings.run_result(RunInputs(ds.events, ds.events, concepts=ds.concepts)).release
    steps = trace_frame(release, names)
    single = steps[~steps["item"].str.startswith("{")]
    assert len(single) and list(single["item description"]) == [names[i] for i in single["item"]]
    assert list(steps["partner description"]) == [
        describe(p, names=names) if p else "" for p in steps["partner"]
    ]
    assert list(trace_frame(release).columns) == ["action", "item", "partner"]
    # a step's large item, written "{a,b,c,... (9 codes)}" by the trace, lists its first codes by name
    big = "{" + ",".join(sorted(names)[:3]) + ",... (9 codes)}"
    said = describe(big, names=names)
    assert said.endswith(" or 6 more code(s) (the release's code map lists them)") and "—" not in said
