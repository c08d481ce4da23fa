"""Risk estimated from the cohort alone, when the population is not at hand (issue 27).

- `kmap`: k-map without the population: each record's population distinguishability estimated from its
  count in the cohort and the sampling fraction (Poisson and zero-truncated Poisson models, as ARX)
"""
