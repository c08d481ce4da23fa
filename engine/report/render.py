"""The IRB report rendered from its JSON-ready data (`engine.report.report.Report.data`) alone: a self-contained
HTML page, a PDF and Markdown, from one list of blocks (`document`), so all say the same thing.

- HTML: one file, figures as inline SVG drawn here, styles inline, no script and no external URL
  (a Content-Security-Policy forbids loading anything); every text from the data (release names,
  codes, disease names, file names) is HTML-escaped.
- PDF (fpdf2): real text (extractable), the same SVG figures, built-in Helvetica/Courier fonts so the
  bytes do not depend on the fonts of the machine. Characters the built-in fonts lack are written as
  `[U+XXXX]` (a few typographic ones as their ASCII equivalent). The PDF's creation date is the
  generation time, or 1970-01-01 (the SOURCE_DATE_EPOCH=0 convention) in reproducible mode.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engine.report import palette
from engine.report.table4 import NOT_REPRODUCED

# ---------------------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    text: str
    strong: bool = False


@dataclass(frozen=True)
class Pairs:
    """Term and value lines; `compact`: "Term: value" on one line, in a smaller font (PDF)."""

    rows: tuple[tuple[str, str], ...]
    compact: bool = False


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    widths: tuple[float, ...] | None = None  # relative column widths (PDF)


@dataclass(frozen=True)
class Hashes:
    """File name and sha256, set in a fixed-width font, one per line."""

    rows: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Curve:
    label: str
    points: tuple[tuple[float, float], ...]
    colour: str
    dashed: bool = False


@dataclass(frozen=True)
class Figure:
    """A risk curve chart (`svg_cdf`) with its caption."""

    curves: tuple[Curve, ...]
    k: int
    caption: str


@dataclass(frozen=True)
class PageBreak:
    pass


Block = Heading | Para | Pairs | Table | Hashes | Figure | PageBreak
BEFORE_COLOUR = palette.ORIGINAL  # the app's colours (engine/report/palette.py, ui/colours.py; issue 26)


def release_colour(data: dict[str, Any], name: str) -> str:
    """A release's colour in the report: the colour of its place in the study, as in the app. The
    study's order is the report's releases and those left out (`"study order"` when the data has it)."""
    order = data.get("study order") or [
        *(r["name"] for r in data["releases"]),
        *data.get("releases not in this report", []),
    ]
    return palette.release_colour(name, order) or palette.PALETTE[0]


# --------------------------------------------------------------------------------- text helpers
def pct(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{100 * x:.1f}%" if x not in (0, 1) else f"{100 * x:.0f}%"


def share_of(part: int, whole: int) -> str:
    return f"{part:,} of {whole:,} ({pct(part / whole) if whole else 'n/a'})"


def value_text(v: Any) -> str:
    """A value in words: numbers formatted, lists as their items, a mapping as "name value" pairs;
    never JSON (`figure_rows` gives a mapping a row per entry instead)."""
    if v is None:
        return "none"
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, dict):
        return "; ".join(f"{_words(k)} {value_text(x)}" for k, x in v.items()) or "none"
    if isinstance(v, list | tuple):
        if not v:
            return "none"
        shown = ", ".join(value_text(x) for x in v[:LIST_ITEMS])
        return shown + (f" and {len(v) - LIST_ITEMS:,} more" if len(v) > LIST_ITEMS else "")
    return str(v)


LIST_ITEMS = 20  # a list in a table cell: at most this many items, then "and n more"


def _words(name: Any) -> str:
    """A figure's key in words: `share_codes_retained` -> "share codes retained"."""
    return str(name).replace("_", " ")


def figure_rows(values: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """A method's figures as (name, value in words) rows: a nested mapping gives one row per entry,
    named "outer: inner" (so no cell holds JSON)."""
    rows: list[tuple[str, str]] = []
    for key, v in values.items():
        name = prefix + _words(key)
        if isinstance(v, dict) and v:
            rows += figure_rows(v, name + ": ")
        else:
            rows.append((name, value_text(v)))
    return rows


# ------------------------------------------------------------------------------------- document
def _jointly_ok(d: dict[str, Any]) -> bool:
    """Whether the releases the bundle hands over are verified together (issue 35; a report without
    a joint verdict: its releases are judged one by one)."""
    return bool((d.get("joint") or {}).get("verified", True))


def _status(r: dict[str, Any], d: dict[str, Any]) -> str:
    if not r["verification"]["verified"]:
        return "NOT verified, not exported"
    if r.get("sensitive") and not r["sensitive"]["verified"]:  # issue 39
        return "verified at k, NOT exported: above the study's rho"
    if not _jointly_ok(d):
        return "verified alone, NOT exported: the set fails jointly"
    return "verified, exported"


def _joint(d: dict[str, Any]) -> list[Block]:
    """The joint verdict of the releases handed over together (engine.study.joint), said before the
    sign-off: a failing set has no bundle."""
    j = d.get("joint")
    if not j:
        return []
    if j["verified"]:
        return [Para("Releases judged together: " + j["message"], strong=True)]
    return [
        Para(
            "Releases judged together: "
            + j["message"]
            + " The bundle is refused: nothing of these releases is handed over together. Remedies: "
            + j["remedies"]
            + ".",
            strong=True,
        )
    ]


def _phewas_cell(r: dict[str, Any]) -> str:
    p = r["phewas"]
    if p is None:
        return "no genotypes loaded"
    kept = p["original"] - p["lost"]
    return f"{kept:,} of {p['original']:,} kept; {p['lost']:,} lost, {p['false']:,} false"


def _paper_procedure_cell(p: dict[str, Any]) -> str:
    """A completed Heatherly release's paper's procedure (`engine.report.table4.paper_counterpart`)."""
    return f"{p['lost']:,} lost, {p['false']:,} false; {p['guarantee']}"


def constraints_cell(r: dict[str, Any]) -> str:
    """Utility constraints met, the shared policy's (the comparison's figure, every release)."""
    c = r["utility constraints met"]
    return f"{c['met']:,} of {c['of']:,}"


def _sized(label: str, n: int) -> str:
    """A generalized item's readable label with its number of codes, said once."""
    tail = " (see code map)"
    if label.endswith(tail):
        return label[: -len(tail)] + f" ({n:,} codes, see code map)"
    return f"{label} ({n:,} codes)"


def pairs_cell(kept: int, of: int) -> str:
    """Pairs retained, as every table of the report writes it."""
    return share_of(kept, of)


def rows_cell(u: dict[str, Any]) -> str:
    """Rows released; for a method that releases repeats, said so (rows then count events)."""
    text = f"{u['rows released']:,}"
    if u["repeats released"]:
        text += " (one per occurrence: repeats released)"
    return text


def _risk_row(label: str, s: dict[str, Any], verified: str) -> tuple[str, ...]:
    return (label, f"{s['records']:,}", pct(s["share unique"]), pct(s["share below k"]), verified)


def codes_cell(u: dict[str, Any]) -> str:
    text = share_of(u["codes retained"], u["codes in"]) + f"; {u['codes as themselves']:,} as themselves"
    if u["items standing for no code of the cohort"]:
        text += f"; {u['items standing for no code of the cohort']:,} items of a coarser level"
    return text


# the comparison table's columns in the summary: (data column, header, how a value is written)
COMPARISON_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("verified", "Verified", lambda v: "yes" if v else "NO"),
    ("share below k", "Share below k", pct),
    ("pairs retained", "Pairs retained", pct),
    ("distinct codes kept", "Distinct codes kept", pct),
    ("records modified", "Records modified", pct),
    ("utility constraints met", "Utility constraints met", lambda v: f"{v:,}"),
    ("PheWAS associations lost", "PheWAS associations lost", lambda v: f"{v:,}"),
    ("PheWAS associations false", "PheWAS associations false", lambda v: f"{v:,}"),
)
BEST_MARK = " (best)"


