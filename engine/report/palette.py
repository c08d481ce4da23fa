"""The one colour table of every chart, the app's (ui/colours.py) and the IRB report's (render.py) (issue 26).

A release's colour is a function of its name and the study's order of releases: the i-th release of the
study is drawn in `PALETTE[i]` on every page and in the report. The original data is always `ORIGINAL`, a
neutral grey that no palette colour is near.

`PALETTE` is Paul Tol's "muted" scheme (9 colours, without its pale grey) with three colours added for
distinguishability: Okabe-Ito's vermillion, Tol's "light" pear and a brown. The order puts the
colours that stay furthest apart, also to colour-blind eyes, first (most studies have few releases).
Every pair differs by at least 12 CIELAB units for normal vision and under simulated deuteranopia,
protanopia and tritanopia (Machado 2009), and by at least 20 for normal vision
(tests/test_compare_glossary.py measures it).

The four adversaries (Risk page) are told apart by line style and colour family: single visit solid, all
visits dashed; the cohort in blues, the population in reds (Tol's "medium contrast" pairs).
"""

from __future__ import annotations

from collections.abc import Sequence

ORIGINAL = "#6b6b6b"
PALETTE: tuple[str, ...] = (
    "#332288",  # indigo (muted)
    "#D55E00",  # vermillion (Okabe-Ito)
    "#88CCEE",  # cyan (muted)
    "#117733",  # green (muted)
    "#DDCC77",  # sand (muted)
    "#AA4499",  # purple (muted)
    "#CC6677",  # rose (muted)
    "#44AA99",  # teal (muted)
    "#774411",  # brown
    "#BBCC33",  # pear (light)
    "#882255",  # wine (muted)
    "#999933",  # olive (muted)
)

# (scope, knowledge) -> (colour, dash): the colour family is the scope, the line style the knowledge
ADVERSARY_STYLE: dict[tuple[str, str], tuple[str, str]] = {
    ("cohort", "single visit"): ("#004488", "solid"),
    ("cohort", "all visits"): ("#6699CC", "dash"),
    ("population", "single visit"): ("#994455", "solid"),
    ("population", "all visits"): ("#EE99AA", "dash"),
}


def adversary_style(label: str) -> tuple[str, str] | None:
    """(colour, dash) of an adversary's label (`Adversary.label`, "cohort / all visits"), else None."""
    scope, _, knowledge = str(label).partition(" / ")
    return ADVERSARY_STYLE.get((scope.strip(), knowledge.strip().replace("_", " ")))


def release_colour(name: str, study_names: Sequence[str]) -> str | None:
    """The colour of the release `name` in a study whose releases are `study_names` (in the study's
    order); None when `name` is not one of them."""
    names = [str(n) for n in study_names]
    name = str(name)
    if name not in names:
        return None
    return PALETTE[names.index(name) % len(PALETTE)]
