"""ui/views/gccens.py's release measures as the view computed them before issue 24 (commit c612ecd), kept
verbatim (the body of `_release_measures`' `compute`, here a function of the release) to prove the view's
statistics, now read from the release's own `loss`, are the same (tests/test_gccens_measures_reference.py).
Not used by the app."""

from __future__ import annotations

from engine.utility.censoring import censoring_loss, cul_statistics, release_cul


def compute(release):
    loss = censoring_loss(release)
    return (
        loss,
        cul_statistics(loss["cul"].to_numpy(), release),
        cul_statistics(release_cul(release, "original"), release, "original"),
    )