def comparison_rows(c: dict[str, Any]) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The header and rows of the comparison table (`engine.study.compare.comparison_data`), each column's
    best value marked `BEST_MARK`; columns the data lack (PheWAS without genotypes) are left out."""
    cols = [(key, head, fmt) for key, head, fmt in COMPARISON_COLUMNS if key in c["columns"]]
    rows = []
    for r in c["rows"]:
        cells = [str(r["release"])]
        for key, _, fmt in cols:
            v = r[key]
            text = "n/a" if v is None else fmt(v)
            if key == "pairs retained" and v is not None:
                text = pairs_cell(r["pairs kept"], r["pairs in the cohort"])
            if key == "utility constraints met" and v is not None:
                text += f" of {r['utility constraints']:,}"
            if str(r["release"]) in c["best"].get(key, ()):
                text += BEST_MARK
            cells.append(text)
        rows.append(tuple(cells))
    return ("Release", *(head for _, head, _ in cols)), tuple(rows)


def _comparison(d: dict[str, Any]) -> list[Block]:
    """Every release side by side, the best of each column marked, then each release's warnings."""
    c = d.get("comparison")
    if not c or not c["rows"]:
        return []
    header, rows = comparison_rows(c)
    out: list[Block] = [
        Heading(2, f"Every release side by side (under {d['attacker']['label']}, k = {d['attacker']['k']})"),
        Para(
            "All figures against the original cohort; utility constraints of "
            + c.get("utility policy", "one policy for every release")
            + f". '{BEST_MARK.strip()}' marks the best value of each column (ties: each)."
        ),
        Table(header, rows, (2.2,) + (1.0,) * (len(header) - 1)),
    ]
    out += [Para(f"{r['release']}: {r['warnings']}") for r in c["rows"] if r.get("warnings")]
    return out


def _summary(d: dict[str, Any]) -> list[Block]:
    att, coh, pop, rels = d["attacker"], d["cohort"], d["population"], d["releases"]
    k = att["k"]
    names = "; ".join(f"{r['name']} ({r['algorithm']}: {_status(r, d)})" for r in rels) or "no release"
    blocks: list[Block] = [
        Heading(1, d["title"]),
        Para(
            "Summary for the IRB in plain words; sections per release, the records and the appendix follow."
        ),
        Pairs(
            (
                (
                    "What is released",
                    f"{len(rels)} release(s) of the cohort '{coh['group']}' ({coh['patients']:,} patients, "
                    f"{coh['events']:,} events, {coh['distinct codes']:,} distinct codes), drawn from the "
                    f"population '{pop['group']}' ({pop['patients']:,} patients) of the dataset "
                    f"'{d['dataset']}': {names}.",
                ),
                (
                    "To whom",
                    d["recipient"] or "____________________ (to be filled in by the privacy officer)",
                ),
                (
                    "Attacker assumption",
                    f"{att['label']}, k = {k}. {att['description']} A release is verified when every "
                    f"released record is consistent with at least {k} candidate records.",
                ),
            )
        ),
        *_joint(d),
        Heading(2, f"Risk before and after (under {att['label']}, k = {k})"),
        Table(
            ("Data", "Records", "Share unique", "Share below k", "Verified"),
            (
                _risk_row("Original cohort (unchanged)", d["risk before"], "no"),
                *(
                    _risk_row(r["name"], r["risk after"], "yes" if r["verification"]["verified"] else "NO")
                    for r in rels
                ),
            ),
            (3.2, 1, 1.2, 1.2, 1),
        ),
        Figure(
            (
                Curve("original cohort", _pts(d["cdf before"]), BEFORE_COLOUR, True),
                *(Curve(r["name"], _pts(r["cdf after"]), release_colour(d, r["name"])) for r in rels),
            ),
            k,
            f"Share of records (vertical) with at most so many candidates (horizontal). Left of k = {k}: below k.",
        ),
        Heading(2, "Utility kept"),
    ]
    if rels:
        blocks.append(
            Table(
                # what the research keeps first (issue 35): the PheWAS (Heatherly's Table 4), the
                # utility constraints, then the counts of what the files hold
                (
                    "Release",
                    "PheWAS associations",
                    "Utility constraints met",
                    "Pairs retained",
                    "Rows released",
                    "Distinct codes retained",
                ),
                tuple(
                    (
                        r["name"],
                        _phewas_cell(r),
                        constraints_cell(r),
                        pairs_cell(r["pairs_retained"]["kept"], r["pairs_retained"]["of"]),
                        rows_cell(r["utility"]),
                        codes_cell(r["utility"]),
                    )
                    for r in rels
                ),
                (1.5, 2.0, 1.0, 1.5, 1.5, 1.3),
            )
        )
    else:
        blocks.append(Para("No release was made."))
    blocks += _comparison(d)
    blocks += [
        Heading(3, "What the figures mean"),
        Pairs(
            tuple((name[:1].upper() + name[1:], meaning) for name, meaning in d["headlines"].items()),
            compact=True,
        ),
    ]
    if d["releases not in this report"]:
        blocks.append(
            Para(
                "Releases of the study left out of this report: "
                + ", ".join(d["releases not in this report"])
                + "."
            )
        )
    if d["releases of other data"]:
        blocks.append(
            Para(
                f"{d['releases of other data']} release(s) in the study were made from other data or other "
                "groups and are not part of this report."
            )
        )
    return blocks


