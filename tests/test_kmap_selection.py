"""k-map without the population for a cohort selected by its codes (issue #36, finding 4).

The finding: told nothing of how the cohort was selected, the estimate is 10-22 points too low on disease
cohorts (every patient with a code of 250, 401, 427, ...). Told the selection codes, every known set
holding one has an exact population count (all its holders are in the cohort); the rest is estimated.
Checked here: on the shipped sample, within 3 points of the truth (the real population's distinguishability,
`engine.risk`) for disease cohorts; on tiny random data, the exact part equals the brute-force population
count, and the cohort-only share is an upper bound on the population share."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bench import estimate as bench_estimate
from engine import risk
from engine.adversary import Adversary
from engine.estimate import kmap
from engine.io.loaders import load_sample
from engine.records import Records
from tests.reference_risk import consistent, known_sets

CODES = ["250.00", "250.01", "272.4", "401.1", "724.2", "427.31"]
SETTINGS = settings(max_examples=60, deadline=None)


def disease_cohort(population: Records, prefixes: tuple[str, ...]) -> Records:
    """Every population patient with a code starting with one of `prefixes`."""
    items = population.items.astype(str)
    held = np.zeros(len(items), dtype=bool)
    for pre in prefixes:
        held |= np.char.startswith(items, pre)
    sets = population.patient_item_sets.tocsc()
    has = np.asarray(sets[:, np.flatnonzero(held)].sum(axis=1)).ravel() > 0
    return population.take(np.flatnonzero(has))


@pytest.fixture(scope="module")
def sample_population() -> Records:
    return load_sample().events


@pytest.mark.parametrize("code", ["714", "555", "296", "493"])
@pytest.mark.parametrize("knowledge", ["single_visit", "all_visits"])
def test_told_the_selection_codes_the_estimate_is_within_3_points(sample_population, code, knowledge) -> None:
    population = sample_population
    cohort = disease_cohort(population, (code,))
    k = 5
    truth = risk.original_distinguishability(cohort, Adversary("population", knowledge), population)
    exact_below = float(np.mean(truth < k))
    exact_unique = float(np.mean(truth <= 1))
    N = population.n_patients
    blind = kmap.estimate_kmap(cohort, N, knowledge, k)
    told = kmap.estimate_kmap(cohort, N, knowledge, k, selected_by=(code,))
    if knowledge == "single_visit":  # the finding: a random-sample model is 10+ points too low
        assert exact_below - blind.share_below_k.estimate > 0.10
    assert abs(told.share_below_k.estimate - exact_below) <= 0.03
    assert abs(told.share_unique.estimate - exact_unique) <= 0.03
    # the model-free bound from the cohort alone holds, and is exact under all-visits knowledge
    assert told.cohort_only.share_below_k >= exact_below
    assert told.cohort_only.share_unique >= exact_unique
    if knowledge == "all_visits":
        assert told.cohort_only.share_below_k == exact_below
        assert told.share_below_k.estimate == pytest.approx(exact_below, abs=1e-12)
        assert told.share_below_k.low == told.share_below_k.high


@st.composite
def populations(draw, max_patients: int = 10) -> tuple[Records, tuple[str, ...], list[int]]:
    """A tiny population, selection prefixes, and a cohort: every holder of a selection code and any
    other patients."""
    rows = []
    n = draw(st.integers(1, max_patients))
    for p in range(n):
        for v in range(draw(st.integers(1, 3))):
            for c in draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=3)):
                rows.append((f"p{p}", v, c))
    pop = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    prefixes = tuple(draw(st.lists(st.sampled_from(["250", "250.01", "401", "427"]), min_size=1, max_size=2)))
    holders = [q for q in range(pop.n_patients) if any(c.startswith(prefixes) for c in pop.patient_codes(q))]
    others = draw(st.lists(st.integers(0, pop.n_patients - 1), max_size=3))
    return pop, prefixes, sorted(set(holders) | set(others))


@given(
    data=populations(),
    knowledge=st.sampled_from(["single_visit", "all_visits"]),
    k=st.integers(1, 5),
)
@example(
    data=(
        Records.from_frame(
            pd.DataFrame(
                [("p0", 0, "250.00"), ("p0", 1, "272.4"), ("p1", 0, "272.4"), ("p1", 0, "250.01")],
                columns=["patient_id", "visit", "code"],
            )
        ),
        ("250.01",),
        [1],
    ),
    knowledge="single_visit",
    k=2,
)
@SETTINGS
def test_sets_holding_a_selection_code_have_the_population_count(data, knowledge, k) -> None:
    pop, prefixes, members = data
    if not members:
        return
    cohort = pop.take(np.array(members))
    if not all(any(str(c).startswith(pre) for c in cohort.items) for pre in prefixes):
        with pytest.raises(ValueError, match="no cohort code starts with"):
            kmap.estimate_kmap(cohort, pop.n_patients, knowledge, k, selected_by=prefixes)
        return
    counts = kmap.set_counts(cohort, knowledge, selected_by=prefixes)
    cands = [Counter(pop.patient_codes(q)) for q in range(pop.n_patients)]
    brute_sets = known_sets(cohort, knowledge, False)
    seen: dict[int, list[Counter]] = {}
    for row in range(len(counts.owner)):
        p = int(counts.owner[row])
        items = counts.items_of(row, cohort.items)
        s = Counter(set(items))
        assert s in brute_sets[p]
        seen.setdefault(p, []).append(s)
        holds = any(i.startswith(prefixes) for i in items)
        assert bool(counts.exact[row]) == holds
        if holds:  # exact: the brute-force count over the WHOLE population
            assert counts.counts[row] == sum(consistent(s, c, None) for c in cands)
    est = kmap.estimate_kmap(cohort, pop.n_patients, knowledge, k, selected_by=prefixes)
    truth = np.array(
        [
            min(sum(consistent(s, c, None) for c in cands) for s in brute_sets[p])
            for p in range(len(brute_sets))
        ]
    )
    # a record with an exact set below k is certainly below k; the cohort-only share bounds the truth
    for p in range(cohort.n_patients):
        exact_rows = (counts.owner == p) & counts.exact
        if exact_rows.any() and counts.counts[exact_rows].min() < k:
            assert est.p_below_k[p] == 1.0
    assert est.cohort_only.share_below_k >= float(np.mean(truth < k))
    assert est.cohort_only.share_unique >= float(np.mean(truth <= 1))
    assert est.share_below_k.estimate <= est.cohort_only.share_below_k + 1e-12


def test_a_selection_code_the_cohort_lacks_is_refused() -> None:
    cohort = Records.from_frame(
        pd.DataFrame([("p0", 0, "250.00"), ("p1", 0, "401.1")], columns=["patient_id", "visit", "code"])
    )
    with pytest.raises(ValueError, match="no cohort code starts with '714'"):
        kmap.estimate_kmap(cohort, 100, "single_visit", 2, selected_by=("250", "714"))
    with pytest.raises(ValueError, match="selection code"):
        kmap.estimate_kmap(cohort, 100, "single_visit", 2, selected_by=(" ",))


def test_risk_cli_takes_the_selection_and_prints_the_bound_and_the_spread(tmp_path, capsys) -> None:
    from engine.commands.cli import main

    rows = [("P1", 1, "250.00"), ("P1", 2, "272.4"), ("P2", 1, "250.01"), ("P2", 1, "401.1")]
    rows += [("P3", 1, "250.00"), ("P3", 2, "272.4"), ("P3", 2, "401.1")]
    ev, co, rep = tmp_path / "ev.csv", tmp_path / "co.csv", tmp_path / "r.json"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)
    pd.DataFrame({"patient_id": ["P1", "P2", "P3"]}).to_csv(co, index=False)
    args = ["risk", "--events", str(ev), "--cohort", str(co), "--scope", "population"]
    args += ["--knowledge", "single_visit", "--k", "2", "--population-size", "300"]
    assert main([*args, "--selected-by", "250", "--report", str(rep)]) == 0
    printed = capsys.readouterr().out
    cohort = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    est = kmap.estimate_kmap(cohort, 300, "single_visit", 2, selected_by=("250",))
    assert printed.startswith("WARNING: " + kmap.SELECTED_WARNING)
    assert "known sets counted exactly (holding a selection code): 3 of 5" in printed
    assert "spread under the model, 95%" in printed and "95% interval" not in printed
    assert f"at most {est.cohort_only.share_below_k:.2%} (the cohort alone" in printed
    report = json.loads(rep.read_text("utf-8"))
    assert report["selected by"] == ["250"]
    assert report["share below k"]["cohort-only upper bound"] == est.cohort_only.share_below_k
    assert report["share below k"]["estimate"] == pytest.approx(est.share_below_k.estimate)
    assert main([*args, "--selected-by", "714"]) == 2
    assert "--selected-by: no cohort code starts with '714'" in capsys.readouterr().err
    assert main([*args, "--selected-by", "250,"]) == 2
    assert "--selected-by: an empty code" in capsys.readouterr().err


def population_code_counts(population: Records) -> dict[str, int]:
    """Patients holding each code: the aggregate counts an officer can obtain without patient data."""
    held = np.asarray(population.patient_item_sets.sum(axis=0)).ravel()
    return dict(zip(population.items.astype(str).tolist(), held.tolist(), strict=True))


@pytest.mark.parametrize("code", ["250", "401", "427"])
def test_the_population_code_counts_bring_the_rest_within_3_points(sample_population, code) -> None:
    """Selection codes alone leave these 3.0-5.0 points low under single-visit knowledge (the sets without
    a selection code are estimated at the cohort's sampling fraction); with the code counts, each set at
    its rarest code's fraction and bounded by its count, within 3 points."""
    population, k = sample_population, 5
    cohort = disease_cohort(population, (code,))
    truth = risk.original_distinguishability(cohort, Adversary("population", "single_visit"), population)
    told = kmap.estimate_kmap(
        cohort,
        population.n_patients,
        "single_visit",
        k,
        selected_by=(code,),
        population_code_counts=population_code_counts(population),
    )
    assert abs(told.share_below_k.estimate - float(np.mean(truth < k))) <= 0.03
    assert abs(told.share_unique.estimate - float(np.mean(truth <= 1))) <= 0.03
    assert told.code_counts


@given(data=populations(), knowledge=st.sampled_from(["single_visit", "all_visits"]), k=st.integers(1, 5))
@SETTINGS
def test_the_code_counts_bound_every_set_and_fix_sets_of_one_code(data, knowledge, k) -> None:
    pop, _, members = data
    if not members:
        return
    cohort = pop.take(np.array(members))
    counts = population_code_counts(pop)
    sets = kmap.set_counts(cohort, knowledge)
    bounds = kmap.set_bounds(cohort, sets, counts)
    cands = [Counter(pop.patient_codes(q)) for q in range(pop.n_patients)]
    est = kmap.estimate_kmap(cohort, pop.n_patients, knowledge, k, population_code_counts=counts)
    for row in range(len(sets.owner)):
        items = sets.items_of(row, cohort.items)
        F = sum(consistent(Counter(set(items)), c, None) for c in cands)
        assert bounds.upper[row] == min(counts[i] for i in items) >= F
        if len(items) == 1:
            assert bounds.single[row] and bounds.upper[row] == F
        if bounds.upper[row] < k:  # certainly below k in the population
            assert est.p_below_k[sets.owner[row]] == 1.0
    assert est.share_below_k.estimate <= est.cohort_only.share_below_k + 1e-12


def test_code_counts_below_the_cohorts_are_refused() -> None:
    cohort = Records.from_frame(
        pd.DataFrame(
            [("p0", 0, "250.00"), ("p1", 0, "250.00"), ("p1", 1, "401.1")],
            columns=["patient_id", "visit", "code"],
        )
    )
    with pytest.raises(
        kmap.CodeCountsError, match=re.escape("code '250.00': 1 population patients, fewer than the 2")
    ):
        kmap.estimate_kmap(cohort, 100, "single_visit", 2, population_code_counts={"250.00": 1, "401.1": 9})
    with pytest.raises(
        kmap.SelectionError, match=re.escape("code '250.00' is held by 3 population patients but 2")
    ):
        kmap.estimate_kmap(
            cohort, 100, "single_visit", 2, selected_by=("250",), population_code_counts={"250.00": 3}
        )
    told = kmap.estimate_kmap(
        cohort, 100, "single_visit", 2, selected_by=("250",), population_code_counts={"250.00": 2, "401.1": 1}
    )
    assert told.p_below_k.tolist() == [0.0, 1.0]  # {250.00}: 2 holders, exact; {401.1}: 1 holder
    with pytest.raises(kmap.CodeCountsError, match="poisson or negative_binomial"):
        kmap.estimate_kmap(
            cohort,
            100,
            "single_visit",
            2,
            model="zero_truncated_poisson",
            population_code_counts={"250.00": 9},
        )


def test_risk_cli_reads_the_population_code_counts(tmp_path, capsys) -> None:
    from engine.commands.cli import main

    rows = [("P1", 1, "250.00"), ("P1", 2, "272.4"), ("P2", 1, "250.01"), ("P2", 1, "401.1")]
    ev, cc, rep = tmp_path / "ev.csv", tmp_path / "cc.csv", tmp_path / "r.json"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)
    counts = {"250.00": 4, "250.01": 1, "272.4": 30, "401.1": 50}
    pd.DataFrame({"code": list(counts), "count": list(counts.values())}).to_csv(cc, index=False)
    args = ["risk", "--events", str(ev), "--scope", "population", "--knowledge", "single_visit", "--k", "5"]
    args += ["--population-size", "200"]
    assert main([*args, "--population-code-counts", str(cc), "--report", str(rep)]) == 0
    printed = capsys.readouterr().out
    cohort = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    est = kmap.estimate_kmap(cohort, 200, "single_visit", 5, population_code_counts=counts)
    # {250.00}, {272.4}: one code each; {250.01, 401.1}: the one holder of 250.01 is in the cohort
    assert "known sets counted exactly (by the code counts): 3 of 3" in printed
    assert printed.startswith("WARNING: " + kmap.CODE_COUNTS_WARNING)
    assert est.p_below_k.tolist() == [1.0, 1.0]
    report = json.loads(rep.read_text("utf-8"))
    assert report["population code counts"] is True
    assert report["share below k"]["estimate"] == pytest.approx(est.share_below_k.estimate)
    for text, words in (
        ("code,count\n250.00,4\n272.4,many\n", "cc.csv, row 3, column 'count': 'many' is not a whole number"),
        ("code,count\n250.00,4\n250.00,5\n", "cc.csv, row 3, column 'code': '250.00' is listed twice"),
        ("code,n\n250.00,4\n", "cc.csv: no column 'count'"),
        ("code,count\n250.00,0\n", "code '250.00': 0 population patients, fewer than the 1"),
    ):
        cc.write_text(text, encoding="utf-8")
        assert main([*args, "--population-code-counts", str(cc)]) == 2
        assert words in capsys.readouterr().err
    out = tmp_path / "o.csv"
    assert main([*args[:-2], "--population-code-counts", str(cc), "--out", str(out)]) == 2
    assert "--population-code-counts is for the estimate without the population" in capsys.readouterr().err


