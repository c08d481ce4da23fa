"""What leaves the tool for people to read: the IRB report, its bundle and the app's plain-language texts.

- `report`: the IRB report of a study as JSON-ready data (`build_report`, `Report`; issue 13)
- `render`: that report as a self-contained HTML page and a PDF, from the same blocks
- `bundle`: the one zip an officer hands over (report, verified release files, study file, manifest)
- `markdown`: untrusted text shown literally inside Markdown (issue 12)
- `glossary`: the glossary and teach-mode texts every page and widget shows (issue 16)
"""