ASSURES = (
    "For each release marked verified, the risk engine checked the release file as written, when this "
    "report was built: every released record is consistent with at least k candidate records under the "
    "study's attacker (the scope searched and what the attacker knows), so an attacker of that kind who "
    "links a released record to a person is right at most 1 in k times. Patients are named by release "
    "ids that reveal nothing of the source ids; the file hashes listed identify the files assured."
)
DOES_NOT_ASSURE = (
    "It does not assure protection against an attacker who knows more than assumed (see the four-"
    "adversary table of each release) or who searches other data than the population named; it does not "
    "prevent learning a fact shared by all k candidates (attribute disclosure) or inferring that a person "
    "is in the cohort; it does not check that the input data are correct or complete, that the recipient "
    "keeps to the data use agreement, or that files other than those listed are safe. A verdict recorded "
    "in a study file is never relied on: only verdicts computed for this report are shown."
)


def _sign_off(d: dict[str, Any]) -> list[Block]:
    """What the verification assures and does not, and the sign-off to be filled in by hand."""
    blank = "_" * 38
    return [
        Heading(2, "What the verification assures, and what it does not"),
        Para("Assures: " + ASSURES),
        Para("Does not assure: " + DOES_NOT_ASSURE),
        *_joint(d),
        Heading(2, "Sign-off"),
        Table(
            ("Role", "Name", "Date", "Signature"),
            (
                ("Prepared by (privacy officer)", blank[:24], blank[:12], blank[:24]),
                ("Reviewed by (IRB)", blank[:24], blank[:12], blank[:24]),
            ),
            (1.6, 1.6, 1, 1.6),
        ),
        Pairs(
            (
                (
                    "Decision",
                    "[  ] approved     [  ] approved with conditions     [  ] not approved",
                ),
                ("Conditions", blank + blank),
                ("Recipient", d["recipient"] or blank),
            )
        ),
    ]


def _pts(points: Sequence[Sequence[float]]) -> tuple[tuple[float, float], ...]:
    return tuple((float(x), float(y)) for x, y in points)


