"""PPE, UGACLIP and ACLIP (Loukides et al. 2010, PNAS): worked examples, policy checks, guarantees."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine.adversary import Adversary
from engine.anonymize.policy import (
    check_policy,
    collect_constraints,
    extract_policy,
    maximal_sets,
    supports,
    violating_subset,
)
from engine.anonymize.profiles import SuppressionLimitExceeded, aclip, trace_frame, ugaclip
from engine.records import Records
from engine.risk import verify
from engine.utility.queries import utility_satisfaction

PANCREATIC = frozenset({"157.0", "157.1", "157.2", "157.3", "157.9"})
UTILITY = {"Pancreatic cancer": PANCREATIC, "Asthma": frozenset({"493.00", "493.01", "493.02"})}


def mary_dataset() -> Records:
    """A cohort where the PNAS example plays out (k = 5): Mary's visits {157.0, 185} on 01/02/08,
    shared by five records, and {157.1, 157.2, 157.3} on 07/09/09, which is unique."""
    rows: list[tuple[str, str, str]] = []

    def add(p: str, v: str, codes: list[str]) -> None:
        rows.extend((p, v, c) for c in codes)

    add("Mary", "2008-01-02", ["157.0", "185"])
    add("Mary", "2009-07-09", ["157.1", "157.2", "157.3"])
    for p in ["P1", "P2", "P3", "P4"]:
        add(p, "2008-03-01", ["157.0", "185"])
    add("A", "2008-05-01", ["157.3", "157.1"])
    add("B", "2008-05-01", ["157.2", "157.1"])
    add("C", "2008-05-01", ["157.2"])
    add("D", "2008-05-01", ["157.1"])
    add("E", "2008-05-01", ["157.1"])
    for p in ["Z1", "Z2", "Z3", "Z4", "Z5", "Z6"]:
        add(p, "2008-06-01", ["493.00"])
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


# ------------------------------------------------------------------------------ worked examples
def test_ppe_mary_single_visit():
    r = mary_dataset()
    policy = extract_policy(r, 5, "single_visit")
    assert policy.constraints == (frozenset({"157.1", "157.2", "157.3"}),)
    assert policy.support.tolist() == [1]
    # {157.0, 185} is shared by five records and dropped; the subsets of Mary's second visit are covered
    collected = collect_constraints(r, "single_visit")
    assert frozenset({"157.0", "185"}) in collected
    assert policy.n_already_protected >= 1 and policy.n_covered >= 1


def test_ppe_all_visits_takes_whole_records():
    r = mary_dataset()
    policy = extract_policy(r, 5, "all_visits")
    assert frozenset({"157.0", "185", "157.1", "157.2", "157.3"}) in policy.constraints
    # every kept constraint needs protection and none contains another
    for a, b in itertools.permutations(policy.constraints, 2):
        assert not a < b
    assert (policy.support < 5).all()


def test_ugaclip_worked_example_generalizes_157_3_then_157_1():
    """PNAS: 157.3 (least frequent) with 157.2 -> (157.2, 157.3) of four patients; still unprotected,
    so it is generalized to (157.1, 157.2, 157.3), shared by at least five."""
    r = mary_dataset()
    policy = extract_policy(r, 5, "single_visit")
    rel = ugaclip(r, policy, 5, UTILITY)
    trace = trace_frame(rel)
    assert trace.values.tolist()[:2] == [
        ["generalize", "157.3", "157.2"],
        ["generalize", "{157.2,157.3}", "157.1"],
    ]
    assert rel.item_codes == {"{157.1,157.2,157.3}": frozenset({"157.1", "157.2", "157.3"})}
    assert supports([["{157.1,157.2,157.3}"]], rel.records)[0] == 6
    assert check_policy(policy.constraints, rel, 5).ok
    assert verify(rel, Adversary("cohort", "single_visit"), 5).ok
    sat = utility_satisfaction(r, rel, UTILITY).set_index("disease")
    assert sat.loc["Pancreatic cancer", "satisfied"] and sat.loc["Asthma", "satisfied"]
    assert rel.loss["suppressed_codes"] == 0


def test_aclip_ignores_utility_policy():
    """ACLIP may merge codes of different diseases (here 185 and asthma codes are free partners)."""
    r = mary_dataset()
    policy = extract_policy(r, 5, "all_visits")
    ug = ugaclip(r, policy, 5, UTILITY)
    ac = aclip(r, policy, 5)
    for rel in (ug, ac):
        assert check_policy(policy.constraints, rel, 5).ok
        assert verify(rel, Adversary("cohort", "all_visits"), 5).ok
    # UGACLIP items stay inside one disease or outside every disease
    inside = set().union(*UTILITY.values())
    for codes in ug.item_codes.values():
        assert any(codes <= u for u in UTILITY.values()) or not (codes & inside)
    assert any(
        not any(codes <= u for u in UTILITY.values()) and (codes & inside) for codes in ac.item_codes.values()
    )


def test_suppression_limit_stops_with_a_report():
    r = mary_dataset()
    policy = extract_policy(r, 5, "single_visit")
    # utility policy with each pancreatic code alone: no generalization allowed -> suppression needed
    singletons = {c: frozenset({c}) for c in sorted(PANCREATIC)}
    with pytest.raises(SuppressionLimitExceeded, match="suppression limit of 0 codes exceeded"):
        ugaclip(r, policy, 5, singletons, max_suppressed=0)
    rel = ugaclip(r, policy, 5, singletons, max_suppressed=10)
    assert rel.loss["suppressed_codes"] > 0
    assert set(rel.suppressed["code"]) <= {"157.1", "157.2", "157.3"}
    assert check_policy(policy.constraints, rel, 5).ok


# ----------------------------------------------------------------------------- policy satisfaction
def test_unsupported_constraint_rule():
    """Nonsupported constraints: every nonempty subset appears >= k times or not at all."""
    rows = [(f"p{i}", "a") for i in range(5)] + [(f"p{i}", "b") for i in range(5, 10)] + [("p10", "c")]
    r = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "code"]))
    assert supports([["a", "b"]], r)[0] == 0
    assert violating_subset(["a", "b"], r, 5) is None  # {a}: 5, {b}: 5, {a, b}: 0
    assert violating_subset(["a", "c"], r, 5) == frozenset({"c"})  # {c}: 1
    assert violating_subset(["a"], r, 6) == frozenset({"a"})
    # nonsupported constraints are kept (a later merge may break them); {a, b} lies inside {a, b, zz}
    policy = extract_policy(r, 5, "custom", code_sets=[["a", "b"], ["a", "c"], ["a", "b", "zz"]])
    assert policy.constraints == (frozenset({"a", "c"}), frozenset({"a", "b", "zz"}))


def _custom_merge_case() -> Records:
    """Issue 13's counterexample: patients {157.0}, {157.0,157.1}, {157.1,157.2}, {157.2}."""
    rows = [
        ("p0", "157.0"),
        ("p1", "157.0"),
        ("p1", "157.1"),
        ("p2", "157.1"),
        ("p2", "157.2"),
        ("p3", "157.2"),
    ]
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "code"]))


