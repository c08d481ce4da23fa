"""Raw against latent Recall@n at every n: one verdict for the CLI, the Lab orders page and the report.

Johnson 2018 (section 3.3.2, Figure 6) claims the latent release lowers Recall@n "for all values of n"
(n = 1..99, matched-pairs t-test). Issue #36, finding 2: a verdict read from n = 1 alone said "does not
lower" while Recall@10 was significantly higher. So the verdict here covers every n at once:

- Band: each Recall@n (raw and latent) with its 95% Wilson binomial interval, the simulations x trials
  breached days taken as independent trials (a tie's fractional credit counts as its expected hit).
- Test: per n, the paired t-test over simulations (`reident.paired_test`, the paper's), at
  n = 1..min(100, candidates - 1) (Recall@100 against 99 others is always 100%). Multiple-testing rule:
  Holm's step-down over those n, family-wise error `alpha` (0.05); an n with no difference has no p and
  counts as not significant.
- Verdict: "lowers" only when the latent Recall@n is significantly below raw at *every* tested n (the
  paper's claim); "raises" when it is significantly above at any n (naming those n); "lowers at some n"
  otherwise when below somewhere; else "no significant difference". Anything but "lowers" states that
  the latent release does not mitigate re-identification on these data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from engine.labs.reident import Recall, paired_test

ALPHA = 0.05
Z95 = 1.959963984540054  # two-sided 95% normal quantile
NOT_MITIGATION = "The latent release does not mitigate re-identification on these data"
RELEASE_WORDS = {"mean": "the encoder means", "sampled": "sampled latent vectors (z ~ N(mu, sigma))"}
Outcome = Literal["lowers", "raises", "lowers_somewhere", "no_difference", "untested"]


def wilson_band(share: np.ndarray, trials: int, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial share observed over `trials` independent trials."""
    p = np.clip(np.asarray(share, dtype=float), 0.0, 1.0)
    if trials < 1:
        return np.zeros_like(p), np.ones_like(p)
    z2n = z * z / trials
    centre = (p + z2n / 2) / (1 + z2n)
    half = z * np.sqrt(p * (1 - p) / trials + z2n / (4 * trials)) / (1 + z2n)
    # the interval always holds p; min / max keep it so where rounding at 0 or 1 would not
    return np.clip(np.minimum(centre - half, p), 0.0, 1.0), np.clip(np.maximum(centre + half, p), 0.0, 1.0)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted among the tests)."""
    p = np.asarray(p, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adjusted, 1.0)
    return out


def n_ranges(ns: list[int] | np.ndarray) -> str:
    """'1-7, 9, 12-99' for sorted whole numbers."""
    ns = [int(x) for x in ns]
    parts: list[str] = []
    i = 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        parts.append(str(ns[i]) if i == j else f"{ns[i]}-{ns[j]}")
        i = j + 1
    return ", ".join(parts)


@dataclass(frozen=True, eq=False)
class LatentVerdict:
    """Raw against one latent release at every tested n (`latent_verdict`)."""

    release: str  # "mean" or "sampled"
    latent_dim: int
    table: (
        pd.DataFrame
    )  # per tested n: recall_raw/_low/_high, recall_latent/_low/_high, t, p, p_holm, significant
    alpha: float
    breached_days: int  # simulations x trials behind each Recall@n
    simulations: int

    @property
    def higher(self) -> list[int]:
        """The n where the latent Recall@n is significantly above raw (Holm)."""
        t = self.table
        return t.n[t.significant & (t.recall_latent > t.recall_raw)].astype(int).tolist()

    @property
    def lower(self) -> list[int]:
        t = self.table
        return t.n[t.significant & (t.recall_latent < t.recall_raw)].astype(int).tolist()

    @property
    def outcome(self) -> Outcome:
        if self.simulations < 2:
            return "untested"
        if self.higher:
            return "raises"
        if len(self.lower) == len(self.table):
            return "lowers"
        return "lowers_somewhere" if self.lower else "no_difference"

    @property
    def mitigates(self) -> bool:
        """Only a release significantly below raw at every tested n is a mitigation (the paper's claim)."""
        return self.outcome == "lowers"

    def _figures(self, n: int) -> str:
        r = self.table[self.table.n == n].iloc[0]
        return (
            f"Recall@{n} {100 * r.recall_latent:.1f}% latent [{100 * r.latent_low:.1f}-{100 * r.latent_high:.1f}] "
            f"against {100 * r.recall_raw:.1f}% raw [{100 * r.raw_low:.1f}-{100 * r.raw_high:.1f}], "
            f"Holm p = {r.p_holm:.2g}"
        )

    def _headline(self, *extra: int) -> str:
        """Figures at n = 1, n = 10 (the paper's two headline n) and `extra`, each once."""
        tested = set(self.table.n.astype(int))
        return "; ".join(self._figures(n) for n in sorted({1, 10, *extra} & tested))

    def _largest(self, ns: list[int]) -> int:
        t = self.table.set_index("n").loc[ns]
        return int((t.recall_latent - t.recall_raw).abs().idxmax())

    def sentence(self) -> str:
        """One sentence: what the release does to Recall@n at every tested n, with figures and the rule."""
        what = f"Releasing {RELEASE_WORDS.get(self.release, self.release)} ({self.latent_dim} dimensions)"
        tested = len(self.table)
        span = f"n = 1-{int(self.table.n.max())}"
        rule = (
            f"paired t-test over {self.simulations} simulations per n, Holm-adjusted over the {tested} n "
            f"at family-wise {self.alpha:g}; bands: 95% Wilson over {self.breached_days:,} breached days"
        )
        if self.outcome == "untested":
            return (
                f"{what}: not tested, a paired test needs at least 2 simulations; {self._headline()}. "
                f"{NOT_MITIGATION} until it is shown below raw at every n."
            )
        if self.outcome == "lowers":
            worst = self._largest(self.lower)
            return f"{what} lowers re-identification at every {span} ({rule}); {self._headline(worst)}."
        if self.outcome == "raises":
            top = self._largest(self.higher)
            text = (
                f"{what} raises re-identification: Recall@n is significantly above raw at {len(self.higher)} of "
                f"{tested} n (n = {n_ranges(self.higher)}), most at n = {top}"
            )
            if self.lower:
                text += f"; below raw at {len(self.lower)} (n = {n_ranges(self.lower)}), so it does not lower it at every n"
            return f"{text}; {self._headline(top)} ({rule}). {NOT_MITIGATION}."
        if self.outcome == "lowers_somewhere":
            return (
                f"{what} does not lower re-identification at every n: significantly below raw at "
                f"{len(self.lower)} of {tested} n (n = {n_ranges(self.lower)}), above at none; "
                f"{self._headline()} ({rule}). {NOT_MITIGATION}."
            )
        return (
            f"{what} does not lower re-identification: no significant difference from raw at any {span}; "
            f"{self._headline()} ({rule}). {NOT_MITIGATION}."
        )


def latent_verdict(
    raw: Recall, latent: Recall, release: str, latent_dim: int, alpha: float = ALPHA
) -> LatentVerdict:
    """Raw against latent Recall@n (same draws) at every tested n, with bands and Holm's rule."""
    top = int(min(raw.n.max(), raw.n_candidates - 1)) if raw.n_candidates > 1 else 1
    test = paired_test(raw, latent)
    keep = (test.n <= top).to_numpy()
    trials = raw.per_simulation.shape[0] * raw.trials
    raw_lo, raw_hi = wilson_band(raw.mean, trials)
    lat_lo, lat_hi = wilson_band(latent.mean, trials)
    p = test.p.to_numpy()[keep]
    p_holm = holm(p)
    table = pd.DataFrame(
        {
            "n": test.n.to_numpy()[keep],
            "recall_raw": raw.mean[keep],
            "raw_low": raw_lo[keep],
            "raw_high": raw_hi[keep],
            "recall_latent": latent.mean[keep],
            "latent_low": lat_lo[keep],
            "latent_high": lat_hi[keep],
            "t": test.t.to_numpy()[keep],
            "p": p,
            "p_holm": p_holm,
            "significant": np.nan_to_num(p_holm, nan=1.0) < alpha,
        }
    )
    return LatentVerdict(release, latent_dim, table, alpha, trials, raw.per_simulation.shape[0])


def verdict_lines(
    raw: Recall, released: dict[str, Recall], latent_dim: int, alpha: float = ALPHA
) -> list[str]:
    """The statement every place renders: one verdict sentence per release (`latent_verdict`), then
    what the measurement does not cover (Johnson 2018 section 2.5's attacker only)."""
    lines = [latent_verdict(raw, rec, name, latent_dim, alpha).sentence() for name, rec in released.items()]
    known = "one breached day" if raw.query == "one_day" else "all of a patient's other days"
    lines.append(
        f"Measured for one attacker only: who knows {known} of lab orders in the same encoding, against "
        f"{raw.n_candidates - 1:,} other patients, {raw.trials:,} breached days in each of "
        f"{len(raw.per_simulation):,} simulations (section 2.5). It says nothing of an attacker who holds "
        "the trained model, of the uniqueness of a patient's whole set of labs (Figure 3: the latent "
        "release keeps one vector per patient-day, so their number per patient), or of lab values."
    )
    return lines