def _release(r: dict[str, Any], i: int, d: dict[str, Any]) -> list[Block]:
    att = d["attacker"]
    k = att["k"]
    v, made, u = r["verification"], r["made"], r["utility"]
    blocks: list[Block] = [PageBreak(), Heading(2, f"Release: {r['name']}")]
    if v["verified"] and not _jointly_ok(d):
        blocks.append(
            Para(
                f"{v['message']} It is verified alone, but the releases handed over with it fail jointly "
                "(see 'Releases judged together'): no bundle is made of them.",
                strong=True,
            )
        )
    elif v["verified"]:
        blocks.append(Para(f"{v['message']} Its files are exported and are in the bundle.", strong=True))
    else:
        blocks.append(
            Para(
                f"{v['message']} It is NOT verified under the study's attacker: its files are not exported "
                "and are not in the bundle. Its figures are reported for comparison only.",
                strong=True,
            )
        )
    if made is not None and (
        (made["adversary"], made["k"]) != (v["adversary"], v["k"]) or made["verified"] != v["verified"]
    ):
        blocks.append(Para(f"When it was made: {made['message']}."))
    params = list(r["settings"].items())
    if r["algorithm"] not in r["settings"].values():
        params.insert(0, ("method", r["algorithm"]))
    blocks += [Heading(3, "Parameters"), Table(("Parameter", "Value"), tuple(params), (1, 3))]
    refs = r["parameters in the appendix"] | r["loss figures in the appendix"]
    if refs:
        listed = "; ".join(f"{name}: {ref}" for name, ref in refs.items())
        blocks.append(Para(f"The method's long records (e.g. of its steps) are separate files: {listed}."))
    blocks.append(Heading(3, "Risk"))
    before = r["risk before"]
    label = "Original cohort" + (" (repeats counted)" if before["repeats counted"] else "")
    blocks.append(
        Table(
            ("Data", "Records", "Share unique", "Share below k", "Verified"),
            (
                _risk_row(label, before, "no"),
                _risk_row(r["name"], r["risk after"], "yes" if v["verified"] else "NO"),
            ),
            (3.2, 1, 1.2, 1.2, 1),
        )
    )
    blocks.append(
        Figure(
            (
                Curve(label.lower(), _pts(r["cdf before"] or d["cdf before"]), BEFORE_COLOUR, True),
                Curve(r["name"], _pts(r["cdf after"]), release_colour(d, r["name"])),
            ),
            k,
            f"Risk of {r['name']} against the original cohort under {att['label']} (records left of k = {k} "
            "are below k).",
        )
    )
    fails = r["fails under"]
    blocks += [
        Heading(3, f"Verification under the four adversaries and the whole-record attacker at k = {k}"),
        Table(
            ("Adversary", "Records", "Below k", "Unique", "Verified"),
            tuple(
                (
                    m["adversary"],
                    f"{m['records']:,}",
                    f"{m['below k']:,}",
                    f"{m['unique']:,}",
                    "yes" if m["verified"] else "NO",
                )
                for m in r["matrix"]
            ),
            (2.4, 1, 1, 1, 1),
        ),
        Para(
            f"Fails under: {', '.join(fails)}."
            if fails
            else f"Verified under all four adversaries and the whole-record attacker at k = {k}.",
            strong=bool(fails),
        ),
        Heading(3, "Utility"),
    ]
    largest = "; ".join(_sized(label, n) for label, n in u["largest generalized items"]) or "none"
    rows = [
        ("Pairs retained", pairs_cell(r["pairs_retained"]["kept"], r["pairs_retained"]["of"])),
        ("Rows released", rows_cell(u)),
        ("Patients in the release file", f"{r['patients']:,}"),
        ("Distinct codes retained", codes_cell(u)),
        ("Generalized items", f"{u['generalized items']:,}"),
        ("Largest generalized items", largest),
        ("PheWAS associations", _phewas_cell(r)),
        *(
            [("PheWAS under the paper's procedure (Heatherly 2013)", _paper_procedure_cell(paper))]
            if (paper := r.get("phewas, the paper's procedure"))
            else []
        ),
        ("Utility constraints met", constraints_cell(r) + " (the shared policy of the comparison)"),
    ]
    blocks += [Pairs(tuple(rows), compact=True), Para(f"PheWAS: {d['phewas']}.")]
    if r.get("phewas, the paper's procedure"):
        blocks.append(Para(NOT_REPRODUCED))
    c = r["utility constraints"]
    if c is not None:
        blocks += [
            Heading(3, "The utility policy the method was made to meet"),
            Para(f"{c['met']:,} of {c['total']:,} constraints met."),
        ]
        blocks.append(
            Table(
                ("Disease (utility constraint)", "Original records", "Released records", "Met"),
                tuple(
                    (
                        x["disease"],
                        count_text(x["original records"]),
                        count_text(x["released records"]),
                        "yes" if x["met"] else "NO",
                    )
                    for x in c["diseases"]
                ),
                (3, 1, 1, 0.6),
            )
        )
    p = r["phewas"]
    if p is not None and p["per snp"]:
        blocks.append(
            Table(
                ("SNP", "Significant in the original", "Lost", "False", "Identical"),
                tuple(
                    (
                        x["snp"],
                        f"{x['original']:,}",
                        f"{x['lost']:,}",
                        f"{x['false']:,}",
                        f"{x['identical']:,}",
                    )
                    for x in p["per snp"]
                ),
                (1.4, 1.6, 1, 1, 1),
            )
        )
    blocks += _release_disclosure(r)
    if r["method loss figures"]:
        blocks += [
            Heading(3, "The method's own figures"),
            Table(
                ("Figure", "Value"),
                tuple(figure_rows(r["method loss figures"])),
                (2, 2),
            ),
        ]
    blocks.append(Heading(3, "Released files (sha256)"))
    if r["files"]:
        blocks.append(
            Hashes(tuple((f"releases/{r['folder']}/{name}", sha) for name, sha in r["files"].items()))
        )
    else:
        blocks.append(Para("None: the release is not verified under the study's attacker."))
    return blocks


def _records(d: dict[str, Any]) -> list[Block]:
    rec = d["records"]
    when = rec.get("generated at") or "omitted (reproducible mode: same inputs give the same bytes)"
    blocks: list[Block] = [
        PageBreak(),
        Heading(2, "Records"),
        Pairs(
            (
                ("CohortShield version", rec["cohortshield version"]),
                ("Code commit", rec["commit"]),
                ("Generated at", when),
                ("Events fingerprint", rec["events fingerprint"]),
            )
        ),
        Heading(3, "Input files (sha256)"),
        Hashes(tuple(rec["input files sha256"].items()))
        if rec["input files sha256"]
        else Para("None recorded."),
        Heading(3, "Group fingerprints (sha256 of the sorted patient ids)"),
        Hashes(tuple(rec["group fingerprints"].items())),
        Heading(3, "Load options that changed the data"),
    ]
    if rec["load options"]:
        blocks.append(Pairs(tuple((k, str(v)) for k, v in rec["load options"].items())))
    else:
        blocks.append(
            Para("None: the data were loaded with the default options (nothing dropped or changed).")
        )
    blocks.append(Heading(3, "Released files (sha256)"))
    if rec["released files sha256"]:
        blocks.append(Hashes(tuple(rec["released files sha256"].items())))
    else:
        blocks.append(Para("None: no release is verified under the study's attacker."))
    k = d["attacker"]["k"]
    blocks += [
        Heading(3, f"Risk of the original cohort under every adversary (k = {k})"),
        Table(
            ("Adversary", "Records", "Share unique", "Share below k", "Median distinguishability"),
            tuple(
                (
                    a["adversary"] + (" (the study's)" if a["chosen"] else ""),
                    f"{a['records']:,}",
                    pct(a["share unique"]),
                    pct(a["share below k"]),
                    value_text(a["median distinguishability"]),
                )
                for a in d["risk before, every adversary"]
            ),
            (2.4, 1, 1, 1, 1.4),
        ),
        Heading(3, "Software"),
        Pairs(tuple(rec["software"].items())),
        Heading(2, "Appendix (separate files)"),
        Para(
            "Long method outputs (e.g. a generalization trace) and code maps are separate files of the "
            "release bundle, not part of this report."
        ),
    ]
    files = [(a["path"], a["sha256"]) for a in d["appendix"]]
    maps = [
        (f"releases/{r['folder']}/code_map.csv", r["files"]["code_map.csv"])
        for r in d["releases"]
        if "code_map.csv" in r["files"]
    ]
    if files or maps:
        blocks.append(Hashes(tuple(files + maps)))
    else:
        blocks.append(Para("No appendix file."))
    return blocks + _code_maps(d)


