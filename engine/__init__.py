"""CohortShield's computation: plain Python, importable and testable without Streamlit."""

__version__ = "0.1.0"  # the version of pyproject.toml (tests/test_report.py checks they agree)
