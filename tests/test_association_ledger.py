"""The association-aware completion's ledger (issue #36, `engine.anonymize.association_ledger`): its
Table 4 count equals the PheWAS module's lost + false on the same records, and the cost it gives a
drop is the change a recount from scratch finds. The "associations" completion's releases verify
like every other release (the arbiter, against a brute-force count)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.anonymize.association_ledger import AssociationLedger
from engine.anonymize.population import anonymize
from engine.records import Records
from engine.report.table4 import lost_false
from engine.utility import phewas
from tests.test_population_properties import brute_force_violations, population, to_records

LOW = phewas.PhewasSettings(min_cases=1)  # tests run on a handful of records
SNPS = ("rs1", "rs2")


def _genotypes(group: Records, data: st.DataObject) -> pd.DataFrame:
    values = st.sampled_from([0.0, 1.0, 2.0, float("nan")])
    rows = {s: [data.draw(values) for _ in range(group.n_patients)] for s in SNPS}
    return pd.DataFrame({"patient_id": group.patient_ids.astype(str), **rows})


def _ledger(group: Records, genotypes: pd.DataFrame, within_visits: bool) -> AssociationLedger:
    phecodes = phewas.code_phecodes(group.items)
    ledger = AssociationLedger(group, phecodes, genotypes, within_visits=within_visits, settings=LOW)
    ledger.sync(group, *phecodes)
    return ledger


def _recount(original: Records, current: Records, genotypes: pd.DataFrame) -> int:
    """Lost + false at p <= 0.05 by the PheWAS module itself."""
    before = phewas.phewas_of_records(original, genotypes, LOW)
    after = phewas.phewas_of_records(current, genotypes, LOW)
    lost, false = lost_false(before, after, 0.05, "heatherly2013")
    return lost + false


@settings(max_examples=60, deadline=None)
@given(recs=population, within_visits=st.booleans(), data=st.data())
def test_a_drop_costs_what_a_recount_finds(recs, within_visits, data):
    """For a random record and a random set of its items (from one visit when `within_visits`, else
    from the whole record): `cost` equals the recount after the drop less the recount before, and after
    `apply` the ledger's count equals a recount from scratch."""
    group = to_records(recs)
    genotypes = _genotypes(group, data)
    ledger = _ledger(group, genotypes, within_visits)
    assert ledger.disagreements() == 0
    r = data.draw(st.integers(0, group.n_patients - 1))
    visits = np.arange(group.visit_ptr[r], group.visit_ptr[r + 1])
    v = data.draw(st.sampled_from(visits.tolist()))
    pool = group.event_item[group.event_ptr[v] : group.event_ptr[v + 1]] if within_visits else None
    held = np.unique(pool if pool is not None else group.event_item[group.event_patient == r])
    items = np.array(data.draw(st.lists(st.sampled_from(held.tolist()), min_size=1, unique=True)))
    cost = ledger.cost(r, items)
    # the records after the drop, counted from scratch
    drop = np.isin(group.event_item, items)
    if within_visits:
        drop &= group.event_visit == v
    else:
        drop &= group.event_patient == r
    after = group.keep_events(~drop)
    assert cost == _recount(group, after, genotypes)
    ledger.apply(r, items)
    assert ledger.disagreements() == cost
    ledger.sync(after, *phewas.code_phecodes(group.items))
    assert ledger.disagreements() == cost


@settings(max_examples=40, deadline=None)
@given(recs=population, k=st.integers(2, 4), scope=st.sampled_from(["cohort", "population"]), data=st.data())
def test_associations_completion_meets_single_visit_k(recs, k, scope, data):
    """Every release of the "associations" completion verifies: the arbiter's verdict equals a
    brute-force count, and a pool of at least k records is met."""
    group = to_records(recs)
    n_cohort = data.draw(st.integers(1, group.n_patients)) if scope != "cohort" else group.n_patients
    cohort_ids = group.patient_ids[:n_cohort]
    res = anonymize(
        group,
        cohort_ids,
        k,
        scope=scope,
        complete=True,
        completion="associations",
        genotypes=_genotypes(group, data),
    )
    rel = res.release
    pool = rel.records if scope == "cohort" else rel.population
    assert set(res.verification.failing["patient_id"]) == brute_force_violations(
        rel.records, pool, rel.item_codes, k
    )
    assert res.verification.ok == (pool.n_patients >= k)


def test_associations_needs_the_genotypes():
    group = to_records([[["401.1"]], [["250.00"]]])
    with pytest.raises(ValueError, match="completion must be one of"):
        anonymize(group, group.patient_ids, 2, complete=True, completion="associations")