def _stands_for(entry: dict[str, Any]) -> list[str]:
    """The first codes of a code map entry, each with its description when the entry has them (an
    OMOP CDM's concept names, `report.code_map_entries`)."""
    described = entry.get("descriptions")
    if not described:
        return list(entry["first codes"])
    return [f"{c} ({text})" for c, text in zip(entry["first codes"], described, strict=True)]


def _code_maps(d: dict[str, Any]) -> list[Block]:
    """Appendix: every release's generalized items, readable, with their label in the files and the
    codes they stand for (the first few; the whole map is the release's code_map.csv)."""
    out: list[Block] = []
    for r in d["releases"]:
        entries = r.get("code map") or []
        if not entries:
            continue
        if not out:
            out += [PageBreak(), Heading(2, "Appendix: code maps (generalized items)")]
        where = (
            f"releases/{r['folder']}/code_map.csv"
            if "code_map.csv" in r["files"]
            else "its code map (not exported: the release is not verified)"
        )
        out += [
            Heading(3, f"Release: {r['name']}"),
            Para(
                f"{len(entries):,} released item(s) stand for more than one code or for another code; the "
                f"full map, one row per (item, code), is {where}."
            ),
            Table(
                ("Item (as read)", "Label in the files", "Codes", "Stands for"),
                tuple(
                    (
                        e["readable"],
                        e["item"],
                        f"{e['codes']:,}",
                        ", ".join(_stands_for(e))
                        + (
                            f" and {e['codes'] - len(e['first codes']):,} more"
                            if e["codes"] > len(e["first codes"])
                            else ""
                        ),
                    )
                    for e in entries
                ),
                (2.2, 1.8, 0.6, 2.6),
            ),
        ]
    return out


def _risk_measures(d: dict[str, Any]) -> list[Block]:
    """Issue 27: the threshold checked and why, then maximum and average risk and records at risk of
    the original and every release (under the study's adversary); nothing for a report without them."""
    if "risk measures before" not in d:
        return []

    def row(label: str, m: dict[str, Any]) -> tuple[str, ...]:
        return (
            label,
            f"{m['maximum risk']:.3f}",
            f"{m['average risk']:.3f}",
            f"{m['records at risk']:,} of {m['records']:,} ({pct(m['share at risk'])})",
        )

    det = d.get("determination") or {}
    return [
        Heading(2, f"Maximum and average risk (under {d['attacker']['label']})"),
        Para(det.get("statement", "")),
        Table(
            ("Data", "Maximum risk", "Average risk", "Records at risk"),
            (
                row("Original cohort (unchanged)", d["risk measures before"]),
                *(row(r["name"], r["risk measures"]) for r in d["releases"] if "risk measures" in r),
            ),
            (3.2, 1.2, 1.2, 2),
        ),
        Para(
            "Maximum risk is 1 / the smallest number of candidate records of any record; average risk the "
            "mean of 1 / that number; records at risk those whose risk exceeds the threshold."
        ),
    ]


def _sensitive(d: dict[str, Any]) -> list[Block]:
    """Issue 39: the study's rho and its reason, then per release and category the highest confidence
    of an inference and the records inferred above rho; a line when the study states no rho."""
    s = d.get("sensitive")
    if s is None:
        return []
    out: list[Block] = [Heading(2, "Sensitive diagnoses (rho)"), Para(s["message"] + ".", strong=True)]
    if not s["checked"]:
        return out
    rows = [
        (
            r["name"],
            c["category"],
            f"{c['records holding']:,}",
            f"{c['highest confidence']:.3f}",
            f"{c['inferred above rho']:,} ({pct(c['share inferred above rho'])})",
            "yes" if r["sensitive"]["verified"] else "NO",
        )
        for r in d["releases"]
        if r.get("sensitive")
        for c in r["sensitive"]["categories"]
    ]
    out.append(
        Table(
            (
                "Release",
                "Category",
                "Records holding",
                "Highest confidence",
                "Inferred above rho",
                "Meets rho",
            ),
            tuple(rows),
            (1.8, 1.4, 0.9, 0.9, 1.3, 0.6),
        )
    )
    out += [
        Para(r["sensitive"]["message"], strong=True)
        for r in d["releases"]
        if r.get("sensitive") and not r["sensitive"]["verified"]
    ]
    return out


# ------------------------------------------------------------------- issue 28: disclosure sections
def _membership_table(rows: Sequence[dict[str, Any]]) -> Table:
    return Table(
        ("Option", "Rows released", "Detection rate at the false-positive rate"),
        tuple((x["option"], f"{x['rows']:,}", pct(x["power"])) for x in rows),
        (3.4, 1, 1.4),
    )


