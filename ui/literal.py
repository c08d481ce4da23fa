"""Untrusted text in the app, shown literally: the one helper every page and tab uses.

Streamlit renders the body of `st.error`, `st.warning`, `st.info`, `st.success`, `st.caption`,
`st.markdown`, headers and widget labels as Markdown (images in labels included). Anything read from
an upload (codes, ids, file names, column names, loader and engine messages quoting them) goes through
`md()` before it is placed in such text, or is shown in `st.text` / `st.code` / `st.dataframe`,
which never interpret it. See `engine.report.markdown` for the rule.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.report.markdown import code, escape

md = escape  # untrusted text placed in Markdown
md_code = code  # untrusted text as a literal code span


def error(message: object, where: Any = st) -> None:
    """An error box whose whole message is literal (e.g. an exception quoting a file's content)."""
    where.error(escape(message))


def warning(message: object, where: Any = st) -> None:
    """A warning box whose whole message is literal."""
    where.warning(escape(message))


__all__ = ["error", "md", "md_code", "warning"]
