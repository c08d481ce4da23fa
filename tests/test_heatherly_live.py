"""Issue 24 on the Heatherly tab: what a completion pass shows is computed once.

Found while timing the completion pass: the tab verified DEMO_D for its downloads under the sidebar's
adversary twice in one run, once in the session's cache (the release download) and once in the
server's (the Figure 13 download, after `remember` had made the release the study's preview, which
moves its entries to the shared store). And with the scopes fanned out, the worker reads DEMO_D's
figures while the other scopes are made (`compare_scopes(while_waiting=...)`), so the page's run
finds them instead of computing them after the worker is done."""

from __future__ import annotations

import os

import pytest
from apptest_support import page_app

from engine import risk

_K = iter(range(31, 60))  # k values no other test of this process computes


def _counting(monkeypatch) -> list[tuple[int, str, bool]]:
    """Calls of the risk engine's release verification: (pid, method, with its source)."""
    calls: list[tuple[int, str, bool]] = []
    original = risk.release_distinguishability

    def counted(release, adversary, population=None):
        calls.append((os.getpid(), release.method, release.source is not None))
        return original(release, adversary, population)

    monkeypatch.setattr(risk, "release_distinguishability", counted)
    return calls


def _completion_pass(k: int):
    at = page_app(
        "pages/anonymize.py",
        state={"method_render_anonymize": "Generalization (Heatherly)", "k": k, "hea_complete": False},
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.checkbox(key="hea_complete").check().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.success and "Verified" in at.success[0].value  # DEMO_D verified: its downloads offered
    return at


def test_the_download_verification_of_demo_d_is_computed_once_per_run(monkeypatch) -> None:
    monkeypatch.setenv("COHORTSHIELD_WORKERS", "0")  # every computation in this process, counted
    calls = _counting(monkeypatch)
    _completion_pass(next(_K))
    sidebar = [c for c in calls if c[1] == "Heatherly DEMO_D" and c[2]]  # with its source: the gate's
    assert len(sidebar) == 1  # the completed release, once (the paper's, at opening, fails k: no gate)


@pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="no fan-out here")
def test_the_worker_reads_demo_d_while_the_other_scopes_are_made(monkeypatch) -> None:
    calls = _counting(monkeypatch)  # inherited by the forked worker and its fan-out process
    _completion_pass(next(_K))
    here = [c for c in calls if c[0] == os.getpid()]
    assert here == []  # the page's run computed no verification: the worker's were replayed
