"""What a new session opening the UGACLIP / ACLIP view at a new k does not compute again (issue 36: the
view at paper scale spent 1.39 s in PPE's k-independent protection and 0.86 s in the relative error's
workload at every new k in a new session): both depend on the cohort alone, so on the shipped sample
the server's sessions share them; the run itself (k-dependent) is computed."""

from __future__ import annotations

import pytest
from apptest_support import page_app
from conftest import sample_missing_reason

import engine.anonymize.policy
import engine.utility.queries

pytestmark = pytest.mark.skipif(sample_missing_reason() is not None, reason=str(sample_missing_reason()))


def _profiles_opened_at(k: int):
    """A new session opening the Anonymize page on the clinical profiles view (UGACLIP) at `k`."""
    state = {"method_render_anonymize": "Clinical profiles (UGACLIP / ACLIP)", "k": k}
    at = page_app("pages/anonymize.py", state=state)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_new_session_at_a_new_k_reuses_the_cohorts_protection_and_workload(monkeypatch):
    monkeypatch.setenv("COHORTSHIELD_WORKERS", "0")  # the run in this process, where calls are counted
    counted: dict[str, int] = {"protection": 0, "workload": 0}

    def counting(name, real):
        def call(*args, **kwargs):
            counted[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(
        engine.anonymize.policy,
        "_condition_constraints",
        counting("protection", engine.anonymize.policy._condition_constraints),
    )
    monkeypatch.setattr(
        engine.utility.queries,
        "frequent_itemsets",
        counting("workload", engine.utility.queries.frequent_itemsets),
    )
    first = _profiles_opened_at(31)  # computes them, or finds them from an earlier test's session
    before = dict(counted)
    second = _profiles_opened_at(37)  # a k no session ran: the run itself is computed
    assert counted == before, f"the second session computed again: {counted} after {before}"
    shown = {m.label: m.value for m in second.metric}
    assert {m.label for m in first.metric} == set(shown) and "Privacy constraints" in shown
    # what the page shows at k = 37 is PPE at that k, computed alone
    from engine.anonymize.policy import extract_policy
    from engine.memo import LocalStore, scope

    cohort = second.session_state["context"].cohort
    with scope(LocalStore()):  # nothing held: PPE from the cohort
        alone = extract_policy(cohort, 37, "single_visit")
    assert shown["Privacy constraints"] == f"{len(alone):,}"
    assert shown["Collected"] == f"{alone.n_collected:,}"
