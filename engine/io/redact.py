"""Secrets never leave in an output: one function hides the password of a database URL in every form.

`redact(url)` is what every record or display of a URL goes through (the study's load options and
sources, the IRB report's records, the sidebar's label, findings, the CLI's stderr and `--report`):

- the userinfo password (`postgresql://alice:***@host/db`), also when the password holds `@`, `/`,
  `:` or `?` (everything up to the last `@` of the authority is userinfo);
- query parameters that carry a secret (`password=`, `passwd=`, `pwd=`, `sslpassword=`, `secret=`,
  `token=`, `api_key=`, any case, also inside an url-encoded ODBC string, `PWD%3D...%3B`, also
  when the key itself is percent-encoded (`?%70assword=`, issue 40) or is the first pair of a value
  (`odbc_connect=PWD=...`);
- a service file (`?service=name`, libpq's pg_service.conf) is named, never read.

It never parses with a library that might give up on a malformed URL: the text is rewritten by the
rules above, so a URL that no driver can read is hidden all the same. `redact_text` hides the
passwords of every URL in free text (an error message that echoes its URL).
"""

from __future__ import annotations

import re

MASK = "***"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)(.*)$", re.S)
_KEYS = (
    "password", "sslpassword", "passwd", "pwd", "secret", "token",
    "api_key", "api-key", "apikey", "access_key", "access-key", "accesskey",
)  # fmt: skip
_ENC = "%(?:25)*"  # a percent sign, itself percent-encoded any number of times (`%2570` is `%70`)


def _char(c: str) -> str:
    """`c` written literally or percent-encoded (either case of a letter): a URL may spell `p` `%70`."""
    forms = {c.lower(), c.upper()}
    codes = "|".join(sorted(f"{ord(f):02X}" for f in forms))
    return f"(?:{re.escape(c)}|{_ENC}(?:{codes}))"


# a secret-bearing key, after a separator (also `=`: `odbc_connect=PWD=...` puts the password first,
# and encoded separators), then `=` or its encoded form, then the value up to the next separator
_QUERY_SECRET = re.compile(
    r"(?i)(?P<pre>^|[?&;=\s]|" + _ENC + r"(?:3B|26|3F|3D))"
    r"(?P<key>" + "|".join("".join(_char(c) for c in k) for k in sorted(_KEYS, key=len, reverse=True)) + r")"
    r"(?P<eq>=|" + _ENC + r"3D)"
    r"(?P<value>(?:(?!" + _ENC + r"(?:26|3B))[^&;#])*)"
)
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")


def _redact_query(text: str) -> str:
    return _QUERY_SECRET.sub(lambda m: f"{m.group('pre')}{m.group('key')}{m.group('eq')}{MASK}", text)


def redact(url: str) -> str:
    """`url` with every password hidden (module docstring); text that is not a URL is returned with
    its secret-bearing `key=value` pairs hidden."""
    url = str(url)
    m = _SCHEME.match(url)
    if m is None:
        return _redact_query(url)
    scheme, rest = m.group(1), m.group(2)
    # the authority's userinfo ends at its last `@`: prefer the last `@` before the query, else the
    # last `@` of all (a password may hold `?`); a password may hold `@`, so never the first
    query_at = rest.find("?")
    head = rest if query_at < 0 else rest[:query_at]
    at = head.rfind("@")
    if at < 0:
        at = rest.rfind("@")
    if at >= 0:
        userinfo, after = rest[:at], rest[at + 1 :]
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            rest = f"{user}:{MASK}@{after}"
    return scheme + _redact_query(rest)


def redact_text(text: str) -> str:
    """Free text with the password of every URL in it hidden (and any `password=...` pair)."""
    return _redact_query(_URL_IN_TEXT.sub(lambda m: redact(m.group(0)), str(text)))


__all__ = ["MASK", "redact", "redact_text"]
