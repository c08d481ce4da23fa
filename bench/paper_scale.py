"""Every method at the paper's scale against the 30,000-patient sample (issue #36, finding 2).

    .venv/bin/python bench/paper_scale.py --work DIR [--sizes 30000,1366786] [--seed 0] [--k 5]
        [--steps risk_single,risk_all,heatherly_d,...] [--min-free-gb 2] [--timeout 1800]

In one run: each size generated once into `--work DIR/<n>/` by `python -m engine sample --scale paper
--patients n` (a rerun reuses it: same seed, same bytes), then for each size every step below as the
CLI command a user runs (`python -m engine ...`, each verified by engine/risk.py before it writes),
each in a fresh subprocess so its CPU time (user + system) and peak memory (ru_maxrss, os.wait4) are
its own; wall time around it. Then per step the growth exponent log(t2 / t1) / log(n2 / n1) of CPU
and wall time over the population sizes (first and last size). The cohort grows as the generator
draws it (2,700 at 30,000, 5,795 at 1,366,786: `generator.group_sizes`), so the cohort-scope
methods grow mostly with reading the population's events.

Steps: risk with full counts of the cohort against the population, single visit and all visits
(`risk --scope population`); Heatherly's three scopes (`anonymize generalize --scope cohort|biobank|
population --complete`, DEMO_D / DEMO_B / DEMO_S); GCCens (population scope, all visits); UGACLIP and
ACLIP (single visit); the LDA (trajectories). k = `--k`.

Guards (a shared machine): a step is killed, and said so, when the machine's free memory
(MemAvailable) falls below `--min-free-gb` or after `--timeout` seconds.

Measured (commit 14a5a90, 2-core machine shared with 7 other engineers, load average 8-15: the CPU
time is the figure to compare; `--work /tmp/h-scale/w --timeout 480`, output in /tmp/h-scale/):

| step | CPU 30,000 | CPU 1,366,786 | wall 30,000 | wall 1,366,786 | peak 1,366,786 | exponent CPU / wall |
|---|---|---|---|---|---|---|
| risk_single | 2.0 s | 28.9 s | 6.9 s | 106.3 s | 5.55 GB | 0.70 / 0.72 |
| risk_all | 2.1 s | 25.1 s | 6.5 s | 93.1 s | 5.56 GB | 0.65 / 0.70 |
| heatherly_d | 2.6 s | 27.6 s | 8.3 s | 87.6 s | 5.55 GB | 0.62 / 0.62 |
| heatherly_b | 2.7 s | 49.0 s | 8.9 s | 165.3 s | 5.54 GB | 0.76 / 0.77 |
| heatherly_s | 3.1 s | 64.3 s | 12.7 s | 252.3 s | 5.55 GB | 0.80 / 0.78 |
| gccens | 3.6 s | 43.9 s | 15.4 s | 171.2 s | 5.55 GB | 0.66 / 0.63 |
| ugaclip | 5.0 s | 45.9 s | 24.9 s | 170.0 s | 5.57 GB | 0.58 / 0.50 |
| aclip | 5.6 s | 55.8 s | 34.8 s | 141.5 s | 5.55 GB | 0.60 / 0.37 |
| lda | 27.2 s | > 155.1 s | 131.9 s | > 480.7 s | 7.37 GB | not completed: stopped at 480 s |
| lda (since issue 36's kernel) | 17.3 s | 247.9 s | 17.8 s | 331.7 s | 5.59 GB | 0.70 / 0.77 |

Every step but the LDA at 1.37 M verified its release (or its risk) at both sizes. The LDA at 1.37 M
did not finish: stopped by `--timeout 480` (155 s CPU, 7.37 GB so far); a second run with `--steps lda
--timeout 1500` was stopped by hand at 316 s wall (72 s CPU) when the machine's free memory fell to
4 GB beside bench/ui.py's run; at 30,000 it takes 27-32 s CPU (its a-gs clustering of 2,700
trajectories; 5,795 longer ones at 1.37 M). Its cost tables were dense over ICD nodes x ICD values
(13,273 x 12,081 on all codes of the paper-scale cohort: 1.28 GB each, four of them), and MDAV's
nearest-record search aligned about half of the records left at each of its 4,636 steps.

Reading and validating the 17.6 million diagnoses is most of each 1.37 M step (the app's load of the
same files: 30 s CPU, 5.66 GB), so the exponents stay below 1: the cohort grows only from 2,700 to 5,795 patients. Peak memory is the loaded
population's, about 5.5 GB for every step (7.4 GB for the LDA before issue 36's kernel).

The LDA since issue 36's kernel (row `lda (since ...)`, `--steps lda --timeout 1800 --work
/tmp/lda-scale/w`, the same data, load average 3-8): it finishes and verifies at 1.37 M (every one of
5,795 records at distinguishability >= 5, 1,159 clusters, ILM 0.873, ALM 0.450). The peak, 5.59 GB,
is the command's reading of the population's 17.6 million diagnoses (`load_groups`, as every step):
the LDA itself reads only the cohort's 565,018 (code, age) pairs (cohort scope, all visits) and
takes 0.70 GB and 201 s of CPU on them (`LDASettings.run_result` on the cohort's events alone). It stays
quadratic in the cohort's trajectories: MDAV asks for the nearest record to the growing cluster among
every record left (O(n^2) A-GS alignments, about half of them skipped by exact lower bounds), each
A-GS O(m x n) in the two trajectories' pairs; 2,700 trajectories of 49 pairs on average at 30,000,
5,795 of 97 at 1.37 M (about 18 times the work). On the first 600, 1,200, 2,400 and 5,795 patients of
the paper-scale cohort: 3.3, 10.5, 36.5 and 200.7 s of CPU, exponents 1.7, 1.8 and 1.9 in the number
of trajectories. The releases are those of the kernel before: the same multiset of released records
at 30,000 (`anonymize lda` of commit ab68301 against this one), and the same sha256 of the released
CSV on the paper-scale cohort's first 600 and 1,200 patients and on the whole of it (the kernel
before, on the cohort's events alone: 483.6 s of CPU and 5.70 GB, against 200.7 s and 0.70 GB).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.scale import available_gb

ROOT = Path(__file__).resolve().parent.parent


def steps(d: Path, out: Path, k: int) -> dict[str, list[str]]:
    """Step name -> the CLI arguments (after `python -m engine`) on the sample folder `d`."""
    ev, co, bb = str(d / "events.parquet"), str(d / "cohort.csv"), str(d / "biobank.csv")
    kk = ["--k", str(k)]
    risk = ["risk", "--events", ev, "--cohort", co, "--scope", "population", *kk]
    gen = ["anonymize", "generalize", "--events", ev, "--biobank", bb, "--cohort", co, *kk, "--complete"]
    clip = ["--events", ev, "--cohort", co, *kk, "--knowledge", "single_visit"]
    return {
        "risk_single": [*risk, "--knowledge", "single_visit", "--out", str(out / "risk_single.csv")],
        "risk_all": [*risk, "--knowledge", "all_visits", "--out", str(out / "risk_all.csv")],
        "heatherly_d": [*gen, "--scope", "cohort", "--out", str(out / "demo_d.csv")],
        "heatherly_b": [*gen, "--scope", "biobank", "--out", str(out / "demo_b.csv")],
        "heatherly_s": [*gen, "--scope", "population", "--out", str(out / "demo_s.csv")],
        "gccens": [
            "anonymize",
            "gccens",
            "--events",
            ev,
            "--cohort",
            co,
            *kk,
            "--out",
            str(out / "gccens.csv"),
        ],
        "ugaclip": [
            "anonymize",
            "ugaclip",
            *clip,
            "--out",
            str(out / "ugaclip.csv"),
            "--codemap",
            str(out / "ugaclip_map.csv"),
        ],
        "aclip": [
            "anonymize",
            "aclip",
            *clip,
            "--out",
            str(out / "aclip.csv"),
            "--codemap",
            str(out / "aclip_map.csv"),
        ],
        "lda": ["anonymize", "lda", "--events", ev, "--cohort", co, *kk, "--out", str(out / "lda.csv")],
    }


def run(args: list[str], min_free_gb: float, timeout: float, log: Path) -> dict:
    """One CLI command in a fresh process: CPU, wall, peak memory, exit code, and why it stopped."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    with log.open("w") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "engine", *args],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
        stopped = ""
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if available_gb() < min_free_gb:
                stopped = f"stopped: {available_gb():.1f} GB free"
            elif time.perf_counter() - t0 > timeout:
                stopped = f"stopped after {timeout:.0f} s"
            if stopped:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "cpu": usage.ru_utime + usage.ru_stime,
        "wall": time.perf_counter() - t0,
        "peak_gb": usage.ru_maxrss / 1e6,  # Linux: kilobytes
        "rc": proc.returncode,
        "stopped": stopped,
        "last": log.read_text().strip().splitlines()[-1:] or [""],
    }


