"""UI-side helpers for the Streamlit pages: session context, caching wrappers, charts, method tabs.

Nothing here holds an algorithm: it calls `engine/` and draws. Charts are built by functions that take
the engine's plain results (DataFrames, dataclasses).
"""
