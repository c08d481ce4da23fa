"""`python -m engine shards`: split a population into Parquet shards by patient (issue 15).

    python -m engine shards EVENTS DIR N [--labs LABS]

Writes `DIR/shard-NNNNN.parquet` (N shards of the long-form events of EVENTS, CSV or Parquet,
streamed in batches: memory of one batch) and, with `--labs`, `DIR/labs-NNNNN.parquet` (the lab
orders split by the same hash of the patient id, so shard i of both holds the same patients). The
shards serve `risk --shards`, `labs uniqueness --shards` and `phewas --shards` (engine/scale/shards.py).
"""

from __future__ import annotations

import argparse

from engine.commands.paths import path_roles
from engine.io.errors import UserError


def register(sub) -> None:
    p = sub.add_parser(
        "shards",
        help="split a population's events (and lab orders) into Parquet shards by patient",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("events", help="long-form events, CSV or Parquet (patient_id, code, [visit])")
    p.add_argument("out_dir", help="folder for shard-NNNNN.parquet (created)")
    p.add_argument("n_shards", type=int, help="number of shards")
    p.add_argument("--labs", help="lab orders (patient_id, day, lab) to split into labs-NNNNN.parquet too")
    p.set_defaults(
        func=run,
        **path_roles(
            ("EVENTS:events", "--labs"),
            folders=(("DIR:out_dir", ("shard-*.parquet", "labs-*.parquet")),),
        ),
    )


def run(args: argparse.Namespace) -> int:
    from engine.scale import shards

    if args.n_shards < 1:
        raise UserError(f"the number of shards must be a positive whole number, not {args.n_shards}")
    try:
        paths = shards.write_shards_from_events(args.events, args.out_dir, args.n_shards)
    except (ValueError, FileNotFoundError) as exc:
        raise UserError(str(exc)) from None
    n = sum(shards.read_shard(p)[1] for p in paths)
    print(f"wrote {len(paths)} shards of {n} patients to {args.out_dir}")
    if args.labs:
        from engine.commands.inputs import InputOptions, load_labs_checked

        labs = load_labs_checked(args.labs, InputOptions.of(args)).data
        lab_paths = shards.write_lab_shards(labs, args.out_dir, args.n_shards)
        print(
            f"wrote {len(lab_paths)} lab shards of {labs['patient_id'].nunique()} patients to {args.out_dir}"
        )
    return 0
