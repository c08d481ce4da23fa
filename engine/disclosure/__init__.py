"""Statistical disclosure control of what leaves besides the release files (issue 28): small cells
of every count table (`cells`)."""