def test_custom_constraint_of_support_zero_survives_later_merges():
    """{157.0, 157.2} is held by no record and no subset violates it at extraction, but ACLIP's merge of
    157.0 with 157.1 for the other constraint makes its image supported by one record. PPE used to drop
    it, and the release passed the check on the reduced list while violating the user's policy."""
    r = _custom_merge_case()
    code_sets = [["157.0", "157.1"], ["157.0", "157.2"]]
    policy = extract_policy(r, 2, "custom", code_sets=code_sets)
    assert frozenset({"157.0", "157.2"}) in policy.constraints
    rel = aclip(r, policy, 2)
    assert check_policy(code_sets, rel, 2).ok


def test_maximal_sets():
    sets = [frozenset("ab"), frozenset("abc"), frozenset("d"), frozenset("bc"), frozenset("cd")]
    assert maximal_sets(sets) == [1, 4]


def test_check_policy_names_violations():
    r = mary_dataset()
    policy = extract_policy(r, 5, "single_visit")
    identity = ugaclip(r, [], 5, UTILITY)  # empty policy: nothing to do, the release is the data
    assert identity.item_codes == {}
    chk = check_policy(policy.constraints, identity, 5)
    assert not chk.ok and chk.n_violated == 1
    assert chk.failing()["released_support"].tolist() == [1]


# --------------------------------------------------------------------------------- properties
CODES = ["157.0", "157.1", "157.2", "185", "493.00", "493.01", "250.00", "250.02", "401.9", "V45.81"]
SMALL_UTILITY = {
    "Pancreatic cancer": frozenset({"157.0", "157.1", "157.2"}),
    "Asthma": frozenset({"493.00", "493.01"}),
    "Diabetes mellitus type 2": frozenset({"250.00", "250.02"}),
}


