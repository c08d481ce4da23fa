"""engine/hierarchy.py: DGHs and the Loss Metric (Tamersoy 2011 thesis, Definitions 2-6, Figure 5)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.hierarchy import ICD9_THESIS_LEVELS, Hierarchy


@pytest.fixture(scope="module")
def ages_fig5() -> Hierarchy:
    return Hierarchy.ages(33, 40)


def test_figure5_age_tree(ages_fig5: Hierarchy) -> None:
    h = ages_fig5
    assert h.root == "[33-40]"  # Example 2: root(H_Age) = [33-40]
    assert h.leaves() == [str(a) for a in range(33, 41)]
    assert h.children("[33-40]") == ["[33-36]", "[37-40]"]
    assert h.children("[33-36]") == ["[33-34]", "[35-36]"]
    assert h.children("[35-36]") == ["35", "36"]
    assert h.ancestors("37") == ["[37-38]", "[37-40]", "[33-40]"]
    assert h.domain_size == 8
    assert h.level("35") == "1-year" and h.level("[37-40]") == "4-year"
    assert h.level_order == ("1-year", "2-year", "4-year", "8-year")
    assert h.n_leaves("[33-36]") == 4


def test_example4_node_to_node_loss(ages_fig5: Hierarchy) -> None:
    # Example 4: generalizing [33-34] to [33-36] costs (4 - 2) / 8 = 0.25
    assert ages_fig5.loss("[33-34]", "[33-36]") == pytest.approx(0.25)


def test_worked_example_leaf_convention(ages_fig5: Hierarchy) -> None:
    h = ages_fig5
    assert h.loss("33", "33") == 0  # unchanged value costs 0 (Example 5: 33 with 33)
    assert h.loss("35", "[35-36]") == pytest.approx(2 / 8)  # text example: 2/8 per leaf
    assert h.suppression_loss("36") == 1  # lca(36, 37) = root: 1 per leaf
    assert h.lca("36", "37") == "[33-40]"
    assert h.combined_loss("35", "36") == pytest.approx(0.5)
    hyp = Hierarchy.from_parents({"401.0": "401", "401.1": "401", "401.9": "401"})
    assert hyp.combined_loss("401.1", "401.9") == pytest.approx(2.0)  # Example 5: (1 + 1)
    with pytest.raises(ValueError):
        h.loss("[33-36]", "33")


def test_ages_not_power_of_two_is_full_binary() -> None:
    h = Hierarchy.ages(0, 100)
    assert h.root == "[0-100]" and h.domain_size == 101
    for lab in h.labels:
        assert len(h.children(lab)) in (0, 2)
    assert Hierarchy.ages(1, 128).children("[1-128]") == ["[1-64]", "[65-128]"]


def test_ages_top_coding() -> None:
    h = Hierarchy.ages(0, 120, top_code_90=True)
    assert h.leaf_of(95) == "90+" and h.leaf_of(89) == "89"
    assert h.domain_size == 91 and "90+" in h.leaves()


def test_icd9_levels_and_labels() -> None:
    h = Hierarchy.icd9()
    assert h.ancestors("250.00") == ["250.0", "250", "249-259", "240-279", "Any"]
    assert h.ancestors("V45.81") == ["V45.8", "V45", "V40-V49", "V01-V91", "Any"]
    assert h.ancestors("E849.0") == ["E849", "E846-E849", "E000-E999", "Any"]
    assert [h.level(x) for x in ("250.00", "250.0", "250", "249-259", "240-279", "Any")] == [
        "5-digit",
        "4-digit",
        "3-digit",
        "section",
        "chapter",
        "Any",
    ]
    assert h.lca("401.1", "401.9") == "401"
    assert h.lca("250.00", "272.4") == "240-279"
    five = Hierarchy.icd9(ICD9_THESIS_LEVELS)
    assert five.ancestors("250.00") == ["250", "249-259", "240-279", "Any"]
    assert five.parent("401.1") == "401"
    # leaf codes keep their own level name (401.1 is a 4-digit code), internal 4-digit nodes are gone
    assert five.level("401.1") == "4-digit" and "250.0" not in five


def test_restrict_to_data_values() -> None:
    r = Hierarchy.icd9(ICD9_THESIS_LEVELS).restrict(["250", "272", "401", "724"])
    assert r.domain_size == 4 and set(r.leaves()) == {"250", "272", "401", "724"}
    assert r.lca("250", "272") == "240-279" and r.lca("250", "401") == "Any"
    assert r.loss("250", "240-279") == pytest.approx(2 / 4)
    with pytest.raises(KeyError, match="not in hierarchy"):
        r.restrict(["999.99"])


def test_phecodes() -> None:
    h = Hierarchy.phecodes()
    assert h.ancestors("250.11")[-1] == "Any"
    assert h.parent("401.1").startswith("phe:")
    anc = h.ancestors("250.01")
    assert all(a.startswith("phe:") for a in anc[:-1]) and len(anc) >= 2


def test_from_parents_multiple_roots() -> None:
    h = Hierarchy.from_parents({"a": "A", "b": "A", "c": "C"})
    assert h.root == "Any" and set(h.children("Any")) == {"A", "C"}
    with pytest.raises(ValueError, match="cycle"):
        Hierarchy.from_parents({"a": "b", "b": "a"})


def test_from_csv_good_and_bad(tmp_path) -> None:
    good = tmp_path / "h.csv"
    good.write_text("child,parent\n401.0,401\n401.1,401\n")
    h = Hierarchy.from_csv(good)
    assert h.root == "401" and h.leaves() == ["401.0", "401.1"]
    bad = tmp_path / "bad.csv"
    bad.write_text("child,parent\n401.0,401\n401.1,\n")
    with pytest.raises(ValueError, match=r"bad\.csv, row 3, column 'parent'"):
        Hierarchy.from_csv(bad)
    hdr = tmp_path / "hdr.csv"
    hdr.write_text("code,group\n1,2\n")
    with pytest.raises(ValueError, match=r"hdr\.csv, row 1"):
        Hierarchy.from_csv(hdr)


@settings(max_examples=50, deadline=None)
@given(lo=st.integers(0, 60), width=st.integers(2, 70), data=st.data())
def test_lca_and_loss_properties(lo: int, width: int, data) -> None:
    h = Hierarchy.ages(lo, lo + width - 1)
    a = str(data.draw(st.integers(lo, lo + width - 1)))
    b = str(data.draw(st.integers(lo, lo + width - 1)))
    m = h.lca(a, b)
    assert h.is_ancestor(m, a) and h.is_ancestor(m, b)
    # no child of the lca is an ancestor of both (it is the lowest)
    assert not any(h.is_ancestor(c, a) and h.is_ancestor(c, b) for c in h.children(m))
    # the loss is additive along the path and a leaf's suppression costs 1
    path = h.ancestors(a, include_self=True)
    steps = sum(h.loss(path[i], path[i + 1]) for i in range(len(path) - 1))
    assert steps == pytest.approx(h.suppression_loss(a)) and h.suppression_loss(a) == pytest.approx(1.0)
    assert 0 <= h.loss(a, m) <= 1


def test_roll_up_to_three_digit() -> None:
    h = Hierarchy.icd9()
    assert h.roll_up(["250.00", "401.1", "724", "V45.81", "E849.0", "999.99x"], "3-digit") == [
        "250",
        "401",
        "724",
        "V45",
        "E849",
        "999.99x",
    ]


def test_from_csv_bytes_names_the_upload() -> None:
    h = Hierarchy.from_csv_bytes(b"child,parent\na,A\nb,A\n", "upload.csv")
    assert h.root == "A"
    with pytest.raises(ValueError, match=r"upload\.csv: not UTF-8"):
        Hierarchy.from_csv_bytes(b"child,parent\n\xff,A\n", "upload.csv")
