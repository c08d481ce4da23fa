"""Cohort: the validation report of the loaded files, and population and cohort side by side
(ui/views/cohort.py)."""

from ui.context import through_entry_point
from ui.views import cohort

through_entry_point()  # a deep link on a fresh server: through app.py (ui/context.py)
cohort.render()