def ensure_sample(n: int, seed: int, work: Path, min_free_gb: float) -> Path:
    d = work / str(n)
    if (d / "cohort.csv").exists() and (d / "labs.parquet").exists():
        print(f"{n:,} patients: reusing {d}", flush=True)
        return d
    print(f"{n:,} patients: generating into {d}", flush=True)
    gen = ["sample", "--scale", "paper", "--patients", str(n), "--seed", str(seed), "--out", str(d)]
    r = run(gen, min_free_gb, 3600, work / f"generate_{n}.log")
    print(
        f"    generated: CPU {r['cpu']:.1f} s, wall {r['wall']:.1f} s, peak {r['peak_gb']:.2f} GB "
        f"{r['stopped']}",
        flush=True,
    )
    if r["rc"] != 0:
        raise SystemExit(f"generating {n} patients failed: {r['last'][0]} ({work / f'generate_{n}.log'})")
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True, help="folder of the generated samples and outputs (reused)")
    ap.add_argument("--sizes", default="30000,1366786", help="population sizes, smallest first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--steps", default="", help="comma-separated steps (default: all)")
    ap.add_argument("--min-free-gb", type=float, default=2.0, help="stop a step below this much free memory")
    ap.add_argument("--timeout", type=float, default=1800, help="stop a step after this many seconds")
    a = ap.parse_args()
    work = Path(a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in a.sizes.split(",")]
    chosen = [s for s in a.steps.split(",") if s]
    results: dict[str, dict[int, dict]] = {}
    for n in sizes:
        d = ensure_sample(n, a.seed, work, a.min_free_gb)
        out = work / f"out_{n}"
        out.mkdir(exist_ok=True)
        for name, cli in steps(d, out, a.k).items():
            if chosen and name not in chosen:
                continue
            r = run(cli, a.min_free_gb, a.timeout, out / f"{name}.log")
            results.setdefault(name, {})[n] = r
            state = r["stopped"] or ("ok" if r["rc"] == 0 else f"exit {r['rc']}")
            print(
                f"  {n:>9,}  {name:<12} CPU {r['cpu']:7.1f} s  wall {r['wall']:7.1f} s  "
                f"peak {r['peak_gb']:5.2f} GB  {state}: {r['last'][0][:110]}",
                flush=True,
            )
    n1, n2 = sizes[0], sizes[-1]
    print(
        f"\n| step | CPU {n1:,} | CPU {n2:,} | wall {n1:,} | wall {n2:,} | peak {n2:,} | exponent CPU / wall |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, by_n in results.items():
        r1, r2 = by_n.get(n1), by_n.get(n2)
        if not r1 or not r2 or n1 == n2:
            continue
        ok = r1["rc"] == 0 and r2["rc"] == 0

        def exp(key: str, r1: dict = r1, r2: dict = r2) -> str:
            return f"{math.log(r2[key] / r1[key]) / math.log(n2 / n1):.2f}" if r1[key] > 0 else "-"

        grow = f"{exp('cpu')} / {exp('wall')}" if ok else "not both completed"
        print(
            f"| {name} | {r1['cpu']:.1f} s | {r2['cpu']:.1f} s | {r1['wall']:.1f} s | {r2['wall']:.1f} s "
            f"| {r2['peak_gb']:.2f} GB | {grow} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
