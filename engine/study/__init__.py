"""A study and the ways methods are run in it (ARCHITECTURE section 8).

- `parameters`: every parameter declared once (type, bounds or choices, default, help) and one validator
- `runs`: one way to run a method: typed, validated settings per method, each making a `Release`
- `study`: the study (data fingerprints, adversary, k, releases), saved to JSON and rebuilt headless
- `compare`: every release of a study side by side, measured against the original cohort
- `experiments`: each paper's method over a grid of parameters (every sweep: UI, CLI, benchmarks)
"""
