"""Every page exercised after its first render (issue 13, "Done when"): one AppTest per page (and per
method on Anonymize) renders it, changes a widget and reruns, switches to another page and back, and
finds no exception at any step. The pages run inside app.py's own navigation (`full_app`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import full_app, page_path, shown
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)

ANONYMIZE = "pages/anonymize.py"


def _ok(at: AppTest, step: str) -> None:
    assert not at.exception, (step, [e.value for e in at.exception])


def _go(at: AppTest, page: str) -> None:
    at.switch_page(page_path(page)).run()
    _ok(at, f"open {page}")


def _set(at: AppTest, kind: str, key: str, value) -> None:
    getattr(at, kind)(key=key).set_value(value).run()
    _ok(at, f"{kind} {key} = {value!r}")


def _exercise(page: str, changes: list[tuple[str, str, object]], state: dict | None = None) -> AppTest:
    """Open `page`, make each change (a rerun each), switch to another page and back, change the first
    widget back and forth once more: no exception at any step."""
    at = full_app()
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.run()
    _ok(at, "first run")
    _go(at, page)
    for kind, key, value in changes:
        _set(at, kind, key, value)
    other = "pages/report.py" if page == "pages/cohort.py" else "pages/cohort.py"
    _go(at, other)
    _go(at, page)
    kind, key, value = changes[-1]
    assert getattr(at, kind)(key=key).value == value, "the changed setting survived the switch"
    return at


@pytest.mark.parametrize(
    ("page", "changes"),
    [
        ("pages/cohort.py", [("slider", "cohort_top_n", 30)]),
        ("pages/risk.py", [("slider", "risk_n_patterns", 30)]),
        ("pages/phewas.py", [("radio", "phewas_correction", "bonferroni")]),
        ("pages/report.py", [("text_input", "report_recipient", "Study team")]),
    ],
)
def test_page_takes_interactions_and_a_return(page, changes):
    at = _exercise(page, changes)
    at.sidebar.number_input(key="k").set_value(6).run()
    _ok(at, "sidebar k = 6")


@pytest.mark.parametrize(
    ("method", "changes"),
    [
        (
            "GCCens (censoring)",
            [("radio", "gcc_capmode", "Universal cap"), ("radio", "gcc_variant", "targeted")],
        ),
        ("Generalization (Heatherly)", [("checkbox", "hea_complete", False)]),
        ("Clinical profiles (UGACLIP / ACLIP)", [("radio", "profiles_method", "ACLIP")]),
        ("Trajectories (LDA)", [("slider", "lda_w", 0.3)]),
    ],
)
def test_anonymize_each_method_takes_interactions_and_a_return(method, changes):
    at = _exercise(ANONYMIZE, changes, {"method_render_anonymize": method})
    assert at.session_state["method_render_anonymize"] == method


def test_tradeoffs_takes_interactions_and_a_return():
    _exercise("pages/tradeoffs.py", [("radio", "gcct_variant", "targeted")])


@pytest.mark.skipif(
    not (ROOT / "sample_data" / "labs.parquet").exists(), reason="the shipped sample has no labs.parquet"
)
def test_lab_orders_takes_every_interaction_and_a_return():
    """Issue 13: the page showed `CacheReplayClosureError` on any interaction after its first render
    (a cached function had drawn a progress bar created outside it; replaying the cache failed)."""
    small = {"labs_simulations": 5, "labs_trials": 20, "labs_epochs": 1, "labs_max_train": 1000}
    at = _exercise(
        "pages/labs.py",
        [
            ("slider", "labs_max_days", 10),
            ("toggle", "labs_train_vae", True),
            ("slider", "labs_max_days", 12),
        ],
        {**small, "labs_train_vae": False},
    )
    at.sidebar.radio(key="adversary_knowledge").set_value("all_visits").run()
    _ok(at, "knowledge all visits")
    at.sidebar.radio(key="adversary_scope").set_value("population").run()
    _ok(at, "scope population")
    at.sidebar.radio(key="adversary_knowledge").set_value("single_visit").run()
    _ok(at, "knowledge back to single visit (cached results replayed)")
    _set(at, "toggle", "labs_train_vae", False)
    _set(at, "toggle", "labs_train_vae", True)


def _edit_table(at: AppTest, key_prefix: str, row: int, column: str, value) -> None:
    """Edit one cell of the `st.data_editor` whose key starts with `key_prefix` and rerun, as the
    browser does (AppTest cannot set an editor's value: its state, a JSON of the edits, is sent with
    the other widgets' states)."""
    import json

    from streamlit.proto.WidgetStates_pb2 import WidgetState

    editors = [d for d in at.data_editor if d.key and d.key.startswith(key_prefix)]
    assert len(editors) == 1, [d.key for d in at.data_editor]
    key = editors[0].key
    edits = {"edited_rows": {}, "added_rows": [], "deleted_rows": []}
    if key in at.session_state:  # the browser sends every edit made on this editor so far
        edits = json.loads(json.dumps(at.session_state[key]))
    edits["edited_rows"].setdefault(str(row), {})[column] = value
    states = at._tree.get_widget_states()
    states.widgets.append(WidgetState(id=editors[0].proto.id, string_value=json.dumps(edits)))
    at._run(states)
    _ok(at, f"edit {key_prefix} row {row} {column} = {value!r}")


def _caps_shown(at: AppTest) -> dict[str, int]:
    table = next(d for d in at.data_editor if d.key and d.key.startswith("gcc_captable:"))
    frame = table.value
    return dict(zip(frame["code"].astype(str), frame["cap"].astype(int), strict=True))


def test_gccens_per_code_cap_edits_survive_page_switches():
    """Issue 13: an edited per-code cap was back at its default after a switch to another page (the
    editor's state cannot be kept like other widgets': ui/persist.py `edited_column`)."""
    at = _exercise(
        ANONYMIZE, [("radio", "gcc_variant", "targeted")], {"method_render_anonymize": "GCCens (censoring)"}
    )
    before = _caps_shown(at)
    code = next(iter(before))
    _edit_table(at, "gcc_captable:", 0, "cap", 1)
    assert at.session_state["gcc_capedits"] == {code: 1}
    _go(at, "pages/risk.py")
    _go(at, ANONYMIZE)
    assert _caps_shown(at) == {**before, code: 1}  # the edit is in the table drawn again
    _go(at, "pages/cohort.py")
    _go(at, ANONYMIZE)
    assert _caps_shown(at) == {**before, code: 1}
    # a second edit on the editor drawn over the kept caps: both kept; then one set back to its default
    second = list(before)[1]
    _edit_table(at, "gcc_captable:", 1, "cap", 0)
    assert _caps_shown(at)[code] == 1 and at.session_state["gcc_capedits"] == {code: 1, second: 0}
    _edit_table(at, "gcc_captable:", 0, "cap", before[code])
    _go(at, "pages/risk.py")
    _go(at, ANONYMIZE)
    assert _caps_shown(at) == {**before, second: 0}


def test_reopening_a_study_moves_the_sidebar_to_its_adversary_and_k():
    """Issue 13: a reopened study kept the sidebar's adversary and k (and so verified its releases
    under another attacker than the study's); now the sidebar moves to the study's and says so."""
    from engine.adversary import Adversary
    from engine.study.study import Study

    at = full_app()
    at.run()
    _go(at, "pages/report.py")
    data = at.session_state["study"].data
    text = Study(data, Adversary("population", "all_visits"), 7).to_json()
    at.file_uploader(key="study_upload").upload("study.json", text.encode(), "application/json")
    at.run()
    _ok(at, "reopen")
    assert at.sidebar.number_input(key="k").value == 7
    assert at.sidebar.radio(key="adversary_scope").value == "population"
    assert at.sidebar.radio(key="adversary_knowledge").value == "all_visits"
    said = [i.value for i in at.sidebar.info]
    assert any("Set from the reopened study file" in s and "k = 7" in s for s in said), said
    assert at.session_state["study"].k == 7
    assert any("at k = 7" in s.value for s in at.subheader)
    # a later change of k is the user's: the note goes, the study follows the sidebar
    at.sidebar.number_input(key="k").set_value(5).run()
    _ok(at, "k = 5")
    assert not any("Set from the reopened study file" in i.value for i in at.sidebar.info)
    assert at.session_state["study"].k == 5


def test_lda_with_an_uploaded_hierarchy_is_refused_by_the_study_with_the_reason():
    """Issue 13: an LDA release over an uploaded ICD hierarchy could not be recorded, and the view said
    only "e.g. an uploaded hierarchy" in a caption. A study file records settings, not the hierarchy:
    the view says so, naming the file and its sha256, and offers no button."""
    import hashlib

    hierarchy = b"child,parent\n250,metabolic\n272,metabolic\n401,circulatory\n724,musculoskeletal\n"
    hierarchy += b"metabolic,*\ncirculatory,*\nmusculoskeletal,*\n"
    at = full_app()
    at.session_state["method_render_anonymize"] = "Trajectories (LDA)"
    at.run()
    _go(at, ANONYMIZE)
    assert at.button(key="lda_study_add")  # a built-in hierarchy: the release can be added
    _set(at, "selectbox", "lda_icd", "Custom (CSV upload)")
    at.file_uploader(key="lda_upload").upload("my_hierarchy.csv", hierarchy, "text/csv")
    at.run()
    at.button(key="lda_run_start").click().run()  # LDA runs on "Run" after a change (issue 13)
    _ok(at, "uploaded hierarchy")
    warned = [shown(w.value) for w in at.warning if "Not added to the study" in shown(w.value)]
    assert len(warned) == 1, [w.value for w in at.warning]
    assert "my_hierarchy.csv" in warned[0] and hashlib.sha256(hierarchy).hexdigest() in warned[0]
    assert not [b for b in at.button if b.key == "lda_study_add"]
    assert at.session_state["study"].releases == ()