def test_risk_page_takes_the_selection_and_shows_the_bound_and_the_spread() -> None:
    from test_page_risk import _metrics, _risk_page

    at = _risk_page()
    at.selectbox(key="cohort_group").set_value("population").run()
    ctx = at.session_state["context"]
    at.number_input(key="risk_population_size").set_value(100_000).run()
    at.text_input(key="risk_selected_by").set_value("250, 401").run()
    assert not at.exception, [e.value for e in at.exception]
    est = kmap.estimate_kmap(ctx.cohort, 100_000, ctx.adversary.knowledge, ctx.k, selected_by=("250", "401"))
    assert _metrics(at)["Estimated share unique"] == f"{est.share_unique.estimate:.1%}"
    captions = " ".join(c.value for c in at.caption)
    assert f"At most {est.cohort_only.share_below_k:.1%}: the cohort alone" in captions
    assert "Spread under the model (95%)" in captions and "interval" not in captions
    assert any(f"Known sets counted exactly: {est.exact_sets:,}" in i.value for i in at.info)
    at.text_input(key="risk_selected_by").set_value("*bold*").run()
    assert not at.exception
    assert any("no cohort code starts with" in e.value and "\\*bold\\*" in e.value for e in at.error)
    assert "Why a record is at risk, and what would fix it" in [h.value for h in at.header]


