"""Brute force of `engine.disclosure.sensitive.rho_uncertainty` (issue #39): plain Python, every subset
of every unit's non-sensitive items by itertools, every candidate tested one by one."""

from __future__ import annotations

from itertools import combinations

from engine.records import Records


def _units(records: Records, p: int, per_visit: bool) -> list[set[str]]:
    visits = [set(v) for v in records.patient_visits(p)]
    return visits if per_visit else [set().union(*visits)]


def brute_force(
    records: Records,
    sensitive: dict[str, set[str]],
    *,
    single_visit: bool,
    m: int,
    within_visits: bool = False,
    population: Records | None = None,
) -> tuple[dict[tuple[str, tuple[str, ...]], float], list[dict[str, float]], list[set[str]]]:
    """(conf of every rule q -> s over the known sets q some record can know, the empty set included;
    per record the highest conf of its own known sets per category; per record the categories held).
    `sensitive`: category -> its codes (items stand for themselves)."""
    all_sens = set().union(*sensitive.values()) if sensitive else set()
    held = [
        {s for s, codes in sensitive.items() if codes & set(records.patient_codes(p))}
        for p in range(records.n_patients)
    ]
    match_visits = within_visits and single_visit

    def holds_q(recs: Records, p: int, q: tuple[str, ...]) -> bool:
        return any(set(q) <= u for u in _units(recs, p, match_visits))

    cands = records if population is None else population
    known: list[set[tuple[str, ...]]] = []
    for p in range(records.n_patients):
        mine: set[tuple[str, ...]] = {()}
        for u in _units(records, p, single_visit):
            plain = sorted(u - all_sens)
            for j in range(1, m + 1):
                mine.update(combinations(plain, j))
        known.append(mine)
    conf: dict[tuple[str, tuple[str, ...]], float] = {}
    for q in set().union(*known) if known else set():
        n_cohort = sum(holds_q(records, p, q) for p in range(records.n_patients))
        n_cand = max(n_cohort, sum(holds_q(cands, p, q) for p in range(cands.n_patients)))
        for s in sensitive:
            with_s = sum(holds_q(records, p, q) and s in held[p] for p in range(records.n_patients))
            conf[(s, q)] = with_s / n_cand if n_cand else 0.0
    best = [{s: max(conf[(s, q)] for q in known[p]) for s in sensitive} for p in range(records.n_patients)]
    return conf, best, held
