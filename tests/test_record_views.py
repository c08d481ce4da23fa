"""Records shown before and after a release, shaped in the engine (issue 17): Heatherly's Figure 13
notation and GCCens' side-by-side multisets; the views only lay them out."""

from __future__ import annotations

import pandas as pd

from engine.anonymize.population import example_patients, figure13_table
from engine.records import Records
from engine.release import Release
from engine.utility.censoring import records_side_by_side


def _records(rows: list[tuple[str, int, str]]) -> Records:
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


ORIGINAL = _records(
    [("a", 1, "401.0"), ("a", 1, "250.00"), ("a", 2, "401.1"), ("b", 1, "250.00"), ("c", 1, "724.2")]
)
RELEASED = Release(
    "Heatherly",
    _records([("a", 1, "{401.0,401.1}"), ("a", 1, "250.00"), ("a", 2, "{401.0,401.1}"), ("b", 1, "250.00")]),
    item_codes={"{401.0,401.1}": frozenset({"401.0", "401.1"})},
    shows_visits=True,
)


def test_figure13_shows_visits_in_braces_and_generalized_items_in_angle_brackets():
    table = figure13_table(ORIGINAL, RELEASED, ["a", "b"])
    assert table.to_dict("records") == [
        {
            "record": "a",
            "original (visits)": "{401.0, 250.00}, {401.1}",  # codes in the order given
            "released (visits)": "{⟨401.0, 401.1⟩, 250.00}, {⟨401.0, 401.1⟩}",
        },
        {"record": "b", "original (visits)": "{250.00}", "released (visits)": "{250.00}"},
    ]


def test_example_patients_put_records_with_a_generalized_item_first():
    assert example_patients(RELEASED, 2) == ["a", "b"]
    plain = Release(
        "x", _records([("b", 1, "250.00"), ("a", 1, "{401.0,401.1}")]), item_codes=RELEASED.item_codes
    )
    assert example_patients(plain, 1) == ["a"]  # b comes first in record order, a holds the generalized item


def test_gccens_side_by_side_writes_multisets_and_the_cul():
    cohort = _records([("a", 1, "250"), ("a", 2, "250"), ("a", 3, "250"), ("a", 3, "401"), ("b", 1, "401")])
    censored = Release("GCCens", _records([("a", 1, "250"), ("a", 3, "401"), ("b", 1, "401")]))
    loss = pd.DataFrame({"patient_id": ["a", "b"], "cul": [0.5, 0.0]})
    table = records_side_by_side(cohort, censored, loss, ["a", "b"])
    assert table.to_dict("records") == [
        {"patient_id": "a", "original": "250 ×3, 401", "released": "250, 401", "CUL": 0.5},
        {"patient_id": "b", "original": "401", "released": "401", "CUL": 0.0},
    ]
