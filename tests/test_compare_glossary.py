"""Issue 16, engine side of the app's plain language: the glossary and teach texts
(engine/report/glossary.py), the release comparison (engine/study/compare.py), release colours (ui/colours.py) and
the raw-identifier rule of the chart check (tests/apptest_support.py)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from apptest_support import is_raw_identifier
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import risk
from engine.adversary import Adversary
from engine.anonymize.censor import gccens
from engine.records import Records
from engine.release import Release
from engine.report.glossary import TEACH, TERMS, glossary_frame, help_for, teach, term
from engine.study import compare
from ui import colours

# the brief's list of terms (issue 16), each with a glossary entry
BRIEF_TERMS = [
    "cul",
    "ncp",
    "re",
    "ppe",
    "ilm",
    "alm",
    "avgre",
    "dgh",
    "mdav",
    "ags",
    "dc_local",
    "cc_local",
    "demo",
    "faithful",
    "targeted",
    "distinguishability",
    "cap",
    "k_anonymity",
    "km_anonymity",
    "adversary",
]
PAGES = ("cohort", "risk", "anonymize", "tradeoffs", "phewas", "labs", "report", "compare", "glossary")


def _records(rows: dict[str, list[str]]) -> Records:
    df = pd.DataFrame([(p, c) for p, cs in rows.items() for c in cs], columns=["patient_id", "code"])
    return Records.from_frame(df)


COHORT = {"a": ["250", "250", "250", "401"], "b": ["250", "272", "724"], "c": ["272", "V45", "V45", "V45"]}


# ------------------------------------------------------------------------------------ glossary
def test_every_term_of_the_brief_has_one_sentence_a_paper_and_a_place():
    for key in BRIEF_TERMS:
        t = term(key)
        assert t.name and t.paper and t.where, key
        # one sentence: ends with a full stop, no sentence break inside
        assert t.sentence.endswith("."), key
        assert not re.search(r"[a-z0-9)]\. [A-Z]", t.sentence), (key, t.sentence)
    frame = glossary_frame()
    assert list(frame.columns) == ["term", "meaning", "example", "paper", "where defined"]
    assert len(frame) == len(TERMS) and frame["meaning"].is_unique


def test_help_is_the_glossary_sentence_and_unknown_terms_fail_loudly():
    assert help_for("cul").startswith(TERMS["cul"].sentence)
    assert "capped record" in help_for("cul")  # Tamersoy's CUL says what it does not count
    both = help_for("k_anonymity", "k_map")
    assert TERMS["k_anonymity"].sentence in both and TERMS["k_map"].sentence in both
    with pytest.raises(KeyError, match="no glossary term"):
        term("nope")


def test_teach_mode_has_two_lines_and_one_thing_to_try_for_every_page():
    assert set(PAGES) <= set(TEACH)
    for page in PAGES:
        text = teach(page)
        assert len(text.shows) == 2 and all(text.shows) and text.try_this


# ------------------------------------------------------------------------------------ colours
def _rgb(hex_colour: str) -> np.ndarray:
    h = hex_colour.lstrip("#")
    return np.array([int(h[i : i + 2], 16) for i in (0, 2, 4)], dtype=float)


# colour-vision deficiency simulation on linear RGB, severity 1 (Machado, Oliveira, Fernandes 2009)
_CVD = {
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.01182, 0.04294, 0.968881]],
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.3039]],
}  # fmt: skip


def _linear(rgb: np.ndarray) -> np.ndarray:
    c = rgb / 255
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _lab(linear: np.ndarray) -> np.ndarray:
    """CIELAB (D65) of a linear RGB colour."""
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    f = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(f > 0.008856, np.cbrt(f), 7.787 * f + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _seen(hex_colour: str, vision: str) -> np.ndarray:
    lin = _linear(_rgb(hex_colour))
    if vision != "normal":
        lin = np.clip(np.array(_CVD[vision]) @ lin, 0, 1)
    return _lab(lin)


def _delta(a: str, b: str, vision: str = "normal") -> float:
    return float(np.linalg.norm(_seen(a, vision) - _seen(b, vision)))


def test_no_release_colour_is_grey_or_near_the_originals():
    for c in colours.PALETTE:
        rgb = _rgb(c)
        assert _delta(c, colours.ORIGINAL) > 25, c  # never drawn in almost the original's colour
        assert rgb.max() - rgb.min() > 60, c  # not a grey
    assert len(set(colours.PALETTE)) == len(colours.PALETTE)


def test_twelve_release_colours_stay_apart_also_to_colour_blind_eyes():
    """Issue 26: colours repeated after 9 releases, and two near-identical oranges. At least 12, every
    pair at least 20 CIELAB units apart for normal vision and 12 under each simulated dichromacy."""
    assert len(colours.PALETTE) >= 12
    for vision, least in (("normal", 20), ("deuteranopia", 12), ("protanopia", 12), ("tritanopia", 12)):
        for i, a in enumerate(colours.PALETTE):
            for b in colours.PALETTE[i + 1 :]:
                assert _delta(a, b, vision) >= least, (vision, a, b, round(_delta(a, b, vision), 1))


def test_the_four_adversaries_differ_in_line_style_and_colour_family():
    """Issue 26: the two all-visits curves on Risk were two near-identical oranges."""
    from engine.adversary import ALL_ADVERSARIES

    styles = {a.label: colours.adversary_style(a.label) for a in ALL_ADVERSARIES}
    assert all(styles.values()) and len({s[0] for s in styles.values()}) == 4
    for a in ALL_ADVERSARIES:
        colour, dash = styles[a.label]
        assert dash == ("solid" if a.knowledge == "single_visit" else "dash")
        hue = _seen(colour, "normal")
        assert (hue[2] < 0) == (a.scope == "cohort")  # cohort blue (b* < 0), population red (b* > 0)
    for vision in _CVD:
        for i, a in enumerate(ALL_ADVERSARIES):
            for b in ALL_ADVERSARIES[i + 1 :]:
                same_style = styles[a.label][1] == styles[b.label][1]
                if same_style:  # told apart by colour alone
                    assert _delta(styles[a.label][0], styles[b.label][0], vision) >= 12, (vision, a, b)


def test_a_release_has_the_colour_of_its_place_in_the_study_in_the_app_and_the_report():
    from engine.report import palette

    study = ["GCCens k=5", "DEMO_D", "DEMO_S", *(f"r{i}" for i in range(9))]
    app = colours.colour_map(["original", *reversed(study)], study)
    assert app["original"] == colours.ORIGINAL
    assert [app[n] for n in study] == list(palette.PALETTE[:12])  # 12 releases, 12 colours, none twice
    assert all(palette.release_colour(n, study) == app[n] for n in study)
    # a series outside the study never takes a study release's colour while one is free
    extra = colours.colour_map(["DEMO_B"], study[:3])["DEMO_B"]
    assert extra not in {app[n] for n in study[:3]}


def test_a_release_keeps_its_colour_and_the_original_is_neutral():
    first = colours.colour_of("release one (test)")
    colours.colour_of("release two (test)")
    assert colours.colour_of("release one (test)") == first
    assert colours.colour_of("original") == colours.ORIGINAL
    assert colours.colour_map(["original", "release one (test)"]) == {
        "original": colours.ORIGINAL,
        "release one (test)": first,
    }


# ---------------------------------------------------------------------------------- the chart rule
@pytest.mark.parametrize(
    "title", ["value", "variable", "share_codes_retained", "measure=DC Local %", "index"]
)
def test_raw_identifiers_are_caught(title):
    assert is_raw_identifier(title)


@pytest.mark.parametrize("title", ["Share", "k", "DC Local %", "k = 5", "DEMO_D", "Released -log10 p"])
def test_words_pass(title):
    assert not is_raw_identifier(title)


# ---------------------------------------------------------------------------------- comparison
def test_headline_counts_what_the_caps_removed_against_the_original():
    cohort = _records(COHORT)
    release = gccens(cohort, cohort, 1, cap=1)  # k = 1: the caps alone remove 4 of 11 instances
    h = compare.headline(release, cohort)
    assert release.loss["cul"]["share_codes_retained"] == 1.0  # Tamersoy's figure reads loss-free
    assert h.instances_kept == pytest.approx(7 / 11)
    assert h.records_modified == pytest.approx(2 / 3)  # a (250 x3 -> x1) and c (V45 x3 -> x1); b untouched
    assert h.code_set == ("250", "272", "401", "724", "V45")


def test_records_modified_counts_generalized_removed_and_dropped_records():
    cohort = _records(COHORT)
    same = Release("hand", cohort)
    assert compare.records_modified(same, cohort) == 0.0
    gen = Release(
        "hand",
        _records({"a": ["250", "250", "250", "401"], "b": ["{250,272}", "{250,272}", "724"]}),
        item_codes={"{250,272}": frozenset({"250", "272"})},
    )
    assert compare.records_modified(gen, cohort) == pytest.approx(2 / 3)  # b generalized, c dropped


def _records_modified_by_text(release: Release, cohort: Records) -> float:
    """The reference: each record as its sorted item texts joined (the first implementation)."""

    def keys(records: Records) -> pd.Series:
        frame = pd.DataFrame(
            {
                "patient": records.patient_ids[records.event_patient].astype(str),
                "item": records.items[records.event_item].astype(str),
            }
        ).sort_values(["patient", "item"], kind="mergesort")
        return frame.groupby("patient", sort=False)["item"].agg("\x1f".join)

    before = keys(cohort).reindex(cohort.patient_ids.astype(str)).fillna("")
    after = keys(release.records).reindex(before.index).fillna("")
    return float((before.to_numpy() != after.to_numpy()).mean())


_PATIENT_CODES = st.dictionaries(
    st.sampled_from("abcdefgh"),
    st.lists(st.sampled_from(["250", "272", "401", "{250,272}", "V45"]), max_size=5),
)


@settings(max_examples=200, deadline=None)
@given(cohort=_PATIENT_CODES.filter(lambda rows: any(rows.values())), released=_PATIENT_CODES)
def test_records_modified_counts_as_comparing_each_records_item_texts(cohort, released):
    """Issue 13 (Long work): records modified was 5 s of a k change on the Anonymize page (UGACLIP's
    long item labels joined per record); the sparse count comparison gives the text comparison's
    figure on any records: duplicates, patients dropped, patients only in the release, empty ones."""
    original = _records(cohort)
    release = (
        Release("hand", _records(released))
        if any(released.values())
        else Release("hand", original.take(np.array([], dtype=int)))
    )
    assert compare.records_modified(release, original) == pytest.approx(
        _records_modified_by_text(release, original)
    )


def test_an_lda_release_is_compared_with_the_pairs_it_was_made_from():
    """Issue 16's note: LDA's `code|age` items were compared with plain codes, so every LDA record read
    as modified. The original of an LDA release is its source pairs."""
    cohort = _records({"a": ["250", "401"], "b": ["250"], "c": ["724"]})
    pairs = _records({"a": ["250|40", "401|41"], "b": ["250|50"], "c": ["724|60"]})
    untouched = Release("LDA", pairs, age_pairs=True, source=pairs)
    assert compare.records_modified(untouched, cohort) == 0.0
    assert compare.headline(untouched, cohort).records_modified == 0.0
    generalized = Release(
        "LDA",
        _records({"a": ["250|40", "401|41"], "b": ["250|[50-59]"], "c": ["724|60"]}),
        age_pairs=True,
        item_codes={"250|[50-59]": frozenset({"250|50"})},
        source=pairs,
    )
    assert compare.records_modified(generalized, cohort) == pytest.approx(1 / 3)  # b's age generalized


def test_flags_name_a_catch_all_item_and_a_partial_code_set():
    cohort = _records({p: ["250", "272", "401", "724", "V45", "E11"] for p in "abcdef"})
    big = frozenset({"250", "272", "401", "724", "V45", "E11"})
    catch = Release("hand", _records({p: ["{all}"] for p in "abcdef"}), item_codes={"{all}": big})
    h = compare.headline(catch, cohort)
    assert h.catch_all_flagged
    assert any("catch-all" in f and "6 codes" in f for f in compare.flags(h))
    # GCCens on two of six codes: the code set is stated against the cohort's
    two = gccens(_records({p: ["250", "272"] for p in "abcdef"}), None, 2, cap=3, scope="cohort")
    text = " ".join(compare.flags(compare.headline(two, cohort)))
    assert "codes 250, 272 (2 of 6 in the cohort)" in text


def test_comparison_table_verifies_each_release_and_marks_the_best():
    cohort = _records(COHORT)
    adversary = Adversary("cohort", "all_visits")
    whole = gccens(cohort, None, 2, cap=3, scope="cohort")
    capped = gccens(cohort, None, 2, cap=1, scope="cohort")
    untouched = Release("hand", cohort)
    releases = {"cap 3": whole, "cap 1": capped, "untouched": untouched}
    utility = {"diabetes": frozenset({"250"})}
    table = compare.comparison_table(releases, cohort, None, adversary, 2, utility=utility)
    assert list(table.columns[:4]) == ["release", "method", "verified", "best in"]
    assert list(table["release"]) == list(releases)
    for name, rel in releases.items():
        v = risk.verify(rel, adversary, 2, None)
        row = table.set_index("release").loc[name]
        assert row["verified"] == v.ok
        assert row["records below k"] == int((v.distinguishability < 2).sum())
    row = table.set_index("release").loc["untouched"]
    assert row["pairs retained"] == 1.0 and row["records modified"] == 0.0
    assert (row["pairs kept"], row["pairs in the cohort"], row["rows released"]) == (
        7,
        7,
        7,
    )  # one row per pair
    best = compare.best_rows(table)
    assert best["pairs retained"] == {"untouched"}
    assert "untouched" in best["records modified"]
    assert "pairs retained" in row["best in"]
    assert "PheWAS associations lost" not in table.columns  # no genotypes given: no column


def test_comparison_risk_figures_are_risk_measures_of_the_verification():
    """Issue 27: maximum and average risk and records at risk on the Compare page (and so the report's
    comparison) are `risk.risk_measures` of the verification's distinguishability at threshold 1/k."""
    cohort = _records(COHORT)
    for adversary in (Adversary("cohort", "all_visits"), Adversary("cohort", "single_visit")):
        releases = {
            "cap 1": gccens(cohort, None, 2, cap=1, scope="cohort"),
            "untouched": Release("hand", cohort),
        }
        table = compare.comparison_table(releases, cohort, None, adversary, 3).set_index("release")
        for name, rel in releases.items():
            m = risk.risk_measures(risk.verify(rel, adversary, 3, None).distinguishability, 1 / 3)
            row = table.loc[name]
            assert row["maximum risk"] == m.prosecutor_max
            assert row["average risk"] == m.average
            assert row["records at risk"] == m.records_at_risk == row["records below k"]
        assert compare.best_rows(table.reset_index())["maximum risk"]


