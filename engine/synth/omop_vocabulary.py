"""A synthetic OMOP CDM v5.4 coded in standard concepts, with its own small vocabulary (issue 37).

`python -m engine sample --formats omop-snomed` writes `omop_snomed/`, a folder of Parquet tables
(`engine.io.omop` reads it): person, visit_occurrence, condition_occurrence, procedure_occurrence,
drug_exposure, measurement, observation, and the vocabulary tables concept, concept_ancestor and concept_relationship. Nothing of
SNOMED CT, CPT-4 or RxNorm is shipped (their licences): every concept is invented, with a local concept
id (above 2,000,000,000, OMOP's range for local concepts), an invented concept code and a name that
says it is synthetic; only the vocabulary ids are the real ones (`SNOMED`, `CPT4`, `RxNorm`, `ATC`,
`LOINC`, `ICD10CM`). Everything follows from the sample and the seed.

- **Conditions** (domain Condition, SNOMED): one concept per ICD-10-CM code of the sample's ICD-10-CM
  variant (`engine.synth.icd10`, the first `OMOP_MAX_PATIENTS` patients) and one per ancestor of it in
  the ICD-10-CM tabular list (4-character code, category, block, chapter), under the top concept
  "Clinical finding": up to six levels to generalize along. Poly-hierarchy: a share `POLY_SHARE` of the
  code concepts get a second parent, the category concept of a code of another chapter.
  `condition_source_value` is the concept code, `condition_source_concept_id` 0 (no ICD source, as at
  many non-US sites). A share `MAPPED_SHARE` of the code concepts have an ICD10CM concept (the ICD-10-CM
  code itself, non-standard) with `Maps to` (ICD10CM -> SNOMED) and `Mapped from` (back) links, for
  PheWAS; the others map to no ICD code.
- **Procedures**: SNOMED procedures (top "Procedure", 6 groups, 4 subgroups each, 3 procedures each;
  `POLY_SHARE` of them also under a subgroup of another group) and CPT4 codes (5 sections, 4 subsections,
  4 codes each); per visit a Poisson(`PROCEDURES_PER_VISIT`) number, drawn with Zipf weights.
- **Drugs**: RxNorm clinical drugs (3 per ingredient) of 40 ingredients, each ingredient under an ATC
  2nd-level class under an ATC 1st-level class; per visit a Poisson(`DRUGS_PER_VISIT`) number of
  exposures, drawn with Zipf weights.
- **Measurements** (lab orders): LOINC-like tests (invented codes `99nnn-n`), 4 under each of 3 LOINC
  groups; per visit a Poisson(`MEASUREMENTS_PER_VISIT`) number, Zipf-drawn, each with an invented
  `value_as_number`; `measurement_source_value` is the test's code (the lab orders of Johnson 2018).
- **Observations**: SNOMED observable entities, 3 under each of 2 groups; per visit a
  Poisson(`OBSERVATIONS_PER_VISIT`) number. Measurements and observations are drawn after the
  procedures and drugs, so those stay as they were for a seed.
- `concept_ancestor`: every (ancestor, descendant) pair of the poly-hierarchy with its minimum and
  maximum levels of separation, the self pairs included (as the OHDSI vocabulary writes them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

CONCEPT_BASE = 2_100_000_000  # local concept ids (OMOP: above 2,000,000,000)
CODE_BASE = 900_000_000  # invented concept codes
POLY_SHARE = 0.15
MAPPED_SHARE = 0.85
PROCEDURES_PER_VISIT = 0.8
DRUGS_PER_VISIT = 0.7
MEASUREMENTS_PER_VISIT = 1.0
OBSERVATIONS_PER_VISIT = 0.3
N_INGREDIENTS = 40
DRUGS_PER_INGREDIENT = 3
EHR = 32817  # type concept: EHR (OMOP standard concept)
SNOMED_DIR = "omop_snomed"


@dataclass
class Vocabulary:
    """Concepts built one by one (parents before children) with their parents."""

    rows: list[dict] = field(default_factory=list)
    parents: list[list[int]] = field(default_factory=list)  # per concept: indexes of its parents

    def add(
        self,
        name: str,
        domain: str,
        vocabulary: str,
        concept_class: str,
        parents: list[int],
        *,
        code: str | None = None,
        standard: str | None = "S",
    ) -> int:
        i = len(self.rows)
        self.rows.append(
            {
                "concept_id": CONCEPT_BASE + i,
                "concept_name": f"{name} (synthetic)",
                "domain_id": domain,
                "vocabulary_id": vocabulary,
                "concept_class_id": concept_class,
                "standard_concept": standard,
                "concept_code": code if code is not None else str(CODE_BASE + i),
            }
        )
        self.parents.append(list(parents))
        return i

    def concept_frame(self) -> pd.DataFrame:
        df = pd.DataFrame(self.rows)
        df["valid_start_date"] = np.datetime64("1970-01-01", "D")
        df["valid_end_date"] = np.datetime64("2099-12-31", "D")
        df["invalid_reason"] = None
        return df

    def ancestor_frame(self) -> pd.DataFrame:
        """Every (ancestor, descendant) pair, self pairs included, with min/max levels of separation
        over all paths of the poly-hierarchy."""
        anc: dict[int, dict[int, tuple[int, int]]] = {}

        def of(i: int) -> dict[int, tuple[int, int]]:
            if i not in anc:
                mine: dict[int, tuple[int, int]] = {i: (0, 0)}
                for p in self.parents[i]:
                    for a, (lo, hi) in of(p).items():
                        old = mine.get(a, (lo + 1, hi + 1))
                        mine[a] = (min(old[0], lo + 1), max(old[1], hi + 1))
                anc[i] = mine
            return anc[i]

        rows = [
            (CONCEPT_BASE + a, CONCEPT_BASE + i, lo, hi)
            for i in range(len(self.rows))
            for a, (lo, hi) in sorted(of(i).items())
        ]
        return pd.DataFrame(
            rows,
            columns=[
                "ancestor_concept_id",
                "descendant_concept_id",
                "min_levels_of_separation",
                "max_levels_of_separation",
            ],
        )


def _zipf(rng: np.random.Generator, n_items: int, size: int) -> np.ndarray:
    """`size` draws of 0..n_items-1 with weights 1/(rank+1), the ranks shuffled once."""
    weights = 1.0 / np.arange(1, n_items + 1)
    order = rng.permutation(n_items)
    return order[rng.choice(n_items, size=size, p=weights / weights.sum())]


def _conditions(
    vocab: Vocabulary, codes: list[str], rng: np.random.Generator
) -> tuple[dict[str, int], list[tuple[int, str]]]:
    """The SNOMED condition concepts of the ICD-10-CM codes (module docstring): code -> concept
    index, and the (concept index, ICD-10-CM code) pairs that map."""
    from engine.hierarchy import Hierarchy, with_codes
    from engine.vocab import code_of_item, icd10cm_description

    tree = with_codes(Hierarchy.icd10cm(), codes)
    top = vocab.add("Clinical finding", "Condition", "SNOMED", "Clinical Finding", [])
    node_of: dict[str, int] = {}
    for code in codes:
        for label in reversed(tree.ancestors(tree.leaf_of(code), include_self=True)[:-1]):
            if label not in node_of:
                parent = tree.parent(label)
                p = top if parent in (None, tree.root) else node_of[str(parent)]
                text = icd10cm_description(label) or code_of_item(label)
                node_of[label] = vocab.add(
                    f"Finding like {text}", "Condition", "SNOMED", "Clinical Finding", [p]
                )
    categories = {c: node_of[_category(tree, c)] for c in codes}
    chapter = {c: tree.ancestors(c, include_self=True)[-2] for c in codes}
    poly = rng.random(len(codes)) < POLY_SHARE
    for code, second in zip(codes, poly, strict=True):
        if second:  # a second parent: the category of a code of another chapter
            others = [o for o in codes if chapter[o] != chapter[code]]
            if others:
                extra = categories[others[int(rng.integers(len(others)))]]
                node = vocab.parents[node_of[code]]
                if extra not in node and extra != node_of[code]:
                    node.append(extra)
    mapped = [
        (node_of[c], code_of_item(c))
        for c, m in zip(codes, rng.random(len(codes)), strict=True)
        if m < MAPPED_SHARE
    ]
    return {c: node_of[c] for c in codes}, mapped


def _category(tree, code: str) -> str:
    """The code's ancestor two levels below the root's children (its category), or itself."""
    path = tree.ancestors(tree.leaf_of(code), include_self=True)  # code .. root
    return path[-4] if len(path) >= 4 else path[0]


def _procedures(vocab: Vocabulary, rng: np.random.Generator) -> list[int]:
    """SNOMED procedures and CPT4 codes (module docstring); the leaf concept indexes."""
    leaves: list[int] = []
    top = vocab.add("Procedure", "Procedure", "SNOMED", "Procedure", [])
    subgroups: list[int] = []
    for g in range(6):
        group = vocab.add(f"Procedure on body system {g + 1}", "Procedure", "SNOMED", "Procedure", [top])
        for s in range(4):
            sub = vocab.add(f"Procedure {g + 1}.{s + 1}", "Procedure", "SNOMED", "Procedure", [group])
            subgroups.append(sub)
            for p in range(3):
                leaves.append(
                    vocab.add(f"Procedure {g + 1}.{s + 1}.{p + 1}", "Procedure", "SNOMED", "Procedure", [sub])
                )
    for leaf in leaves:
        if rng.random() < POLY_SHARE:
            own_group = vocab.parents[vocab.parents[leaf][0]][0]
            others = [s for s in subgroups if vocab.parents[s][0] != own_group]
            vocab.parents[leaf].append(others[int(rng.integers(len(others)))])
    cpt_top = vocab.add("CPT4 hierarchy", "Procedure", "CPT4", "CPT4 Hierarchy", [], standard="C")
    for s in range(5):
        section = vocab.add(
            f"CPT section {s + 1}", "Procedure", "CPT4", "CPT4 Hierarchy", [cpt_top], standard="C"
        )
        for u in range(4):
            sub = vocab.add(
                f"CPT subsection {s + 1}.{u + 1}",
                "Procedure",
                "CPT4",
                "CPT4 Hierarchy",
                [section],
                standard="C",
            )
            for c in range(4):
                code = f"9{s}{u}{c}{rng.integers(10)}"  # invented five-digit codes, unique by position
                leaves.append(
                    vocab.add(f"CPT procedure {code}", "Procedure", "CPT4", "CPT4", [sub], code=code)
                )
    return leaves


def _drugs(vocab: Vocabulary) -> list[int]:
    """ATC classes, RxNorm ingredients and clinical drugs (module docstring); the drug indexes."""
    drugs: list[int] = []
    atc1 = [
        vocab.add(f"ATC group {chr(65 + a)}", "Drug", "ATC", "ATC 1st", [], code=chr(65 + a), standard="C")
        for a in range(4)
    ]
    atc2 = [
        vocab.add(
            f"ATC class {chr(65 + a)}{b:02d}",
            "Drug",
            "ATC",
            "ATC 2nd",
            [atc1[a]],
            code=f"{chr(65 + a)}{b:02d}",
            standard="C",
        )
        for a in range(4)
        for b in range(1, 4)
    ]
    for i in range(N_INGREDIENTS):
        ing = vocab.add(f"Ingredient {i + 1}", "Drug", "RxNorm", "Ingredient", [atc2[i % len(atc2)]])
        for d in range(DRUGS_PER_INGREDIENT):
            drugs.append(
                vocab.add(
                    f"Ingredient {i + 1} {5 * (d + 1)} MG Oral Tablet",
                    "Drug",
                    "RxNorm",
                    "Clinical Drug",
                    [ing],
                )
            )
    return drugs


def _measurements(vocab: Vocabulary) -> list[int]:
    """LOINC-like lab tests under LOINC groups (module docstring); the test indexes."""
    tests: list[int] = []
    for g, group_name in enumerate(("Chemistry", "Hematology", "Urinalysis")):
        group = vocab.add(
            f"{group_name} tests", "Measurement", "LOINC", "LOINC Group", [], code=f"LG99{g}", standard="C"
        )
        for t in range(4):
            n = 100 * (g + 1) + t
            code = f"99{n:03d}-{n % 10}"  # invented, LOINC-shaped
            tests.append(
                vocab.add(
                    f"{group_name} test {t + 1}", "Measurement", "LOINC", "Lab Test", [group], code=code
                )
            )
    return tests


def _observations(vocab: Vocabulary) -> list[int]:
    """SNOMED observable entities under two groups (module docstring); the leaf indexes."""
    top = vocab.add("Observable entity", "Observation", "SNOMED", "Observable Entity", [])
    leaves: list[int] = []
    for g in range(2):
        group = vocab.add(f"Observable group {g + 1}", "Observation", "SNOMED", "Observable Entity", [top])
        leaves += [
            vocab.add(f"Observable {g + 1}.{o + 1}", "Observation", "SNOMED", "Observable Entity", [group])
            for o in range(3)
        ]
    return leaves


def snomed_cdm(events: pd.DataFrame, seed: int) -> dict[str, pd.DataFrame]:
    """The tables of the synthetic CDM (module docstring) from ICD-10-CM events (`patient_id, visit,
    code, age`), deterministic from `seed`."""
    from engine.synth.formats import person_and_visit_tables, visit_dates

    rng = np.random.default_rng(seed)
    vocab = Vocabulary()
    codes = sorted(set(events["code"].astype(str)))
    concept_of_code, mapped = _conditions(vocab, codes, rng)
    procedures = np.array(_procedures(vocab, rng))
    drugs = np.array(_drugs(vocab))
    first_icd = len(vocab.rows)
    for _, icd in mapped:
        vocab.add(f"ICD-10-CM {icd}", "Condition", "ICD10CM", "ICD10 code", [], code=icd, standard=None)
    icd_ids = CONCEPT_BASE + np.arange(first_icd, first_icd + len(mapped))
    tests = np.array(_measurements(vocab))  # after the ICD concepts: earlier concept ids unchanged
    observables = np.array(_observations(vocab))
    concept = vocab.concept_frame()
    snomed_ids = CONCEPT_BASE + np.array([n for n, _ in mapped], dtype=np.int64)
    relationship = pd.DataFrame(
        {
            "concept_id_1": np.concatenate([icd_ids, snomed_ids]),
            "concept_id_2": np.concatenate([snomed_ids, icd_ids]),
            "relationship_id": ["Maps to"] * len(mapped) + ["Mapped from"] * len(mapped),
            "valid_start_date": np.datetime64("1970-01-01", "D"),
            "valid_end_date": np.datetime64("2099-12-31", "D"),
            "invalid_reason": None,
        }
    )
    yob, dates = visit_dates(events)
    day = dates.to_numpy().astype("datetime64[D]")
    person, visit, pid_codes, vkey = person_and_visit_tables(events, yob, day)
    cond_concept = CONCEPT_BASE + events["code"].astype(str).map(concept_of_code).to_numpy(dtype=np.int64)
    code_of_id = dict(zip(concept["concept_id"], concept["concept_code"], strict=True))
    condition = pd.DataFrame(
        {
            "condition_occurrence_id": np.arange(1, len(events) + 1),
            "person_id": pid_codes + 1,
            "condition_concept_id": cond_concept,
            "condition_start_date": day,
            "condition_type_concept_id": EHR,
            "visit_occurrence_id": vkey + 1,
            "condition_source_value": [code_of_id[c] for c in cond_concept],
            "condition_source_concept_id": 0,
        }
    )
    procedure = _per_visit(rng, visit, procedures, PROCEDURES_PER_VISIT, "procedure_occurrence", code_of_id)
    drug = _per_visit(rng, visit, drugs, DRUGS_PER_VISIT, "drug_exposure", code_of_id)
    measurement = _per_visit(rng, visit, tests, MEASUREMENTS_PER_VISIT, "measurement", code_of_id)
    observation = _per_visit(rng, visit, observables, OBSERVATIONS_PER_VISIT, "observation", code_of_id)
    return {
        "person": person,
        "visit_occurrence": visit,
        "condition_occurrence": condition,
        "procedure_occurrence": procedure,
        "drug_exposure": drug,
        "measurement": measurement,
        "observation": observation,
        "concept": concept,
        "concept_ancestor": vocab.ancestor_frame(),
        "concept_relationship": relationship,
    }


# table -> its id, concept, date and source value columns (OMOP CDM v5.4)
_EVENT_COLUMNS = {
    "procedure_occurrence": (
        "procedure_occurrence_id",
        "procedure_concept_id",
        "procedure_date",
        "procedure_type_concept_id",
        "procedure_source_value",
    ),
    "drug_exposure": (
        "drug_exposure_id",
        "drug_concept_id",
        "drug_exposure_start_date",
        "drug_type_concept_id",
        "drug_source_value",
    ),
    "measurement": (
        "measurement_id",
        "measurement_concept_id",
        "measurement_date",
        "measurement_type_concept_id",
        "measurement_source_value",
    ),
    "observation": (
        "observation_id",
        "observation_concept_id",
        "observation_date",
        "observation_type_concept_id",
        "observation_source_value",
    ),
}


def _per_visit(
    rng: np.random.Generator,
    visit: pd.DataFrame,
    leaves: np.ndarray,
    per_visit: float,
    table: str,
    code_of_id: dict[int, str],
) -> pd.DataFrame:
    """Rows of procedure_occurrence or drug_exposure: Poisson(per_visit) per visit, Zipf-drawn."""
    n = rng.poisson(per_visit, size=len(visit))
    at = np.repeat(np.arange(len(visit)), n)
    concept = CONCEPT_BASE + leaves[_zipf(rng, len(leaves), len(at))]
    date = visit["visit_start_date"].to_numpy()[at]
    id_col, concept_col, date_col, type_col, source_col = _EVENT_COLUMNS[table]
    out = pd.DataFrame(
        {
            id_col: np.arange(1, len(at) + 1),
            "person_id": visit["person_id"].to_numpy()[at],
            concept_col: concept,
            date_col: date,
            type_col: EHR,
            "visit_occurrence_id": visit["visit_occurrence_id"].to_numpy()[at],
            source_col: [code_of_id[int(c)] for c in concept],
        }
    )
    if table == "drug_exposure":
        out.insert(4, "drug_exposure_end_date", date)
    if table == "measurement":  # an invented result: never part of the known set (engine.io.omop)
        out["value_as_number"] = np.round(rng.normal(100.0, 15.0, size=len(at)), 1)
    return out


def write_snomed_cdm(out_dir: str | Path, seed: int = 0) -> dict[str, Path]:
    """Write `omop_snomed/` (module docstring) beside the sample of `out_dir` (its
    events.parquet), the ICD-10-CM variant of its first `OMOP_MAX_PATIENTS` patients; returns
    table -> path of each Parquet file written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from engine.synth.formats import OMOP_MAX_PATIENTS
    from engine.synth.icd10 import icd10cm_variants

    out = Path(out_dir)
    events = pd.read_parquet(out / "events.parquet")
    keep = pd.unique(events["patient_id"])[:OMOP_MAX_PATIENTS]
    events = events[events["patient_id"].isin(keep)].reset_index(drop=True)
    icd10 = icd10cm_variants(events)[0]
    target = out / SNOMED_DIR
    target.mkdir(parents=True, exist_ok=True)
    paths = {}
    for table, frame in snomed_cdm(icd10, seed).items():
        path = target / f"{table}.parquet"
        table_ = pa.Table.from_pandas(frame, preserve_index=False)
        for i, f in enumerate(table_.schema):  # dates as the DDL's `date`, not timestamps
            if pa.types.is_timestamp(f.type):
                table_ = table_.set_column(i, f.name, table_.column(i).cast(pa.date32()))
        pq.write_table(table_, path, compression="zstd")
        paths[f"omop-snomed {table}"] = path
    return paths