@given(
    c=st.integers(1, 6),
    f=st.floats(0.01, 0.99),
    k=st.integers(1, 8),
    extra=st.integers(0, 12),
    model=st.sampled_from(["poisson", "negative_binomial"]),
)
@SETTINGS
def test_bounded_probabilities_are_the_model_conditioned_on_the_bound(c, f, k, extra, model) -> None:
    """P(F < k | F <= U) and P(F = 1 | F <= U), summed term by term from the model's pmf of F - c."""
    prior = kmap.GammaPrior(shape=0.7, rate=0.05)
    upper = c + extra
    if model == "poisson":
        lam = c * (1 - f) / f

        def pmf(u: int) -> float:
            return math.exp(-lam + u * math.log(lam) - math.lgamma(u + 1)) if lam > 0 else float(u == 0)
    else:
        r, q = prior.shape + c - 1, (prior.rate + f) / (prior.rate + 1)

        def pmf(u: int) -> float:
            return (
                math.exp(math.lgamma(r + u) - math.lgamma(r) - math.lgamma(u + 1) + r * math.log(q))
                * (1 - q) ** u
            )

    z = math.fsum(pmf(u) for u in range(extra + 1))
    p1, pk, mean = kmap.bounded_probabilities(
        np.array([c]), np.array([f]), k, model, prior, np.array([float(upper)])
    )
    assert pk[0] == pytest.approx(
        min(1.0, math.fsum(pmf(u) for u in range(extra + 1) if c + u < k) / z), abs=1e-9
    )
    assert p1[0] == pytest.approx(min(1.0, pmf(0) / z) if c == 1 else 0.0, abs=1e-9)
    assert c <= mean[0] <= upper


