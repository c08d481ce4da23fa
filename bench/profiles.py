"""Benchmark: PPE + UGACLIP / ACLIP on the shipped sample at a new k, and on a cohort of the PNAS VNEC shape.

    .venv/bin/python -m bench.profiles [--patients 2762] [--k 5] [--reference-patients 300] [--sample-only]

First the shipped sample (issue 24, "Live means live": every interaction <= 1 s): the cohort's sizes,
then at new values of k (PPE's k-independent part and numba's compiled code already loaded, as in the
app after its first run) the whole `ProfilesSettings(...).run` per method, and beside it, measured in
the same run: PPE against `reference_extract_policy` (PPE from scratch, tests/reference_profiles.py)
and the compiled greedy against `reference_anonymize_profiles` (the step-by-step numpy greedy it
replaced), with the ratio and whether the releases are the same (fingerprints, trace, loss).

Then the VNEC-shaped cohort:

The cohort is drawn from `engine.synth.generator.generate` (a population scaled so that its research cohort has
2,762 patients, the VNEC size). For single-visit and all-visits policies it prints sizes, the time of
PPE, of each method, of the policy check and of the risk engine's verification, and peak memory.
Speed-up: a plain reference implementation of the same greedy (Python sets of records, supports by
scanning every record, every partner scored by a scan) runs in the same process on a subset of the
cohort, next to the engine on that subset; both must produce the same release.
"""

from __future__ import annotations

import argparse
import heapq
import math
import resource
import time

import numpy as np

from engine.adversary import Adversary
from engine.anonymize.policy import check_policy, extract_policy
from engine.anonymize.profiles import anonymize_profiles
from engine.records import Records
from engine.risk import verify
from engine.study.runs import ProfilesSettings, RunInputs
from engine.synth.generator import generate
from engine.utility.queries import read_utility_policy


