"""CohortShield: Streamlit entry point. Navigation over pages/ and the shared sidebar.

Run with `make run`. The sidebar (ui/sidebar.py) holds the shared choices: dataset, which group is
the population and which the cohort, the adversary's scope and knowledge, and k. It stores a
`ui.context.Context` in session state for the pages.
"""

import streamlit as st

from ui import sidebar

st.set_page_config(page_title="CohortShield", page_icon="🛡️", layout="wide")

PAGES = [
    st.Page("pages/cohort.py", title="Cohort", icon="👥", default=True),
    st.Page("pages/risk.py", title="Risk", icon="🎯"),
    st.Page("pages/anonymize.py", title="Anonymize", icon="🛡️"),
    st.Page("pages/tradeoffs.py", title="Trade-offs", icon="⚖️"),
    st.Page("pages/phewas.py", title="PheWAS", icon="🧬"),
    st.Page("pages/labs.py", title="Lab orders", icon="🧪"),
    st.Page("pages/report.py", title="Report", icon="📄"),
]

navigation = st.navigation(PAGES)
sidebar.render()
navigation.run()
