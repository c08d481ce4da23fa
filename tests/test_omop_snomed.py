"""Issue 37: a synthetic OMOP CDM coded in standard concepts (SNOMED conditions, SNOMED/CPT4
procedures, RxNorm drugs) with its own vocabulary tables (engine/synth/omop_vocabulary.py), read in
standard concepts of several domains (engine/io/omop.py), generalized along its own hierarchy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.synth.omop_vocabulary import CONCEPT_BASE, snomed_cdm

SAMPLE_ICD10 = Path(__file__).resolve().parent.parent / "sample_data" / "icd10cm" / "events.parquet"


def small_events(n_patients: int = 150) -> pd.DataFrame:
    """The first patients of the shipped sample's ICD-10-CM variant."""
    events = pd.read_parquet(SAMPLE_ICD10)
    keep = pd.unique(events["patient_id"])[:n_patients]
    return events[events["patient_id"].isin(keep)].reset_index(drop=True)


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return snomed_cdm(small_events(), seed=1)


def write_folder(tables: dict[str, pd.DataFrame], target: Path) -> Path:
    """The tables as Parquet files of a CDM folder (as `write_snomed_cdm` writes them)."""
    target.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        frame.to_parquet(target / f"{name}.parquet", index=False)
    return target


@pytest.fixture(scope="module")
def cdm(tmp_path_factory, tables) -> Path:
    return write_folder(tables, tmp_path_factory.mktemp("snomed") / "cdm")


# ------------------------------------------------------------------------------------ the sample
def test_sample_is_deterministic_from_the_seed(tables):
    again = snomed_cdm(small_events(), seed=1)
    for name, frame in tables.items():
        pd.testing.assert_frame_equal(frame, again[name], obj=name)
    other = snomed_cdm(small_events(), seed=2)
    assert not other["procedure_occurrence"].equals(tables["procedure_occurrence"])


def test_sample_vocabulary_is_invented_deep_and_poly_hierarchical(tables):
    concept, ancestor = tables["concept"], tables["concept_ancestor"]
    assert (concept["concept_id"] >= CONCEPT_BASE).all()  # local ids only: nothing of SNOMED CT
    assert concept["concept_name"].str.endswith("(synthetic)").all()
    assert set(concept["vocabulary_id"]) == {"SNOMED", "CPT4", "RxNorm", "ATC", "LOINC", "ICD10CM"}
    snomed = set(concept.loc[concept["vocabulary_id"] == "SNOMED", "concept_id"])
    cond = tables["condition_occurrence"]
    assert set(cond["condition_concept_id"]) <= snomed
    assert (cond["condition_source_concept_id"] == 0).all()
    # deep enough to generalize along: a condition concept 5 levels below its top
    used = ancestor[ancestor["descendant_concept_id"].isin(cond["condition_concept_id"])]
    assert used["max_levels_of_separation"].max() >= 5
    # poly-hierarchy: condition and procedure concepts with two parents
    parents = ancestor[ancestor["min_levels_of_separation"] == 1]
    n_parents = parents.groupby("descendant_concept_id").size()
    multi = set(n_parents[n_parents > 1].index)
    assert multi & set(cond["condition_concept_id"])
    assert multi & set(tables["procedure_occurrence"]["procedure_concept_id"])
    # the self pairs, and every parent pair is an ancestor pair of separation 1
    self_pairs = ancestor[ancestor["ancestor_concept_id"] == ancestor["descendant_concept_id"]]
    assert set(self_pairs["ancestor_concept_id"]) == set(concept["concept_id"])
    assert (self_pairs["max_levels_of_separation"] == 0).all()