def test_phewas_changes_reads_the_total_row():
    original = pd.DataFrame(
        {
            "snp": ["s1", "s1"],
            "phecode": ["250", "401"],
            "phenotype": ["d", "h"],
            "n_cases": [30, 30],
            "odds_ratio": [2.0, 1.0],
            "p": [0.001, 0.5],
            "p_bonferroni": [0.002, 1.0],
            "p_bh": [0.002, 0.5],
        }
    )
    released = original.assign(p=[0.5, 0.001], p_bonferroni=[1.0, 0.002], p_bh=[0.5, 0.002])
    assert compare.phewas_changes(original, {"r": released}) == {"r": (1, 1)}


def test_a_series_outside_the_study_avoids_its_colours_when_every_colour_was_handed_out(monkeypatch):
    """Found by `make test` in a fresh clone: after many other series had been drawn in the process,
    a series outside the study was given a study release's colour (the fallback cycled the palette)."""
    palette = colours.PALETTE
    # 18 earlier series holding every colour: with the study's 3, the old cycle's pick was a study colour
    earlier = {f"earlier series {i}": palette[i % len(palette)] for i in range(18)}
    monkeypatch.setattr(colours, "_FALLBACK", earlier)
    study = ["GCCens k=5", "DEMO_D", "DEMO_S"]
    app = colours.colour_map(study, study)
    extra = colours.colour_map(["DEMO_B"], study)["DEMO_B"]
    assert extra not in {app[n] for n in study}
