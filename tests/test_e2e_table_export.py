"""No unaudited export from a table (issue 40, part of finding 6): Streamlit's table toolbar offers
"Download as CSV" of what a `st.dataframe` shows (source ids, PheWAS cells the app's own CSV buttons
suppress) with no audit entry. The shipped .streamlit/config.toml sets `client.disableDataExport`.

The browser test serves a one-table page from the checkout itself (so Streamlit reads the shipped
config.toml, as `make run` and every browser test's server do) and hovers the table: its toolbar has
no download.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from browser_support import ROOT, WAIT_MS, chromium, free_port, require_browser, served_app

PAGE = "import pandas as pd\nimport streamlit as st\nst.dataframe(pd.DataFrame({'patient': ['P1', 'P2']}))\n"


def test_the_shipped_config_disables_table_export() -> None:
    shipped = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert shipped["client"]["disableDataExport"] is True


@pytest.mark.e2e
@pytest.mark.xdist_group("browser")
def test_a_served_table_offers_no_download(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    require_browser()
    script = tmp_path / "table.py"
    script.write_text(PAGE)
    with served_app(free_port(), tmp_path / "streamlit.log", script=script) as url, chromium() as browser:
        page = browser.new_page()
        page.goto(url)
        table = page.locator('[data-testid="stDataFrame"]')
        expect(table).to_be_visible(timeout=WAIT_MS)
        table.hover()
        toolbar = page.locator('[data-testid="stElementToolbar"]')
        expect(toolbar.get_by_role("button", name="Search")).to_be_visible(timeout=WAIT_MS)  # drawn
        assert toolbar.get_by_role("button", name="Download as CSV").count() == 0