def _release_disclosure(r: dict[str, Any]) -> list[Block]:
    """A release's ledger result and the membership attack on its PheWAS table (issue 28)."""
    blocks: list[Block] = []
    if "ledger" in r:
        blocks.append(Heading(3, "Linked with the study's other releases (ledger)"))
        pairs = r["ledger"] or []
        blocks += [Para(x["message"] + ".", strong=not x["verified"]) for x in pairs] or [
            Para("It shares no patient with another release of this report.")
        ]
    if r.get("membership"):
        blocks += [
            Heading(3, "Membership attack on its PheWAS statistics"),
            _membership_table(r["membership"]),
        ]
    return blocks


def _disclosure(d: dict[str, Any]) -> list[Block]:
    """The small-cell policy and what it suppressed, the ledger of linked releases and the membership
    attack on the released PheWAS statistics (issue 28); nothing for a report without them."""
    out: list[Block] = []
    cells = d.get("small cells")
    if cells is not None:
        out += [
            Heading(2, "Small cells"),
            Para(f"Small-cell policy: {cells['description']}.", strong=True),
            Para(cells["rule"]),
        ]
        notes = cells["suppressed"]
        out.append(
            Table(
                ("Release", "Table", "Columns", "Small cells", "Complementary", "Rows withheld"),
                tuple(
                    (
                        n.get("release", ""),
                        n["table"],
                        ", ".join(n["columns"]),
                        f"{n['primary']:,}",
                        f"{n['complementary']:,}",
                        f"{n['rows withheld']:,}",
                    )
                    for n in notes
                ),
                (1.6, 1.4, 2, 0.8, 0.9, 0.8),
            )
            if notes
            else Para("Nothing in this report's tables of patient counts fell under the policy.")
        )
    if "ledger" in d:
        out.append(Heading(2, "Releases that add up (ledger)"))
        out.append(
            Para(
                "Every pair of this report's releases that shares patients, linked per patient as a "
                "recipient holding both could, and verified as one release under the study's attacker "
                f"and k = {d['attacker']['k']}."
            )
        )
        out += [Para(x["message"] + ".", strong=not x["verified"]) for x in d["ledger"]] or [
            Para("No two releases of this report share a patient.")
        ]
    m = d.get("membership")
    if m is not None:
        out += [
            Heading(2, "Membership attack on the released PheWAS statistics"),
            Para(m["status"][:1].upper() + m["status"][1:] + "."),
        ]  # a sentence
        if m.get("original"):
            out += [
                Para(f"Reference and non-members: {m['reference']}."),
                Heading(3, "The original cohort's PheWAS table"),
                _membership_table(m["original"]),
            ]
    return out


def count_text(v: Any) -> str:
    """A count of a table of patient counts: formatted, or as written when suppressed (issue 28)."""
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def document(data: dict[str, Any]) -> list[Block]:
    """The report as blocks: summary, the sign-off, one section per release, records and appendix
    (the code maps)."""
    out = _summary(data) + _risk_measures(data) + _sensitive(data) + _sign_off(data)
    out += _disclosure(data)  # issue 28
    for i, r in enumerate(data["releases"]):
        out += _release(r, i, data)
    return out + _records(data)


