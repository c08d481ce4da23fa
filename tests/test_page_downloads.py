"""The one download helper (ui/downloads.py, issue 17): every download button of the app goes through
it, and a release leaves only as the object verified with the cohort it was made from (`source`).

Review finding: the Anonymize page's preview downloads were gated as "verified" on releases without
their `source`. Without it the risk engine cannot take a single-visit attacker's knowledge from the
original visits (`risk.attacker_known_visits`) and, on a release exported as one set per patient,
understates the attacker: below, patient a's first visit {401.1, 250.00} lost 250.00 there but kept
it in visit 2, so the file shows a with both codes and a is unique, while the release without its
source verifies at k = 2.
"""

from __future__ import annotations

import ast

from apptest_support import ROOT, shown
from streamlit.testing.v1 import AppTest


def _source_app(case: str) -> AppTest:
    """`release_downloads` / `release_table_download` on the toy release, single-visit cohort
    adversary at k = 2, with the verification of the release without its source (ok there):
    `sourceless` offers the release without `source`, `checked` the release with it."""

    def page(case: str) -> None:
        import pandas as pd

        from engine.adversary import Adversary
        from engine.records import Records
        from engine.release import Release
        from engine.risk import verify
        from ui.downloads import release_downloads, release_table_download

        cols = ["patient_id", "visit", "code"]
        cohort = Records.from_frame(
            pd.DataFrame(
                [
                    ("a", 1, "401.1"),
                    ("a", 1, "250.00"),
                    ("a", 2, "250.00"),
                    ("b", 1, "401.1"),
                    ("c", 1, "250.00"),
                ],
                columns=cols,
            )
        )
        kept = [("a", 1, "401.1"), ("a", 2, "250.00"), ("b", 1, "401.1"), ("c", 1, "250.00")]
        bare = Release(
            "toy",
            Records.from_frame(pd.DataFrame(kept, columns=cols)),
            suppressed=pd.DataFrame([("a", 1, "250.00")], columns=cols),
        )
        adversary = Adversary("cohort", "single_visit")
        v = verify(bare, adversary, 2)
        assert v.ok  # the understated verdict the finding is about
        rel = bare if case.startswith("sourceless") else bare.checked(cohort)
        if case.endswith("table"):
            release_table_download(
                rel.records.to_frame(),
                rel,
                v,
                adversary,
                2,
                None,
                label="Download these records (CSV)",
                file_name="toy.csv",
                key="toy_table",
            )
        else:
            release_downloads(rel, v, adversary, 2, None, name="toy", key="toy")

    at = AppTest.from_function(page, kwargs={"case": case})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _labels(at: AppTest) -> set[str]:
    return {b.proto.label for b in at.get("download_button")}


def test_a_release_without_its_source_cohort_is_not_offered():
    for case in ("sourceless", "sourceless table"):
        at = _source_app(case)
        assert _labels(at) == set(), case
        said = " ".join(shown(e.value) for e in at.error) + " ".join(shown(c.value) for c in at.caption)
        assert "cohort it was made from" in said, case


def test_the_helper_verifies_the_release_with_its_source_not_the_bare_verdict():
    at = _source_app("checked")
    assert _labels(at) <= {"Download the records below k (CSV)"}
    assert at.error and "Not verified" in shown(at.error[0].value)
    assert at.dataframe[0].value["patient_id"].tolist() == ["a"]
    table = _source_app("checked table")
    assert _labels(table) == set()


def _python_files() -> list:
    files = [ROOT / "app.py", *(ROOT / "ui").rglob("*.py"), *(ROOT / "pages").rglob("*.py")]
    return sorted(f for f in files if f != ROOT / "ui" / "downloads.py")


def _download_buttons(paths) -> list[str]:
    """Every `download_button` in these files (as `st.download_button`, `col.download_button`, an
    imported name or a `getattr` string), as `path:line`."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if (
                (isinstance(node, ast.Attribute) and node.attr == "download_button")
                or (isinstance(node, ast.Name) and node.id == "download_button")
                or (isinstance(node, ast.alias) and node.name == "download_button")
                or (isinstance(node, ast.Constant) and node.value == "download_button")
            ):
                found.append(f"{path.name}:{getattr(node, 'lineno', '?')}")
    return sorted(found)


def test_no_download_button_outside_the_helper():
    """ui/downloads.py is the one place that builds a download button (and enforces verified-only)."""
    assert _download_buttons(_python_files()) == []


def test_the_download_button_check_reads_subpackages_and_every_spelling(tmp_path):
    assert ROOT / "ui" / "views" / "__init__.py" in _python_files()  # method views live in ui/views/
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import streamlit as st\nfrom streamlit import download_button\n"
        "st.download_button('a', b'')\nc = st.columns(2)[0]\nc.download_button('b', b'')\n"
        "getattr(st, 'download_button')('c', b'')\n"
    )
    assert _download_buttons([planted]) == [
        "planted.py:2",
        "planted.py:3",
        "planted.py:5",
        "planted.py:6",
    ]


class _Recorder:
    """Stands in for `st` / a column: records what a download button was given."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def download_button(self, label, data, **kwargs) -> bool:
        self.calls.append((label, data, kwargs))
        return False


def test_a_table_download_writes_its_csv_on_click_from_the_table_as_drawn():
    """The CSV is built when the button is clicked (not on every rerun: bench/load_ws.py), from the
    table as drawn: a later change of the frame does not reach the file; formulas are neutralized."""
    import pandas as pd

    from engine.io.export import safe_csv_bytes
    from ui.downloads import table_download

    frame = pd.DataFrame({"code": ["=1+1", "401.9"], "n": [3, 4]})
    drawn = safe_csv_bytes(frame)
    where = _Recorder()
    table_download(frame, "Download (CSV)", "t.csv", "dl_t", where=where)
    ((label, data, kwargs),) = where.calls
    assert (
        label == "Download (CSV)"
        and callable(data)
        and kwargs["file_name"] == "t.csv"
        and kwargs["mime"] == "text/csv"
    )
    frame.loc[0, "code"] = "changed"
    frame["n"] = 0
    assert data() == drawn and b"'=1+1" in data()


def test_a_report_download_may_be_built_on_click():
    from ui.downloads import report_download

    where = _Recorder()
    report_download(lambda: '{"a": 1}', "Report (JSON)", "r.json", "dl_r", where=where)
    report_download('{"b": 2}', "Report (JSON)", "s.json", "dl_s", where=where)
    (_, lazy, lazy_kw), (_, eager, eager_kw) = where.calls
    # every download is built on click through the audit log (issue 25), eager bytes included
    assert lazy() == b'{"a": 1}' and (eager() if callable(eager) else eager) == b'{"b": 2}'
    assert lazy_kw["mime"] == eager_kw["mime"] == "application/json"
