"""PheWAS: original vs released data (Heatherly 2013, Table 4 and Figures 1-12; ui/views/phewas.py)."""

from ui.context import current
from ui.views import phewas

phewas.render(current())
