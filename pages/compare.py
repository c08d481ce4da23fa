"""Compare releases: every release of the study side by side (issue 16; ui/views/compare.py)."""

from ui.context import current
from ui.views import compare

compare.render(current())
