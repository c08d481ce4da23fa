"""Retention and loss measures, one submodule per family of measures.

- `coverage`: instances retained against the original cohort, catch-all items, code coverage (issue 16)
- `censoring`: Censoring Utility Loss (CUL) and its statistics (Tamersoy 2010, Tables 1-2)
- `retention`: Diagnosis Count and Code Count (Heatherly 2013, Figure 15, Tables 1-3)
- `queries`: utility constraints satisfied and relative error of case-count queries (Loukides 2010)
- `loss`: ILM, ALM and AvgRE of trajectories (Tamersoy 2011 thesis, chapter IV)
- `phewas`: PheWAS on original and released data, associations lost and false (Heatherly 2013, Table 4)
"""
