"""Issue 26, findings 3 and 5: messages that contradict each other, jargon, units and 'None'.

One AppTest per message, on the shipped sample, through `apptest_support` (the real sidebar and one
page or one method view).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from apptest_support import add_release, page_app, page_text, run_prompts, run_view, shown
from streamlit.testing.v1 import AppTest

from ui.views.gccens import CODE_MODES

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def _infos(at: AppTest) -> list[str]:
    return [shown(i.value) for i in at.info]


def _prompts(at: AppTest) -> list[str]:
    """Every "press Run" message (`ui.progress.run(..., ask=True)`), the first run's included."""
    return [i for i in _infos(at) if "Press Run" in i]


@pytest.fixture(scope="module")
def gccens_release(sample_dataset):
    from engine.study.runs import GCCensSettings, RunInputs

    settings = GCCensSettings(k=5, scope="population")
    cohort = sample_dataset.group_records("cohort")
    return settings, settings.run(RunInputs(sample_dataset.events, cohort))


# ------------------------------------------------------------------------------------ finding 5
def test_risk_with_releases_of_other_data_does_not_say_the_study_is_empty(gccens_release):
    """'3 release(s) ... made from other data' stood above 'No release in the study yet'."""
    settings, release = gccens_release
    at = _ok(page_app("pages/risk.py"))
    at.run()
    add_release(at, "GCCens k=5", release, settings)
    at.sidebar.selectbox(key="cohort_group").set_value("population").run()
    _ok(at)
    infos = "\n".join(_infos(at))
    assert "1 release(s) of this study were made from other data" in infos, infos
    assert "No release in the study yet" not in infos, infos


def test_before_and_after_heading_only_when_a_release_exists():
    """The 'Before and after' heading stood empty until a release existed."""
    at = _ok(page_app("pages/risk.py"))
    at.run()
    _ok(at)
    assert "Before and after" not in [h.value for h in at.header]
    assert any("No release in the study yet" in i for i in _infos(at))


def test_gccens_headline_counts_have_their_numbers_and_no_arrows():
    """'↑ of 3,117 codes': a delta badge without its number, retention with green up-arrows."""
    at = run_view("ui.views.gccens", "anonymize", adversary_scope="population")
    headline = [m for m in at.metric if m.label.startswith(("Pairs retained", "Distinct codes kept"))]
    assert len(headline) == 2
    for m in headline:
        assert not m.proto.delta, (m.label, m.proto.delta)  # no badge, no arrow
    captions = "\n".join(shown(c.value) for c in at.caption)
    assert re.search(r"\d[\d,]* of [\d,]+ distinct codes", captions), captions
    assert re.search(r"\d[\d,]* of [\d,]+ \(patient, code\) pairs", captions), captions


def test_gccens_verdict_names_the_attacker_add_to_study_records():
    """'Verified … (cohort / all visits)' above 'Added … (cohort / single visit)'."""
    at = run_view(
        "ui.views.gccens", "anonymize", adversary_scope="cohort", adversary_knowledge="single_visit"
    )
    at.button(key="gcc_study_add").click().run()
    _ok(at)
    added = next(s.value for s in at.success if "Added" in s.value)
    assert "(cohort / single visit)" in shown(added)
    for s in at.success:
        text = shown(s.value)
        if "(cohort / all visits)" in text:  # GCCens' own model may be shown, named as such
            assert "GCCens' own attacker" in text, text
    assert any("(cohort / single visit)" in shown(s.value) for s in at.success if "Added" not in s.value)


def test_run_prompt_asks_the_first_slow_run_and_quotes_no_other_jobs_time():
    """'took 0.0 s' before a 48 s job; the first all-codes run started without asking."""
    from ui import cache

    cache.clear()  # previews are shared by the process's sessions
    at = run_view("ui.views.gccens", "anonymize", adversary_scope="population", gcc_mode=CODE_MODES[3])
    asked = _prompts(at)
    assert len(asked) == 1 and "Verified" not in page_text(at), asked
    at.button(key="gcc_run_start").click().run()
    _ok(at)
    at.selectbox(key="gcc_mode").set_value(CODE_MODES[0]).run()
    _ok(at)
    at.radio(key="gcc_capmode").set_value("Universal cap").run()
    at.selectbox(key="gcc_mode").set_value(CODE_MODES[3]).run()
    _ok(at)
    for text in run_prompts(at) + _prompts(at):
        assert "0.0 s" not in text, text


def test_phewas_opens_on_a_snp_with_a_significant_association():
    """PheWAS opened on a SNP with no significant association (an empty table)."""
    at = _ok(page_app("pages/phewas.py", state={"phewas_heatherly": False}))
    at.run()
    _ok(at)
    sig = next(d.value for d in at.dataframe if "neglog10_p" in d.value.columns)
    assert len(sig) > 0, at.selectbox(key="phewas_snp").value


# ------------------------------------------------------------------------------------ finding 3
def test_risk_shows_no_server_details_outside_the_administrators_expander():
    at = _ok(page_app("pages/risk.py"))
    at.run()
    _ok(at)
    backend = [e for e in at.expander if "administrators" in e.label]
    assert backend and any("Backend" in c.value for c in backend[0].caption)
    top = [c.value for c in at.main.children.values() if getattr(c, "type", "") == "caption"]
    assert not any("Backend" in str(t) for t in top)


def test_risk_figures_are_percentages_not_bare_fractions():
    at = _ok(page_app("pages/risk.py"))
    at.run()
    _ok(at)
    for m in at.metric:
        assert not re.fullmatch(r"0\.\d+", m.value), (m.label, m.value)
        assert m.proto.help or m.label == "Cohort records", m.label  # a hover definition
    assert not any(re.search(r"1/k = 0\.\d", m.label) for m in at.metric)


# a metric label's width in characters across the whole main area of the wide layout: five columns
# cut 'Mean CUL against the original record' after 24 characters ('Mean CUL against the ori…')
FULL_WIDTH_CHARS = 140


def _metrics_by_column(at: AppTest):
    def walk(node):
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            for child in children.values():
                yield from walk(child)
        else:
            yield node

    for column in at.columns:
        for node in walk(column):
            if getattr(node, "type", "") == "metric":
                yield column.weight, node


@pytest.mark.parametrize("view", ["ui.views.gccens", "ui.views.heatherly"])
def test_metric_labels_fit_their_columns(view):
    at = run_view(view, "anonymize", adversary_scope="population")
    seen = list(_metrics_by_column(at))
    assert seen
    for weight, m in seen:
        assert len(m.label) <= FULL_WIDTH_CHARS * weight, (m.label, round(weight, 2))
        assert m.proto.help, m.label


def test_heatherly_tables_show_no_none():
    at = run_view("ui.views.heatherly", "anonymize", adversary_scope="population")
    for d in at.dataframe:
        frame = d.value
        missing = frame.isna()  # a missing cell reads "None" in the browser's grid
        assert not missing.any().any(), frame.loc[missing.any(axis=1)]


def test_phewas_page_says_no_none():
    """'r² is None': a missing r² is a dash and the reason, in words."""
    import ast

    tree = ast.parse((ROOT / "ui" / "views" / "phewas.py").read_text())
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not [t for t in texts if re.search(r"\bNone\b", t)]
    from ui.format import missing

    assert missing("no test ran on the release") == "— (no test ran on the release)"
