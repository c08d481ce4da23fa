"""Risk estimated from the cohort alone, when the population is not at hand (issue 27).

- `kmap`: k-map without the population: each record's population distinguishability estimated from its
  count in the cohort and the sampling fraction (Poisson and zero-truncated Poisson models, as ARX; the
  negative binomial, default), exact for sets holding a stated selection code (issue #36)
- `explain`: why a record is at risk (the minimal part of what the attacker knows that singles it out)
  and the cheapest change of the release (generalize a category in every record, else suppress codes of
  the record) that brings it to k, re-verified by `engine.risk` (issue 35)
"""
