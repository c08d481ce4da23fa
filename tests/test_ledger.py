"""The ledger (issue 28, engine/study/ledger.py): two releases that each meet k and together do not,
found by the risk engine on the combined release and by a brute force in plain Python."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from engine import risk
from engine.adversary import Adversary
from engine.records import Records
from engine.release import Release
from engine.study.ledger import LedgerRelease, check_addition, combine, ledger

COHORT = {"P1": {"a", "b"}, "P2": {"a", "c"}, "P3": {"d", "b"}, "P4": {"d", "c"}, "P5": {"a", "b"}}
ADV = Adversary("cohort", "all_visits")


def _records(sets: dict[str, set[str]]) -> Records:
    return Records.from_frame(
        pd.DataFrame([{"patient_id": p, "code": c} for p, codes in sets.items() for c in sorted(codes)])
    )


def _release(keep: set[str], name: str) -> Release:
    cohort = _records(COHORT)
    return Release(name, _records({p: s & keep for p, s in COHORT.items()})).checked(cohort)


def brute_force_min_k(held: list[dict[str, set[str]]]) -> dict[str, int]:
    """Plain Python: link the recipient's files per patient (union of what each shows), then count for
    each patient the patients whose linked set holds everything the target's does."""
    linked: dict[str, set[str]] = {}
    for n, rel in enumerate(held):
        for p, s in rel.items():
            if not s:  # a patient with nothing released is not in the file
                continue
            linked.setdefault(p, set()).update(f"{n}:{x}" for x in s)
    return {p: sum(1 for q in linked.values() if s <= q) for p, s in linked.items()}


def test_each_meets_k_together_they_do_not():
    cohort = _records(COHORT)
    a, b = _release({"a", "d"}, "A"), _release({"b", "c"}, "B")
    for r in (a, b):
        assert risk.verify(r, ADV, 2, cohort).ok
    bf = brute_force_min_k(
        [{p: s & {"a", "d"} for p, s in COHORT.items()}, {p: s & {"b", "c"} for p, s in COHORT.items()}]
    )
    assert sorted(p for p, d in bf.items() if d < 2) == ["P2", "P3", "P4"]
    combined = combine(a, b, cohort)
    v = risk.verify(combined, ADV, 2, cohort)
    got = dict(zip(map(str, v.patient_ids), np.asarray(v.distinguishability).tolist(), strict=True))
    assert got == bf  # the kernel on the combined release equals the brute force
    pairs = ledger([LedgerRelease("s", "A", "lab X", a), LedgerRelease("s", "B", "lab X", b)], ADV, 2, cohort)
    assert len(pairs) == 1 and not pairs[0].ok and pairs[0].below_k == 3 and pairs[0].shared == 5
    assert "NOT verified" in pairs[0].message() and pairs[0].same_recipient


def test_brute_force_over_every_pair_of_keeps():
    """Every pair of code subsets kept: the ledger's verdict equals the brute force's."""
    cohort = _records(COHORT)
    subsets = [set(c) for n in (1, 2) for c in itertools.combinations("abcd", n)]
    for ka, kb in itertools.combinations(subsets, 2):
        a, b = _release(ka, "A"), _release(kb, "B")
        held = [{p: s & ka for p, s in COHORT.items()}, {p: s & kb for p, s in COHORT.items()}]
        bf = brute_force_min_k(held)
        pairs = ledger([LedgerRelease("", "A", "", a), LedgerRelease("", "B", "", b)], ADV, 2, cohort)
        shared = {p for p, s in COHORT.items() if s & ka} & {p for p, s in COHORT.items() if s & kb}
        assert len(pairs) == (1 if shared else 0)
        if not pairs:
            continue
        pair = pairs[0]
        assert pair.shared == len(shared) and pair.records == len(bf)
        assert pair.below_k == sum(d < 2 for d in bf.values()), (ka, kb)


def test_check_addition_flags_before_adding():
    cohort = _records(COHORT)
    a, b, c = _release({"a", "d"}, "A"), _release({"b", "c"}, "B"), _release({"a"}, "C")
    existing = [LedgerRelease("s", "A", "x", a)]
    assert [p.ok for p in check_addition(existing, LedgerRelease("s", "B", "y", b), ADV, 2, cohort)] == [
        False
    ]
    assert [p.ok for p in check_addition(existing, LedgerRelease("s", "C", "y", c), ADV, 2, cohort)] == [True]
