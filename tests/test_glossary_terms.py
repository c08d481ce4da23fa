"""Issue 26, finding 3: every term a page shows in a metric's label or a help text is in the glossary,
and the Glossary page is a searchable list of them, each with its paper and an example, no source
paths. The labels and help texts are collected from AppTest runs of each page on the shipped sample."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from apptest_support import page_app, run_view, shown
from streamlit.testing.v1 import AppTest

from engine.report.glossary import TERMS, glossary_frame, term, unknown_terms

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)

PAGES = ["pages/cohort.py", "pages/risk.py", "pages/phewas.py", "pages/labs.py", "pages/compare.py"]
VIEWS = ["ui.views.gccens", "ui.views.heatherly", "ui.views.profiles", "ui.views.lda"]


def _walk(node):
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            yield from _walk(child)
    else:
        yield node


def labels_and_help(at: AppTest) -> list[tuple[str, str]]:
    """(where, text) of every metric label and every help text of a run (main area and sidebar)."""
    out = []
    for node in _walk(at._tree):
        proto = getattr(node, "proto", None)
        kind = getattr(node, "type", "")
        if proto is None:
            continue
        if kind == "metric":
            out.append((f"metric {proto.label!r}", proto.label))
        try:
            help_text = getattr(proto, "help", "")
        except AttributeError:
            help_text = ""
        if isinstance(help_text, str) and help_text:
            out.append((f"help of {kind} {getattr(proto, 'label', '')!r}", help_text))
    return out


def _run_page(page: str) -> AppTest:
    at = page_app(page, state={"phewas_heatherly": False})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("target", PAGES + VIEWS)
def test_every_term_of_a_label_or_help_is_in_the_glossary(target):
    at = run_view(target, "anonymize", adversary_scope="population") if target in VIEWS else _run_page(target)
    texts = labels_and_help(at)
    assert texts, target
    missing = {(where, t) for where, text in texts for t in unknown_terms(text)}
    assert not missing, sorted(missing)


def test_the_brief_terms_are_in_the_glossary():
    for words in ("PheWAS", "VAE", "QQ-plot", "Recall@n", "method-internal", "CUL", "DEMO_D", "DC Local %"):
        assert not unknown_terms(words), words


def test_every_term_has_a_paper_and_an_example_and_no_source_path():
    for t in TERMS.values():
        assert t.paper and t.example, t.key
        for text in (t.sentence, t.example, t.paper, t.where, t.help):
            assert not re.search(r"\w+/\w+\.py|\.py\b|engine/", text), (t.key, text)
    assert list(glossary_frame().columns) == ["term", "meaning", "example", "paper", "where defined"]


def test_glossary_page_is_a_searchable_full_width_list():
    at = page_app("pages/glossary.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    search = at.text_input(key="glossary_search")
    text = "\n".join(shown(m.value) for m in at.markdown)
    assert all(t.name in text for t in TERMS.values())
    assert ".py" not in text and "engine/" not in text
    assert not at.dataframe  # no truncated grid
    search.set_value("qq").run()
    text = "\n".join(shown(m.value) for m in at.markdown)
    assert term("qq_plot").name in text and term("cul").name not in text, text
    search.set_value("nothing matches this").run()
    assert any("No term" in i.value for i in at.info)
