"""Views for AppTests of what a page's job sees in its pool worker (tests/test_job_session.py): each
computes a value in a job (`ui.progress.run`) and here, and writes both."""

from __future__ import annotations

import streamlit as st

from ui import progress
from ui.context import Context


def data_of_in_a_job(ctx: Context) -> None:
    """`ui.study.data_of`: the study's reference to the data loaded now, with the load options a
    release records (a study reopened loads its data with them)."""
    from ui.study import data_of

    there = progress.run("Data in a job", lambda step: data_of(ctx), key="job_data_of", job=1, probe=False)
    st.write(f"job: {there!r}")
    st.write(f"here: {data_of(ctx)!r}")