def test_sample_maps_a_share_of_conditions_to_icd10cm(tables):
    concept, rel = tables["concept"], tables["concept_relationship"]
    vocab = dict(zip(concept["concept_id"], concept["vocabulary_id"], strict=True))
    maps_to = rel[rel["relationship_id"] == "Maps to"]
    assert {vocab[c] for c in maps_to["concept_id_1"]} == {"ICD10CM"}
    assert {vocab[c] for c in maps_to["concept_id_2"]} == {"SNOMED"}
    used = set(tables["condition_occurrence"]["condition_concept_id"])
    share = len(used & set(maps_to["concept_id_2"])) / len(used)
    assert 0.6 < share < 1.0  # some map, some do not
    icd = concept[concept["vocabulary_id"] == "ICD10CM"]
    from engine.vocab import is_known_icd10cm

    assert all(is_known_icd10cm(c) for c in icd["concept_code"])


def test_drugs_have_ingredients_as_ancestors(tables):
    concept, ancestor = tables["concept"], tables["concept_ancestor"]
    klass = dict(zip(concept["concept_id"], concept["concept_class_id"], strict=True))
    drugs = set(tables["drug_exposure"]["drug_concept_id"])
    assert {klass[d] for d in drugs} == {"Clinical Drug"}
    up = ancestor[ancestor["descendant_concept_id"].isin(drugs)]
    ingredients = up[up["ancestor_concept_id"].map(klass) == "Ingredient"]
    assert ingredients.groupby("descendant_concept_id").size().eq(1).all()
    assert set(ingredients["descendant_concept_id"]) == drugs


def test_sample_has_loinc_measurements_and_observations(tables):
    """Issue 37: the synthetic CDM gains measurements (LOINC-like invented tests, a value each) and
    SNOMED observations, each under a group to generalize along; the other tables stay as they were."""
    concept = tables["concept"].set_index("concept_id")
    meas, obs = tables["measurement"], tables["observation"]
    assert len(meas) > 0 and len(obs) > 0
    tests = concept.loc[pd.unique(meas["measurement_concept_id"])]
    assert set(tests["vocabulary_id"]) == {"LOINC"} and set(tests["concept_class_id"]) == {"Lab Test"}
    assert tests["concept_name"].str.endswith("(synthetic)").all()
    assert (
        meas["measurement_source_value"]
        == tests.loc[meas["measurement_concept_id"], "concept_code"].to_numpy()
    ).all()
    assert meas["value_as_number"].notna().all()
    assert set(concept.loc[pd.unique(obs["observation_concept_id"]), "domain_id"]) == {"Observation"}
    visit = tables["visit_occurrence"]
    visits = set(zip(visit["visit_occurrence_id"], visit["person_id"], strict=True))
    assert set(zip(meas["visit_occurrence_id"], meas["person_id"], strict=True)) <= visits


def test_measurements_and_observations_are_read_as_concepts(cdm, tables):
    """--domains measurement,observation: one item per measured LOINC concept (values left out) and
    per observation concept, in the visits of their rows; drugs at clinical-drug level are the
    exposures' own clinical drugs."""
    from engine.io.omop import read_omop

    data = read_omop(cdm, codes="standard", domains=("measurement", "observation"), labs=False)
    assert data.report.errors == []
    vocab = pd.Series(data.events.vocabulary)
    assert set(vocab) == {"LOINC", "SNOMED"}
    assert (vocab == "LOINC").sum() == len(tables["measurement"])
    assert (vocab == "SNOMED").sum() == len(tables["observation"])
    codes = set(data.events.frame["code"][(vocab == "LOINC").to_numpy()])
    assert codes == {f"LOINC:{c}" for c in tables["measurement"]["measurement_source_value"]}
    drugs = read_omop(cdm, codes="standard", domains=("drug",), drug_level="clinical", labs=False)
    concept = tables["concept"].set_index("concept_id")
    want = sorted(
        f"RxNorm:{concept.at[c, 'concept_code']}" for c in tables["drug_exposure"]["drug_concept_id"]
    )
    assert sorted(drugs.events.frame["code"]) == want


