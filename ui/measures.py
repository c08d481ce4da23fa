"""PheWAS results for the pages that show them (the PheWAS page, the Report page's build), one
function per result so that both read one memo entry (`ui.cache`: shared on the shipped sample, else
in this session), keyed on the content fingerprints of cohort or release and genotypes and on the
settings (Heatherly 2013's PheWAS, `engine.utility.phewas`)."""

from __future__ import annotations

from dataclasses import astuple

import pandas as pd

from engine.release import Release
from engine.utility import phewas
from ui import cache
from ui.context import Context
from ui.fingerprints import frame_fingerprint, release_key

_ORIGINALS, _COUNTS, _RELEASED = 8, 8, 32  # tables held per name


def _genotypes(ctx: Context) -> pd.DataFrame:
    genotypes = ctx.dataset.genotypes
    if genotypes is None:
        raise ValueError("the loaded data have no genotypes")
    return genotypes


def original_phewas(ctx: Context, settings: phewas.PhewasSettings) -> pd.DataFrame:
    """`phewas_of_records` of the sidebar's cohort and the dataset's genotypes under `settings`."""
    genotypes = _genotypes(ctx)
    return cache.memo(
        "phewas original",
        (ctx.cohort.fingerprint, frame_fingerprint(genotypes), astuple(settings)),
        lambda: phewas.phewas_of_records(ctx.cohort, genotypes, settings),
        size=_ORIGINALS,
        data=ctx,
        spinner="Running the original PheWAS…",
    )


def genotyped_count(ctx: Context) -> int:
    """Cohort patients with genotypes (asked on every run of the PheWAS page)."""
    genotypes = _genotypes(ctx)
    return cache.memo(
        "genotyped count",
        (ctx.cohort.fingerprint, frame_fingerprint(genotypes)),
        lambda: int(genotypes["patient_id"].astype(str).isin(set(ctx.cohort.patient_ids)).sum()),
        size=_COUNTS,
        data=ctx,
    )


def released_phewas(ctx: Context, release: Release, settings: phewas.PhewasSettings) -> pd.DataFrame:
    """`phewas_of_release` of `release` with the dataset's genotypes under `settings`."""
    genotypes = _genotypes(ctx)
    return cache.memo(
        "phewas released",
        (release_key(release), frame_fingerprint(genotypes), astuple(settings)),
        lambda: phewas.phewas_of_release(release, genotypes, settings),
        size=_RELEASED,
        data=(release, ctx),
        spinner="Running the released PheWAS…",
    )
