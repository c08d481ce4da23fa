"""CohortShield: Streamlit entry point. Navigation over pages/ and the shared sidebar.

Run with `make run`. The sidebar (ui/sidebar.py) holds the shared choices: dataset, which group is
the population and which the cohort, the adversary's scope and knowledge, and k. It stores a
`ui.context.Context` in session state for the pages.
"""

import threading
from pathlib import Path

import streamlit as st

from ui import admission, auth, cache, heap, media_guard, navigation, resume, sidebar, state, worker
from ui.context import follow_deep_link

# The favicon from the checkout's assets/ (found through ui/, also when AppTest runs a copy of this
# script), sent inline as a data URL: a material icon here is fetched by the browser from
# fonts.gstatic.com, and nothing may be fetched at run time (tests/test_setup_split.py).
PAGE_ICON = Path(sidebar.__file__).resolve().parent.parent / "assets" / "favicon.svg"
st.set_page_config(page_title="CohortShield", page_icon=PAGE_ICON, layout="wide")
media_guard.require_guard()  # served through serve.py only: downloads to their session alone (issue 40)
user = auth.gate()  # first: no page without a signed-in user (ui/auth.py); shows who in the sidebar

PAGES = [
    navigation.page("pages/cohort.py", title="Cohort", icon=":material/groups:", default=True),
    navigation.page("pages/risk.py", title="Risk", icon=":material/query_stats:"),
    navigation.page("pages/anonymize.py", title="Anonymize", icon=":material/shield:"),
    navigation.page("pages/tradeoffs.py", title="Trade-offs", icon=":material/balance:"),
    navigation.page("pages/phewas.py", title="PheWAS", icon=":material/genetics:"),
    navigation.page("pages/labs.py", title="Lab orders", icon=":material/science:"),
    navigation.page("pages/report.py", title="Report", icon=":material/description:"),
    navigation.page("pages/compare.py", title="Compare releases", icon=":material/compare:"),
    navigation.page("pages/glossary.py", title="Glossary", icon=":material/menu_book:"),
]
if user.admin:  # COHORTSHIELD_ADMINS, or the single user of local mode
    PAGES.append(navigation.page("pages/audit.py", title="Audit log", icon=":material/policy:"))

page = navigation.navigation(PAGES)
# a run of this session (issue 38), in turn (issue 40), with this session's memos (issue 24)
with state.running(), admission.admitted(), cache.engine_scope():
    follow_deep_link()
    ctx = sidebar.render()
    try:
        resume.serve(page)  # the Resume offer, the page, then the save of the work (ui/resume.py)
    finally:  # also when the page stops or reruns
        if heap.settle(data_loaded=ctx is not None):  # once per process (ui/heap.py)
            worker.preload_ahead(threading.current_thread())  # the kernels, before the first worker