@st.composite
def cohorts(draw) -> Records:
    n = draw(st.integers(3, 14))
    rows = []
    for p in range(n):
        for v in range(draw(st.integers(1, 3))):
            codes = draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=4, unique=True))
            rows.extend((f"p{p}", v, c) for c in codes)
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cohorts(), st.integers(2, 5), st.sampled_from(["single_visit", "all_visits"]), st.booleans())
def test_every_release_satisfies_its_policy_and_risk_agrees(r, k, knowledge, guided):
    policy = extract_policy(r, k, knowledge)
    rel = ugaclip(r, policy, k, SMALL_UTILITY) if guided else aclip(r, policy, k)
    assert check_policy(policy.constraints, rel, k).ok
    # the full policy (every visit's / record's code set) too, and it coincides with risk.py
    full = collect_constraints(r, knowledge)
    assert check_policy(full, rel, k).ok
    ver = verify(rel, Adversary("cohort", knowledge), k)
    assert ver.ok or r.n_patients < k
    # items are mutually exclusive and cover exactly the unsuppressed codes
    seen: list[str] = []
    for item in rel.records.items.tolist():
        seen.extend(rel.codes_of(str(item)))
    assert len(seen) == len(set(seen))
    assert set(seen) | set(rel.suppressed["code"]) == set(r.items.tolist())
    assert len(rel.records.to_frame()) + len(rel.suppressed) + rel.loss["merged_events"] == r.n_events
    if guided:
        inside = set().union(*SMALL_UTILITY.values())
        for codes in rel.item_codes.values():
            assert any(codes <= u for u in SMALL_UTILITY.values()) or not (codes & inside)
        sat = utility_satisfaction(r, rel, SMALL_UTILITY)
        # a disease whose codes were not suppressed keeps its count
        sup_codes = set(rel.suppressed["code"])
        for name, ok in zip(sat["disease"], sat["satisfied"], strict=True):
            if not (SMALL_UTILITY[name] & sup_codes):
                assert ok


@settings(max_examples=40, deadline=None)
@given(cohorts(), st.integers(2, 5), st.sampled_from(["single_visit", "all_visits"]), st.data())
def test_policy_check_coincides_with_risk_engine(r, k, knowledge, data):
    """For an arbitrary partition of the codes into items (and some suppressed), the full policy of
    the filtering condition is satisfied iff risk.py finds every record's distinguishability >= k."""
    from engine.release import Release, set_item_label

    codes = r.items.tolist()
    labels = data.draw(st.lists(st.integers(0, 4), min_size=len(codes), max_size=len(codes)))
    groups: dict[int, list[str]] = {}
    for c, g in zip(codes, labels, strict=True):
        groups.setdefault(g, []).append(c)
    label_of = {
        c: (None if g == 0 else set_item_label(groups[g])) for c, g in zip(codes, labels, strict=True)
    }
    df = r.to_frame()
    df["code"] = df["code"].astype(str).map(label_of)
    kept = df[df["code"].notna()]
    # keep every patient (an empty visit is an empty known set) by giving each a placeholder if needed
    if kept["patient_id"].nunique() < r.n_patients:
        return
    item_codes = {set_item_label(v): frozenset(v) for v in groups.values() if len(v) > 1}
    rel = Release("test", Records.from_frame(kept), item_codes=item_codes)
    full = collect_constraints(r, knowledge)
    ver = verify(rel, Adversary("cohort", knowledge), k)
    assert check_policy(full, rel, k).ok == ver.ok


def test_deterministic():
    r = mary_dataset()
    policy = extract_policy(r, 5, "all_visits")
    a, b = aclip(r, policy, 5), aclip(r, policy, 5)
    assert a.records.fingerprint == b.records.fingerprint
    assert np.array_equal(a.records.items, b.records.items)


@settings(max_examples=40, deadline=None)
@given(
    cohorts(),
    st.integers(2, 4),
    st.lists(st.lists(st.sampled_from([*CODES, "999.9"]), min_size=1, max_size=4, unique=True), max_size=5),
    st.booleans(),
)
@example(_custom_merge_case(), 2, [["157.0", "157.1"], ["157.0", "157.2"]], False)
def test_custom_policies_with_unsupported_constraints_are_satisfied(r, k, code_sets, guided):
    """User-supplied constraints may be nonsupported (never held together); the release still
    satisfies them: every nonempty subset shared by >= k records or by none."""
    policy = extract_policy(r, k, "custom", code_sets=code_sets)
    rel = ugaclip(r, policy, k, SMALL_UTILITY) if guided else aclip(r, policy, k)
    assert check_policy(code_sets, rel, k).ok


# ------------------------------------------------------------------------------ export structure
def minimal_case() -> Records:
    """Issue 12's minimal case: P1 has 401.1 and 250.00 in one visit, P2 in two visits."""
    rows = [("P1", 1, "401.1"), ("P1", 1, "250.00"), ("P2", 1, "401.1"), ("P2", 2, "250.00")]
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


def test_supports_within_visits_count_patients_owning_such_a_visit():
    r = minimal_case()
    assert supports([["401.1", "250.00"]], r).tolist() == [2]
    assert supports([["401.1", "250.00"]], r, within_visits=True).tolist() == [1]
    assert supports([["401.1"], ["250.00"]], r, within_visits=True).tolist() == [2, 2]
    assert violating_subset(["401.1", "250.00"], r, 2) is None
    assert violating_subset(["401.1", "250.00"], r, 2, within_visits=True) == {"401.1", "250.00"}


