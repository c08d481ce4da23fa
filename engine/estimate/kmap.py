"""k-map without the population: population risk estimated from the cohort and the sampling fraction.

READ THIS FIRST: told nothing else, every figure here assumes that the cohort is a SIMPLE RANDOM SAMPLE of
the population (each patient of the institution equally likely to be in it, independently of their
codes). A disease cohort is the opposite: it is selected BY its codes (every member holds the phenotype's
codes, and with them the comorbidities that go with the disease). Its code patterns are then much more
frequent in the cohort than in the population, a pattern seen c times in the cohort is seen far fewer than
c/f times in the population, and the estimate UNDERSTATES the risk: on the shipped sample's eight disease
cohorts (every patient with a code of 250, 401, 427, 714, 340, 555, 296 or 493; bench/estimate.py, k = 5)
the share below k is 10.4-22.1 points too low under single-visit knowledge, 5.7-11.8 under all visits.

How the cohort was selected (issue #36, finding 4; `estimate_kmap(selected_by=...)`, `risk --selected-by`):
the officer states the codes that define the cohort (prefixes: every population patient holding a code
that starts with one is in the cohort). A known set holding such a code then has an EXACT population
count: every candidate consistent with it holds the code, so is in the cohort, and F = c (`set_counts`).
Under all-visits knowledge every member's one set holds a selection code: the figures are exact. The other
sets (single-visit sets without a selection code) are estimated by the model below. Measured: the disease
cohorts' share below k within 0.3-5.0 points single visit (5 of 8 within 3; 250 -3.02, 401 -4.1,
427 -5.0 below, which the warning states: `SELECTION_ONLY_CAVEAT`), 0.0 all visits.

The population's code counts (`population_code_counts`, `risk --population-code-counts`: patients holding
each code, aggregate counts far easier to obtain than patient data): a set of one code has that code's
count exactly; every set is at most its rarest code's count U; a set is estimated at its own sampling
fraction, the cohort's share of its rarest code's other holders (`fellow_fraction`; a set whose rarest
code's holders are all in the cohort is exact), conditioned on F <= U (`set_bounds`,
`bounded_probabilities`; poisson and negative binomial models). A heuristic: the share of a set's
holders in the cohort is taken as its rarest code's. A record's sets are then combined as the riskiest
(`default_combine`). Measured (share below k, k = 5): single visit, the eight disease cohorts within
0.0-3.0 points (427 -2.97; share unique within 3.2, 340), the four random ones within 0.8 (independent
and the rarest code's share counting the record: 340 +3.5, random f = 0.01 +5.3); all visits, disease
cohorts exact, random ones within 2.5 (f = 0.01, 300 patients; 4.0 before `fellow_fraction`).

Where the disease cohorts still miss (measured on the sample, single visit, k = 5; issue #36, not
fixed): told only the selection, 401 (-4.1) and 427 (-5.0) because a member's sets without a selection
code are far more concentrated in the cohort than f: the cohort holds on average 0.45 of such a set's
population holders for 401 (f = 0.196) and 0.29 for 427 (f = 0.042), so c / f overstates F (401,
c = 2: E[F] 7.4 estimated, 3.3 true). The cohort does identify an effective fraction (maximum
likelihood of those sets' counts beside the exact sets': 0.55 for 401, 0.37 for 427), but taken as
every such set's fraction it brings 401 to +0.5 but overstates the seven others by 4.5-16.1 points
(prior fitted to the exact sets, whose counts are capped by the cohort's size), so it is not used.
Told the code counts with sets independent, 340 was +3.5 (265 patients, 11.6 sets per record): its
estimated sets sum to 264 below k against 211 true (likely the bound F <= U cutting a heavy-tailed prior,
shape 0.29, toward small counts), and 11.6 overlapping sets taken as independent count that risk many
times; as the riskiest, +2.4, and with `fellow_fraction` +1.8 (share unique +3.2). Told only the
selection the riskiest is worse (427 -8.1), so there the sets stay independent.

The cohort-only bound (`CohortOnly`, always printed): the shares with the cohort as the candidates. The
cohort is part of the population, so c <= F for every set: a record unique (below k) in the population is
so in the cohort, and the cohort-only shares are UPPER bounds on the population's, model-free and whatever
the selection; every estimate here is at most that bound, record by record. It is exact for a cohort
selected by its codes under all-visits knowledge.

Prefer `risk.original_distinguishability` with the real population (scope population) whenever the
population can be had.

The sample count. For every known set S of a record (one per visit under single-visit knowledge, the
whole record under all-visits knowledge), c_S is its number of consistent records IN THE COHORT: the
cohort-scope distinguishability of the set, counted by the risk kernel
(`risk.known_set_distinguishability(cohort, cohort, ...)`), so c_S >= 1 (the record itself). The
sampling fraction is f = cohort size / stated population size.

The models. ARX's k-map estimators (El Emam and Dankar, JAMIA 2008, D3 and D4; Pannekoek 1999), which
take each set on its own with no knowledge of how set sizes are spread:
- `poisson`: the population count of the set is F = c + X, X ~ Poisson(c (1 - f) / f): the c records seen,
  and the unseen ones at the rate the cohort implies (E[F] = c / f).
- `zero_truncated_poisson`: the sample count of a population class of size F is Poisson(f F), truncated
  at zero because the class was seen at all (D4); with a flat prior on F over c .. N - n + c (N the
  population size, n the cohort size: the other cohort records are outside the class), the posterior of
  F given c is proportional to (f F)^c e^{-f F} / (1 - e^{-f F}). For a sample unique (c = 1) and small f
  this gives P(F = 1) close to f, where the plain Poisson model gives e^{-(1-f)/f}, nearly 0.
Both UNDERSTATE the risk badly even for a truly random cohort (bench/estimate.py: share unique 0-10 % for
an exact 11-49 %): most code combinations are rare in the population, which a per-set model ignores.
- `negative_binomial` (the default): the Poisson-gamma superpopulation model of Bethlehem, Keller and
  Pannekoek (1990) and Benedetti and Franconi's individual risk (1998; mu-ARGUS, sdcMicro): the record
  itself is in the cohort, each of its F - 1 fellows with probability f, F - 1 ~ Poisson(lam) and lam
  ~ Gamma(shape, rate) across sets, the gamma fitted by maximum likelihood to the cohort's own counts
  (`fit_prior`; c - 1 is then negative binomial); given c, F - c ~ NegBin(shape + c - 1, (rate + f) /
  (rate + 1)). The fitted prior carries how rare combinations are; on random cohorts of the shipped
  sample it is within a few points of the exact shares (bench/estimate.py).
At f = 1 the cohort is the population and every model returns F = c exactly. The Poisson models
approximate sampling without replacement: for f near 1 they are rough (the zero-truncated one most).

A record's population distinguishability is the minimum of F_S over its known sets. Its probability of
being below k: `combine="independent"` takes the F_S of a record's distinct sets as independent,
1 - prod_S P(F_S >= k); `combine="riskiest"` takes the largest P(F_S < k), a lower bound whatever the
dependence (the sets of one record overlap, so their counts are positively dependent: the truth lies
between the two, closer to the riskiest the more nested the sets). The record's estimated population
distinguishability (`expected_population`) is E[F] of its set with the fewest cohort records.

The shares (unique, below k) are the means of the records' probabilities, with a normal interval of
the Poisson-binomial sum (records taken as independent Bernoulli trials): it is the SPREAD UNDER THE MODEL,
NOT the error of the model, and is shown under that name. Its coverage, measured (bench/estimate.py): it
holds the exact share in 4 of 8 random cohort x knowledge cases and in 0 of 16 disease ones told nothing;
told the selection, in the 8 all-visits cases (exact: no spread) and 2 of 8 single-visit ones.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from scipy import optimize, stats
from scipy.special import logsumexp

from engine.adversary import Knowledge
from engine.records import Records
from engine.risk import DEFAULT_MATCHING, Matching, known_set_distinguishability

Model = Literal["poisson", "zero_truncated_poisson", "negative_binomial"]
Combine = Literal["independent", "riskiest"]
MODELS: tuple[Model, ...] = ("poisson", "zero_truncated_poisson", "negative_binomial")
COMBINES: tuple[Combine, ...] = ("independent", "riskiest")

RANDOM_SAMPLE_WARNING = (
    "Estimated, not measured: assumes the cohort is a simple random sample of the population. A cohort "
    "selected by its codes (a disease cohort) is not, and its risk is then underestimated: state its "
    "selection codes."
)
CODE_COUNTS_WARNING = (
    "Partly estimated: sets of one code are counted from the population's code counts; every other set is "
    "estimated at its rarest code's share in the cohort, at most that code's count."
)
SELECTED_WARNING = (
    "Partly estimated: known sets holding a selection code are counted exactly (every patient with that "
    "code is in the cohort, as stated); the other sets are estimated by a model of the population."
)

SELECTION_ONLY_CAVEAT = (
    "On the sample's disease cohorts the share below k came out up to 5.0 points too low (sets without a "
    "selection code go with it more than the cohort can show); the population's code counts bring it "
    "within 3."
)


@dataclass(frozen=True)
class Share:
    """An estimated share of records with its interval (`confidence`, e.g. 0.95)."""

    estimate: float
    low: float
    high: float
    confidence: float


@dataclass(frozen=True, eq=False)
class KMapEstimate:
    """Per-record estimates of population risk from the cohort alone, and their shares (module docstring).

    sample_distinguishability: per record, its cohort-scope distinguishability (min over its sets of c).
    expected_population: per record, E[F] of its set with the fewest cohort records.
    p_unique, p_below_k: per record, the probability that its population distinguishability is 1, < k.
    cohort_only: the model-free upper bound from the cohort alone (`CohortOnly`).
    prior: the fitted gamma prior (`negative_binomial` model, f < 1, some set estimated), else None.
    selected_by: the selection codes stated, or None (a random sample assumed); exact_sets of n_sets
    distinct known sets have an exact population count; code_counts: the population's code counts used."""

    model: Model
    combine: Combine
    knowledge: Knowledge
    k: int
    population_size: int
    cohort_size: int
    sampling_fraction: float
    sample_distinguishability: np.ndarray
    expected_population: np.ndarray
    p_unique: np.ndarray
    p_below_k: np.ndarray
    share_unique: Share
    share_below_k: Share
    cohort_only: CohortOnly
    prior: GammaPrior | None = None
    selected_by: tuple[str, ...] | None = None
    exact_sets: int = 0
    n_sets: int = 0
    code_counts: bool = False
    warning: str = RANDOM_SAMPLE_WARNING