def test_drug_level_and_new_domains_on_the_command_line(cdm, tmp_path, capsys):
    from engine.commands.cli import main

    out = tmp_path / "r.csv"
    assert main(["risk", "--events", str(cdm), "--source", "omop", "--omop-codes", "standard",
                 "--domains", "condition,drug,measurement,observation", "--drug-level", "clinical",
                 "--scope", "cohort", "--knowledge", "all_visits", "--k", "5", "--out", str(out)]) == 0  # fmt: skip
    assert len(pd.read_csv(out)) == 150
    with pytest.raises(SystemExit) as exit_:  # the parser names the choices
        main(["risk", "--events", str(cdm), "--source", "omop", "--omop-codes", "standard",
              "--domains", "condition,drug", "--drug-level", "product", "--scope", "cohort"])  # fmt: skip
    assert exit_.value.code == 2 and "ingredient" in capsys.readouterr().err


def test_sample_command_writes_the_snomed_cdm(tmp_path):
    from engine.commands.cli import main

    assert main(["sample", "--out", str(tmp_path), "--patients", "200", "--labs", "no",
                 "--formats", "omop-snomed"]) == 0  # fmt: skip
    folder = tmp_path / "omop_snomed"
    for table in ("person", "condition_occurrence", "procedure_occurrence", "drug_exposure", "concept",
                  "concept_ancestor", "concept_relationship"):  # fmt: skip
        assert (folder / f"{table}.parquet").exists(), table
    import pyarrow.parquet as pq

    assert str(
        pq.read_schema(folder / "condition_occurrence.parquet").field("condition_start_date").type
    ) == ("date32[day]")
    person = pd.read_parquet(folder / "person.parquet")
    assert len(person) == 200 and np.array_equal(person["person_id"], np.arange(1, 201))


# ------------------------------------------------------------------------------------ reading
def test_standard_concepts_are_read_with_their_vocabulary(cdm, tables):
    """Issue 37: a CDM whose conditions are SNOMED only gave 0 patients (every row's source concept
    'not ICD'); read in standard concepts, every condition is an event `SNOMED:<code>`."""
    from engine.io.omop import read_omop

    data = read_omop(cdm, codes="standard", labs=False)
    assert data.report.errors == []
    events = data.events.frame
    cond = tables["condition_occurrence"]
    assert len(events) == len(cond)
    code = dict(zip(tables["concept"]["concept_id"], tables["concept"]["concept_code"], strict=True))
    assert events["code"].tolist() == [f"SNOMED:{code[c]}" for c in cond["condition_concept_id"]]
    assert set(data.events.vocabulary) == {"SNOMED"}
    assert events["patient_id"].tolist() == cond["person_id"].astype(str).tolist()


def test_icd_standard_concepts_keep_their_item_labels():
    from engine.vocab import concept_item

    assert concept_item("ICD10CM", "E11.9") == "E11.9"
    assert concept_item("ICD10CM", "V45.5") == "ICD10CM:V45.5"
    assert concept_item("ICD9CM", "250.00") == "250.00"
    assert concept_item("SNOMED", "44054006") == "SNOMED:44054006"


def test_domains_are_one_visit_set(cdm, tables):
    """Procedures and drugs (at ingredient level) of a visit join its conditions: one known set."""
    from engine.io.omop import read_omop

    data = read_omop(cdm, codes="standard", domains=("condition", "procedure", "drug"), labs=False)
    assert data.report.errors == []
    events = data.events.frame
    n = {t: len(tables[t]) for t in ("condition_occurrence", "procedure_occurrence", "drug_exposure")}
    assert len(events) == sum(n.values())  # one ingredient per drug in the sample
    assert set(data.events.vocabulary) == {"SNOMED", "CPT4", "RxNorm"}
    visit = tables["visit_occurrence"].set_index("visit_occurrence_id")["visit_start_date"]
    proc = tables["procedure_occurrence"]
    got = events[events["code"].isin(events["code"][data.events.vocabulary == "CPT4"])]
    assert len(got) == (proc["procedure_source_value"].str.len() == 5).sum()
    first = proc.iloc[0]
    code = dict(zip(tables["concept"]["concept_id"], tables["concept"]["concept_code"], strict=True))
    vocab = dict(zip(tables["concept"]["concept_id"], tables["concept"]["vocabulary_id"], strict=True))
    label = f"{vocab[first['procedure_concept_id']]}:{code[first['procedure_concept_id']]}"
    day = pd.Timestamp(visit[first["visit_occurrence_id"]]).date().isoformat()
    hit = events[(events["patient_id"] == str(first["person_id"])) & (events["visit"] == day)]
    assert label in set(hit["code"])
    assert len(set(hit["code"])) > 1  # with the visit's conditions
    drugs = events[data.events.vocabulary == "RxNorm"]["code"]
    klass = dict(zip(tables["concept"]["concept_code"], tables["concept"]["concept_class_id"], strict=True))
    assert {klass[c.split(":", 1)[1]] for c in drugs} == {"Ingredient"}