def test_ppe_and_policy_check_count_within_visits_when_visits_are_exported():
    """{401.1, 250.00} is shared by both records but held in one visit by P1 alone: PPE keeps it when
    the release will show its visits, and the policy check of such a release counts within visits."""
    r = minimal_case()
    assert extract_policy(r, 2, "single_visit").constraints == ()
    policy = extract_policy(r, 2, "single_visit", within_visits=True)
    assert policy.constraints == (frozenset({"401.1", "250.00"}),) and policy.within_visits
    plain = ugaclip(r, [], 2, UTILITY)
    shown = plain.with_visits(True)
    assert check_policy(policy.constraints, plain, 2).ok
    assert not check_policy(policy.constraints, shown, 2).ok
    for guided in (True, False):
        rel = (
            ugaclip(r, policy, 2, UTILITY, with_visits=True)
            if guided
            else aclip(r, policy, 2, with_visits=True)
        )
        assert rel.shows_visits and check_policy(policy.constraints, rel, 2).ok
        assert verify(rel, Adversary("cohort", "single_visit"), 2).ok


def test_run_profiles_refuses_visits_for_all_visits_and_a_mismatched_policy():
    from engine.anonymize.profiles import run_profiles

    r = minimal_case()
    with pytest.raises(ValueError, match="single-visit knowledge only"):
        run_profiles(r, 2, "all_visits", "ACLIP", UTILITY, with_visits=True)
    with pytest.raises(ValueError, match="extract it again"):
        run_profiles(
            r,
            2,
            "single_visit",
            "ACLIP",
            UTILITY,
            policy=extract_policy(r, 2, "single_visit"),
            with_visits=True,
        )
    run = run_profiles(r, 2, "single_visit", "UGACLIP", UTILITY, with_visits=True)
    assert run.verified and run.release.shows_visits and run.release.params["with_visits"]
    assert list(run.release.exported_frame().columns) == ["patient_id", "visit", "code"]
    run = run_profiles(r, 2, "single_visit", "UGACLIP", UTILITY)
    assert run.verified and not run.release.shows_visits
    assert list(run.release.exported_frame().columns) == ["patient_id", "code"]


def test_outside_suppress_never_groups_codes_outside_the_utility_policy():
    """Issue 16: the PNAS text allows reading "generalizations that satisfy the utility policy" as
    merges inside one utility constraint only; with `outside="suppress"` codes outside every
    constraint are released as themselves or suppressed, never grouped (the default groups them)."""
    # five asthma patients, each with one rare code outside the policy in the same visit
    rows = [(f"p{i}", "v", c) for i in range(5) for c in ("493.00", f"70{i + 1}")]
    r = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    policy = extract_policy(r, 5, "single_visit")
    grouped = ugaclip(r, policy, 5, UTILITY)
    assert list(grouped.item_codes.values()) == [frozenset({"701", "702", "703", "704", "705"})]
    assert grouped.loss["suppressed_codes"] == 0
    strict = ugaclip(r, policy, 5, UTILITY, outside="suppress")
    assert strict.item_codes == {}
    assert strict.loss["suppressed_codes"] == 5
    assert sorted(str(x) for x in strict.present_items()) == ["493.00"]
    assert strict.params["outside"] == "suppress"
    assert check_policy(policy.constraints, strict, 5).ok
    assert verify(strict, Adversary("cohort", "single_visit"), 5).ok
    with pytest.raises(ValueError, match="outside must be one of"):
        ugaclip(r, policy, 5, UTILITY, outside="merge")


def test_the_measures_table_states_each_run_in_words():
    """The profiles view's measures table is built in the engine (issue 17) from the runs' own figures."""
    from engine.anonymize.profiles import measures_table, run_profiles
    from engine.utility.queries import read_utility_policy

    r = mary_dataset()
    utility = read_utility_policy().as_mapping()
    runs = {m: run_profiles(r, 2, "single_visit", m, utility) for m in ("UGACLIP", "ACLIP")}
    table = measures_table(runs)
    assert table["method"].tolist() == ["UGACLIP", "ACLIP"]
    for m, row in table.set_index("method").iterrows():
        run = runs[str(m)]
        assert row["privacy policy"] == ("satisfied" if run.check.ok else f"{run.check.n_violated} violated")
        assert row["risk engine"] == ("verified" if run.verification.ok else "not verified")
        s = run.summary()
        # Mary's toy data hold codes of 3 of Table 1's 18 diseases: the 15 others are said (issue 37)
        assert s["utility_constraints_applying"] == 3
        assert row["utility constraints satisfied"] == (
            f"{s['utility_satisfied']}/{s['utility_constraints']} (15 match no code of these data)"
        )
        assert row["generalized items"] == s["generalized_items"] and row["RE queries"] == len(
            run.relative_error.queries
        )
