"""Issue 38, finding 1: the k that a layer cannot show.

The upper bound on k was 100 in the sidebar, 1,000,000 in a study file and none on the command line.
A study made with `study new --k 150` reopened in the app with k = 2 (the sidebar's input reset the
out-of-range value to its minimum) and the Report page stated "maximum risk 1/k = 0.50 (k = 2 ...)".
Now one range, `engine.adversary.K_RANGE` (2..MAX_K for a release), bounds every layer, and a value
outside it is an error naming it, never a silent change.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import pytest

from engine.adversary import MAX_K, MIN_RELEASE_K, check_k, k_argument
from engine.commands.cli import main
from engine.io.errors import UserError

K = 150  # above the sidebar's old bound (100), within every layer's now


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, Path]:
    rows = [(f"P{i:03d}", 1, code, 40 + i % 30) for i, code in enumerate(["401.1", "250.00", "272.4"] * 20)]
    ev, co = tmp_path / "events.csv", tmp_path / "cohort.csv"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code", "age"]).to_csv(ev, index=False)
    pd.DataFrame({"patient_id": sorted({r[0] for r in rows})}).to_csv(co, index=False)
    return ev, co


def test_a_study_made_with_k_150_reopens_in_the_app_with_k_150(data, tmp_path) -> None:
    """`study new --k 150`, packaged with its inputs, reopened in a new session: the sidebar's k and
    the Report page's threshold line say k = 150."""
    from apptest_support import reopen_in_new_session, shown

    ev, co = data
    study, package = tmp_path / "study.json", tmp_path / "study.zip"
    new = ["study", "new", str(study), "--events", str(ev), "--cohort", str(co)]
    assert main([*new, "--scope", "cohort", "--knowledge", "all_visits", "--k", str(K)]) == 0
    assert json.loads(study.read_text())["k"] == K
    args = ["study", "package", str(study), "--out", str(package), "--with-inputs"]
    assert main([*args, "--events", str(ev), "--cohort", str(co)]) == 0
    at = reopen_in_new_session("study.zip", package.read_bytes(), "application/zip")
    at.run()  # the sidebar takes the reopened attacker before its widgets draw
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.number_input(key="k").value == K
    assert at.session_state["study"].k == K
    captions = [shown(c.value) for c in at.caption]
    line = [c for c in captions if c.startswith("Threshold checked")]
    assert line and f"(k = {K}" in line[0] and "1/k = 0.01" in line[0], captions


def test_the_sidebar_input_takes_every_k_a_study_file_takes() -> None:
    """The sidebar's range is the engine's: one bound, no layer narrower than another."""
    from ui.sidebar import K_MAX, K_MIN

    assert (K_MIN, K_MAX) == (MIN_RELEASE_K, MAX_K)


@pytest.mark.parametrize("k", [MIN_RELEASE_K, K, MAX_K])
def test_every_k_of_the_range_is_taken_by_every_layer(k: int) -> None:
    from engine.adversary import Adversary
    from engine.study.study import DataRef, Study

    assert check_k(k) == k and k_argument(str(k)) == k
    text = Study(DataRef("d", "0" * 64), Adversary(), k).to_json()
    assert Study.from_json(text).k == k


@pytest.mark.parametrize("k", [0, 1, MAX_K + 1, 10**20])
def test_a_k_outside_the_range_is_refused_by_name(k: int) -> None:
    with pytest.raises(
        UserError, match=rf"k must be a whole number from {MIN_RELEASE_K} to {MAX_K:,}, not {k}\b"
    ):
        check_k(k)


def test_the_command_line_refuses_a_k_above_the_range_by_name(tmp_path, capsys, data) -> None:
    ev, co = data
    new = ["study", "new", str(tmp_path / "s.json"), "--events", str(ev), "--cohort", str(co)]
    with pytest.raises(SystemExit) as exit_:
        main([*new, "--scope", "cohort", "--knowledge", "all_visits", "--k", str(MAX_K + 1)])
    assert exit_.value.code == 2
    assert f"from 1 to {MAX_K:,}" in capsys.readouterr().err
    with pytest.raises(argparse.ArgumentTypeError):
        k_argument(str(MAX_K + 1))


def test_a_study_file_with_k_above_the_range_is_refused_by_name() -> None:
    from engine.adversary import Adversary
    from engine.study.study import DataRef, Study, StudyError

    d = json.loads(Study(DataRef("d", "0" * 64), Adversary(), 5).to_json())
    d["k"] = MAX_K + 1
    with pytest.raises(StudyError, match="k"):
        Study.from_json(json.dumps(d))


