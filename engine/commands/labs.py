"""`python -m engine labs ...`: lab-order uniqueness and one-day re-identification (Johnson 2018).

labs uniqueness (--labs LABS | --shards DIR) --out OUT.csv
    rows: days, patients (with at least that many days), share_unique (Figure 3); with --shards the
    lab orders are read one shard at a time from DIR/labs-NNNNN.parquet (`python -m engine shards
    EVENTS DIR N --labs LABS` writes them; engine.scale.shards.sharded_uniqueness), same result
    --min-cell N|cms|...: counts of patients suppressed with a complement against the printed total,
    and the share unique beside a count withheld too when the unique or non-unique patients it gives
    (share x patients) would be (engine.disclosure.cells.suppress_cumulative_share)
labs recall --labs LABS [--min-orders N] [--trials T] [--simulations S] [--against 99|population]
            [--query one_day|all_days] [--latent DIM] [--epochs E] [--seed S] --out OUT.csv
    rows: n, recall, random (Figure 4); with --latent the recall of the VAE's latent vectors on the
    same draws, plus recall_raw and the paired t-test's p (Figure 6), each recall's 95% band, the
    Holm-adjusted p and whether the difference is significant at that n; the verdict over every n is
    printed (engine.labs.latent_verdict: "lowers" only when below raw at every n)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from engine.commands.inputs import shard_progress
from engine.commands.parameter_options import add_parameter_options
from engine.commands.paths import path_roles
from engine.disclosure.cells import add_min_cell_option, min_cell_of
from engine.io.errors import UserError
from engine.labs import reident as L
from engine.study.runs import LabRecallSettings, SettingsError


def register(sub) -> None:
    parser = sub.add_parser("labs", help="lab-order uniqueness and one-day re-identification (Johnson 2018)")
    cmds = parser.add_subparsers(dest="labs_command", required=True)
    u = cmds.add_parser(
        "uniqueness", help="share of patients whose set of labs no other patient has, by days"
    )
    src = u.add_mutually_exclusive_group(required=True)
    src.add_argument("--labs", help="lab orders, CSV or Parquet: patient_id, day, lab")
    src.add_argument("--shards", help="folder of lab shards (labs-NNNNN.parquet), read one at a time")
    u.add_argument("--out", required=True, help="CSV to write: days, patients, share_unique")
    add_min_cell_option(u, "the patients per number of days (a complement too: the total is printed)")
    u.set_defaults(func=run_uniqueness, **path_roles(("--labs", "--shards"), ("--out",)))
    r = cmds.add_parser("recall", help="Recall@n of one-day re-identification against the random line")
    r.add_argument("--labs", required=True, help="lab orders, CSV or Parquet: patient_id, day, lab")
    # the options of the declarations (issue 38)
    add_parameter_options(r, LabRecallSettings, ("min_orders", "trials", "simulations", "against", "query"))
    r.add_argument("--latent", type=int, default=None, help="also train the VAE with this latent size (2-64)")
    r.add_argument("--epochs", type=int, default=None, help="VAE training epochs (default 10)")
    add_parameter_options(r, LabRecallSettings, ("seed",))
    r.add_argument("--out", required=True, help="CSV to write: n, recall, random")
    r.set_defaults(func=run_recall, **path_roles(("--labs",), ("--out",)))


def _load(path: str, args: argparse.Namespace | None = None) -> L.PatientDays:
    from engine.commands.inputs import InputOptions, load_labs_checked

    if not Path(path).exists():
        raise UserError(f"{path}: no such file")
    return L.patient_days(load_labs_checked(path, InputOptions.of(args)).data)


def _write(frame: pd.DataFrame, out: str) -> None:
    from engine.io.export import write_table_csv

    write_table_csv(out, frame)


def run_uniqueness(args: argparse.Namespace) -> int:
    policy = min_cell_of(args)
    t0 = time.perf_counter()
    if args.shards:
        from engine.scale.shards import sharded_uniqueness

        paths = sorted(Path(args.shards).glob("labs-*.parquet"))
        if not paths:
            raise UserError(f"--shards: no labs-*.parquet file in {str(args.shards)!r}")
        print(f"backend: {len(paths)} lab shards, one at a time")
        u = sharded_uniqueness(paths, progress=shard_progress())
        what = f"{len(u.patient_ids)} patients, {int(u.days.sum())} patient-days"
    else:
        days = _load(args.labs, args)
        u = L.uniqueness(days)
        what = f"{days.n_patients} patients, {days.n_days} patient-days, {days.n_labs} labs"
    table = u.by_days()
    if policy.active:  # patients with at least d days: counts of people (the total is printed below)
        from engine.disclosure.cells import SUPPRESSED, suppress_cumulative_share

        hide, hide_share = suppress_cumulative_share(
            table["patients"].tolist(), table["unique"].tolist(), policy, len(u.patient_ids)
        )
        table = table.astype({"patients": object, "share_unique": object})
        table.loc[hide, "patients"] = SUPPRESSED
        table.loc[hide_share, "share_unique"] = SUPPRESSED
        print(
            f"small cells ({policy.describe()}): {int(hide.sum()):,} of {len(hide):,} count(s) of patients "
            f"suppressed (small, or a small difference to another count or to the total), and "
            f"{int(hide_share.sum()):,} share(s) unique (times the count: unique and non-unique patients)"
        )
    table = table[["days", "patients", "share_unique"]]
    _write(table, args.out)
    print(f"{what}: {100 * u.share_unique:.1f}% unique; {time.perf_counter() - t0:.1f} s -> {args.out}")
    return 0


def recall_settings(args: argparse.Namespace) -> LabRecallSettings:
    """The run settings of `labs recall` (checked once, by the settings: engine.study.runs)."""
    from engine.io.extras import require
    from engine.labs.vae_config import VAEConfig, VAEConfigError

    if args.epochs is not None and args.latent is None:
        raise UserError("labs recall: --epochs applies to the autoencoder: give --latent too")
    if args.latent is not None:
        require("vae", "the VAE")  # before the data are read (issue 38, finding 5)
    try:
        vae = None
        if args.latent is not None:
            extra = {"epochs": args.epochs} if args.epochs is not None else {}
            vae = VAEConfig(latent_dim=args.latent, seed=args.seed, **extra)
        settings = LabRecallSettings(
            args.min_orders, args.trials, args.simulations, args.against, args.query, args.seed, vae
        )
        settings.validate()
    except (SettingsError, VAEConfigError) as exc:
        raise UserError(f"labs recall: {exc}") from None
    return settings


def run_recall(args: argparse.Namespace) -> int:
    settings = recall_settings(args)
    t0 = time.perf_counter()
    full = _load(args.labs, args)
    try:
        res = settings.run_result(full, progress=lambda f, m: print(f"  {m}", file=sys.stderr))
    except UserError:
        raise
    except ValueError as exc:  # what the data lacks (e.g. no patient with two days)
        raise UserError(f"{args.labs}: {exc}") from exc
    raw, days, n_min = res.raw, res.days, settings.min_orders_for(full)
    frame = res.curves()
    note = f"raw Recall@1 {raw.at(1):.3f}, @10 {raw.at(10):.3f}"
    lines: list[str] = []
    if res.model is not None and res.latent is not None:
        from engine.labs.latent_verdict import latent_verdict, verdict_lines

        model, lat = res.model, res.latent
        note += f"; latent ({model.config.latent_dim} dims, ROC AUC {model.roc_auc:.3f}, PR AUC {model.pr_auc:.3f}) "
        note += f"Recall@1 {lat.at(1):.3f}, @10 {lat.at(10):.3f}"
        verdict = latent_verdict(raw, lat, model.config.release, model.config.latent_dim)
        frame = frame.merge(verdict_columns(verdict.table), on="n", how="left")
        lines = verdict_lines(raw, {model.config.release: lat}, model.config.latent_dim)
    _write(frame, args.out)
    print(
        f"{days.n_patients} patients, {days.n_days} patient-days, {days.n_labs} labs ordered on >= {n_min} "
        f"patient-days; {args.simulations} x {args.trials} {args.query} queries against "
        f"{'99 others' if args.against == '99' else 'the whole population'}: {note}; "
        f"{time.perf_counter() - t0:.1f} s -> {args.out}"
    )
    for line in lines:  # the verdict at every n (issue #36), as the Lab orders page states it
        print(f"- {line}")
    return 0


def verdict_columns(table: pd.DataFrame) -> pd.DataFrame:
    """The verdict's bands and Holm-adjusted test per n, named for the CSV (`recall` is the latent's)."""
    return table[["n", "latent_low", "latent_high", "raw_low", "raw_high", "p_holm", "significant"]].rename(
        columns={
            "latent_low": "recall_low",
            "latent_high": "recall_high",
            "raw_low": "recall_raw_low",
            "raw_high": "recall_raw_high",
        }
    )
