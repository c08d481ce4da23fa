"""AppTest of issue 12's app-side findings: the cohort of an upload (2), session caches keyed on the
whole content (4), downloads only through the export gate (5), untrusted text shown literally (7),
cap 0 on many codes (8)."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pandas as pd
import pytest
from apptest_support import ROOT, full_app, page_app, page_path, page_text, run_view, shown
from streamlit.testing.v1 import AppTest

CODES = ["401.1", "250.00", "272.4", "724.2", "530.81", "311", "493.90", "244.9"]


def _upload_events(n_patients: int = 300, seed: int = 0) -> pd.DataFrame:
    """Events of n patients over a few real ICD-9-CM codes, two visits each."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_patients):
        for visit in (1, 2):
            for code in rng.choice(CODES, size=2, replace=False):
                rows.append((f"U{p:04d}", visit, code))
    return pd.DataFrame(rows, columns=["patient_id", "visit", "code"])


def _csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


def _upload(at: AppTest, role: str, name: str, data: bytes) -> None:
    at.sidebar.file_uploader(key=f"upload_{role}").upload(name, data, "text/csv")


def _warnings(at: AppTest, where: str = "main") -> list[str]:
    root = at.sidebar if where == "sidebar" else at.main
    return [w.value for w in root.warning]


# ------------------------------------------------------------------------------------ finding 2
def test_loading_a_cohort_list_after_the_events_selects_it():
    """Events first, the 60-patient cohort list after: the cohort is the list, not the population,
    and no release holds a patient outside it."""
    events = _upload_events(300)
    cohort_ids = events["patient_id"].drop_duplicates().iloc[::5].tolist()
    assert len(cohort_ids) == 60
    at = full_app()
    at.run()
    at.sidebar.radio(key="dataset_choice").set_value("Upload files").run()
    _upload(at, "events", "events.csv", _csv_bytes(events))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["context"].cohort.n_patients == 300
    # the whole population as cohort is flagged in the sidebar and on the pages that release data
    assert any("whole population" in w for w in _warnings(at, "sidebar"))
    for page in ("pages/anonymize.py", "pages/report.py"):
        at.switch_page(page_path(page)).run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("whole population (300 patients)" in w for w in _warnings(at)), page

    _upload(at, "cohort", "cohort.csv", _csv_bytes(pd.DataFrame({"patient_id": cohort_ids})))
    at.switch_page(page_path("pages/anonymize.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.selectbox(key="cohort_group").value == "cohort"
    ctx = at.session_state["context"]
    assert ctx.cohort.n_patients == 60 and ctx.population.n_patients == 300
    assert not any("whole population" in w for w in _warnings(at) + _warnings(at, "sidebar"))
    at.button(key="gcc_study_add").click().run()  # the default method view: GCCens
    assert not at.exception, [e.value for e in at.exception]
    released = at.session_state["study_made"]["GCCens k=5"].release
    assert set(map(str, released.records.patient_ids)) <= set(cohort_ids)

    # choosing the population as cohort afterwards is the user's choice, and is flagged again
    at.sidebar.selectbox(key="cohort_group").set_value("population").run()
    assert at.sidebar.selectbox(key="cohort_group").value == "population"
    assert any("whole population" in w for w in _warnings(at))


def test_whole_population_cohort_is_flagged_on_every_release_page():
    for page in ("pages/anonymize.py", "pages/tradeoffs.py", "pages/risk.py", "pages/report.py"):
        at = page_app(page)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert not any("whole population" in w for w in _warnings(at)), page
        at.sidebar.selectbox(key="cohort_group").set_value("population").run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("The cohort is the whole population" in w for w in _warnings(at)), page


# ------------------------------------------------------------------------------------ finding 4
N_GENOTYPED = 60_000  # Streamlit hashes frames of 50,000 rows or more on a sample of 10,000


def _phewas_inputs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Events of 60,000 patients (401.1 more frequent with each risk allele) and two genotype
    frames that differ in one value only, in a row Streamlit's sampled hash never reads."""
    rng = np.random.default_rng(12)
    ids = [f"G{i:05d}" for i in range(N_GENOTYPED)]
    genotype = rng.integers(0, 3, size=N_GENOTYPED)
    hypertensive = rng.random(N_GENOTYPED) < 0.10 + 0.03 * genotype
    events = pd.DataFrame({"patient_id": ids, "visit": 1, "code": np.where(hypertensive, "401.1", "250.00")})
    first = pd.DataFrame({"patient_id": ids, "rs1": genotype.astype(float)})
    sampled = set(first.sample(n=10_000, random_state=0).index)  # what Streamlit's hash reads
    middle = N_GENOTYPED // 2
    row = next(
        r for r in range(middle, N_GENOTYPED) if r not in sampled and hypertensive[r] and genotype[r] == 2
    )
    second = first.copy()
    second.loc[row, "rs1"] = 0.0
    return events, first, second


def _significant(at: AppTest) -> pd.DataFrame:
    return at.dataframe[-1].value.set_index("phecode")


def test_phewas_results_follow_every_row_of_the_genotypes_per_session():
    from engine.records import Records
    from engine.utility import phewas

    events, first, second = _phewas_inputs()
    state = {"dataset_choice": "Upload files", "phewas_heatherly": False}
    sessions = []
    for genotypes in (first, second):  # two sessions, same events, different genotype files
        at = page_app("pages/phewas.py", state=state)
        at.run()
        _upload(at, "events", "events.csv", _csv_bytes(events))
        _upload(at, "genotypes", "genotypes.csv", _csv_bytes(genotypes))
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        sessions.append(at)
    shown = [_significant(at) for at in sessions]
    cohort = Records.from_frame(events)
    settings = phewas.PhewasSettings()
    for genotypes, table in zip((first, second), shown, strict=True):
        truth = phewas.phewas_of_records(cohort, genotypes, settings).set_index("phecode")
        assert table.loc["401.1", "p"] == pytest.approx(truth.loc["401.1", "p"], rel=1e-9, abs=0)
    assert shown[0].loc["401.1", "p"] != pytest.approx(shown[1].loc["401.1", "p"], rel=1e-9, abs=0)

    # one session: a corrected genotype file replaces the first one's result
    at = sessions[0]
    _upload(at, "genotypes", "genotypes_fixed.csv", _csv_bytes(second))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert _significant(at).loc["401.1", "p"] == pytest.approx(shown[1].loc["401.1", "p"], rel=1e-9, abs=0)


# ------------------------------------------------------------------------------------ finding 7
LEAK = "![x](http://127.0.0.1:8999/leak.png)"
LEAK_NAME = "![y](http://127.0.0.1:8999/name.png).csv"


def _markdown_bodies(at: AppTest) -> list[str]:
    """Every text the browser renders as Markdown: alerts, captions, markdown, headers."""
    kinds = ("error", "warning", "info", "success", "caption", "markdown", "subheader", "header", "title")
    return [str(e.value) for kind in kinds for e in getattr(at, kind)]


_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")  # CommonMark code spans: literal


def _assert_literal(at: AppTest, payloads: tuple[str, ...]) -> None:
    bodies = _markdown_bodies(at)
    for body in bodies:
        outside_code = _CODE_SPAN.sub("", body)
        for raw in ("![", "](http", "<img"):
            assert raw not in outside_code, body
    seen = "\n".join(shown(b) for b in bodies)
    for payload in payloads:  # still shown, as the characters it is made of
        assert payload in seen, payload


def test_untrusted_code_and_file_name_are_shown_literally():
    events = f"patient_id,visit,code\nP1,1,401.1\nP2,1,{LEAK}\nP3,1,250.00\n".encode()
    at = full_app()
    at.run()
    at.sidebar.radio(key="dataset_choice").set_value("Upload files").run()
    _upload(at, "events", LEAK_NAME, events)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.error  # the bad code is refused, quoting it and the file name
    _assert_literal(at, (LEAK, LEAK_NAME))

    # a valid file under that name: the Cohort page and the report name it literally
    good = _csv_bytes(_upload_events(20))
    _upload(at, "events", LEAK_NAME, good)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    _assert_literal(at, (LEAK_NAME,))
    at.switch_page(page_path("pages/report.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    _assert_literal(at, ())
    # the IRB report (HTML shown in a frame and downloaded) names the file literally, escaped
    at.button(key="report_build").click().run()
    assert not at.exception, [e.value for e in at.exception]
    page = at.session_state["report_built"][2].decode()
    assert html.escape(LEAK_NAME) in page and "<img" not in page


def test_error_details_show_no_traceback():
    import tomllib

    from streamlit import config
    from streamlit.config import ShowErrorDetailsConfigOptions

    value = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["client"]["showErrorDetails"]
    assert value in {o.value for o in ShowErrorDetailsConfigOptions}
    before = config.get_option("client.showErrorDetails")
    config.set_option("client.showErrorDetails", value)
    try:
        at = AppTest.from_string("raise ValueError('/srv/cohortshield/secret.py: bad value')")
        at.run()
    finally:
        config.set_option("client.showErrorDetails", before)
    assert at.exception  # the run still fails visibly, but says nothing of the server
    shown_error = at.exception[0]
    assert not shown_error.stack_trace
    assert "/srv/cohortshield" not in shown_error.message and "ValueError" not in shown_error.value


# ------------------------------------------------------------------------------------ finding 5
def _download_labels(at: AppTest) -> set[str]:
    return {b.proto.label for b in at.get("download_button")}


def test_heatherly_download_is_gated_under_the_sidebars_all_visits_adversary():
    """Verified for single visits (the paper's model), the release is refused when the sidebar names
    the all-visits adversary: no release, code map or records download; the records below k shown."""
    at = run_view("ui.views.heatherly", "anonymize", hea_complete=True)
    assert at.success and "Verified" in at.success[0].value
    assert {"Download the release (CSV)", "Download these records (CSV)"} <= _download_labels(at)

    at.sidebar.radio(key="adversary_knowledge").set_value("all_visits").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.success and "single visit" in at.success[0].value  # the method's own verdict stays
    labels = _download_labels(at)
    for refused in (
        "Download the release (CSV)",
        "Download the code map (CSV)",
        "Download these records (CSV)",
    ):
        assert refused not in labels
    assert any("all visits" in shown(e.value) and "no download" in e.value for e in at.error)
    below = next(
        d.value for d in at.dataframe if list(d.value.columns) == ["patient_id", "distinguishability"]
    )
    assert len(below) > 0 and (below["distinguishability"] < 5).all()


def test_unverified_release_offers_nothing_of_its_records():
    """The paper's procedure leaves records below k on the sample: neither the release nor the
    released records beside the originals can be downloaded; which records fall short is shown."""
    at = run_view("ui.views.heatherly", "anonymize", hea_complete=False)  # the paper's procedure (issue 35)
    summary = next(d.value for d in at.dataframe if "verified" in d.value.columns)
    assert not summary.set_index("release").loc["DEMO_D", "verified"]
    labels = _download_labels(at)
    assert "Download the release (CSV)" not in labels and "Download these records (CSV)" not in labels
    assert "Download the records below k (CSV)" in labels
    assert any("Not verified" in e.value for e in at.error)
    assert any("No download of these records" in shown(c.value) for c in at.caption)


def _gate_app(case: str) -> AppTest:
    """A page calling `ui.downloads.release_downloads` on a small release: `safe` (every record meets
    k = 2), `below k` (patient c holds 250.00 alone), `stale` (the below-k release offered with the
    safe release's verification), `k 1`."""

    def page(case: str) -> None:
        import pandas as pd

        from engine.adversary import Adversary
        from engine.records import Records
        from engine.release import Release
        from engine.risk import verify
        from ui.downloads import release_downloads

        def release(last: str) -> Release:
            frame = pd.DataFrame({"patient_id": ["a", "b", "c"], "code": ["401.1", "401.1", last]})
            records = Records.from_frame(frame)  # the release as made from this cohort (`source`)
            return Release("toy", records).checked(records)

        named = Adversary("cohort", "all_visits")
        safe, bad = release("401.1"), release("250.00")
        rel = safe if case in ("safe", "k 1") else bad
        v = verify(safe if case == "stale" else rel, named, 2)
        release_downloads(rel, v, named, 1 if case == "k 1" else 2, None, name="toy", key="toy")

    at = AppTest.from_function(page, kwargs={"case": case})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_release_downloads_go_through_the_gate():
    safe = _gate_app("safe")
    assert _download_labels(safe) == {"Download the release (CSV)", "Download the code map (CSV)"}
    assert not safe.error
    for case in ("below k", "stale", "k 1"):
        at = _gate_app(case)
        assert _download_labels(at) <= {"Download the records below k (CSV)"}, case
        assert at.error, case
    below = _gate_app("stale")  # the verification of another release is not trusted: c is shown
    assert below.dataframe[0].value["patient_id"].tolist() == ["c"]
    assert "k = 1 protects nobody" in shown(_gate_app("k 1").error[0].value)


def test_every_download_goes_through_ui_downloads():
    """One helper: no page or tab builds a download button or a CSV of its own."""
    offenders = []
    for path in [*(ROOT / "ui").glob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"]:
        if path.name == "downloads.py":
            continue
        text = path.read_text()
        for needle in ("download_button(", "to_csv(index", "_csv_gz("):
            if needle in text:
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert offenders == []


# ------------------------------------------------------------------------------------ finding 8
def test_gccens_tab_universal_cap_zero_on_all_codes():
    """Cap 0 on every code of the sample (hundreds of codes, more than numpy's 64 dimensions)."""
    at = run_view(
        "ui.views.gccens",
        "anonymize",
        adversary_scope="population",
        gcc_mode="All codes",
        gcc_capmode="Universal cap",
        gcc_cap=0,
    )
    at.button(key="gcc_run_start").click().run()  # all codes never start unasked (issue 26)
    assert not at.exception, [e.value for e in at.exception]
    at.button(key="gcc_study_add").click().run()
    assert not at.exception, [e.value for e in at.exception]
    release = at.session_state["study_made"]["GCCens k=5"].release
    assert release.records.n_events == 0 and release.loss["censored_by_loop"] == 0
    assert "Verified" in page_text(at)


def test_frame_fingerprint_reads_every_row_of_every_column():
    def page() -> None:  # AppTest runs this function's source alone: it imports what it uses
        import json

        import numpy as np
        import pandas as pd
        import streamlit as st

        from ui.fingerprints import frame_fingerprint

        n = 60_000
        base = pd.DataFrame(
            {
                "patient_id": pd.Series([f"P{i}" for i in range(n)], dtype="str"),
                "lab": pd.Series([f"L{i % 97}" for i in range(n)], dtype=object),
                "value": np.arange(n, dtype=float),
            }
        )
        changed = {"same": base.copy()}
        for column, value in (("patient_id", "Q"), ("lab", "M"), ("value", -1.0)):
            frame = base.copy()
            frame.loc[n // 2, column] = value
            changed[column] = frame
        reordered = base.iloc[::-1].reset_index(drop=True)
        changed["order"] = reordered
        fps = {name: frame_fingerprint(f) for name, f in changed.items()}
        st.text(json.dumps([frame_fingerprint(base), fps]))

    at = AppTest.from_function(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    base_fp, fps = json.loads(at.text[0].value)
    assert fps["same"] == base_fp
    assert len({base_fp, *(fps[c] for c in ("patient_id", "lab", "value", "order"))}) == 5
