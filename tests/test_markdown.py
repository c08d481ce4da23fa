"""Untrusted text in Markdown is literal (issue 12, finding 7): `engine.report.markdown` and the report."""

from __future__ import annotations

import re
import string

from apptest_support import shown
from hypothesis import example, given
from hypothesis import strategies as st

from engine.report.markdown import code, escape

LEAK = "![x](http://127.0.0.1:8999/leak.png)"
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def _unescaped_punctuation(markdown: str) -> list[str]:
    """ASCII punctuation not preceded by a backslash (each backslash escapes the next character)."""
    out, i = [], 0
    while i < len(markdown):
        if markdown[i] == "\\":
            i += 2
            continue
        if markdown[i] in string.punctuation:
            out.append(markdown[i])
        i += 1
    return out


@given(st.text())
@example(LEAK)
@example("[link](javascript:alert(1)) <img src=x> *em* $x$ # h\n===\n`code`")
@example("see http://127.0.0.1:8999/x, www.example.org or mail a@b.org")
def test_escaped_text_has_no_markup_and_shows_every_character(text):
    md = escape(text)
    assert _unescaped_punctuation(md) == []
    assert "\n" not in md and "\r" not in md
    assert shown(md) == re.sub(r"[\r\n\u2028\u2029]+", " ", text).replace("\u2060", "")
    # no address left for GitHub-flavoured autolinks once the escapes are resolved
    resolved = re.sub(r"\\(.)", r"\1", md)
    assert re.search("[:@](?!\u2060)", resolved) is None
    assert re.search(r"(?i)www\.", resolved) is None


@given(st.text(alphabet=st.sampled_from("`a! [](")))
@example("``a`")
@example("`")
@example(" [ ")
def test_code_span_fence_is_longer_than_any_backtick_run_inside(text):
    span = code(text)
    if not text:
        assert span == ""
        return
    fence = re.match(r"`+", span).group(0)
    inner = span[len(fence) : -len(fence)]
    assert span.endswith(fence) and max((len(r) for r in re.findall(r"`+", inner)), default=0) < len(fence)
    # CommonMark: one space is stripped from each end when both ends are spaces and not all is space
    body = inner[1:-1] if inner.startswith(" ") and inner.endswith(" ") and inner.strip(" ") else inner
    assert body == text
