"""Risk: the re-identification risk of the loaded cohort (ui/views/risk.py)."""

from ui.context import current
from ui.views import risk

risk.render(current())
