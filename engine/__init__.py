"""CohortShield's computation: plain Python, importable and testable without Streamlit."""