@pytest.fixture(scope="module")
def bench_cohorts(sample_population) -> list[tuple[str, Records, tuple[str, ...] | None]]:
    """bench/estimate.py's cohorts as selected: its random cohorts (told nothing) and its eight disease
    cohorts (told their selection code)."""
    population = sample_population
    cases: list[tuple[str, Records, tuple[str, ...] | None]] = [
        (name, c, None) for name, c in bench_estimate.random_cohorts(population)
    ]
    cases += [
        (code, bench_estimate.disease_cohort(population, code), (code,)) for code in bench_estimate.DISEASES
    ]
    return cases


@pytest.mark.parametrize("knowledge", ["single_visit", "all_visits"])
def test_with_the_code_counts_every_bench_cohort_is_within_3_points(
    sample_population, bench_cohorts, knowledge
) -> None:
    """Issue #36, finding 4: "within 3 points on the eight disease cohorts" and on random ones. With the
    population's code counts and sets independent, 340 was +3.5 and random f=0.01 +5.3 (share below k,
    single visit, k = 5); the default with code counts takes a record's riskiest set. Under all visits
    random f=0.01 was +4.0: a set's fraction counted the record itself among its rarest code's holders."""
    population, k = sample_population, 5
    counts = population_code_counts(population)
    errors = {}
    for name, cohort, selected in bench_cohorts:
        truth = risk.original_distinguishability(cohort, Adversary("population", knowledge), population)
        est = kmap.estimate_kmap(
            cohort,
            population.n_patients,
            knowledge,
            k,
            selected_by=selected,
            population_code_counts=counts,
        )
        errors[name] = 100 * (est.share_below_k.estimate - float(np.mean(truth < k)))
    assert len(errors) == 12
    assert all(abs(e) <= 3.0 for e in errors.values()), {name: f"{e:+.2f}" for name, e in errors.items()}


