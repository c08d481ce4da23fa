"""The membership attack made fast (issue 24, engine/utility/membership.py) against the attack as it
was (tests/reference_membership.py): every `AttackResult` field equal and every target's chance of
being flagged equal to the bit, on random small cohorts (visits or not, missing genotypes, no
genotyped patient outside the cohort, case frequencies of 0 and 1, suppressed or missing, phecodes the
map lacks, repeated rows, empty tables, the All of Us policy) and on the shipped sample; and
`flag_rates` by itself on integer scores, where ties are exact."""

from __future__ import annotations

from dataclasses import astuple

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.disclosure.cells import SUPPRESSED, SmallCellPolicy
from engine.records import Records
from engine.utility import membership
from engine.utility.phewas import PhewasSettings, phewas_of_records
from tests import reference_membership as reference

CODES = ["250.00", "401.1", "714.0", "427.31", "340", "E11.9", "not.a.code"]
AOU = SmallCellPolicy.preset("aou")


def results(assessed: dict[str, list]) -> dict[str, list[tuple]]:
    return {name: [astuple(r) for r in rs] for name, rs in assessed.items()}


def assert_same_flags(table: pd.DataFrame, members, non, genotypes, panel) -> None:
    new = membership.Attacker(members, non, genotypes, panel).flags(table)
    old = reference.Attacker(members, non, genotypes, panel).flags(table)
    assert new.rows == old.rows
    np.testing.assert_array_equal(new.members, old.members, strict=True)
    np.testing.assert_array_equal(new.non_members, old.non_members, strict=True)


