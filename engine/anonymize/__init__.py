"""One module per anonymization method, each returning an `engine.release.Release`.

- `censor`: GCCens (Tamersoy 2010; thesis chapter III)
- `population`: frequency-bin generalization under utility constraints (Heatherly 2013)
- `profiles`: PPE, UGACLIP and ACLIP (Loukides 2010)
- `trajectories`: the Longitudinal Data Anonymizer, Baseline / A-GS alignment, MDAV (thesis ch. IV)
"""
