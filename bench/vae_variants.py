"""Raw against latent Recall@n for the VAE variants Johnson 2018 describes or leaves open (issue 16).

    .venv/bin/python -m bench.vae_variants [--simulations 100] [--quick]

On the shipped sample's lab orders (labs ordered on at least the scaled 500 patient-days), one set of
draws (simulations x 100 breached days, 99 others, seed 0) is ranked with the raw day vectors and with
the latent vectors of each variant (`engine.labs.vae.VAEConfig`): the architecture (one hidden layer of
128 units, the default, or the Keras example's 512), what is released (encoder means or one seeded
draw z ~ N(mu, sigma) per patient-day) and the latent size (2-64; the paper's 16). Each model is
trained once and both releases are read from it (`engine.labs.vae.with_release`). The steps are the
Lab orders page's (`engine.study.runs.LabRecallSettings`).

A row without a model ranks the raw vectors with each lab weighted by its log inverse day frequency:
what cosine on a nearly lossless encoding does (engine/labs/vae.py's docstring).

Columns: the model's reconstruction (ROC AUC from the means, Figure 5), the release's own
reconstruction (decoded from the released vectors), Recall@1 / @10 / @50 (%), at how many of
n = 1-99 the latent Recall@n is significantly above / below raw (paired t-test, Holm: Figure 6 at every
n, `engine.labs.latent_verdict`), and the training CPU seconds. Then `engine.labs.latent_verdict.verdict_lines`
for the paper's setting (16 dimensions), as the Lab orders page states it.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.labs import reident as L
from engine.labs.latent_verdict import latent_verdict, verdict_lines
from engine.study.runs import LabRecallSettings

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "labs.parquet"
NS = (1, 10, 50)


def idf_weighted(days: L.PatientDays) -> sp.csr_matrix:
    """The raw day vectors with each lab scaled by its log inverse day frequency, log(days / days
    ordering it): a cosine that weighs labs by what they tell apart, with no model (issue #36: why the
    latent release raises Recall@n)."""
    ordered = np.asarray((days.matrix > 0).sum(axis=0)).ravel()
    idf = np.log(days.n_days / np.maximum(ordered, 1))
    return sp.csr_matrix(days.matrix.multiply(idf[None, :]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulations", type=int, default=100)
    ap.add_argument(
        "--quick", action="store_true", help="20 simulations, the paper's size and the Keras example only"
    )
    args = ap.parse_args()
    from engine.labs.vae import KERAS_EXAMPLE, VAEConfig, with_release

    sims = 20 if args.quick else args.simulations
    settings = LabRecallSettings(trials=100, simulations=sims, seed=0)
    r = settings.restricted(L.patient_days(pd.read_parquet(SAMPLE)))
    draws = settings.draws(r)
    raw = settings.raw_recall(r, draws)
    print(
        f"sample: {r.n_patients:,} patients, {r.n_days:,} patient-days, {r.n_labs} labs; "
        f"{sims} simulations x 100 breached days, 99 others"
    )
    variants = [("one layer, 128 units", VAEConfig(latent_dim=d)) for d in (2, 4, 8, 16, 32, 64)]
    variants.insert(4, ("Keras example, 512 units", KERAS_EXAMPLE))
    if args.quick:
        variants = [v for v in variants if v[1].latent_dim == 16]
    rows = [
        {"architecture": "raw lab orders", "latent": "-", "release": "-", "model ROC AUC": None}
        | {f"Recall@{n} %": round(100 * raw.at(n), 1) for n in NS}
    ]
    weighted = L.recall_at_n(r, draws, vectors=idf_weighted(r))
    verdict = latent_verdict(raw, weighted, "mean", r.n_labs)
    rows.append(
        {"architecture": "raw, IDF-weighted (no model)", "latent": "-", "release": "-", "model ROC AUC": None}
        | {f"Recall@{n} %": round(100 * weighted.at(n), 1) for n in NS}
        | {"n above raw": len(verdict.higher), "n below raw": len(verdict.lower)}
    )
    paper: dict[str, L.Recall] = {}
    for label, cfg in variants:
        c = time.process_time()
        model = dataclasses.replace(settings, vae=cfg).train(r)
        cpu = time.process_time() - c
        for release in ("mean", "sampled"):
            m = model if release == cfg.release else with_release(model, r.matrix, release)
            rec = settings.latent_recall(r, draws, m)
            verdict = latent_verdict(raw, rec, release, cfg.latent_dim)
            rows.append(
                {
                    "architecture": label,
                    "latent": cfg.latent_dim,
                    "release": release,
                    "model ROC AUC": round(m.roc_auc, 3),
                    "release ROC AUC": round(m.release_roc_auc, 3),
                    "release PR AUC": round(m.release_pr_auc, 3),
                }
                | {f"Recall@{n} %": round(100 * rec.at(n), 1) for n in NS}
                | {"n above raw": len(verdict.higher), "n below raw": len(verdict.lower)}
                | {"training CPU s": round(cpu, 1)}
            )
            if cfg.latent_dim == 16 and cfg.hidden == VAEConfig().hidden:
                paper[release] = rec
        print(f"  trained {label}, latent {cfg.latent_dim}: {cpu:.1f} s CPU", flush=True)
    print()
    print(pd.DataFrame(rows).to_string(index=False, na_rep=""))
    print("\nThe page's statement (16 dimensions, one hidden layer of 128 units):")
    for line in verdict_lines(raw, paper, 16):
        print(f"- {line}")


if __name__ == "__main__":
    main()