def test_domains_need_standard_codes(cdm):
    from engine.io.errors import UserError
    from engine.io.omop import read_omop

    with pytest.raises(UserError, match="--omop-codes standard"):
        read_omop(cdm, domains=("condition", "drug"))
    with pytest.raises(UserError, match="unknown domain"):
        read_omop(cdm, codes="standard", domains=("condition", "labs"))


def test_risk_command_on_standard_concepts(cdm, tmp_path, capsys):
    from engine.commands.cli import main

    shares = {}
    for domains in ("condition", "condition,procedure,drug"):
        out = tmp_path / "r.csv"
        code = main(["risk", "--events", str(cdm), "--source", "omop", "--omop-codes", "standard",
                     "--domains", domains, "--scope", "cohort", "--knowledge", "all_visits", "--k", "5",
                     "--out", str(out)])  # fmt: skip
        assert code == 0
        text = capsys.readouterr().out
        shares[domains] = float(text.split("share unique (distinguishability 1): ")[1].split("%")[0])
        assert len(pd.read_csv(out)) == 150
    assert shares["condition,procedure,drug"] > shares["condition"]
    assert main(["risk", "--events", str(cdm), "--source", "omop", "--domains", "drug", "--scope", "cohort",
                 "--knowledge", "all_visits", "--k", "5"]) == 2  # fmt: skip


# ------------------------------------------------------------------------------------ brute force
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from engine import risk  # noqa: E402
from engine.records import Records  # noqa: E402
from tests.reference_risk import reference_distinguishability  # noqa: E402

# a tiny vocabulary: 3 SNOMED conditions, 2 SNOMED and 1 CPT4 procedures, 3 clinical drugs of 2
# ingredients (drug 33 holds both) and a branded drug 34 of clinical drug 31, 2 LOINC measurements,
# 2 SNOMED observations; concept ids 1..; ingredients 41, 42
_CONCEPTS = [
    (1, "SNOMED", "101", "Clinical Finding"),
    (2, "SNOMED", "102", "Clinical Finding"),
    (3, "SNOMED", "103", "Clinical Finding"),
    (11, "SNOMED", "201", "Procedure"),
    (12, "SNOMED", "202", "Procedure"),
    (13, "CPT4", "99213", "CPT4"),
    (31, "RxNorm", "301", "Clinical Drug"),
    (32, "RxNorm", "302", "Clinical Drug"),
    (33, "RxNorm", "303", "Clinical Drug"),
    (34, "RxNorm", "304", "Branded Drug"),
    (41, "RxNorm", "401", "Ingredient"),
    (42, "RxNorm", "402", "Ingredient"),
    (51, "LOINC", "2345-7", "Lab Test"),
    (52, "LOINC", "718-7", "Lab Test"),
    (61, "SNOMED", "601", "Observable Entity"),
    (62, "SNOMED", "602", "Context-dependent"),
]
_INGREDIENTS = {31: (41,), 32: (42,), 33: (41, 42), 34: (41,)}
_CLINICAL = {31: (31,), 32: (32,), 33: (33,), 34: (31,)}
_LABEL = {cid: f"{v}:{c}" for cid, v, c, _ in _CONCEPTS}
# domain -> (table, date column, concept column, concept ids drawn)
_DOMAIN_TABLES = {
    "condition": ("condition_occurrence", "condition_start_date", "condition_concept_id", [1, 2, 3]),
    "procedure": ("procedure_occurrence", "procedure_date", "procedure_concept_id", [11, 12, 13]),
    "drug": ("drug_exposure", "drug_exposure_start_date", "drug_concept_id", [31, 32, 33, 34]),
    "measurement": ("measurement", "measurement_date", "measurement_concept_id", [51, 52]),
    "observation": ("observation", "observation_date", "observation_concept_id", [61, 62]),
}


