"""Audit log (administrators only; app.py adds the page for `ui.auth` administrators): every entry of
the audit log of exports and downloads (engine/audit/log.py), and a check of its hash chain."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.audit.log import entries, log_path
from engine.audit.verify import verify
from ui import literal
from ui.auth import USER_KEY
from ui.context import through_entry_point
from ui.state import ABSENT, declare

_VERIFIED = "_audit_verified"  # the last `audit verify` result shown
declare("pages/audit.py", held={_VERIFIED: ABSENT})

through_entry_point()  # a deep link on a fresh server goes through app.py and its sign-in gate
user = st.session_state.get(USER_KEY)
if user is None or not user.admin:  # the navigation offers this page to administrators only
    st.error("The audit log is for administrators (COHORTSHIELD_ADMINS).")
    st.stop()

st.title("Audit log")
path = log_path()
st.caption(
    literal.md(
        f"Every export and download, one line each, chained by sha256: {path} (COHORTSHIELD_AUDIT_LOG). "
        "Check it from a shell with `python -m engine audit verify`."
    )
)
if st.button("Verify the chain", type="primary", key="audit_verify"):
    st.session_state[_VERIFIED] = verify(path)
result = st.session_state.get(_VERIFIED)
if result is not None:
    if result.ok:
        st.success(literal.md(result.message()))
    else:
        literal.error("The chain is broken:\n\n" + result.message())
rows = entries(path)
if not rows:
    st.info("The audit log holds no entry yet.")
else:
    frame = pd.DataFrame(rows)
    columns = ["seq", "time", "user", "what", "file_name", "release", "adversary", "k", "study", "sha256"]
    st.dataframe(frame[[c for c in columns if c in frame]].iloc[::-1], hide_index=True, key="audit_all")
