"""Lab orders: uniqueness, one-day re-identification and the latent-space release (Johnson 2018);
the view is ui/views/labs.py."""

from ui.context import current
from ui.views.labs import render

render(current())