# ---------------------------------------------------------------------------------------- figure
def svg_cdf(
    fig: Figure, text: Callable[[str], str] = html.escape, width: int = 640, height: int = 280
) -> str:
    """The risk curves as a step chart in SVG: log-scaled distinguishability (horizontal), share of
    records at or below it (vertical), a dashed line at k, a legend. `text` escapes every label."""
    left, right, top, bottom = 48, 190, 12, 42
    pw, ph = width - left - right, height - top - bottom
    xmax = max([2.0 * fig.k] + [p[0] for c in fig.curves for p in c.points])
    lmax = math.log10(max(xmax, 10.0))

    def sx(x: float) -> float:
        return left + pw * math.log10(max(x, 1.0)) / lmax

    def sy(y: float) -> float:
        return top + ph * (1.0 - y)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica" font-size="12">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#ffffff" stroke="#999999"/>',
    ]
    for y in (0.25, 0.5, 0.75):
        out.append(f'<line x1="{left}" y1="{sy(y):.1f}" x2="{left + pw}" y2="{sy(y):.1f}" stroke="#e5e5e5"/>')
    for y in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{int(y * 100)}%</text>')
    decade = 0
    while decade <= lmax + 1e-9:
        x = sx(10.0**decade)
        out.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 4}" stroke="#333333"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle">{10**decade:,}</text>')
        decade += 1
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 6}" text-anchor="middle">'
        "distinguishability (candidate records, log scale)</text>"
    )
    kx = sx(fig.k)
    out.append(
        f'<line x1="{kx:.1f}" y1="{top}" x2="{kx:.1f}" y2="{top + ph}" stroke="#000000" stroke-dasharray="4 3"/>'
    )
    out.append(f'<text x="{kx + 4:.1f}" y="{top + 12}">k = {fig.k}</text>')
    for i, c in enumerate(fig.curves):
        dash = ' stroke-dasharray="6 3"' if c.dashed else ""
        if c.points:  # a step curve: from share 0 up at the first value, then across and up
            steps = [f"M{sx(c.points[0][0]):.1f} {sy(0.0):.1f}"]
            for x, y in c.points:
                steps.append(f"H{sx(x):.1f}V{sy(y):.1f}")
            steps.append(f"H{left + pw:.1f}")
            out.append(
                f'<path d="{"".join(steps)}" fill="none" stroke="{c.colour}" stroke-width="1.8"{dash}/>'
            )
        ly = top + 10 + 16 * i
        lx = left + pw + 10
        out.append(
            f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="{c.colour}" stroke-width="2"{dash}/>'
        )
        label = c.label if len(c.label) <= 26 else c.label[:25] + "…"
        out.append(f'<text x="{lx + 22}" y="{ly + 4}">{text(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ HTML
_CSS = """
body{font-family:Helvetica,Arial,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#111;line-height:1.4}
h1{font-size:1.6rem}h2{font-size:1.3rem;margin-top:2rem;border-bottom:1px solid #ccc}h3{font-size:1.05rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f2f2f2}dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}dt{font-weight:bold}dd{margin:0}
.hash{font-family:monospace;font-size:.85rem}p.strong{font-weight:bold}figure{margin:1rem 0}figcaption{font-size:.9rem;color:#444}
.page{break-before:page}
@media print{.page{page-break-before:always}}
"""


def render_html(data: dict[str, Any]) -> str:
    """The report as one self-contained HTML page (no script, no external resource)."""
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">",
        f"<title>{e(data['title'])}</title><style>{_CSS}</style></head><body>",
    ]
    for b in document(data):
        if isinstance(b, Heading):
            parts.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            parts.append(f'<p class="strong">{e(b.text)}</p>' if b.strong else f"<p>{e(b.text)}</p>")
        elif isinstance(b, Pairs):
            parts.append("<dl>" + "".join(f"<dt>{e(t)}</dt><dd>{e(v)}</dd>" for t, v in b.rows) + "</dl>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{e(h)}</th>" for h in b.header)
            body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in b.rows)
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif isinstance(b, Hashes):
            parts.append(
                "<table>"
                + "".join(f'<tr><td>{e(n)}</td><td class="hash">{e(h)}</td></tr>' for n, h in b.rows)
                + "</table>"
            )
        elif isinstance(b, Figure):
            parts.append(f"<figure>{svg_cdf(b)}<figcaption>{e(b.caption)}</figcaption></figure>")
        elif isinstance(b, PageBreak):
            parts.append('<div class="page"></div>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# -------------------------------------------------------------------------------------- Markdown
def render_markdown(data: dict[str, Any]) -> str:
    """The report as Markdown, from the same blocks as HTML and PDF: every text from the data is
    escaped (`engine.report.markdown.escape`), so codes, names and file names read literally; figures are
    given by their caption (the curves are in the HTML and PDF)."""
    from engine.report.markdown import code, escape

    out: list[str] = []
    for b in document(data):
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + escape(b.text))
        elif isinstance(b, Para):
            out.append(f"**{escape(b.text)}**" if b.strong else escape(b.text))
        elif isinstance(b, Pairs):
            out.append("\n".join(f"- **{escape(t)}**: {escape(v)}" for t, v in b.rows))
        elif isinstance(b, Table):
            lines = ["| " + " | ".join(escape(h) for h in b.header) + " |"]
            lines.append("|" + "---|" * len(b.header))
            lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in b.rows]
            out.append("\n".join(lines))
        elif isinstance(b, Hashes):
            out.append("\n".join(f"- {escape(n)}: {code(h)}" for n, h in b.rows))
        elif isinstance(b, Figure):
            out.append(f"*Figure (in the HTML and PDF report):* {escape(b.caption)}")
        elif isinstance(b, PageBreak):
            out.append("---")
    return "\n\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------- PDF
_ASCII = {
    "≥": ">=",
    "≤": "<=",
    "…": "...",
    "–": "-",
    "—": "-",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "→": "->",
    "✓": "yes",
    "−": "-",
}


PDF_CELL_CHARS = 400  # a table row must fit on one PDF page: longer cells are cut (in full in HTML/JSON)


def table_cell(text: str) -> str:
    """A PDF table cell: text longer than `PDF_CELL_CHARS` cut, saying so."""
    if len(text) <= PDF_CELL_CHARS:
        return text
    return text[:PDF_CELL_CHARS] + f"... ({len(text):,} characters; in full in the HTML and JSON report)"


def latin1(text: str) -> str:
    """Text the built-in PDF fonts can show: typographic characters as ASCII, anything else outside
    Latin-1 as `[U+XXXX]` (so nothing is silently dropped)."""
    out = []
    for ch in str(text):
        if ch in _ASCII:
            out.append(_ASCII[ch])
        elif ord(ch) < 256 and (ch.isprintable() or ch == " "):
            out.append(ch)
        else:
            out.append(f"[U+{ord(ch):04X}]")
    return "".join(out)