@st.composite
def multi_domain_cdms(draw):
    """Persons with 1-3 visits, each with 0-2 rows of every domain (some visit holds one); a
    measurement row carries a value, never part of the item."""
    rows: dict[str, list] = {d: [] for d in _DOMAIN_TABLES}
    n_persons = draw(st.integers(1, 7))
    n_visits = 0
    for p in range(1, n_persons + 1):
        for _ in range(draw(st.integers(1, 3))):
            n_visits += 1
            for domain, (*_, ids) in _DOMAIN_TABLES.items():
                for cid in draw(st.lists(st.sampled_from(ids), max_size=2)):
                    rows[domain].append((p, n_visits, cid))
            if not any(r[1] == n_visits for rs in rows.values() for r in rs):
                rows["condition"].append((p, n_visits, 1))
    return n_persons, n_visits, rows


def _write_cdm(target: Path, n_persons: int, n_visits: int, rows: dict) -> None:
    day = {v: np.datetime64("2020-01-01") + np.timedelta64(v, "D") for v in range(1, n_visits + 1)}
    visit_person = {v: p for rs in rows.values() for p, v, _ in rs}
    ancestors = {d: {*_INGREDIENTS[d], *_CLINICAL[d]} - {d} for d in _INGREDIENTS}
    frames = {
        "person": pd.DataFrame({"person_id": range(1, n_persons + 1), "year_of_birth": 1960}),
        "visit_occurrence": pd.DataFrame(
            {
                "visit_occurrence_id": list(visit_person),
                "person_id": list(visit_person.values()),
                "visit_start_date": [day[v] for v in visit_person],
            }
        ),
        "concept": pd.DataFrame(
            _CONCEPTS, columns=["concept_id", "vocabulary_id", "concept_code", "concept_class_id"]
        ),
        "concept_ancestor": pd.DataFrame(
            [(a, d, 1) for d, ancs in ancestors.items() for a in sorted(ancs)] + [(41, 41, 0), (42, 42, 0)],
            columns=["ancestor_concept_id", "descendant_concept_id", "min_levels_of_separation"],
        ),
    }
    for domain, (table, date, concept, _) in _DOMAIN_TABLES.items():
        rs = rows[domain]
        frames[table] = pd.DataFrame(
            {
                "person_id": pd.array([p for p, _, _ in rs], dtype="int64"),
                date: pd.array([day[v] for _, v, _ in rs], dtype="datetime64[s]"),
                "visit_occurrence_id": pd.array([v for _, v, _ in rs], dtype="int64"),
                concept: pd.array([c for _, _, c in rs], dtype="int64"),
            }
        )
    frames["measurement"]["value_as_number"] = np.arange(len(rows["measurement"]), dtype=float)
    target.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        frame.to_parquet(target / f"{name}.parquet", index=False)


def _expected_records(rows: dict, drug_level: str = "ingredient") -> Records:
    """The visits' items by hand: each row's label, a drug once per ingredient (or its clinical drug)."""
    level = _INGREDIENTS if drug_level == "ingredient" else _CLINICAL
    out = []
    for domain, rs in rows.items():
        for p, v, cid in rs:
            for c in level[cid] if domain == "drug" else (cid,):
                out.append((str(p), v, _LABEL[c]))
    return Records.from_frame(pd.DataFrame(out, columns=["patient_id", "visit", "code"]))


