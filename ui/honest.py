"""Honest headlines (issue 16): every utility headline measured against the original cohort, the
method-internal figure beside it and labelled as such, and the release's warnings (a catch-all item,
a fraction of the cohort's codes) on every page that shows the release. Figures: `engine.study.compare`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import streamlit as st

from engine.io.pseudonyms import Pseudonyms
from engine.records import Records
from engine.release import Release
from engine.report.glossary import help_for
from engine.study import compare
from engine.utility.coverage import FileFigures
from ui import cache, literal
from ui import format as fmt
from ui.fingerprints import release_key

T = TypeVar("T")

_HELD = 32  # releases memoized (per name)


def _memoized(name: str, release: Release, cohort: Records, compute: Callable[[Release, Records], T]) -> T:
    """`compute(release, cohort)`, memoized per release and cohort content (`ui.cache`: shared when
    both are the shipped sample's alone, else in this session)."""
    key = (release_key(release), cohort.fingerprint)
    return cache.memo(name, key, lambda: compute(release, cohort), size=_HELD, data=(release, cohort))


def figures(release: Release, cohort: Records) -> compare.Headline:
    """`engine.study.compare.headline`, memoized per release and cohort content."""
    return _memoized("headlines", release, cohort, compare.headline)


def file_figures(
    release: Release,
    cohort: Records,
    files: Mapping[str, bytes] | None = None,
    pseudonyms: Pseudonyms | None = None,
) -> FileFigures:
    """`engine.study.compare.release_figures` (what the release's files keep: the one source of the
    report's and the Compare page's figures, issue 23), memoized per release and cohort. `files`: the
    export gate's files of the release when the session holds them (a study's release), read with the
    crosswalk of the study's `pseudonyms` instead of writing them again (issue 36: 0.78 s of the 1.67 s
    for three releases at paper scale); relabelling patients changes no count, so the figures are the
    same either way."""
    if not files:
        return _memoized("file figures", release, cohort, compare.release_figures)
    return _memoized(
        "file figures", release, cohort, lambda r, c: compare.release_figures(r, c, files, pseudonyms)
    )


def code_set_caption(h: compare.Headline) -> str:
    """'Code set: codes 250, … (4 of 3,117 in the cohort)'; '' when the release has no code set."""
    text = compare.code_set_text(h.code_set, h.codes_total)
    return f"Code set: {text}" if text else ""


def legend_name(name: str, release: Release, cohort: Records) -> str:
    """A release's name in a chart legend: with its code set when the method restricts it (GCCens,
    LDA: 'GCCens k=5 (codes 250, 272, 401, 724 of 3,117)')."""
    h = figures(release, cohort)
    if h.code_set is None:
        return name
    codes = ", ".join(h.code_set) if len(h.code_set) <= 4 else f"{len(h.code_set):,} codes"
    return f"{name} (codes {codes} of {h.codes_total:,})"


def show_flags(release: Release, cohort: Records, name: str | None = None, where=None) -> list[str]:
    """The release's warnings, one `st.warning` each (prefixed with its name when given)."""
    where = where or st
    out = compare.flags(figures(release, cohort), file_figures(release, cohort))
    for text in out:
        literal.warning(f"{name}: {text}" if name else text, where)
    return out


def headline(
    release: Release,
    cohort: Records,
    internal: Sequence[tuple[str, str, str]] = (),
) -> compare.Headline:
    """Headline metrics against the original cohort, then the method-internal ones (label, value,
    help), each labelled as such; the code set (when the method restricts it) and the warnings."""
    h = figures(release, cohort)
    f = file_figures(release, cohort)  # the figures the report and the Compare page show (issue 23)
    # what the research keeps first (issue 35): the utility constraints, as the report and Compare
    met, of = _memoized("constraints met", release, cohort, compare.constraints_met)
    st.metric(
        "Utility constraints met (diseases whose record count is kept)",
        f"{met:,} of {of:,}",
        help=help_for("utility_constraint"),
    )
    cols = st.columns(3)
    # issue 26: the counts under the figure in words, not as a delta badge (an arrow, green for a loss)
    cols[0].metric(
        "Pairs retained, of the original cohort",
        fmt.percent(f.pairs_share),
        help=help_for("pairs_retained"),
    )
    cols[0].caption(fmt.of(f.pairs_kept, f.pairs_of, "(patient, code) pairs"))
    if f.pairs_in_broad_items:  # issue 35: kept only inside items too broad to use, so not counted
        cols[0].caption(
            f"{f.pairs_in_broad_items:,} more pairs are released only inside items spanning several "
            "phecode families (not counted)"
        )
    cols[1].metric(
        "Distinct codes kept, of the original cohort",
        fmt.percent(f.codes_kept / f.codes_of if f.codes_of else 1.0),
        help=help_for("code_coverage"),
    )
    cols[1].caption(fmt.of(f.codes_kept, f.codes_of, "distinct codes"))
    cols[2].metric(
        "Records modified, against the original",
        fmt.percent(h.records_modified),
        help=help_for("records_modified"),
    )
    if internal:  # a row of their own: five in a row cut the labels (issue 26)
        for col, (label, value, text) in zip(st.columns(len(internal)), internal, strict=True):
            col.metric(label, value, help=text)
    caption = code_set_caption(h)
    if caption:
        st.caption(literal.md(caption))
    show_flags(release, cohort)
    return h