@dataclass
class _Pdf:
    """fpdf2 writer with the report's layout (A4, 15 mm margins, Helvetica)."""

    title: str
    created: datetime
    pdf: Any = field(init=False)

    def __post_init__(self) -> None:
        pdf = _pdf_class()(orientation="portrait", unit="mm", format="A4")
        pdf.footer_text = latin1(self.title)
        pdf.set_margins(15, 15, 15)
        pdf.set_auto_page_break(True, margin=18)
        pdf.set_creation_date(self.created)
        pdf.set_title(latin1(self.title))
        pdf.set_creator("CohortShield")
        pdf.set_producer("CohortShield (fpdf2)")
        pdf.add_page()
        self.pdf = pdf

    def font(self, size: float, style: str = "", family: str = "helvetica") -> None:
        self.pdf.set_font(family, style=style, size=size)

    def _lines(self, text: str, size: float, style: str = "", width: float | None = None) -> int:
        self.font(size, style)
        w = width or self.pdf.epw
        return max(1, math.ceil(self.pdf.get_string_width(latin1(text)) / max(w - 2, 1.0)))

    def height(self, b: Block, start_only: bool = True) -> float:
        """About how tall `b` is in mm (its first lines or rows only when `start_only`): what must fit
        under a heading for the heading to stay on the page (`keep_with_next`)."""
        if isinstance(b, Heading):
            size = {1: 16, 2: 13, 3: 11}.get(b.level, 11)
            return (1.5 if b.level == 3 else 3) + self._lines(b.text, size, "B") * size * 0.5 + 1
        if isinstance(b, Para):
            return min(self._lines(b.text, 9, "B" if b.strong else ""), 3 if start_only else 10**6) * 4.2 + 1
        if isinstance(b, Pairs):
            return min(len(b.rows), 2) * (4.0 if b.compact else 8.4) + 1
        if isinstance(b, Table):
            per = self.pdf.epw / sum(b.widths or tuple(1.0 for _ in b.header))
            widths = b.widths or tuple(1.0 for _ in b.header)
            rows = (b.header, *b.rows[:1])
            return sum(
                max(self._lines(table_cell(c), 8.5, "", w * per) for c, w in zip(row, widths, strict=False))
                * 4.2
                + 2.5
                for row in rows
            )
        if isinstance(b, Hashes):
            return min(len(b.rows), 2) * 8.4 + 1.5
        if isinstance(b, Figure):
            return self.pdf.epw * 0.62 * 280 / 640 + 12
        return 0.0

    def keep_with_next(self, blocks: Sequence[Block], i: int) -> None:
        """Before the heading `blocks[i]`: a new page unless it, the headings right after it and the
        start of the block they head fit on this page (no heading at a page's foot)."""
        need, j = 0.0, i
        while j < len(blocks) and isinstance(blocks[j], Heading):
            need += self.height(blocks[j])
            j += 1
        if j < len(blocks) and not isinstance(blocks[j], PageBreak):
            need += self.height(blocks[j])
        pdf = self.pdf
        at_top = pdf.get_y() <= pdf.t_margin + 1
        if not at_top and pdf.get_y() + need > pdf.page_break_trigger:
            pdf.add_page()

    def block(self, b: Block) -> None:
        pdf = self.pdf
        if isinstance(b, Heading):
            size = {1: 16, 2: 13, 3: 11}.get(b.level, 11)
            pdf.ln(1.5 if b.level == 3 else 3)
            self.font(size, "B")
            pdf.multi_cell(0, size * 0.5, latin1(b.text), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        elif isinstance(b, Para):
            self.font(9, "B" if b.strong else "")
            pdf.multi_cell(0, 4.2, latin1(b.text), align="L", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        elif isinstance(b, Pairs) and b.compact:
            for term, value in b.rows:  # a row never split over two pages
                need = self._lines(f"{term}: {value}", 8, "B") * 3.7 + 0.3
                if pdf.get_y() + need > pdf.page_break_trigger:
                    pdf.add_page()
                self.font(8, "B")
                pdf.write(3.7, latin1(term) + ": ")
                self.font(8)
                pdf.write(3.7, latin1(value))
                pdf.ln(4)
            pdf.ln(1)
        elif isinstance(b, Pairs):
            for term, value in b.rows:
                self.font(9, "B")
                pdf.multi_cell(0, 4.2, latin1(term), align="L", new_x="LMARGIN", new_y="NEXT")
                self.font(9)
                pdf.set_x(pdf.l_margin + 5)
                pdf.multi_cell(0, 4.2, latin1(value), align="L", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        elif isinstance(b, Table):
            self.font(8.5)
            widths = b.widths or tuple(1.0 for _ in b.header)
            with pdf.table(
                col_widths=widths,
                text_align="LEFT",
                line_height=4.2,
                first_row_as_headings=True,
                headings_style=_headings_style(),
            ) as table:
                for row in (b.header, *b.rows):
                    cells = table.row()
                    for c in row:
                        cells.cell(latin1(table_cell(c)))
            pdf.ln(2)
        elif isinstance(b, Hashes):
            for name, sha in b.rows:
                self.font(8.5)
                pdf.multi_cell(0, 4.2, latin1(name), align="L", new_x="LMARGIN", new_y="NEXT")
                self.font(8, family="courier")
                pdf.set_x(pdf.l_margin + 5)
                pdf.cell(0, 4.2, latin1(sha), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1.5)
        elif isinstance(b, Figure):
            svg = svg_cdf(b, text=lambda s: html.escape(latin1(s)))
            w = pdf.epw * 0.62
            if pdf.get_y() + w * 280 / 640 + 12 > pdf.h - pdf.b_margin:
                pdf.add_page()
            pdf.image(io.BytesIO(svg.encode("utf-8")), w=w)
            self.font(8.5)
            pdf.multi_cell(0, 4.2, latin1(b.caption), align="L", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        elif isinstance(b, PageBreak):
            pdf.add_page()

    def bytes(self) -> bytes:
        return bytes(self.pdf.output())


def _headings_style():
    from fpdf.fonts import FontFace

    return FontFace(emphasis="BOLD", fill_color=(242, 242, 242))


def render_pdf(data: dict[str, Any]) -> bytes:
    """The report as a PDF (real text; see the module docstring for fonts and dates)."""
    when = data["records"].get("generated at")
    created = datetime.fromisoformat(when) if when else datetime(1970, 1, 1, tzinfo=UTC)
    doc = _Pdf(data["title"], created)
    blocks = document(data)
    for i, b in enumerate(blocks):
        if isinstance(b, Heading) and (i == 0 or not isinstance(blocks[i - 1], Heading)):
            doc.keep_with_next(blocks, i)
        doc.block(b)
    return doc.bytes()


def _pdf_class() -> type:
    """fpdf2's FPDF with the report's footer: the title, and "page n of N" (`alias_nb_pages`)."""
    from fpdf import FPDF

    class ReportPdf(FPDF):
        footer_text = ""

        def footer(self) -> None:
            self.set_y(-12)
            self.set_font("helvetica", size=7.5)
            self.set_text_color(90, 90, 90)
            self.cell(self.epw * 0.75, 5, self.footer_text[:110], align="L")
            self.cell(0, 5, f"page {self.page_no()} of {{nb}}", align="R")
            self.set_text_color(0, 0, 0)

    return ReportPdf