def world(seed: int, n: int, snps: int, visits: bool, outside: bool, missing: float):
    """(events, cohort, genotypes, the cohort's PheWAS table at >= 2 cases) of `n` random people."""
    rng = np.random.default_rng(seed)
    rows = [
        {"patient_id": f"P{i:03d}", "code": c, **({"visit": int(rng.integers(0, 3))} if visits else {})}
        for i in range(n)
        for c in rng.choice(CODES, size=int(rng.integers(1, 4)))
    ]
    events = Records.from_frame(pd.DataFrame(rows))
    ids = [f"P{i:03d}" for i in range(n)]
    x = rng.binomial(2, rng.uniform(0.1, 0.5, snps), size=(n, snps)).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    genotypes = pd.DataFrame(x, columns=[f"rs{j}" for j in range(snps)])
    genotypes.insert(0, "patient_id", ids)
    if not outside:  # the cohort's alone: a held-out half of it is the panel and the non-members
        genotypes = genotypes.iloc[: n // 2]
    cohort = events.subset(np.array(ids[: n // 2]))
    return events, cohort, genotypes, phewas_of_records(cohort, genotypes, PhewasSettings(min_cases=2))


@given(
    seed=st.integers(0, 2**16),
    n=st.integers(24, 90),
    snps=st.integers(1, 4),
    visits=st.booleans(),
    outside=st.booleans(),
    missing=st.sampled_from([0.0, 0.1]),
    policy=st.booleans(),
)
def test_assess_equals_the_reference(seed, n, snps, visits, outside, missing, policy):
    events, cohort, genotypes, table = world(seed, n, snps, visits, outside, missing)
    rng = np.random.default_rng(seed + 1)
    changed = table.copy()
    if len(changed):  # frequencies at the clip bounds and rounded, a repeated row, a phecode unmapped
        changed["case_maf"] = rng.choice([0.0, 1.0, 0.25, 0.123456], size=len(changed))
        changed = pd.concat([changed, changed.iloc[:1], changed.iloc[:1].assign(phecode="999.99")])
    tables = {"original": table, "changed": changed, "empty": table.iloc[:0]}
    args = (cohort, events, genotypes, AOU if policy else None)
    assert results(membership.assess(tables, *args)) == results(reference.assess(tables, *args))


@given(seed=st.integers(0, 2**16), n=st.integers(24, 90), visits=st.booleans(), outside=st.booleans())
def test_flags_of_suppressed_and_missing_frequencies_equal_the_reference(seed, n, visits, outside):
    events, cohort, genotypes, table = world(seed, n, 3, visits, outside, 0.1)
    members, non, panel, _ = membership.targets_of(cohort, events, genotypes)
    rng = np.random.default_rng(seed + 2)
    t = table.astype({"case_maf": object})
    if len(t):
        t.loc[t.index[rng.random(len(t)) < 0.3], "case_maf"] = SUPPRESSED
        t.loc[t.index[rng.random(len(t)) < 0.2], "case_maf"] = np.nan
    assert_same_flags(t, members, non, genotypes, panel)


@given(
    w=st.lists(st.lists(st.integers(-2, 2), min_size=3, max_size=3), min_size=1, max_size=12),
    null=st.lists(st.lists(st.integers(-2, 2), min_size=3, max_size=3), max_size=12),
    fpr=st.sampled_from([0.05, 0.2, 0.5]),
)
def test_flag_rates_on_integer_scores_equal_the_reference(w, null, fpr):
    """Integer weights and genotypes: the scores are exact, so ties (a null genotype scoring what the
    target scores, a target no row concerns) are exact ties."""
    wa, na = np.array(w, dtype=float), np.array(null, dtype=float).reshape(-1, 3)
    y = wa[::-1].copy()
    for leave_out, targets, genos in ((False, wa, y), (True, np.resize(wa, na.shape), na)):
        np.testing.assert_array_equal(
            membership.flag_rates(targets, genos, na, fpr, leave_out=leave_out),
            reference.flag_rates(targets, genos, na, fpr, leave_out=leave_out),
            strict=True,
        )


@pytest.mark.slow
def test_the_sample_equals_the_reference(sample_dataset):
    """The shipped sample's cohort table under every option of the officer (the All of Us policy
    among them): each member's and non-member's chance of being flagged, to the bit."""
    cohort = sample_dataset.group_records("cohort")
    population = sample_dataset.group_records("population")
    genotypes = sample_dataset.genotypes
    table = phewas_of_records(cohort, genotypes)
    members, non, panel, _ = membership.targets_of(cohort, population, genotypes)
    new = membership.Attacker(members, non, genotypes, panel)
    old = reference.Attacker(members, non, genotypes, panel)
    for option, t in membership.release_options(table, AOU).items():
        a, b = new.flags(t), old.flags(t)
        assert a.rows == b.rows, option
        np.testing.assert_array_equal(a.members, b.members, strict=True, err_msg=option)
        np.testing.assert_array_equal(a.non_members, b.non_members, strict=True, err_msg=option)
    assert results(membership.assess({"original": table}, cohort, population, genotypes)) == results(
        reference.assess({"original": table}, cohort, population, genotypes)
    )


def test_flag_rates_of_many_targets_with_repeated_genotypes_equal_the_reference():
    """Issue 36: the compiled count (`engine.utility.membership_kernel`, one target at a time, the null's
    counts as whole numbers): more targets than the reference's chunks, null genotypes repeated up to
    hundreds of times, exact ties, targets no row concerns."""
    rng = np.random.default_rng(36)
    null = rng.integers(-1, 3, size=(2600, 3)).astype(float)  # 64 distinct genotypes, ~40 of each
    w = rng.integers(-2, 3, size=(2600, 3)).astype(float)
    w[::7] = 0.0  # targets no row concerns
    for leave_out, y in ((False, null[::-1].copy()), (True, null)):
        np.testing.assert_array_equal(
            membership.flag_rates(w, y, null, 0.05, leave_out=leave_out),
            reference.flag_rates(w, y, null, 0.05, leave_out=leave_out),
            strict=True,
        )
    assert len(w) > 2 * reference.CHUNK


@given(
    seed=st.integers(0, 2**16),
    targets=st.integers(1, 700),
    distinct=st.integers(1, 40),
    snps=st.integers(1, 6),
    fpr=st.sampled_from([0.05, 0.2]),
)
def test_flag_rates_on_centred_genotypes_equal_the_reference(seed, targets, distinct, snps, fpr):
    """Issue 36: real-valued weights and centred genotypes (x - 2q, zero where missing), each distinct
    genotype repeated, the targets their own null (leave one out) and others: the compiled count flags
    every target as the reference does, to the bit."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.05, 0.5, snps)
    kinds = rng.integers(0, 4, size=(distinct, snps)).astype(float)  # 3: missing
    genotypes = np.where(kinds == 3, 0.0, kinds - 2 * q)
    null = genotypes[rng.integers(0, distinct, size=targets)]
    w = rng.normal(size=(targets, snps)) * (rng.random((targets, 1)) < 0.9)  # a tenth concerned by no row
    for leave_out, y in ((True, null), (False, genotypes[rng.integers(0, distinct, size=targets)])):
        np.testing.assert_array_equal(
            membership.flag_rates(w, y, null, fpr, leave_out=leave_out),
            reference.flag_rates(w, y, null, fpr, leave_out=leave_out),
            strict=True,
        )


def test_targets_alike_are_scored_once_and_a_hash_collision_changes_nothing(monkeypatch):
    """Issue 36: targets of the same weights and statistic are scored once (`membership.distinct_rows`,
    rows told apart by a hash of their bits, then checked); with a hash under which different rows
    collide, every row is its own and the flags are the same."""
    rows = np.array([[1.0, 2.0], [2.0, 1.0], [1.0, 2.0], [0.0, -0.0], [0.0, 0.0]])
    first, same = membership.distinct_rows(rows)
    np.testing.assert_array_equal(first, [0, 1, 3, 4])  # -0.0 and 0.0 differ in their bits: kept apart
    np.testing.assert_array_equal(same, [0, 1, 0, 2, 3])
    rng = np.random.default_rng(7)
    null = rng.integers(-1, 3, size=(300, 2)).astype(float)
    w = rng.integers(-2, 3, size=(300, 2)).astype(float)
    expected = reference.flag_rates(w, null, null, 0.05, leave_out=True)
    monkeypatch.setattr(membership, "_MIX", np.ones(64, dtype=np.uint64))  # (1, 2) and (2, 1) collide
    first, same = membership.distinct_rows(rows)
    np.testing.assert_array_equal(first, np.arange(5))
    np.testing.assert_array_equal(same, np.arange(5))
    np.testing.assert_array_equal(
        membership.flag_rates(w, null, null, 0.05, leave_out=True), expected, strict=True
    )