@given(cdm=multi_domain_cdms())
@settings(max_examples=30, deadline=None)
def test_multi_domain_distinguishability_equals_brute_force(cdm, tmp_path_factory):
    """The CDM read over all five domains (drugs at ingredient and at clinical-drug level) is, visit
    by visit, the hand-built union of their items, and its distinguishability under both knowledges
    is the brute force's count."""
    from engine.io.omop import read_omop

    n_persons, n_visits, rows = cdm
    folder = tmp_path_factory.mktemp("cdm")
    _write_cdm(folder, n_persons, n_visits, rows)

    def visit_sets(r: Records) -> list[tuple[str, list[frozenset[str]]]]:
        return sorted(
            (str(r.patient_ids[p]), sorted(map(frozenset, r.patient_visits(p)), key=sorted))
            for p in range(r.n_patients)
        )

    for drug_level in ("ingredient", "clinical"):
        data = read_omop(
            folder, codes="standard", domains=tuple(_DOMAIN_TABLES), drug_level=drug_level, labs=False
        )
        assert data.report.errors == []
        got = data.dataset("cdm").events
        want = _expected_records(rows, drug_level)
        assert visit_sets(got) == visit_sets(want)
        for knowledge in ("single_visit", "all_visits"):
            dis = risk.distinguishability(got, got, knowledge)
            order = [list(map(str, want.patient_ids)).index(str(x)) for x in got.patient_ids]
            ref = reference_distinguishability(want, want, knowledge)
            assert dis.tolist() == [ref[i] for i in order]


def test_standard_concepts_from_duckdb_equal_the_folder(cdm, tables, tmp_path):
    """The same CDM in DuckDB: concept and concept_ancestor read in SQL, only the rows used."""
    import duckdb

    from engine.io.omop import read_omop

    db = tmp_path / "cdm.duckdb"
    con = duckdb.connect(str(db))
    for name, frame in tables.items():
        con.register("frame", frame)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
        con.unregister("frame")
    con.close()
    domains = ("condition", "procedure", "drug", "measurement", "observation")
    for level in ("ingredient", "clinical"):
        a = read_omop(cdm, codes="standard", domains=domains, drug_level=level)
        b = read_omop(db, codes="standard", domains=domains, drug_level=level)
        assert b.report.errors == []
        pd.testing.assert_frame_equal(a.events.frame, b.events.frame)
        pd.testing.assert_frame_equal(a.labs, b.labs)  # by LOINC concept, the concepts read in SQL


# ------------------------------------------------------------------------------------ hierarchy
def test_poly_hierarchy_keeps_the_parent_with_most_data_below():
    """A code with several parents climbs the one with the most data codes below it, ties by the
    lower concept id: deterministic whatever order the parents come in."""
    from engine.hierarchy import ROOT, Hierarchy

    parents = {"a": ["C", "B"], "b": ["B"], "c": ["C"], "d": ["D", "E"], "B": ["T"], "C": ["T"]}
    h = Hierarchy.from_poly_parents(parents, ["a", "b", "c", "d", "c"], order={"D": 9, "E": 7})
    assert h.parent("a") in ("B", "C") and h.parent("b") == "B" and h.parent("c") == "C"
    # B and C both hold 2 data codes (a and one more): the tie goes to the lower order, then the label
    assert h.parent("a") == "B"
    assert h.parent("d") == "E"  # 1 code below each of D and E; E has the lower concept id
    assert h.parent("T") == ROOT and h.parent("E") == ROOT and h.root == ROOT
    assert set(h.leaves()) == {"a", "b", "c", "d"}
    again = Hierarchy.from_poly_parents({k: v[::-1] for k, v in parents.items()}, ["d", "c", "b", "a"],
                                        order={"D": 9, "E": 7})  # fmt: skip
    assert (
        again.to_frame()
        .sort_values("node")
        .reset_index(drop=True)
        .equals(h.to_frame().sort_values("node").reset_index(drop=True))
    )
    parents_more = {**parents, "x": ["C"], "y": ["C"]}
    h2 = Hierarchy.from_poly_parents(parents_more, ["a", "b", "c", "x", "y"])
    assert h2.parent("a") == "C"  # C now holds 4 data codes, B 2


