"""One way to run a method: typed settings per method, each turning a study's inputs into a `Release`.

The pages, the CLI, the study's headless rebuild and the benchmarks call these, so a release made in
the app can be rebuilt byte for byte from its settings (`engine.study.study`). Every release made here
carries its source cohort (`Release.checked`): the construction invariant is checked, and the risk
engine takes a single-visit attacker's knowledge from the original visits (`risk.attacker_known_visits`). Settings are plain frozen
dataclasses that round-trip through JSON (`settings_to_dict` / `settings_from_dict`); `describe()`
gives the readable parameters an IRB report shows. Each parameter is declared once, on its field
(`engine.study.parameters.declared`: type, default, bounds or choices, help; issue 38): `validate`, the study
file's reader, the CLI's options and the app's widgets are made from the declarations, and `validate`
adds only the checks a declaration cannot express (`check_together`).

The methods are those of the papers: GCCens (Tamersoy 2010; thesis ch. III), Heatherly's
frequency-bin generalization (Heatherly 2013), UGACLIP / ACLIP after PPE (Loukides 2010) and the
Longitudinal Data Anonymizer (thesis ch. IV). Johnson 2018's lab-order re-identification, with its
variational autoencoder, is an experiment rather than a release: `LabRecallSettings` runs it the same
way from the Lab orders page, the `labs recall` command and bench/labs.py.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from engine.adversary import (
    PAPERS_KNOWLEDGES,
    Adversary,
    K,
    papers_knowledge,
)
from engine.io.progress import Progress
from engine.memo import memo
from engine.records import Records
from engine.release import Release
from engine.study.parameters import (
    Parameter,
    SettingsError,
    check_declared,
    declared,
    parameter_of,
    read_declared,
)

if TYPE_CHECKING:
    import pandas as pd

    from engine.anonymize.censor import CensorProblem
    from engine.anonymize.policy import PrivacyPolicy
    from engine.anonymize.population import GroupRelease
    from engine.anonymize.profiles import ProfilesRun
    from engine.dataset import Dataset
    from engine.io.concepts import ConceptParents
    from engine.labs.reident import Draws, PatientDays, Recall
    from engine.labs.vae import LatentModel
    from engine.labs.vae_config import VAEConfig
    from engine.utility.queries import UtilityPolicy, Workload

PAPER_CODES = ("250", "272", "401", "724")  # Tamersoy 2010's four codes, thesis D4 (3-digit)
# Tamersoy's four codes are ICD-9-CM. On ICD-10-CM data their counterparts are these 3-character
# categories (our choice, not the paper's): 250 diabetes mellitus -> E11 type 2 diabetes mellitus (the
# bulk of 250.x0/250.x2; type 1, E10, is left out as 250.x1 would be a separate choice), 272 disorders
# of lipoid metabolism -> E78, 401 essential hypertension -> I10, 724 other disorders of the back ->
# M54 dorsalgia (low back pain, sciatica, back pain unspecified: 724.2, 724.3, 724.5).
PAPER_CODES_ICD10CM = ("E11", "E78", "I10", "M54")
CODE_SELECTIONS = ("paper", "top", "chosen", "all")
MAX_COUNT = 1_000_000_000  # the bound of a count (caps, codes, suppressed codes): beyond any data


@dataclass(frozen=True, eq=False)
class RunInputs:
    """The records a method runs on: the population the cohort was drawn from, the cohort to release,
    and the biobank when one is named (Heatherly's Figure 14); an OMOP CDM's own hierarchy when the
    events are its standard concepts (the `cdm` hierarchy)."""

    population: Records
    cohort: Records
    biobank: Records | None = None
    concepts: ConceptParents | None = None  # a CDM's own hierarchy (`Dataset.concepts`; issue 37)


_BIOBANKS_KEPT = 4  # `biobank_between`'s memo (`engine.memo`): the last few data and groups


def biobank_between(
    dataset: Dataset, population_group: str, cohort_group: str, cohort: Records, population: Records
) -> Records | None:
    """The dataset's `biobank` group when it lies between the cohort and the population (Heatherly
    2013, Figure 14: DEMO_B): named, neither the population nor the cohort group, holding every cohort
    patient and held in the population. None otherwise. Memoized per the events' and groups' content
    where the caller's scope says (`engine.memo`: the app's session)."""
    import hashlib

    if "biobank" not in dataset.groups or "biobank" in (population_group, cohort_group):
        return None
    listed = dataset.group_ids("biobank")
    digest = hashlib.sha256("\x1f".join(map(str, listed)).encode()).hexdigest()
    key = (dataset.events.fingerprint, cohort.fingerprint, population.fingerprint, digest)

    def make() -> Records | None:
        bio = set(map(str, listed))
        inside = set(map(str, cohort.patient_ids)) <= bio <= set(map(str, population.patient_ids))
        return dataset.group_records("biobank") if inside else None

    return memo("runs biobanks", key, make, size=_BIOBANKS_KEPT)


class Declared:
    """Settings whose fields are declared (`engine.study.parameters.declared`): `validate` checks every
    declared parameter, named with `owner` (default the method's name), then `check_together`."""

    method: ClassVar[str]

    def validate(self, owner: str | None = None) -> None:
        check_declared(self, self.method if owner is None else owner)
        self.check_together()

    def check_together(self) -> None:
        """The checks a declaration cannot express (one parameter against another, nested settings)."""


def _choices(module: str, name: str):
    """Choices held by a module that the settings import only when asked (numpy, numba behind it)."""

    def allowed() -> tuple:
        import importlib

        return tuple(getattr(importlib.import_module(module), name))

    return allowed


SCOPE_HELP = "k-map (population) or k-anonymity (cohort)"


@dataclass(frozen=True)
class CodeSelection(Declared):
    """Which codes a method releases: Tamersoy's four 3-digit codes (`paper`), the `top` most frequent
    codes of the cohort, `chosen` codes, or `all` codes."""

    method: ClassVar[str] = "codes"
    mode: str = declared(Parameter("mode", str, "paper", choices=CODE_SELECTIONS, flag=""))
    top_n: int = declared(
        Parameter(
            "top_n",
            int,
            10,
            bounds=(1, MAX_COUNT),
            flag="--top-codes",
            help="keep the N codes held by most cohort patients",
        )
    )
    chosen: tuple[str, ...] = ()

    def check_together(self) -> None:
        if not isinstance(self.chosen, tuple) or not all(isinstance(c, str) for c in self.chosen):
            raise SettingsError(f"codes: chosen must be a list of codes, not {self.chosen!r}")
        if self.mode == "chosen" and not self.chosen:
            raise SettingsError("choose at least one code")

    def describe(self) -> str:
        if self.mode == "paper":
            return (
                "Tamersoy's four codes 250, 272, 401, 724 (3-digit categories; "
                "on ICD-10-CM data their counterparts E11, E78, I10, M54)"
            )
        if self.mode == "top":
            return f"the {self.top_n} most frequent codes of the cohort"
        if self.mode == "chosen":
            return f"{len(self.chosen)} chosen codes"
        return "all codes"


def paper_codes_for(items) -> tuple[str, ...]:
    """Tamersoy's four codes in the vocabularies of these item labels: the ICD-9-CM 3-digit codes
    (`PAPER_CODES`) on ICD-9-CM data (or data of no ICD vocabulary), their ICD-10-CM categories
    (`PAPER_CODES_ICD10CM`) on ICD-10-CM data, both on mixed data (an ICD-9 and an ICD-10 code stay
    distinct items)."""
    from engine.vocab import ICD9CM, ICD10CM, vocabulary_of_item

    found = {vocabulary_of_item(str(x)) for x in items} - {None}
    if found == {ICD10CM}:
        return PAPER_CODES_ICD10CM
    if found == {ICD9CM, ICD10CM}:
        return PAPER_CODES + PAPER_CODES_ICD10CM
    return PAPER_CODES


def roll_up_to_categories(codes: list[str]) -> list[str]:
    """Each code replaced by its 3-digit ICD-9-CM or 3-character ICD-10-CM category (the thesis' D4
    roll-up, `401.1` -> `401`, `E11.9` -> `E11`), through the hierarchy of the codes' vocabularies;
    codes the hierarchy does not know are kept as they are."""
    from engine.hierarchy import icd_hierarchy_for

    hierarchy = icd_hierarchy_for(codes)
    return hierarchy.roll_up(hierarchy.roll_up(codes, "3-digit"), "category")


ROLL_UP_LEVELS = ("4-digit", "3-digit", "section", "chapter")  # ICD-9-CM names; ICD-10-CM: counterparts


def roll_up_codes(codes: list[str], level: str) -> list[str]:
    """Each code replaced by its ancestor at an ICD-9-CM level (`ROLL_UP_LEVELS`) or, for ICD-10-CM
    codes, at that level's ICD-10-CM counterpart (3-digit: the category, E11), through the hierarchy
    of the codes' vocabularies; codes with no such ancestor are kept as they are."""
    from engine.hierarchy import icd10cm_levels, icd_hierarchy_for

    hierarchy = icd_hierarchy_for(codes)
    out = hierarchy.roll_up(codes, level)
    for counterpart in icd10cm_levels((level,))[-1:]:
        out = hierarchy.roll_up(out, counterpart)
    return out


def code_frequency_order(cohort: Records) -> list[str]:
    """The cohort's codes, most records first (ties by code text)."""
    import numpy as np

    held = np.asarray(cohort.patient_item_sets.sum(axis=0)).ravel()
    codes = [str(x) for x in cohort.items]
    order = sorted((i for i in range(len(codes)) if held[i] > 0), key=lambda i: (-held[i], codes[i]))
    return [codes[i] for i in order]


# --------------------------------------------------------------------------------- GCCens
@dataclass(frozen=True)
class GCCensSettings(Declared):
    """GCCens (Tamersoy 2010 Figure 2; thesis Algorithm 1): censor repeats of the selected codes until
    every record is k-mapped (scope population) or k-anonymous (scope cohort), after caps."""

    method: ClassVar[str] = "GCCens"
    k: int = declared(K)
    scope: str = declared(
        Parameter("scope", str, "population", choices=("population", "cohort"), help=SCOPE_HELP)
    )
    codes: CodeSelection = field(default_factory=CodeSelection)
    # universal cap; None: per-code caps (`caps`, default the cohort's maxima)
    cap: int | None = declared(
        Parameter(
            "cap", int, None, bounds=(0, MAX_COUNT), optional=True, help="one universal cap for every code"
        )
    )
    caps: tuple[tuple[str, int], ...] = ()
    variant: str = declared(
        Parameter(
            "variant",
            str,
            "faithful",
            choices=_choices("engine.anonymize.censor", "VARIANTS"),
            help="faithful Algorithm 1 or targeted",
        )
    )

    def check_together(self) -> None:
        self.codes.validate(f"{self.method} codes")
        for code, c in self.caps:
            code_cap(code).check(c, self.method)

    @property
    def adversary(self) -> Adversary:
        return Adversary(self.scope, "all_visits")  # type: ignore[arg-type]

    def describe(self) -> dict[str, str]:
        caps = f"universal cap {self.cap}" if self.cap is not None else "per-code caps"
        if self.caps and self.cap is None:
            caps += " (" + ", ".join(f"{c}: {v}" for c, v in self.caps) + ")"
        return {
            "k": str(self.k),
            "scope": "k-map against the population"
            if self.scope == "population"
            else "k-anonymity in the cohort",
            "codes": self.codes.describe(),
            "caps": caps,
            "variant": self.variant,
        }

    def prepare_input(self, inputs: RunInputs, progress: Progress | None = None) -> GCCensInput:
        """The selected codes of the cohort (and population), rolled up to categories for the paper's
        codes in the data's vocabulary, as GCCens' prepared problem: what `run` censors and what the
        GCCens view draws its baseline, cap table and sweeps from."""
        from engine.anonymize.censor import prepare, rolled_item_codes, select_codes

        self.validate()
        if progress is not None:
            progress(0.0, "selecting the codes")
        cohort, population = inputs.cohort, inputs.population
        roll = None
        vocab = sorted({str(x) for x in population.items} | {str(x) for x in cohort.items})
        if self.codes.mode == "paper":
            roll = dict(zip(vocab, roll_up_to_categories(vocab), strict=True))
            codes = list(paper_codes_for(vocab))
        elif self.codes.mode == "top":
            codes = code_frequency_order(cohort)[: self.codes.top_n]
        elif self.codes.mode == "chosen":
            codes = list(self.codes.chosen)
        else:
            codes = code_frequency_order(cohort)
        sel_cohort = select_codes(cohort, codes, roll)
        sel_pop = select_codes(population, codes, roll)
        if progress is not None:
            progress(0.0, f"preparing the repeat counts of {len(codes):,} codes")
        problem = prepare(sel_cohort, sel_pop if self.scope == "population" else None, self.scope)  # type: ignore[arg-type]
        item_codes = None
        if roll is not None:
            item_codes = {i: c for i, c in rolled_item_codes(vocab, roll).items() if i in codes}
        return GCCensInput(problem, sel_cohort, item_codes)

    def run(self, inputs: RunInputs, progress: Progress | None = None) -> Release:
        return self.release_of(self.prepare_input(inputs, progress), inputs.cohort, progress)

    def release_of(self, prepared: GCCensInput, cohort: Records, progress: Progress | None = None) -> Release:
        """GCCens on a prepared input (`prepare_input`), checked against the cohort it stands for."""
        from engine.anonymize.censor import gccens_run

        cap_args: dict[str, Any] = (
            {"cap": self.cap} if self.cap is not None else {"caps": dict(self.caps) or None}
        )
        release = gccens_run(prepared.problem, self.k, variant=self.variant, progress=progress, **cap_args)  # type: ignore[arg-type]
        if prepared.item_codes is not None:
            release = dataclasses.replace(release, item_codes=prepared.item_codes)
        return release.checked(cohort)


@dataclass(frozen=True, eq=False)
class GCCensInput:
    """What GCCens runs on (`GCCensSettings.prepare_input`): the prepared problem, the selected cohort,
    and the codes each rolled-up category stands for (None when no roll-up was made)."""

    problem: CensorProblem
    cohort: Records
    item_codes: dict[str, frozenset[str]] | None


# ------------------------------------------------------------------------------- Heatherly
@dataclass(frozen=True)
class HeatherlySettings(Declared):
    """Heatherly 2013: frequency-bin generalization within utility groups, then suppression, on the
    cohort (DEMO_D), the biobank (DEMO_B) or the population (DEMO_S), the cohort then extracted."""

    method: ClassVar[str] = "Heatherly"
    k: int = declared(K)
    scope: str = declared(
        Parameter(
            "scope",
            str,
            "cohort",
            choices=("cohort", "biobank", "population"),
            help="group anonymized before extraction",
        )
    )
    constraints: str = declared(
        Parameter(
            "constraints",
            str,
            "phecode",
            help="utility constraints: phecode (default), icd9:LEVEL (5-digit, 4-digit, 3-digit, section, chapter, "
            "Any), cdm or cdm:DEPTH (codes under one concept DEPTH levels below the root, default 2, of an OMOP "
            "CDM's own hierarchy: --source omop --omop-codes standard with concept and concept_ancestor), none",
        )
    )
    complete: bool = declared(
        Parameter("complete", bool, True, help="completion pass until every visit meets k")
    )
    # export keeps the visit grouping (else one set of codes per patient)
    with_visits: bool = declared(
        Parameter(
            "with_visits",
            bool,
            False,
            help="keep the visit grouping in the release (patient_id, visit, code); default: one set of codes "
            "per patient (patient_id, code), the paper's form. Verified and completed for the export chosen",
        )
    )
    # the completion pass's strategy (issue #36: "phewas" keeps case statuses where it can; "rarest",
    # the first pass, stays the default: bench/table4.py)
    completion: str = declared(
        Parameter(
            "completion",
            str,
            "rarest",
            choices=_choices("engine.anonymize.population", "COMPLETIONS"),
            help="the completion pass's strategy: rarest items first (default), or phewas: keep case statuses "
            "where possible (issue 36; bench/table4.py)",
        )
    )

    def check_together(self) -> None:
        from engine.anonymize.population import parse_constraints

        try:
            parse_constraints(self.constraints)
        except ValueError as exc:
            raise SettingsError(f"utility constraints: {exc}") from None

    @property
    def adversary(self) -> Adversary:
        return Adversary("cohort" if self.scope == "cohort" else "population", "single_visit")

    def describe(self) -> dict[str, str]:
        from engine.anonymize.population import COMPLETION_WORDS, SCOPE_NAMES, export_label

        return {
            "k": str(self.k),
            "anonymized group": f"{self.scope} ({SCOPE_NAMES[self.scope]})",
            "utility constraints": self.constraints,
            "completion pass": (
                f"yes ({COMPLETION_WORDS[self.completion]})"
                if self.complete
                else "no (the paper's procedure only)"
            ),
            "export": export_label(self.with_visits),
        }

    def run_result(
        self, inputs: RunInputs, progress: Progress | None = None, *, verify_now: bool = True
    ) -> GroupRelease:
        """The full result behind the release (the released group, the procedure's figures and the
        method's own verification), for the views and benchmarks that show them. `verify_now=False`:
        the method's verification waits for its first reader (`run`, whose caller verifies)."""
        from engine.anonymize.population import anonymize, cdm_depth

        self.validate()
        group = {"cohort": inputs.cohort, "biobank": inputs.biobank, "population": inputs.population}[
            self.scope
        ]
        if group is None:
            raise SettingsError("the biobank scope needs a biobank group")
        if cdm_depth(self.constraints) is not None and inputs.concepts is None:
            raise SettingsError(f"the utility constraints {self.constraints!r} need {CDM_HIERARCHY_NEEDS}")
        return anonymize(
            group,
            inputs.cohort.patient_ids,
            self.k,
            scope=self.scope,
            constraints=self.constraints,
            complete=self.complete,
            progress=progress,
            with_visits=self.with_visits,
            completion=self.completion,
            concepts=inputs.concepts,
            verify_now=verify_now,
        )

    def run(self, inputs: RunInputs, progress: Progress | None = None) -> Release:
        return self.run_result(inputs, progress, verify_now=False).release.checked(inputs.cohort)


# -------------------------------------------------------------------------------- profiles
@dataclass(frozen=True)
class ProfilesSettings(Declared):
    """PPE, then UGACLIP (utility policy honoured) or ACLIP (Loukides 2010). The utility policy is
    kept as the CSV text it was read from, so a study file carries it whole."""

    method: ClassVar[str] = "Profiles"
    algorithm: str = declared(Parameter("algorithm", str, "UGACLIP", choices=("UGACLIP", "ACLIP"), flag=""))
    k: int = declared(K)
    knowledge: str = declared(
        Parameter("knowledge", str, "single_visit", choices=PAPERS_KNOWLEDGES, help="PPE filtering condition")
    )
    # None: the shipped default policy (PNAS Table 1); the CLI's --utility-policy names its file
    utility_policy_csv: str | None = declared(
        Parameter("utility_policy_csv", str, None, optional=True, flag="")
    )
    max_suppressed: int | None = declared(
        Parameter(
            "max_suppressed",
            int,
            None,
            bounds=(0, MAX_COUNT),
            optional=True,
            help="stop when more distinct codes must be suppressed",
        )
    )
    # export keeps the visit grouping (single-visit knowledge only)
    with_visits: bool = declared(
        Parameter(
            "with_visits",
            bool,
            False,
            help="keep the visit grouping in the release (patient_id, visit, code; single_visit only); "
            "default: one set of codes per patient (patient_id, code), the paper's released profiles",
        )
    )
    # "cdm": the utility policy of an OMOP CDM's own hierarchy (`cdm_utility_policy`; issue 37)
    utility_hierarchy: str = declared(
        Parameter(
            "utility_hierarchy",
            str,
            "",
            choices=("", "cdm"),
            help="cdm: the utility policy of an OMOP CDM's own hierarchy, the codes below each concept 2 "
            "levels under its root one constraint (--omop-codes standard; instead of --utility-policy)",
        )
    )

    def check_together(self) -> None:
        if self.utility_hierarchy and self.utility_policy_csv is not None:
            raise SettingsError("give an uploaded utility policy or the CDM's hierarchy, not both")
        if self.with_visits and self.knowledge != "single_visit":
            raise SettingsError(
                "keeping visits in the export needs single-visit knowledge: an attacker who knows every "
                "visit could match them one by one"
            )

    @property
    def adversary(self) -> Adversary:
        return Adversary("cohort", self.knowledge)  # type: ignore[arg-type]

    def utility_policy(self, items=None, concepts: ConceptParents | None = None):
        """The uploaded policy, else the shipped default in the vocabularies of `items` (the cohort's
        codes): ICD-9-CM (PNAS Table 1), ICD-10-CM, or on mixed data each disease's codes of both;
        with `utility_hierarchy="cdm"` the CDM's (`cdm_utility_policy` of `concepts`)."""
        from engine.utility.queries import default_utility_policy, read_utility_policy

        if self.utility_hierarchy == "cdm":
            if concepts is None:
                raise SettingsError(f"the utility hierarchy 'cdm' needs {CDM_HIERARCHY_NEEDS}")
            return cdm_utility_policy(concepts, [] if items is None else items)
        if self.utility_policy_csv is None:
            return default_utility_policy(items)
        return read_utility_policy(io.StringIO(self.utility_policy_csv), name="utility policy")

    def describe(self) -> dict[str, str]:
        from engine.anonymize.population import export_label

        return {
            "algorithm": self.algorithm,
            "k": str(self.k),
            "privacy policy": "every "
            + ("visit's" if self.knowledge == "single_visit" else "record's")
            + " code set (PPE)",
            "utility policy": "the CDM's hierarchy (the codes below each concept 2 levels under its root)"
            if self.utility_hierarchy == "cdm"
            else "shipped default (PNAS Table 1)"
            if self.utility_policy_csv is None
            else "uploaded",
            "suppression limit": "none" if self.max_suppressed is None else f"{self.max_suppressed} codes",
            "export": export_label(self.with_visits),
        }

    def run(self, inputs: RunInputs, progress: Progress | None = None) -> Release:
        return self.run_result(inputs, progress, verify_now=False).release.checked(inputs.cohort)

    def run_result(
        self,
        inputs: RunInputs,
        progress: Progress | None = None,
        *,
        policy: PrivacyPolicy | None = None,
        verify_now: bool = True,
        workload: Workload | None = None,
    ) -> ProfilesRun:
        """The full run behind the release (the privacy policy, its check, the utility measures).
        `policy`: the cohort's privacy policy when already extracted (PPE at this k and knowledge), so
        that UGACLIP and ACLIP on the same cohort share one extraction; `workload`: the cohort's
        relative-error workload (`case_count_workload`) when the caller holds it. `verify_now=False`:
        the method's verification waits for its first reader (`run`, whose caller verifies)."""
        from engine.anonymize.profiles import run_profiles

        self.validate()
        return run_profiles(
            inputs.cohort,
            self.k,
            self.knowledge,
            self.algorithm,
            self.utility_policy([str(x) for x in inputs.cohort.items], inputs.concepts).as_mapping(),
            policy=policy,
            max_suppressed=self.max_suppressed,
            with_visits=self.with_visits,
            progress=progress,
            verify_now=verify_now,
            workload=workload,
        )


CDM_POLICY_DEPTH = 2  # the concepts two levels below the hierarchy's root (`cdm_utility_policy`)


def cdm_utility_policy(concepts: ConceptParents, items) -> UtilityPolicy:
    """UGACLIP's utility policy of an OMOP CDM (issue 37; our rule, not Loukides 2010's, whose policy
    is PNAS Table 1 in ICD-9-CM): the codes of `items` grouped by their concept two levels below the
    root of the CDM's hierarchy (`ConceptParents.hierarchy`, `Hierarchy.groups_at`; the children of
    a vocabulary's top concept, such as the synthetic SNOMED's 20 chapter-like findings), each group one
    constraint named by that concept's concept_name. The parents of the codes (the narrowest groups)
    suppressed 42.6% of the 5,000-patient sample CDM's events at k = 5, these 0.01%."""
    from engine.utility.queries import UtilityPolicy

    codes = [str(x) for x in items]
    groups = concepts.hierarchy(codes).groups_at(codes, CDM_POLICY_DEPTH)
    names = {p: f"{concepts.names.get(p) or p} ({p})" for p in groups}
    why = "the data codes below this concept in the CDM's concept_ancestor"
    return UtilityPolicy(
        {names[p]: c for p, c in groups.items()}, {names[p]: why for p in groups}, code_column="concept_codes"
    )


# ------------------------------------------------------------------------------------- LDA
ICD_HIERARCHIES = ("icd9-thesis", "icd9-4digit", "phecode", "cdm")  # cdm: RunInputs.concepts (issue 37)
AGES = (0, 150)  # the ages an age domain may span (a study file's, the app's inputs)
CDM_HIERARCHY_NEEDS = (
    "events read from an OMOP CDM in standard concepts (--omop-codes standard) with its vocabulary "
    "tables concept and concept_ancestor"
)
_LDA_INPUTS_KEPT = 4  # `LDASettings.inputs`' memo (`engine.memo`): the last few cohorts and selections


@dataclass(frozen=True)
class LDASettings(Declared):
    """The Longitudinal Data Anonymizer (thesis ch. IV): (ICD, Age) trajectories clustered by MDAV
    over Baseline or A-GS alignments, k-anonymous against an attacker who knows every pair.

    Ages above 89 are always one category, `90+` (HIPAA safe harbor; issue 23): the age hierarchy is
    top-coded whatever `top_code_90` says. The field stays so that study files that name it still
    read (`settings_from_dict` refuses unknown fields); it changes nothing."""

    method: ClassVar[str] = "LDA"
    k: int = declared(K)
    codes: CodeSelection = field(default_factory=CodeSelection)
    icd_hierarchy: str = declared(
        Parameter("icd_hierarchy", str, "icd9-thesis", choices=ICD_HIERARCHIES, flag="")
    )
    age_low: int = declared(Parameter("age_low", int, 1, bounds=AGES, flag=""))
    age_high: int = declared(Parameter("age_high", int, 128, bounds=AGES, flag=""))
    # kept for study files; ages are top-coded at 90 whatever it says
    top_code_90: bool = declared(Parameter("top_code_90", bool, True, flag=""))
    w_icd: float = declared(
        Parameter(
            "w_icd",
            float,
            0.5,
            bounds=(0.0, 1.0),
            help="weight of the code part of the information loss, from 0 to 1; the age part weighs 1 minus it",
        )
    )
    alignment: str = declared(
        Parameter(
            "alignment",
            str,
            "a-gs",
            choices=_choices("engine.anonymize.alignment", "METHODS"),
            help="alignment (Algorithm 3 or 2)",
            flag="--method",
        )
    )
    # codes replaced by their ancestor at this level first; "" none
    roll_up: str = declared(
        Parameter(
            "roll_up",
            str,
            "",
            choices=("", *ROLL_UP_LEVELS),
            help="replace each code by its ancestor at this level first (the thesis' D4 sets use 3-digit codes)",
        )
    )

    def check_together(self) -> None:
        self.codes.validate(f"{self.method} codes")
        if self.age_low >= self.age_high:
            raise SettingsError(f"the age domain must run upwards, not {self.age_low}..{self.age_high}")

    @property
    def adversary(self) -> Adversary:
        return Adversary("cohort", "all_visits")

    def describe(self) -> dict[str, str]:
        return {
            "k": str(self.k),
            "codes": self.codes.describe(),
            "ICD hierarchy": self.icd_hierarchy,
            "age hierarchy": f"ages {self.age_low}-{self.age_high}, 90+ top-coded",
            "weights": f"w_ICD {self.w_icd:g}, w_Age {1 - self.w_icd:g}",
            "alignment": "A-GS" if self.alignment == "a-gs" else "Baseline",
            **({"codes rolled up to": self.roll_up} if self.roll_up else {}),
        }

    def trajectories(self, cohort: Records):
        """The cohort's (ICD, Age) trajectories of the selected codes (after the roll-up, if any)."""
        import pandas as pd

        from engine.anonymize.trajectories import Trajectories

        def per_code(fn, codes: pd.Series) -> pd.Series:  # each distinct code mapped once
            index, distinct = pd.factorize(codes.astype(str))
            return pd.Series(pd.Index(fn(distinct.tolist()), dtype=object)[index], index=codes.index)

        df = cohort.to_frame()
        if self.roll_up:
            df = df.assign(code=per_code(lambda c: roll_up_codes(c, self.roll_up), df["code"]))
        if self.codes.mode == "all":
            return Trajectories.from_frame(df, patient_ids=cohort.patient_ids)
        if self.codes.mode == "paper":
            df = df.assign(code=per_code(roll_up_to_categories, df["code"]))
            codes = list(paper_codes_for(str(x) for x in cohort.items))
            return Trajectories.from_frame(df, patient_ids=cohort.patient_ids, codes=codes)
        if self.codes.mode == "top":
            return Trajectories.from_frame(df, patient_ids=cohort.patient_ids, top_codes=self.codes.top_n)
        return Trajectories.from_frame(df, patient_ids=cohort.patient_ids, codes=list(self.codes.chosen))

    def hierarchies(self, items=None, concepts: ConceptParents | None = None):
        """The ICD and age hierarchies. The ICD hierarchy follows the vocabularies of `items` (the
        trajectories' codes; None: ICD-9-CM): `icd9-thesis` / `icd9-4digit` name the ICD-9-CM levels
        kept, which on ICD-10-CM or mixed data keep their ICD-10-CM counterparts
        (`engine.hierarchy.icd_hierarchy_for`; the thesis' 3-digit level is the category, E11);
        `phecode` hangs ICD-10-CM codes under their phecode too when the data has any. Codes of `items`
        the hierarchy lacks get their place by their own digits (`engine.hierarchy.with_codes`), so
        the LDA runs on all codes of any data (issue 35, finding 6). `cdm`: the CDM's own
        `concept_ancestor` (`concepts`, `Hierarchy.from_poly_parents`; issue 37), refused by name
        without one."""
        from engine.hierarchy import (
            ICD9_LEVELS,
            ICD9_THESIS_LEVELS,
            Hierarchy,
            icd_hierarchy_for,
            with_codes,
        )
        from engine.vocab import ICD10CM, vocabulary_of_item

        items = [] if items is None else [str(x) for x in items]
        if self.icd_hierarchy == "cdm":
            if concepts is None:
                raise SettingsError(f"the ICD hierarchy 'cdm' needs {CDM_HIERARCHY_NEEDS}")
            icd = concepts.hierarchy(items)
        elif self.icd_hierarchy == "phecode":
            icd = Hierarchy.phecodes(icd10cm=any(vocabulary_of_item(x) == ICD10CM for x in items))
        else:
            levels = ICD9_THESIS_LEVELS if self.icd_hierarchy == "icd9-thesis" else ICD9_LEVELS
            icd = icd_hierarchy_for(items, levels)
        return with_codes(icd, items), Hierarchy.ages(
            self.age_low, self.age_high, top_code_90=True
        )  # always (class docstring)

    def inputs(self, cohort: Records, trajectories=None, concepts: ConceptParents | None = None) -> tuple:
        """(trajectories, ICD hierarchy, age hierarchy) of this cohort, memoized on the cohort's
        content and the settings that shape them (not k, the weights or the alignment: a run at
        another k starts from here), where the caller's scope says (`engine.memo`: the app's
        session). `trajectories`: those `self.trajectories(cohort)` gives; `concepts`: the CDM's
        hierarchy (`RunInputs.concepts`) for `cdm`."""
        source = cohort.fingerprint if trajectories is None else trajectories.fingerprint
        tree = concepts.fingerprint if concepts is not None and self.icd_hierarchy == "cdm" else None
        key = (source, self.codes, self.roll_up, self.icd_hierarchy, tree, self.age_low, self.age_high)

        def make() -> tuple:
            traj = self.trajectories(cohort) if trajectories is None else trajectories
            return (traj, *self.hierarchies(set(map(str, traj.codes)), concepts))

        return memo("runs lda inputs", key, make, size=_LDA_INPUTS_KEPT)

    def run_result(self, inputs: RunInputs, progress: Progress | None = None, *, trajectories=None):
        """The full LDA result (clusters, losses) behind the release. `trajectories`: those
        `self.trajectories(inputs.cohort)` gives, when the caller built them already."""
        from engine.anonymize.trajectories import lda

        self.validate()
        trajectories, icd, age = self.inputs(inputs.cohort, trajectories, inputs.concepts)
        return lda(
            trajectories,
            self.k,
            w_icd=self.w_icd,
            method=self.alignment,
            icd_hierarchy=icd,
            age_hierarchy=age,
            progress=progress,
        )

    def run(self, inputs: RunInputs, progress: Progress | None = None) -> Release:
        res = self.run_result(inputs, progress)
        return res.release().checked(res.source_pairs())  # the source: the cohort's (code, age) pairs


# ------------------------------------------------------------------ the views' first settings
OPENING_CODES = CodeSelection("paper")  # GCCens' first codes (they verify; all codes one choice away)


def opening_settings(cohort: Records, adversary: Adversary, k: int) -> dict[str, MethodSettings]:
    """The setting each method's view opens on (issue 35, finding 6): one whose release verifies under
    the sidebar's adversary and k on the shipped sample (tests/test_defaults_verify.py) and keeps the page
    live. Heatherly with its completion pass (the paper's procedure alone, one click off, left 1,805 of
    2,700 records below k = 5); UGACLIP under the adversary's knowledge; GCCens (in the adversary's scope)
    and the LDA (over the data's age domain, `default_age_domain`) on the papers' codes, which verify.
    All codes verify too and keep more pairs (GCCens 17.8% against 4.9%, the LDA 97.0% against 3.9%) but
    not the PheWAS (GCCens loses 105 of 107 associations against 107), and they are not live: every
    change of GCCens on all codes waits for "Run", and the LDA on all codes takes about 34 s on the sample
    against 1.3 s. They are one choice away."""
    from engine.anonymize.trajectories import default_age_domain

    ages = cohort.event_age
    low, high = (LDASettings.age_low, LDASettings.age_high) if ages is None else default_age_domain(ages)
    return {
        HeatherlySettings.method: HeatherlySettings(k=k, scope=adversary.scope),
        GCCensSettings.method: GCCensSettings(k=k, scope=adversary.scope, codes=OPENING_CODES),
        ProfilesSettings.method: ProfilesSettings(k=k, knowledge=papers_knowledge(adversary.knowledge)),
        LDASettings.method: LDASettings(k=k, age_low=low, age_high=high),
    }


# ------------------------------------------------------------------ lab orders (Johnson 2018)
LAB_AGAINST = ("99", "population")  # section 2.5: 99 others drawn at random, or everyone
LAB_QUERIES = ("one_day", "all_days")
LAB_MAX_SEED = 2**31 - 1  # the Lab orders page's seed input; numpy's and torch's seeds take it


@dataclass(frozen=True)
class LabRecallSettings:
    """One-day re-identification from lab orders and its latent-space release (Johnson 2018,
    sections 2.5-2.7, Figures 4-6): keep the labs ordered on at least `min_orders` patient-days (None:
    the paper's 500 scaled to the data, `reident.default_min_orders`), draw `simulations` x `trials`
    breached records (`query`) ranked `against` 99 others or the population, and with `vae` set,
    train the autoencoder and rank the same draws on its released vectors (the paired test of Figure 6).

    The steps are methods so that a page can keep each one's result (`restricted`, `draws`,
    `raw_recall`, `train`, `latent_recall`); `run_result` runs them in order."""

    method: ClassVar[str] = "lab_recall"
    min_orders: int | None = declared(
        Parameter(
            "min_orders",
            int,
            None,
            bounds=(1, MAX_COUNT),
            optional=True,
            help="keep labs ordered on at least N patient-days (default: the paper's 500 scaled to the data)",
        )
    )
    trials: int = declared(
        Parameter(
            "trials", int, 100, bounds=(1, MAX_COUNT), help="breached records per simulation (default 100)"
        )
    )
    simulations: int = declared(
        Parameter("simulations", int, 10, bounds=(1, MAX_COUNT), help="repeated simulations (default 10)")
    )
    against: str = declared(
        Parameter("against", str, "99", choices=LAB_AGAINST, help="99 others or everyone")
    )
    query: str = declared(
        Parameter("query", str, "one_day", choices=LAB_QUERIES, help="what the attacker knows")
    )
    seed: int = declared(Parameter("seed", int, 0, bounds=(0, LAB_MAX_SEED), help="random seed (default 0)"))
    vae: VAEConfig | None = None

    def validate(self) -> None:
        """The declared parameters, named without an owner (the CLI says `labs recall:`), then the
        autoencoder's seed."""
        check_declared(self, "")
        if self.vae is not None and self.vae.seed != self.seed:
            raise SettingsError(f"the autoencoder's seed ({self.vae.seed}) must be the run's ({self.seed})")

    def min_orders_for(self, days: PatientDays) -> int:
        from engine.labs.reident import default_min_orders

        return self.min_orders if self.min_orders is not None else default_min_orders(days.n_days)

    def restricted(self, days: PatientDays) -> PatientDays:
        """The patient-days on the labs kept (section 2.4: labs ordered on >= min_orders days)."""
        return days.restrict_labs(self.min_orders_for(days))

    def draws(self, days: PatientDays) -> Draws:
        """Breached records and candidates (section 2.5), seeded; a ValueError names what the data lacks."""
        from engine.labs.reident import draw_queries

        return draw_queries(days, self.trials, self.simulations, self.against, self.query, self.seed)  # type: ignore[arg-type]

    def raw_recall(self, days: PatientDays, draws: Draws, progress: Progress | None = None) -> Recall:
        """Recall@n on the raw patient-day vectors (Figure 4)."""
        from engine.labs.reident import recall_at_n

        return recall_at_n(days, draws, progress=progress)

    def train(self, days: PatientDays, progress: Progress | None = None) -> LatentModel:
        """The autoencoder trained on `days` under `vae` (section 2.7, Figure 5); imports torch."""
        if self.vae is None:
            raise SettingsError("these settings train no autoencoder (vae is None)")
        from engine.io.extras import require

        require("vae", "the VAE")  # torch is the 'vae' extra: refused by name without it
        from engine.labs.vae import train_vae

        return train_vae(days, self.vae, progress=progress)

    def latent_recall(self, days: PatientDays, draws: Draws, model: LatentModel) -> Recall:
        """Recall@n on the model's released vectors, on the same draws (section 3.3.2)."""
        from engine.labs.reident import recall_at_n

        return recall_at_n(days, draws, vectors=model.latent)

    def run_result(self, days: PatientDays, progress: Progress | None = None) -> LabRecallResult:
        """Every step on the patient-days of every lab (before `min_orders`)."""
        self.validate()
        kept = self.restricted(days)
        draws = self.draws(kept)
        raw = self.raw_recall(kept, draws)
        if self.vae is None:
            return LabRecallResult(self, kept, draws, raw)
        model = self.train(kept, progress)
        return LabRecallResult(self, kept, draws, raw, model, self.latent_recall(kept, draws, model))


@dataclass(frozen=True, eq=False)
class LabRecallResult:
    """What `LabRecallSettings.run_result` computed: the patient-days on the labs kept, the draws,
    Recall@n raw and (with an autoencoder) latent."""

    settings: LabRecallSettings
    days: PatientDays
    draws: Draws
    raw: Recall
    model: LatentModel | None = None
    latent: Recall | None = None

    def paired(self) -> pd.DataFrame | None:
        """Figure 6's paired t-test per n (None without an autoencoder)."""
        from engine.labs.reident import paired_test

        return None if self.latent is None else paired_test(self.raw, self.latent)

    def curves(self) -> pd.DataFrame:
        """Per n: the released vectors' recall (latent when trained, else raw), the random line, and
        with an autoencoder the raw recall and the paired test's p."""
        import pandas as pd

        frame = pd.DataFrame({"n": self.raw.n, "recall": self.raw.mean, "random": self.raw.random})
        paired = self.paired()
        if self.latent is None or paired is None:
            return frame
        return frame.assign(recall=self.latent.mean, recall_raw=self.raw.mean, p=paired["p"].to_numpy())


# ------------------------------------------------------------------------------ (de)serialize
MethodSettings = GCCensSettings | HeatherlySettings | ProfilesSettings | LDASettings
SETTINGS_TYPES: dict[str, type] = {
    t.method: t for t in (GCCensSettings, HeatherlySettings, ProfilesSettings, LDASettings)
}


def settings_to_dict(settings: MethodSettings) -> dict[str, Any]:
    """JSON-ready settings with the method's name under `method`."""
    out: dict[str, Any] = {"method": settings.method}
    for f in dataclasses.fields(settings):
        v = getattr(settings, f.name)
        if isinstance(v, CodeSelection):
            v = {"mode": v.mode, "top_n": v.top_n, "chosen": list(v.chosen)}
        elif isinstance(v, tuple):
            v = [list(x) if isinstance(x, tuple) else x for x in v]
        out[f.name] = v
    return out


def settings_from_dict(data: Mapping[str, Any]) -> MethodSettings:
    """Settings back from `settings_to_dict`, every value checked through its declaration (of its type,
    never coerced: `"7"` or `5.9` for a whole number, `1` for a bool are refused; in its bounds or
    choices); an unknown method or parameter raises SettingsError naming it (issue 38)."""
    name = data.get("method")
    if name not in SETTINGS_TYPES:
        raise SettingsError(f"unknown method {name!r}; known: {', '.join(SETTINGS_TYPES)}")
    cls = SETTINGS_TYPES[name]
    nested = {f.name for f in dataclasses.fields(cls)} & {"codes", "caps"}
    kwargs = read_declared(
        cls, {k: v for k, v in data.items() if k != "method"}, name, others=frozenset(nested)
    )
    if "codes" in data:
        kwargs["codes"] = _read_codes(name, data["codes"])
    if "caps" in data:
        kwargs["caps"] = _read_caps(name, data["caps"])
    settings = cls(**kwargs)
    settings.validate()
    return settings


def _read_codes(owner: str, value: object) -> CodeSelection:
    if not isinstance(value, Mapping):
        raise SettingsError(f"{owner}: codes must be an object of mode, top_n, chosen, not {value!r}")
    chosen = value.get("chosen", [])
    if not isinstance(chosen, list) or not all(isinstance(c, str) for c in chosen):
        raise SettingsError(f"{owner}: codes.chosen must be a list of codes")
    read = read_declared(CodeSelection, value, f"{owner} codes", others=frozenset({"chosen"}))
    return CodeSelection(**read, chosen=tuple(chosen))


def _read_caps(owner: str, value: object) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, list) or not all(
        isinstance(x, list) and len(x) == 2 and isinstance(x[0], str) for x in value
    ):
        raise SettingsError(f"{owner}: caps must be a list of [code, cap] pairs")
    return tuple((c, code_cap(c).check(v, owner)) for c, v in value)


def code_cap(code: str) -> Parameter:
    """The cap of one code (`GCCensSettings.caps`): the universal cap's bounds, None not allowed."""
    cap = parameter_of(GCCensSettings, "cap")
    return dataclasses.replace(cap, name=f"the cap of {code}", optional=False)
