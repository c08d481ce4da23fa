"""What `anonymize METHOD` reports of the release `engine.study.study.make_release` made (issue 38,
finding 2): for each method one function from that `MadeRelease` (the release verified and written,
its verification), the loaded inputs and the method's own result (figures only the run knows:
GCCens' censoring, Heatherly's procedure, PPE's policy, the LDA's clusters) to REPORT.json's fields,
the summary line printed and the hint a refused export adds. `engine.commands.anonymize_release.
anonymize` writes and prints them, once, for every method.

Every report holds the method and its parameters, the sha256 of the inputs (`inputs`/`sources`),
the loaders' warnings, the method's figures and the verification; `anonymize` adds the export record
(`export`: the release fingerprint and the sha256 of the files written, or the refusal)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.anonymize.profiles import ProfilesRun
    from engine.commands.inputs import GroupInputs
    from engine.disclosure.cells import SmallCellPolicy
    from engine.risk import Verification
    from engine.study.runs import GCCensSettings, HeatherlySettings, LDASettings, ProfilesSettings
    from engine.study.study import MadeRelease
    from engine.utility.queries import UtilityPolicy


@dataclass(frozen=True)
class MethodReport:
    """REPORT.json's fields (the export record added by `anonymize`), the line printed, and what a
    refused export's message adds (what the user may change)."""

    fields: dict[str, Any]
    summary: str
    hint: str = ""


def closing(made: MadeRelease) -> str:
    """The end of every summary line: the verdict and how the release file is structured."""
    from engine.io.export import structure_note

    return f"{made.verification.message()} Release {structure_note(made.release)}."


def verification_fields(verification: Verification, adversary: str, before=None) -> dict[str, Any]:
    """A report's `verification`: verdict, adversary (as `adversary` words it), k, message, the
    risk summary before (original distinguishability `before`, when given) and after, and the
    records below k."""
    from engine import risk

    k = verification.k
    out: dict[str, Any] = {
        "ok": verification.ok,
        "adversary": adversary,
        "k": k,
        "message": verification.message(),
    }
    if before is not None:
        out["before"] = risk.summarize(before, k).as_dict()
    out["after"] = risk.summarize(verification.distinguishability, k).as_dict()
    out["failing"] = verification.failing.astype({"distinguishability": int}).to_dict("records")
    return out


def gccens(made: MadeRelease, inputs: GroupInputs, settings: GCCensSettings) -> MethodReport:
    """GCCens (Tamersoy 2010): `engine.anonymize.censor.report` (CUL per record and its statistics,
    the censoring steps, risk before and after with repeats counted)."""
    from engine import risk
    from engine.anonymize.censor import report

    release, verification = made.release, made.verification
    population, cohort = inputs.population, inputs.cohort
    before = risk.original_distinguishability(
        cohort, settings.adversary, population, risk.Matching(count_repeats=True)
    )
    fields = report(
        release,
        verification,
        before,
        original_codes=cohort.n_events,
        population_size=population.n_patients,
        sources=inputs.sources,
    )
    fields["input_warnings"] = inputs.warnings
    pool = population.n_patients if settings.scope == "population" else cohort.n_patients
    loss = release.loss
    summary = (
        f"GCCens k={settings.k} {settings.scope} {settings.variant}: {cohort.n_patients} records, "
        f"{release.records.n_events} of {cohort.n_events} codes released "
        f"({loss['censored_by_caps']} censored by caps, {loss['censored_by_loop']} by the loop), "
        f"mean CUL {fields['cul_statistics']['mean']:.3f}; {closing(made)}"
    )
    hint = (
        f" k = {settings.k} cannot be reached with {settings.scope} scope (even an empty record has only "
        f"{pool} candidates)"
    )
    return MethodReport(fields, summary, hint)


def heatherly(made: MadeRelease, inputs: GroupInputs, settings: HeatherlySettings) -> MethodReport:
    """Heatherly 2013: the procedure's figures, Diagnosis Count and Code Count of the cohort before,
    with and without generalization (Tables 2-3), suppressed events, risk before and after."""
    from engine import risk
    from engine.anonymize.population import SCOPE_NAMES, suppress_rare
    from engine.utility.retention import code_count_phrase, figures

    release, verification = made.release, made.verification
    cohort, scope = inputs.cohort, settings.scope
    group = {"cohort": cohort, "population": inputs.population, "biobank": inputs.biobank}[scope]
    assert group is not None  # the biobank scope needs --biobank (settings_of)
    _, plain_cohort = suppress_rare(group, cohort.patient_ids, settings.k)
    before = risk.original_distinguishability(cohort, verification.adversary, group)
    original, released = figures(cohort), figures(release.records, release.item_codes, original=cohort)
    fields: dict[str, Any] = {
        "method": f"Heatherly 2013, {SCOPE_NAMES[scope]} (frequency-bin generalization, then suppression)",
        "parameters": release.params,
        "inputs": inputs.sources,
        "input_warnings": inputs.warnings,
        "records": {"anonymized group": group.n_patients, "cohort": cohort.n_patients},
        "procedure": release.loss,
        "retention": {
            "original": original.__dict__,
            "with generalization": released.__dict__,
            "without generalization": figures(plain_cohort).__dict__,
        },
        "suppressed events": len(release.suppressed),
        "verification": verification_fields(verification, verification.adversary.label, before),
    }
    summary = (
        f"Heatherly {SCOPE_NAMES[scope]} k={settings.k} ({settings.constraints}"
        f"{', completed' if settings.complete else ''}): {cohort.n_patients} records, DC "
        f"{released.diagnosis_count} of {original.diagnosis_count}, {code_count_phrase(released, original)}; "
        f"{closing(made)}"
    )
    return MethodReport(
        fields, summary, "" if settings.complete else " (--complete adds the completion pass)"
    )


