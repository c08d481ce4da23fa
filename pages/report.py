"""Report: the study's releases verified under all four adversaries, the IRB report (HTML, PDF,
JSON), the release bundle, and the study file (save, and reopen with a rebuild of every release;
ui/views/report.py)."""

from ui.context import current
from ui.views import report

report.render(current())