def test_cdm_hierarchy_of_the_sample(cdm, tables):
    from engine.io.omop import read_concept_parents, read_omop

    data = read_omop(cdm, codes="standard", domains=("condition", "procedure", "drug"), labs=False)
    items = sorted(set(data.events.frame["code"]))
    tree = read_concept_parents(cdm)
    h = tree.hierarchy(items)
    assert all(item in h for item in items)
    assert max(h.depth(item) for item in items) >= 5
    multi = [c for c in items if len(tree.parents.get(c, [])) > 1]
    assert multi
    for c in multi:  # the kept parent holds at least as many of the data codes as any other parent

        def below(node: str) -> int:
            return sum(1 for x in items if node in _dag_ancestors(tree.parents, x))

        assert below(h.parent(c)) == max(below(p) for p in tree.parents[c])
    assert tree.names[items[0]].endswith("(synthetic)")


def _dag_ancestors(parents: dict[str, list[str]], code: str) -> set[str]:
    seen, stack = {code}, [code]
    while stack:
        for p in parents.get(stack.pop(), []):
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def test_lda_generalizes_along_the_cdm_hierarchy(cdm):
    """The LDA on the SNOMED-coded sample with the CDM's own hierarchy: the released codes are nodes
    of that hierarchy (SNOMED concepts above the data's, not only `Any`), and engine.risk verifies
    the release at k."""
    from engine import risk
    from engine.adversary import Adversary
    from engine.anonymize.trajectories import Trajectories, lda
    from engine.io.omop import read_concept_parents, read_omop

    cohort = read_omop(cdm, codes="standard", labs=False).dataset("cdm").events
    frame = cohort.to_frame()
    traj = Trajectories.from_frame(frame, patient_ids=cohort.patient_ids)
    h = read_concept_parents(cdm).hierarchy(sorted(set(frame["code"])))
    res = lda(traj, 3, icd_hierarchy=h, age_domain=(0, 100))
    release = res.release()
    verification = risk.verify(release, Adversary("cohort", "all_visits"), 3)
    assert verification.ok
    codes = set(res.released_frame()["code"].astype(str))
    assert codes <= set(h.labels)
    inner = {c for c in codes if not h.is_leaf(c) and c != h.root}
    assert inner and all(c.startswith("SNOMED:") for c in inner)


# ------------------------------------------------------------------------------------ PheWAS
def test_icd_codes_through_concept_relationship(cdm, tables):
    """--omop-codes icd: each condition's standard concept mapped back to its ICD-10-CM code through
    concept_relationship, the share mapped stated; the others keep their concept label."""
    from engine.io.omop import read_omop

    data = read_omop(cdm, codes="icd", labs=False)
    assert data.report.errors == []
    events = data.events.frame
    cond = tables["condition_occurrence"]
    rel = tables["concept_relationship"]
    maps = rel[rel["relationship_id"] == "Maps to"]
    icd_code = dict(zip(tables["concept"]["concept_id"], tables["concept"]["concept_code"], strict=True))
    to_icd = {s: icd_code[i] for i, s in zip(maps["concept_id_1"], maps["concept_id_2"], strict=True)}
    want = [to_icd.get(c, f"SNOMED:{icd_code[c]}") for c in cond["condition_concept_id"]]
    assert events["code"].tolist() == want
    n_mapped = sum(c in to_icd for c in cond["condition_concept_id"])
    found = [w for w in data.report.warnings if w.kind == "icd_mapping"]
    assert len(found) == 1 and found[0].message.startswith(f"{n_mapped} of {len(cond)} condition(s) (")
    assert 0 < n_mapped < len(cond)