def vnec_like(n_cohort: int, seed: int = 0) -> Records:
    """A synthetic research cohort of about `n_cohort` patients (synth's cohort is ~2,700 at 30,000)."""
    n_pop = int(30000 * (n_cohort / 2700) ** 5)  # cohort size grows as population ** 0.2 in synth
    data = generate(max(n_pop, 1000), seed, labs=False)
    events = Records.from_frame(data.events)
    ids = data.cohort["patient_id"].astype(str).to_numpy()
    if len(ids) < n_cohort:  # top up from the rest of the population, in id order
        rest = np.setdiff1d(events.patient_ids.astype(str), ids)
        ids = np.concatenate([ids, rest[: n_cohort - len(ids)]])
    return events.subset(ids[:n_cohort])


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------- the shipped sample
def _best(fn, *args, repeat: int = 3, **kwargs):
    """The least wall time of `repeat` calls of fn(*args, **kwargs) (the machine is shared), and its
    result."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        times.append(time.perf_counter() - t)
    return min(times), out


def sample_new_k(ks: tuple[int, ...] = (8, 13)) -> None:
    """The shipped sample's cohort at new values of k: the engine's run per method, PPE and the greedy
    against the previous implementations (tests/reference_profiles.py), same releases required."""
    from engine.io.loaders import load_sample_checked
    from tests.reference_profiles import reference_anonymize_profiles, reference_extract_policy

    cohort = load_sample_checked().data.group_records("cohort")
    inputs = RunInputs(cohort, cohort)
    print(
        f"shipped sample cohort: {cohort.n_patients:,} patients, {cohort.n_visits:,} visits, "
        f"{cohort.n_events:,} events, {cohort.n_items:,} codes in its vocabulary"
    )
    t_first, _ = _best(ProfilesSettings(k=5).run, inputs, repeat=1)
    print(
        f"first run (k = 5; numba's code loaded, PPE's constraints and supports counted once): {t_first:.2f} s"
    )
    utility = ProfilesSettings().utility_policy([str(x) for x in cohort.items]).as_mapping()
    for k in ks:
        t_run = {
            m: _best(ProfilesSettings(algorithm=m, k=k).run, inputs, repeat=1)[0]
            for m in ("UGACLIP", "ACLIP")
        }
        print(
            f"\nk = {k}: ProfilesSettings.run at a new k (PPE, greedy, policy check, verification, measures): "
            + ", ".join(f"{m} {v:.2f} s" for m, v in t_run.items())
            + f"; both {sum(t_run.values()):.2f} s"
        )
        t_ppe, policy = _best(extract_policy, cohort, k, "single_visit")
        t_old, old_policy = _best(reference_extract_policy, cohort, k, "single_visit", repeat=1)
        same = policy.constraints == old_policy.constraints and np.array_equal(
            policy.support, old_policy.support
        )
        print(
            f"  PPE ({len(policy):,} of {policy.n_collected:,} constraints kept): {t_ppe * 1000:.1f} ms, "
            f"from scratch {t_old:.2f} s: x{t_old / max(t_ppe, 1e-9):.0f}; same policy: {same}"
        )
        for method, u in (("UGACLIP", utility), ("ACLIP", None)):
            t_new, new = _best(anonymize_profiles, cohort, policy, k, u, method=method)
            t_old, old = _best(reference_anonymize_profiles, cohort, policy, k, u, method=method, repeat=1)
            same = (new.fingerprint, new.content_fingerprint, new.params, new.loss) == (
                old.fingerprint,
                old.content_fingerprint,
                old.params,
                old.loss,
            )
            print(
                f"  {method:8s} greedy ({len(new.params['trace']):,} steps): {t_new:.3f} s, "
                f"previous {t_old:.2f} s: x{t_old / max(t_new, 1e-9):.0f}; same release: {same}"
            )


# ----------------------------------------------------------------------------- plain reference
def reference(cohort: Records, constraints, k: int, utility) -> dict[str, frozenset[str]]:
    """The same greedy as `anonymize_profiles`, written plainly: code -> final item (None: suppressed)."""
    recs = [
        set(map(str, cohort.items[cohort.patient_item_sets[p].indices])) for p in range(cohort.n_patients)
    ]
    codes = [str(c) for c in cohort.items]
    order = {c: i for i, c in enumerate(codes)}
    item_of: dict[str, frozenset[str] | None] = {c: frozenset((c,)) for c in codes}
    diseases = list((utility or {}).values())

    def holds(r: set[str], item: frozenset[str]) -> bool:
        return not r.isdisjoint(item)

    def sup(items) -> int:
        return sum(all(holds(r, it) for it in items) for r in recs)

    def image(con):
        return sorted(
            {item_of[c] for c in con if item_of.get(c) is not None}, key=lambda it: min(order[c] for c in it)
        )

    def allowed(a, b) -> bool:
        if utility is None:
            return True
        u = a | b
        inside = set().union(*diseases) if diseases else set()
        return any(u <= d for d in diseases) or not (u & inside)

    def violation(img):
        if not img:
            return None
        s = sup(img)
        if s >= k:
            return None
        if s > 0:
            return img
        raise NotImplementedError("the reference covers supported constraints only")

    def partner(i):
        best = None
        for j in {it for it in item_of.values() if it is not None and it != i}:
            if not allowed(i, j):
                continue
            u = i | j
            s = sum(holds(r, u) for r in recs)
            key = (
                len(u) + math.log2(-math.expm1(-len(u) * math.log(2.0))) + math.log2(s),
                s,
                min(order[c] for c in j),
            )
            if best is None or key < best[0]:
                best = (key, j)
        return None if best is None else best[1]

    cons = [frozenset(c) for c in constraints]
    pending = list(range(len(cons)))
    while pending:
        heap = [(-sup(image(cons[ci])), ci) for ci in pending]
        heapq.heapify(heap)
        while heap:
            neg, ci = heapq.heappop(heap)
            now = sup(image(cons[ci]))
            if now != -neg:
                heapq.heappush(heap, (-now, ci))
                continue
            while (bad := violation(image(cons[ci]))) is not None:
                ordered = sorted(bad, key=lambda it: (sup([it]), min(order[c] for c in it)))
                i, j = ordered[0], None
                for g in ordered:
                    j = partner(g)
                    if j is not None:
                        i = g
                        break
                if j is None:
                    for c in i:
                        item_of[c] = None
                else:
                    for c in i | j:
                        item_of[c] = i | j
        pending = [ci for ci, c in enumerate(cons) if violation(image(c)) is not None]
    return {c: it for c, it in item_of.items()}


def engine_map(release, cohort: Records) -> dict[str, frozenset[str] | None]:
    out: dict[str, frozenset[str] | None] = {str(c): None for c in cohort.items}
    for item in release.records.items.tolist():
        codes = release.codes_of(str(item))
        for c in codes:
            out[c] = codes
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patients", type=int, default=2762)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--reference-patients", type=int, default=300)
    ap.add_argument("--sample-only", action="store_true", help="the shipped sample's section only")
    args = ap.parse_args()
    sample_new_k()
    if args.sample_only:
        return
    print()
    t = time.perf_counter()
    cohort = vnec_like(args.patients)
    print(
        f"cohort: {cohort.n_patients:,} patients, {cohort.n_visits:,} visits, {cohort.n_events:,} events, "
        f"{cohort.n_items:,} distinct codes (built in {time.perf_counter() - t:.1f} s)"
    )
    utility = read_utility_policy().as_mapping()
    for knowledge in ("single_visit", "all_visits"):
        t = time.perf_counter()
        policy = extract_policy(cohort, args.k, knowledge)
        t_ppe = time.perf_counter() - t
        print(
            f"\n{knowledge}: PPE {t_ppe:.2f} s: {policy.n_collected:,} constraints collected, "
            f"{len(policy):,} kept ({policy.n_already_protected:,} already protected, {policy.n_covered:,} covered)"
        )
        for method in ("UGACLIP", "ACLIP"):
            t = time.perf_counter()  # the app's, the CLI's and a study's entry: PPE, the method, its checks
            run = ProfilesSettings(algorithm=method, k=args.k, knowledge=knowledge).run_result(
                RunInputs(cohort, cohort)
            )
            rel, total = run.release, time.perf_counter() - t
            t = time.perf_counter()
            ok = check_policy(policy.constraints, rel, args.k).ok
            t_chk = time.perf_counter() - t
            t = time.perf_counter()
            ver = verify(rel, Adversary("cohort", knowledge), args.k).ok
            t_ver = time.perf_counter() - t
            print(
                f"  {method:8s} ProfilesSettings run (PPE, method, its policy check, verification and utility "
                f"measures) {total:.2f} s, {'within' if total <= 30 else 'OVER'} 30 s; "
                f"policy check {t_chk:.2f} s -> {ok}; risk.verify {t_ver:.2f} s -> {ver}; "
                f"{rel.loss['generalized_items']} generalized items (largest {rel.loss['largest_item']} codes), "
                f"{rel.loss['suppressed_codes']} codes suppressed; peak {peak_mb():.0f} MB"
            )
    # speed-up over the plain reference on a subset, same release required
    sub = cohort.take(np.arange(min(args.reference_patients, cohort.n_patients)))
    sub = Records.from_frame(sub.to_frame())  # vocabulary of the subset only
    print(
        f"\nreference vs engine on {sub.n_patients} patients ({sub.n_items} codes), single visit, k = {args.k}:"
    )
    policy = extract_policy(sub, args.k, "single_visit")
    for method, u in (("UGACLIP", utility), ("ACLIP", None)):
        t = time.perf_counter()
        rel = anonymize_profiles(sub, policy, args.k, u, method=method)
        t_fast = time.perf_counter() - t
        t = time.perf_counter()
        ref = reference(sub, policy.constraints, args.k, u)
        t_ref = time.perf_counter() - t
        same = ref == engine_map(rel, sub)
        print(
            f"  {method:8s} engine {t_fast:.3f} s, reference {t_ref:.2f} s: speed-up x{t_ref / max(t_fast, 1e-9):.0f}; "
            f"same release: {same}"
        )
    print(f"\npeak memory {peak_mb():.0f} MB")


if __name__ == "__main__":
    main()