def test_told_only_the_selection_the_warning_says_how_low_it_was_measured(
    sample_population, bench_cohorts
) -> None:
    """Issue #36, finding 4: told only the selection, 250, 401 and 427 stay 3.0-5.0 points low (single
    visit, k = 5): the sets without a selection code go with it more than the cohort can show (every
    member holds one). The warning must say so, with a figure no smaller than the worst miss measured,
    and name the code counts as the remedy; told the code counts as well, it does not say it."""
    population, k = sample_population, 5
    misses = []
    for _, cohort, selected in bench_cohorts:
        if selected is None:
            continue
        truth = risk.original_distinguishability(cohort, Adversary("population", "single_visit"), population)
        est = kmap.estimate_kmap(cohort, population.n_patients, "single_visit", k, selected_by=selected)
        misses.append(100 * (float(np.mean(truth < k)) - est.share_below_k.estimate))
        assert est.warning.startswith(kmap.SELECTED_WARNING)
    assert max(misses) > 3.0  # the finding: the selection alone does not reach 3 points on every cohort
    stated = re.search(r"up to (\d+(?:\.\d+)?) points too low", est.warning)
    assert stated and float(stated.group(1)) >= max(misses), (max(misses), est.warning)
    assert "code counts" in est.warning
    both = kmap.estimate_kmap(
        cohort,
        population.n_patients,
        "single_visit",
        k,
        selected_by=selected,
        population_code_counts=population_code_counts(population),
    )
    assert "too low" not in both.warning