def test_unmapped_patient_is_never_a_phewas_control():
    from engine.records import Records
    from engine.utility.phewas import phenotype_matrix

    records = Records.from_frame(
        pd.DataFrame(
            {"patient_id": ["a", "b", "b", "c"], "code": ["250.00", "401.1", "SNOMED:900000001", "I10"]}
        )
    )
    m = phenotype_matrix(records)
    excluded = m.excluded.toarray().astype(bool)
    assert excluded[1].all()  # b holds a concept no ICD code stands for: a control of nothing
    assert not excluded[0].all() and not excluded[2].all()
    col = list(m.phecodes).index("401.1")
    assert m.counts.toarray()[1, col] == 1  # still a case of what maps


def _same_through_sql(
    url: str, cdm: Path, tables: dict[str, pd.DataFrame], schema: str | None = None
) -> None:
    """The CDM's tables written to `url` read back in standard concepts, ICD-mapped and as a
    hierarchy exactly as from the folder (the vocabulary read in SQL)."""
    import sqlalchemy as sa

    from engine.io.omop import read_concept_parents, read_omop

    engine = sa.create_engine(url)
    if schema:
        with engine.begin() as con:
            con.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    for name, frame in tables.items():
        dates = {c: pd.to_datetime(frame[c]).dt.date for c in frame.columns if c.endswith("_date")}
        frame.assign(**dates).to_sql(name, engine, index=False, schema=schema)
    engine.dispose()
    domains = ("condition", "procedure", "drug")
    read = {}
    for codes, dom in (("standard", domains), ("icd", ("condition",))):
        a = read_omop(cdm, codes=codes, domains=dom, labs=False)
        b = read_omop(url, schema=schema, codes=codes, domains=dom, labs=False)
        assert b.report.errors == []
        pd.testing.assert_frame_equal(a.events.frame, b.events.frame)
        read[codes] = a
    items = sorted(set(read["standard"].events.frame["code"]))
    h_files = read_concept_parents(cdm).hierarchy(items)
    h_sql = read_concept_parents(url, schema=schema).hierarchy(items)
    assert h_files.to_frame().equals(h_sql.to_frame())


def test_standard_concepts_and_hierarchy_from_sqlite(cdm, tables, tmp_path):
    _same_through_sql(f"sqlite:///{tmp_path / 'cdm.sqlite'}", cdm, tables)


def test_standard_concepts_and_hierarchy_from_postgresql(cdm, tables, postgres_url):
    import uuid

    import sqlalchemy as sa

    schema = f"cs_snomed_{uuid.uuid4().hex[:8]}"
    try:
        _same_through_sql(postgres_url, cdm, tables, schema)
    finally:
        engine = sa.create_engine(postgres_url)
        with engine.begin() as con:
            con.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


def test_rows_without_a_standard_concept_are_left_out_and_named(tables, tmp_path):
    """A condition of concept 0 and a drug whose concept has no RxNorm ingredient are left out, each
    named by its own table and row in a warning; the others are read."""
    from engine.io.omop import read_omop

    concept = tables["concept"]
    atc = int(concept.loc[concept["vocabulary_id"] == "ATC", "concept_id"].iloc[0])
    cond = tables["condition_occurrence"].copy()
    cond.loc[2, "condition_concept_id"] = 0
    drug = tables["drug_exposure"].copy()
    drug.loc[4, "drug_concept_id"] = atc
    folder = write_folder({**tables, "condition_occurrence": cond, "drug_exposure": drug}, tmp_path / "cdm")
    data = read_omop(folder, codes="standard", domains=("condition", "drug"), labs=False)
    assert data.report.errors == []
    assert len(data.events.frame) == len(cond) - 1 + len(drug) - 1
    found = {w.file: w for w in data.report.warnings if w.kind == "no_standard_concept"}
    assert found["cdm/condition_occurrence.parquet"].rows == (4,)  # header row 1, data row 3
    assert found["cdm/drug_exposure.parquet"].rows == (6,)
    assert "no RxNorm ingredient" in found["cdm/drug_exposure.parquet"].message
