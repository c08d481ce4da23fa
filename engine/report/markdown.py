"""Untrusted text inside Markdown, shown literally (issue 12, finding 7).

Codes, patient ids, file names, column names and loader messages come from uploaded files. Put into
Markdown as they are, `![x](http://host/leak.png)` is an image the reader's browser fetches, `[x](…)`
a link, `*`, `_`, `#` and `$` change the layout. `escape` backslash-escapes every ASCII punctuation
character, which CommonMark defines as always literal (so no image, link, autolink, HTML, emphasis,
heading, list, table or math can start inside the text), and breaks the web addresses GitHub-flavoured
Markdown would turn into links with an invisible word joiner, and `code` writes a code span whose fence
is longer than any run of backticks in the text (CommonMark's rule), so nothing ends it early.
Used by the app (`ui.literal`) and the Markdown report (`engine.report.report`).
"""

from __future__ import annotations

import re
import string

_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029]+")
# GitHub-flavoured autolink literals (`http://…`, `www.…`, `a@b.c`) are found in the text after
# escapes are resolved (Streamlit's renderer, GitHub): an invisible word joiner after `:` and `@`
# and between `www` and its dot leaves no address to find, and the text reads the same.
WORD_JOINER = "\u2060"
_SCHEME_OR_MAIL = re.compile(r"(\\[:@])")
_WWW = re.compile(r"((?i:www))(?=\\\.)")


def escape(text: object) -> str:
    """`text` as Markdown that renders as exactly these characters (line breaks become spaces), with
    an invisible word joiner (U+2060) after every `:` and `@` and after `www` before a dot."""
    escaped = _PUNCTUATION.sub(r"\\\1", _LINE_BREAKS.sub(" ", str(text)))
    return _WWW.sub("\\1" + WORD_JOINER, _SCHEME_OR_MAIL.sub("\\1" + WORD_JOINER, escaped))


def code(text: object) -> str:
    """`text` as a Markdown code span (literal, monospace; line breaks become spaces)."""
    body = _LINE_BREAKS.sub(" ", str(text))
    if not body:
        return ""
    runs = [len(r) for r in re.findall(r"`+", body)]
    fence = "`" * (max(runs, default=0) + 1)
    # CommonMark strips one space from each end when both ends are spaces (and not all is space): pad
    # then, and when a backtick touches the fence
    spaced = body[0] == " " and body[-1] == " " and body.strip(" ") != ""
    pad = " " if spaced or body[0] == "`" or body[-1] == "`" else ""
    return f"{fence}{pad}{body}{pad}{fence}"