def sampling_fraction(cohort_size: int, population_size: int) -> float:
    """f = cohort size / stated population size, checked: 1 <= cohort size <= population size."""
    if isinstance(population_size, bool) or int(population_size) != population_size:
        raise ValueError(f"the population size must be a whole number, not {population_size!r}")
    if cohort_size < 1:
        raise ValueError("the cohort has no records: nothing to estimate")
    if population_size < cohort_size:
        raise ValueError(
            f"the stated population size ({population_size}) is smaller than the cohort ({cohort_size}): "
            "the cohort must be drawn from the population"
        )
    return cohort_size / int(population_size)


# ----------------------------------------------------------------------------- one set: F given c
def _ztp_log_posterior(c: int, f: float, f_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Population counts F = c .. f_max and their log posterior weights (unnormalized) under the
    zero-truncated Poisson likelihood with a flat prior."""
    grid = np.arange(c, f_max + 1, dtype=np.float64)
    lam = f * grid
    return grid, c * np.log(lam) - lam - np.log(-np.expm1(-lam))


def _ztp_upper(c: int, f: float, upper: int) -> int:
    """Where the posterior's tail is negligible (about Gamma(c, f): mean c/f, sd sqrt(c)/f), within the
    largest possible count `upper`."""
    return int(min(upper, max(c, math.ceil((c + 12.0 * math.sqrt(c) + 40.0) / f))))


def set_probabilities(
    counts: np.ndarray,
    f: float,
    k: int,
    model: Model,
    upper: int | None = None,
    prior: GammaPrior | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per sample count c (>= 1) of a known set: P(F = 1), P(F < k) and E[F] of its population count F
    under `model` (module docstring); `upper` bounds F (N - n + c for the zero-truncated model; default
    no bound beyond the tail)."""
    counts = np.asarray(counts, dtype=np.int64)
    if (counts < 1).any():
        raise ValueError("sample counts must be at least 1 (a record is its own candidate)")
    if not 0.0 < f <= 1.0:
        raise ValueError(f"the sampling fraction must be in (0, 1], not {f!r}")
    p1 = np.zeros(len(counts))
    pk = np.zeros(len(counts))
    if f == 1.0:  # the cohort is the population: F = c
        return (counts == 1).astype(np.float64), (counts < k).astype(np.float64), counts.astype(np.float64)
    if model == "poisson":
        rate = counts * (1.0 - f) / f
        pk = np.where(counts < k, stats.poisson.cdf(k - 1 - counts, rate), 0.0)
        p1 = np.where(counts == 1, np.exp(-rate), 0.0)
        return p1, pk, counts / f
    if model == "negative_binomial":
        return _nb_probabilities(counts, f, k, prior if prior is not None else fit_prior(counts, f))
    if model != "zero_truncated_poisson":
        raise ValueError(f"model must be one of {MODELS}, not {model!r}")
    mean = np.empty(len(counts))
    for c in np.unique(counts).tolist():
        at = counts == c
        bound = _ztp_upper(c, f, upper + c if upper is not None else 1 << 62)
        grid, logw = _ztp_log_posterior(c, f, bound)
        total = logsumexp(logw)
        w = np.exp(logw - total)
        mean[at] = float((grid * w).sum())
        if c < k:
            pk[at] = min(1.0, float(w[grid < k].sum()))
        if c == 1:
            p1[at] = float(w[0])
    return p1, pk, mean


@dataclass(frozen=True)
class GammaPrior:
    """The Poisson-gamma prior of the `negative_binomial` model: F - 1 ~ Poisson(lam), lam ~ Gamma(shape,
    rate), fitted to the cohort's counts (`fit_prior`)."""

    shape: float
    rate: float


_MAX_SHAPE = 1000.0


def fit_prior(counts: np.ndarray, f: float) -> GammaPrior:
    """Maximum likelihood fit of the gamma prior to sample counts c (>= 1): c - 1 ~ NegBin(shape,
    rate / (rate + f)), the marginal of c - 1 ~ Poisson(f lam) (the record itself is in the sample, each
    of its F - 1 fellows is with probability f). Distinct counts are weighted by their number."""
    y, w = np.unique(np.asarray(counts, dtype=np.int64) - 1, return_counts=True)
    if len(y) == 0:
        raise ValueError("no sample counts to fit the prior to")
    if y.max() == 0:  # every set seen once: the data say only "small"; a prior at the fit's boundary
        return GammaPrior(shape=1e-3, rate=1e3)
    mean = float((y * w).sum() / w.sum())

    def nll(theta: np.ndarray) -> float:
        shape, p = math.exp(theta[0]), 1.0 / (1.0 + math.exp(-theta[1]))
        return -float((w * stats.nbinom.logpmf(y, shape, p)).sum())

    start = np.array([math.log(0.5), math.log(0.5 / max(mean, 1e-9))])  # p/(1-p) = shape/mean
    # shape at most 1000: counts no more spread than a Poisson's have no finite maximum (shape -> infinity,
    # the Poisson limit), which a shape of 1000 already is for every count here
    bounds = [(math.log(1e-4), math.log(_MAX_SHAPE)), (-40.0, 40.0)]
    start = np.clip(start, [b[0] for b in bounds], [b[1] for b in bounds])
    res = optimize.minimize(
        nll, start, method="Nelder-Mead", bounds=bounds, options={"xatol": 1e-6, "fatol": 1e-9}
    )
    shape, p = math.exp(res.x[0]), 1.0 / (1.0 + math.exp(-res.x[1]))
    return GammaPrior(shape=shape, rate=p * f / (1.0 - p))


def _nb_probabilities(
    counts: np.ndarray, f: float, k: int, prior: GammaPrior
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(F = 1), P(F < k), E[F] given c: F - c | c ~ NegBin(shape + c - 1, (rate + f) / (rate + 1))."""
    n_succ = prior.shape + counts - 1.0
    q = (prior.rate + f) / (prior.rate + 1.0)
    pk = np.where(counts < k, stats.nbinom.cdf(np.maximum(k - 1 - counts, 0), n_succ, q), 0.0)
    p1 = np.where(counts == 1, q**n_succ, 0.0)
    return p1, pk, counts + n_succ * (1.0 - f) / (prior.rate + f)


# ----------------------------------------------------------------------------- records and shares
def _share(p: np.ndarray, confidence: float) -> Share:
    n = len(p)
    if n == 0:
        return Share(0.0, 0.0, 0.0, confidence)
    est = float(p.mean())
    half = float(stats.norm.ppf(0.5 + confidence / 2.0)) * math.sqrt(float((p * (1.0 - p)).sum())) / n
    return Share(est, max(0.0, est - half), min(1.0, est + half), confidence)


def _distinct_rows(owner: np.ndarray, matrix) -> np.ndarray:
    """A boolean mask keeping the first of every (record, known set) repeated within a record."""
    seen: set[tuple[int, bytes, bytes]] = set()
    keep = np.zeros(len(owner), dtype=bool)
    ptr, ind, data = matrix.indptr, matrix.indices, matrix.data
    for r in range(len(owner)):
        key = (int(owner[r]), ind[ptr[r] : ptr[r + 1]].tobytes(), data[ptr[r] : ptr[r + 1]].tobytes())
        if key not in seen:
            seen.add(key)
            keep[r] = True
    return keep


def combine_records(
    owner: np.ndarray,
    p_unique: np.ndarray,
    p_below: np.ndarray,
    n_records: int,
    combine: Combine,
    empty_unique: float = 0.0,
    empty_below: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Per record, from its sets' probabilities: P(min F = 1) and P(min F < k), either as independent
    sets or the riskiest set (module docstring). A record with no set gets `empty_*` (its population
    distinguishability is the whole population)."""
    if combine not in COMBINES:
        raise ValueError(f"combine must be one of {COMBINES}, not {combine!r}")
    has = np.zeros(n_records, dtype=bool)
    has[owner] = True
    out = []
    for p, empty in ((p_unique, empty_unique), (p_below, empty_below)):
        if combine == "riskiest":
            rec = np.zeros(n_records)
            np.maximum.at(rec, owner, p)
        else:  # 1 - prod(1 - p), in logs; a set with p = 1 makes the record certain
            log_keep = np.zeros(n_records)
            np.add.at(log_keep, owner, np.log1p(-np.where(p < 1.0, p, 0.0)))
            rec = -np.expm1(log_keep)
            certain = np.zeros(n_records, dtype=bool)
            certain[owner[p >= 1.0]] = True
            rec[certain] = 1.0
        rec[~has] = empty
        out.append(np.clip(rec, 0.0, 1.0))
    return out[0], out[1]


class SelectionError(ValueError):
    """The stated selection codes do not fit the cohort (a code no member holds, an empty code)."""


def _selected_items(items: np.ndarray, selected_by: Sequence[str]) -> np.ndarray:
    """Boolean mask over `items`: the item starts with one of the selection codes. Every code must start
    some item of the cohort (a code no member holds is a typo, or not how the cohort was selected)."""
    labels = np.asarray(items).astype(str)
    mask = np.zeros(len(labels), dtype=bool)
    for code in selected_by:
        code = str(code).strip()
        if not code:
            raise SelectionError("a selection code is empty")
        hit = np.char.startswith(labels, code)
        if not hit.any():
            raise SelectionError(
                f"no cohort code starts with {code!r}: the cohort cannot hold every patient selected by it"
            )
        mask |= hit
    return mask


@dataclass(frozen=True, eq=False)
class SetCounts:
    """The distinct known sets of the cohort's records (`matrix` rows over the cohort's items, `owner[r]`
    the record of row r), their cohort counts c, and which are `exact`: sets holding a selection code,
    whose population count is c (every population patient holding that code is in the cohort, so every
    candidate consistent with the set is)."""

    matrix: sp.csr_matrix
    owner: np.ndarray
    counts: np.ndarray
    exact: np.ndarray

    def items_of(self, row: int, items: np.ndarray) -> list[str]:
        """The items of set `row` (by name, `items` the cohort's vocabulary)."""
        return [
            str(items[j]) for j in self.matrix.indices[self.matrix.indptr[row] : self.matrix.indptr[row + 1]]
        ]


def set_counts(
    cohort: Records,
    knowledge: Knowledge,
    matching: Matching = DEFAULT_MATCHING,
    selected_by: Sequence[str] | None = None,
) -> SetCounts:
    """Every record's distinct known sets with their cohort counts (the risk kernel, cohort scope, full
    counts) and, for a cohort selected by `selected_by` (code prefixes: every population patient holding a
    code that starts with one is in the cohort), the sets whose count is exact (issue #36, finding 4)."""
    sets = known_set_distinguishability(cohort, cohort, knowledge, dataclasses.replace(matching, cap=None))
    keep = _distinct_rows(sets.owner, sets.matrix)
    matrix = sets.matrix[np.flatnonzero(keep)]
    exact = np.zeros(matrix.shape[0], dtype=bool)
    if selected_by is not None:
        selected = _selected_items(cohort.items, selected_by).astype(np.int32)
        exact = (matrix @ selected) > 0
    return SetCounts(matrix, sets.owner[keep], sets.values[keep], exact)


class CodeCountsError(ValueError):
    """The population's code counts contradict the cohort (a code held by more cohort patients than by
    the population)."""


def _check_selection(cohort: Records, selected_by: Sequence[str], code_counts: Mapping[str, int]) -> None:
    """The stated selection against the population's code counts: every population patient holding a
    selection code is in the cohort, so a counted selection code's count is its cohort count."""
    in_cohort = np.asarray(cohort.patient_item_sets.sum(axis=0)).ravel()
    for j in np.flatnonzero(_selected_items(cohort.items, selected_by)).tolist():
        item = str(cohort.items[j])
        if item in code_counts and int(code_counts[item]) != int(in_cohort[j]):
            raise SelectionError(
                f"code {item!r} is held by {int(code_counts[item])} population patients but {int(in_cohort[j])} "
                "cohort patients: the cohort does not hold every patient with it, as its selection states"
            )


@dataclass(frozen=True, eq=False)
class SetBounds:
    """What the population's code counts (patients holding each code) tell of each known set S: `upper`,
    the fewest population holders of one of its codes (F_S <= upper; inf when no code of S is counted),
    and `fraction`, the cohort's share of the holders of that rarest code (the set's own sampling
    fraction; NaN when none is counted). A set of one code (held once) has F_S = upper exactly."""

    upper: np.ndarray
    fraction: np.ndarray
    single: np.ndarray


def set_bounds(cohort: Records, sets: SetCounts, code_counts: Mapping[str, int]) -> SetBounds:
    """`SetBounds` of every known set from the population's code counts (codes not in `code_counts` are
    not counted, e.g. suppressed small cells: they bound nothing)."""
    in_cohort = np.asarray(cohort.patient_item_sets.sum(axis=0)).ravel().astype(np.float64)
    pop = np.full(cohort.n_items, np.inf)
    for j, item in enumerate(cohort.items.astype(str).tolist()):
        if item in code_counts:
            pop[j] = float(code_counts[item])
            if pop[j] < in_cohort[j]:
                raise CodeCountsError(
                    f"code {item!r}: {int(pop[j])} population patients, fewer than the {int(in_cohort[j])} "
                    "cohort patients holding it (the cohort is part of the population)"
                )
    m = sets.matrix
    lens = np.diff(m.indptr)
    upper = np.full(len(lens), np.inf)
    fraction = np.full(len(lens), np.nan)
    rarest = np.full(len(lens), -1, dtype=np.int64)
    nonempty = np.flatnonzero(lens > 0)
    if len(nonempty):
        # per set, its rarest counted code: the first cell of its block once sorted by (set, count)
        order = np.lexsort((pop[m.indices], np.repeat(np.arange(len(lens)), lens)))
        rarest[nonempty] = m.indices[order[m.indptr[nonempty]]]
        upper[nonempty] = pop[rarest[nonempty]]
    counted = np.isfinite(upper)
    fraction[counted] = in_cohort[rarest[counted]] / upper[counted]
    once = np.zeros(len(lens), dtype=bool)
    once[nonempty] = m.data[m.indptr[nonempty]] == 1  # a set of one code known held once (not repeats)
    single = (lens == 1) & counted & once
    return SetBounds(upper, fraction, single)


def fellow_fraction(bounds: SetBounds, f: float) -> np.ndarray:
    """Per set, the cohort's share of its OTHER population holders, as the models take it (the record
    itself is in the cohort, each of its F - 1 fellows with probability f): of its rarest code's U - 1
    other holders, m - 1 are in the cohort (m of U in all, the record one of them), with one pseudo-holder
    at the cohort's fraction f so that m = 1 is not 0: (m - 1 + f) / U. The share m / U counts the record
    itself and overstates the fraction most where U is small: a random cohort of 300 (f = 0.01) was +4.0
    points below k under all visits, +2.5 with this (issue #36, finding 4; bench/estimate.py). NaN where
    no code of the set is counted."""
    held = bounds.fraction * bounds.upper  # m, the cohort's holders of the rarest code
    return (held - 1.0 + f) / bounds.upper


def bounded_probabilities(
    counts: np.ndarray,
    f: np.ndarray,
    k: int,
    model: Model,
    prior: GammaPrior | None,
    upper: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(F = 1), P(F < k), E[F] of sets seen c times, each with its own sampling fraction f (< 1), under
    the `poisson` or `negative_binomial` model (`set_probabilities`) conditioned on F <= upper."""
    c = np.asarray(counts, dtype=np.float64)
    room = np.where(np.isfinite(upper), upper - c, np.inf)
    below = np.minimum(k - 1 - c, room)
    if model == "poisson":
        dist = stats.poisson(c * (1.0 - f) / f)
        mean = c / f
    elif model == "negative_binomial":
        if prior is None:
            raise ValueError("the negative binomial model needs its prior")
        n_succ = prior.shape + c - 1.0
        dist = stats.nbinom(n_succ, (prior.rate + f) / (prior.rate + 1.0))
        mean = c + n_succ * (1.0 - f) / (prior.rate + f)
    else:
        raise ValueError(
            f"the population's code counts need the poisson or negative_binomial model, not {model!r}"
        )
    z = np.where(np.isfinite(room), dist.cdf(np.where(np.isfinite(room), room, 0.0)), 1.0)
    pk = np.where(c < k, dist.cdf(np.maximum(below, 0.0)) / z, 0.0)
    p1 = np.where(c == 1, dist.pmf(0) / z, 0.0)
    return np.clip(p1, 0.0, 1.0), np.clip(pk, 0.0, 1.0), np.minimum(mean, upper)


@dataclass(frozen=True)
class CohortOnly:
    """The model-free bound from the cohort alone: the shares unique and below k with the cohort as the
    candidates. The cohort is part of the population, so a set's cohort count c is at most its population
    count F: a record unique (below k) in the population is so in the cohort, and these shares are UPPER
    bounds on the population's, whatever the selection. Exact when every set is exact (a cohort selected
    by its codes, all-visits knowledge)."""

    share_unique: float
    share_below_k: float


def default_combine(code_counts: bool) -> Combine:
    """How a record's sets are combined unless stated: the riskiest set when the population's code counts
    are given, else independent (issue #36, finding 4; bench/estimate.py, single visit, k = 5). With the
    code counts each set's own probability is already near its truth and its overlap with the record's
    other sets (a shared rare code) makes their counts move together, so taking them as independent
    counts one risk several times: 340 +3.5 and random f = 0.01 +5.3 points against +2.4 and +0.7 as
    the riskiest (every disease and random cohort within 2.7, before `fellow_fraction`). Without them a
    set away from the selection codes is estimated too common (c / f), and independence offsets part of
    it: told the selection, riskiest puts 427 at -8.1 against -5.0, and random cohorts told nothing at
    -2.5 to -3.9 against +0.6 to +6.1."""
    return "riskiest" if code_counts else "independent"


def estimate_kmap(
    cohort: Records,
    population_size: int,
    knowledge: Knowledge,
    k: int,
    *,
    model: Model = "negative_binomial",
    combine: Combine | None = None,
    matching: Matching = DEFAULT_MATCHING,
    confidence: float = 0.95,
    selected_by: Sequence[str] | None = None,
    population_code_counts: Mapping[str, int] | None = None,
) -> KMapEstimate:
    """Estimate each cohort record's population distinguishability, and the probability that it is 1 and
    below k, from the cohort alone and the stated population size (k-map without the population).

    `selected_by` None: ASSUMES THE COHORT IS A SIMPLE RANDOM SAMPLE OF THE POPULATION (module docstring):
    for a cohort selected by its codes the risk is underestimated. `selected_by` (code prefixes): the
    cohort holds every population patient with a code starting with one of them; a known set holding such
    a code then has its population count exactly (its cohort count, `set_counts`), the other sets are
    estimated by the model, its prior fitted to all sets (issue #36, finding 4). `population_code_counts`
    (code -> population patients holding it, aggregate counts): a set of one code has that count exactly,
    a set whose rarest code's holders are all in the cohort has its cohort count exactly, and any other
    set is estimated at its own sampling fraction (the cohort's share of its rarest code's holders) with
    F at most that code's count (`set_bounds`, `bounded_probabilities`). `matching` as for the kernel (its `cap` is not used:
    the expected population counts need full cohort counts). Defaults: the negative binomial model; sets
    combined as independent, or as the riskiest when the code counts are given (`default_combine`)."""
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive whole number, not {k!r}")
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, not {model!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), not {confidence!r}")
    if combine is None:
        combine = default_combine(population_code_counts is not None)
    if population_code_counts is not None and model == "zero_truncated_poisson":
        raise CodeCountsError("the population's code counts need the poisson or negative_binomial model")
    n = cohort.n_patients
    f = sampling_fraction(n, population_size)
    sets = set_counts(cohort, knowledge, matching, selected_by)
    owner, counts, exact = sets.owner, sets.counts, sets.exact
    p1, pk, mean = (
        (counts == 1).astype(np.float64),
        (counts < k).astype(np.float64),
        counts.astype(np.float64),
    )
    bounds = None
    if population_code_counts is not None:
        if selected_by is not None:
            _check_selection(cohort, selected_by, population_code_counts)
        bounds = set_bounds(cohort, sets, population_code_counts)
        known = bounds.single & ~exact  # F is the code's population count
        p1[known], pk[known], mean[known] = (
            bounds.upper[known] == 1,
            bounds.upper[known] < k,
            bounds.upper[known],
        )
        exact = exact | known | (bounds.fraction >= 1.0)  # every holder of its rarest code is in the cohort
    guessed = ~exact
    # the prior is fitted to every set (exact ones too: how rare combinations are); on the sample's disease
    # cohorts 0.1-1.2 points closer than fitted to the estimated sets alone (bench/estimate.py)
    prior = fit_prior(counts, f) if model == "negative_binomial" and f < 1.0 and guessed.any() else None
    own = guessed & np.isfinite(bounds.upper) if bounds is not None and f < 1.0 else np.zeros_like(guessed)
    if own.any():
        assert bounds is not None
        p1[own], pk[own], mean[own] = bounded_probabilities(
            counts[own], fellow_fraction(bounds, f)[own], int(k), model, prior, bounds.upper[own]
        )
        guessed &= ~own
    if guessed.any():
        p1[guessed], pk[guessed], mean[guessed] = set_probabilities(
            counts[guessed], f, int(k), model, upper=int(population_size) - n, prior=prior
        )
    # a record with no known set is consistent with the whole population
    p_unique, p_below = combine_records(
        owner, p1, pk, n, combine, float(population_size <= 1), float(population_size < k)
    )
    sample = np.full(n, n, dtype=np.int64)
    np.minimum.at(sample, owner, counts)
    expected = np.full(n, float(population_size))
    if len(owner):
        order = np.lexsort((counts, owner))  # per record, its set with the fewest cohort records first
        first = np.ones(len(order), dtype=bool)
        first[1:] = owner[order][1:] != owner[order][:-1]
        expected[owner[order][first]] = mean[order][first]
    return KMapEstimate(
        model=model,
        combine=combine,
        knowledge=knowledge,
        k=int(k),
        population_size=int(population_size),
        cohort_size=n,
        sampling_fraction=f,
        sample_distinguishability=sample,
        expected_population=expected,
        p_unique=p_unique,
        p_below_k=p_below,
        share_unique=_share(p_unique, confidence),
        share_below_k=_share(p_below, confidence),
        cohort_only=CohortOnly(float(np.mean(sample <= 1)), float(np.mean(sample < k))),
        prior=prior,
        selected_by=tuple(str(c).strip() for c in selected_by) if selected_by is not None else None,
        exact_sets=int(exact.sum()),
        code_counts=population_code_counts is not None,
        n_sets=len(counts),
        warning=SELECTED_WARNING + ("" if population_code_counts is not None else " " + SELECTION_ONLY_CAVEAT)
        if selected_by is not None
        else CODE_COUNTS_WARNING
        if population_code_counts is not None
        else RANDOM_SAMPLE_WARNING,
    )