def test_the_report_pages_hand_over_never_changes_k_silently() -> None:
    """`hand_over_k` clamped a k outside the input's range to its end; now it refuses it by name."""
    from streamlit.testing.v1 import AppTest

    def script() -> None:
        import streamlit as st

        from engine.io.errors import UserError
        from ui.sidebar import hand_over_k

        hand_over_k(150)
        shown = st.session_state["k"]
        try:
            hand_over_k(10**7)
        except UserError as exc:
            st.session_state["refused"] = str(exc)
        st.session_state["after"] = st.session_state["k"]
        st.session_state["shown"] = shown

    at = AppTest.from_function(script)
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["shown"] == 150 and at.session_state["after"] == 150
    assert "not 10000000" in at.session_state["refused"]


# ------------------------------------------------ one other parameter: the LDA's age domain and weight
def test_the_lda_views_inputs_take_every_value_a_study_file_takes() -> None:
    """The LDA view's age inputs spanned 0..200 and 1..255 while a study file takes ages 0..150: an
    age domain made in the app (to 200) was saved and then refused on reopening. Now the inputs read
    the declarations (`ui.parameter_widgets`), as the weight's slider does."""
    from apptest_support import run_view

    from engine.study.parameters import parameter_of
    from engine.study.runs import LDASettings

    at = run_view("ui.views.lda", "anonymize")
    for key, name in (("lda_lo", "age_low"), ("lda_hi", "age_high")):
        widget = at.number_input(key=key)
        assert (widget.min, widget.max) == parameter_of(LDASettings, name).bounds, key
    slider = at.slider(key="lda_w")
    assert (slider.min, slider.max) == parameter_of(LDASettings, "w_icd").bounds


def test_a_study_file_with_an_age_no_layer_takes_is_refused_by_name_in_the_app() -> None:
    """A study file whose LDA release has age_high = 151 reopened in the app: an error naming the
    file, the release, the method and the parameter; the session's study is not the file's."""
    from apptest_support import reopen_in_new_session, shown

    from engine.study.runs import LDASettings, settings_to_dict
    from tests.test_study_package import _study

    base = json.loads(_study().to_json())
    settings = {**settings_to_dict(LDASettings()), "age_high": 151}
    release = {"name": "ages", "settings": settings, "data": base["data"], "files": {}, "verification": None}
    text = json.dumps({**base, "k": K, "releases": [release]}).encode()
    at = reopen_in_new_session("ages.json", text)
    errors = [shown(e.value) for e in at.error]
    words = "release 'ages': LDA: age_high must be a whole number from 0 to 150, not 151"
    assert any("ages.json" in e and words in e for e in errors), errors
    study = at.session_state["study"] if "study" in at.session_state else None  # noqa: SIM401 (AppTest state has no get)
    assert study is None or not study.releases


def test_a_per_code_cap_no_study_file_takes_is_refused_by_name_in_the_app() -> None:
    """The GCCens view's cap table took any cap >= 0 while a study file takes 0..1,000,000,000 (the
    declaration of `cap`): a cap edited to 2,000,000,000 made a release whose study no longer
    reopened. Now the table's edits are checked through the declaration and refused by code."""
    from apptest_support import page_app, shown

    from tests.test_pages_interact import _caps_shown, _edit_table

    at = page_app(view=("ui.views.gccens", "render_anonymize"), state={"gcc_capmode": "Per-code caps"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    code = next(iter(_caps_shown(at)))
    _edit_table(at, "gcc_captable:", 0, "cap", 2_000_000_000)
    assert not at.exception, [e.value for e in at.exception]
    errors = [shown(e.value) for e in at.error]
    words = f"the cap of {code} must be a whole number from 0 to 1,000,000,000, not 2000000000"
    assert any(words in e for e in errors), errors


@pytest.mark.parametrize(
    ("method", "words"),
    [
        (
            ["gccens", "--cap", "2000000000"],
            "GCCens: cap must be a whole number from 0 to 1,000,000,000 or none",
        ),
        (["lda", "--age-domain", "1-200"], "LDA: age_high must be a whole number from 0 to 150, not 200"),
    ],
    ids=["cap", "age"],
)
def test_study_add_refuses_a_setting_no_study_file_takes_by_name(
    data, tmp_path, capsys, method, words
) -> None:
    """`study add gccens --cap 2000000000` or `study add lda --age-domain 1-200` wrote a study whose
    file no longer reopened (the reader took caps up to 1,000,000,000 and ages up to 150, validate()
    had no upper bound); now the validation, made from the same declarations, refuses it by name
    before anything is written."""
    ev, co = data
    study = tmp_path / "study.json"
    new = ["study", "new", str(study), "--events", str(ev), "--cohort", str(co)]
    assert main([*new, "--scope", "population", "--knowledge", "all_visits", "--k", "2"]) == 0
    written = study.read_text()
    add = ["study", "add", str(study), "--name", "r", method[0], "--events", str(ev), "--cohort", str(co)]
    assert main([*add, *method[1:]]) == 2
    assert words in capsys.readouterr().err
    assert study.read_text() == written