def profiles(
    made: MadeRelease,
    inputs: GroupInputs,
    settings: ProfilesSettings,
    result: ProfilesRun,
    utility: UtilityPolicy,
    cells: SmallCellPolicy,
    policy_name: str | None,
) -> MethodReport:
    """UGACLIP / ACLIP (Loukides 2010): the privacy policy PPE extracted and its check on the
    release, the utility constraints satisfied (patients per disease under the small-cell policy
    `cells`), suppression, relative error. `policy_name`: the utility policy file given, if any."""
    from engine.commands.inputs import findings_json
    from engine.disclosure.cells import suppress_frame
    from engine.utility.queries import satisfaction_words

    release, verification, cohort = made.release, made.verification, inputs.cohort
    policy, check, sat, re_ = result.policy, result.check, result.satisfaction, result.relative_error
    count_cols = ["original_records", "released_records"]  # patients per disease: the report's cells
    shown_sat, sat_note = suppress_frame(sat, cells, count_cols, table="utility constraints")
    fields = {
        "method": settings.algorithm,
        "paper": "Loukides, Gkoulalas-Divanis, Malin 2010, PNAS 107(17):7898-7903",
        "params": {
            "k": settings.k,
            "knowledge": settings.knowledge,
            "utility_policy": policy_name or settings.describe()["utility policy"],
            "max_suppressed": settings.max_suppressed,
        },
        "sources": inputs.sources,
        "input_warnings": findings_json(utility.report, inputs.report),
        "cohort": {"records": cohort.n_patients, "visits": cohort.n_visits, "events": cohort.n_events},
        "privacy_policy": {
            "constraints": len(policy),
            "collected": policy.n_collected,
            "already_protected": policy.n_already_protected,
            "covered_by_superset": policy.n_covered,
        },
        "policy_check": {"ok": check.ok, "violated": check.n_violated, "message": check.message()},
        "verification": {"ok": verification.ok, "message": verification.message()},
        "loss": release.loss,
        "steps": len(release.params.get("trace", [])),
        "utility_constraints": shown_sat.to_dict(orient="records"),
        "small_cells": {"policy": cells.to_dict(), "description": cells.describe(), **sat_note.to_dict()},
        "relative_error": {"queries": len(re_.queries), "mean": re_.mean, "std": re_.std},
    }
    loss = release.loss
    summary = (
        f"{settings.algorithm} k={settings.k} {settings.knowledge}: {cohort.n_patients} records, "
        f"{len(policy)} privacy constraints; {loss['generalized_items']} generalized items, "
        f"{loss['suppressed_codes']} codes suppressed ({loss['share_suppressed_events']:.2%} of events); "
        f"utility constraints satisfied {satisfaction_words(sat)}; RE mean {re_.mean:.3f} (sd {re_.std:.3f}); "
        f"{closing(made)}"
    )
    return MethodReport(fields, summary)


def lda(made: MadeRelease, inputs: GroupInputs, settings: LDASettings, result, trajectories) -> MethodReport:
    """The LDA (Tamersoy 2011 thesis, chapter IV): ILM / ALM and AvgRE, DGH-level shares, the
    clusters and each record's loss of the run `result` on `trajectories`."""
    from engine.utility.loss import avg_re, level_shares, record_losses

    release, verification = made.release, made.verification
    are = avg_re(result)
    adversary = f"{verification.adversary.label} ((code, age) pairs, repeats counted)"
    fields = {
        "method": f"LDA {settings.alignment} + MDAV (Tamersoy 2011 thesis, chapter IV)",
        "parameters": {**release.params, "settings": settings.describe()},
        "inputs": inputs.sources,
        "input_warnings": inputs.warnings,
        "trajectories": trajectories.summary(),
        "loss": {"ILM": release.loss["ILM"], "ALM": release.loss["ALM"], "AvgRE": are.value},
        "workload_queries": len(are.workload),
        "level_shares": level_shares(result).to_dict("records"),
        "clusters": [
            {"size": len(m), "trajectory": [list(p) for p in result.cluster_labels(c)]}
            for c, m in enumerate(result.clusters)
        ],
        "per_record": record_losses(result).astype({"patient_id": str}).to_dict("records"),
        "suppressed_pairs": len(release.suppressed),
        "verification": verification_fields(verification, adversary),
    }
    summary = (
        f"LDA {settings.alignment} k={settings.k} w_icd={settings.w_icd:g}: {trajectories.n} cohort patients, "
        f"{int((trajectories.lengths > 0).sum())} trajectories in {len(result.clusters)} clusters; "
        f"ILM {release.loss['ILM']:.3f} ALM {release.loss['ALM']:.3f} AvgRE {are.value:.3f}; {closing(made)}"
    )
    return MethodReport(fields, summary)
