"""CohortShield's server: `make run` (`streamlit run serve.py`) serves app.py through `st.App`, with the
download guard in front of every request (ui/media_guard.py, issue 40): a download is served only to
the session that made it, once, within `COHORTSHIELD_DOWNLOAD_SECONDS`. app.py stays the script each
session runs (and the one the tests run).
"""

import streamlit as st

from ui import media_guard

app = st.App("app.py", middleware=media_guard.middleware())

if __name__ == "__main__":  # `python serve.py`
    app.run()
