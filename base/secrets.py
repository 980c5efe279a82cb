"""Credentials inside connection strings, found by parsing them, not by guessing where a password ends.

A store is named by a URL (`postgresql://user:password@host/db`, `http://user:password@host`), a URL with the
password in its query (`...?password=...`), or a libpq key/value DSN (`host=h password='a b\\' c'`). A password
may hold any character: quotes, spaces, `@`, `/`, `#`, `%` — raw, or percent-encoded as SQLAlchemy wants it. So:

* `url_secrets(text)` returns every form of every password in the string (as written, percent-decoded and
  percent-encoded), so text that quotes the store (an error message, a driver's repr) can be scrubbed of it;
* `redact_url(text)` is the string as it may be shown: the user and host kept, each password `***`;
* `scrub(text, secrets)` replaces each secret wherever it appears, and `scrub_fragments` also every run of
  `min_len` or more characters that is a piece of a secret (a parser that split a password at an `@` quotes
  the pieces, not the whole).

The user info of a URL ends at the last `@` of the string: a raw password may hold `@`, `/`, `?` and `#`, and a
host never holds `@`, so that choice can only hide more than the password, never less.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from urllib.parse import quote, unquote

__all__ = ["HIDDEN", "redact_url", "scrub", "scrub_fragments", "url_secrets"]

HIDDEN = "***"
_SCHEME = re.compile(r"^\s*(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<rest>.*)$", re.DOTALL)
_QUERY_KEYS = ("password", "passwd", "pwd", "secret", "token", "api_key", "apikey", "access_key")
_QUERY_PAIR = re.compile(
    r"(?P<head>[?&;](?:" + "|".join(_QUERY_KEYS) + r")=)(?P<val>[^&;#]*)", re.IGNORECASE
)
_DSN_KEY = re.compile(r"(?:^|\s)(?:password|passfile|sslpassword)\s*=", re.IGNORECASE)


def _forms(secret: str) -> set[str]:
    """A secret as written, percent-decoded and percent-encoded (the forms a driver may quote)."""
    out = {secret}
    with contextlib.suppress(UnicodeDecodeError):
        out.add(unquote(secret, errors="strict"))
    out.add(quote(secret, safe=""))
    out.add(quote(secret))
    return {s for s in out if s}


def _dsn_password(text: str) -> str | None:
    """The password of a libpq key/value DSN, or None when `text` is not one (or has none)."""
    if not _DSN_KEY.search(text):
        return None
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return None
    try:
        params = conninfo_to_dict(text)
    except Exception:
        return None
    value = params.get("password")
    return None if value in (None, "") else str(value)


def _dsn_value_span(text: str) -> list[tuple[int, int]]:
    """Where the values of `password=` pairs of a key/value DSN stand (quoted with '' and \\ escapes, or bare)."""
    spans = []
    for m in re.finditer(r"(?:^|\s)password\s*=\s*", text, re.IGNORECASE):
        i = m.end()
        if i < len(text) and text[i] == "'":
            j = i + 1
            while j < len(text) and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            spans.append((i, min(j + 1, len(text))))
        else:
            j = i
            while j < len(text) and not text[j].isspace():
                j += 1
            spans.append((i, j))
    return spans


def url_secrets(text: str | None) -> list[str]:
    """Every password in a URL or DSN, in each form it may be quoted in, longest first."""
    if not text:
        return []
    found: set[str] = set()
    m = _SCHEME.match(text)
    if m:
        rest = m.group("rest")
        at = rest.rfind("@")
        if at >= 0:
            _user, sep, password = rest[:at].partition(":")
            if sep and password:
                found |= _forms(password)
        for q in _QUERY_PAIR.finditer(rest):
            if q.group("val"):
                found |= _forms(q.group("val"))
    else:
        password = _dsn_password(text)
        if password:
            found |= _forms(password)
        for start, end in _dsn_value_span(text):
            raw = text[start:end]
            if raw:
                found.add(raw)
                found.add(raw.strip("'"))
    return sorted((s for s in found if s), key=len, reverse=True)


def redact_url(text: str | None) -> str:
    """`text` (a URL, a DSN, a path) as it may be shown: every password `***`, the rest kept."""
    if not text:
        return text or ""
    m = _SCHEME.match(text)
    if m:
        scheme, rest = m.group("scheme"), m.group("rest")
        at = rest.rfind("@")
        if at >= 0:
            user, sep, password = rest[:at].partition(":")
            if sep and password:
                rest = f"{user}:{HIDDEN}@{rest[at + 1:]}"
        rest = _QUERY_PAIR.sub(lambda q: q.group("head") + (HIDDEN if q.group("val") else ""), rest)
        return scheme + rest
    for start, end in reversed(_dsn_value_span(text)):
        text = text[:start] + HIDDEN + text[end:]
    return text


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each secret replaced by `***` (longest first)."""
    for s in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(s, HIDDEN)
    return text


def scrub_fragments(text: str, secrets: Iterable[str], min_len: int = 4) -> str:
    """`text` with every run of at least `min_len` characters that is a piece of a secret replaced by `***`.
    Quadratic in the lengths: for short texts (a readiness detail), where a parser may have quoted a piece of a
    password it split."""
    pool = [s for s in set(secrets) if len(s) >= min_len]
    if not pool or not text:
        return text
    text = scrub(text, pool)
    out: list[str] = []
    i = 0
    while i < len(text):
        best = 0
        length = min_len
        while i + length <= len(text) and any(text[i:i + length] in s for s in pool):
            best = length
            length += 1
        if best:
            out.append(HIDDEN)
            i += best
        else:
            out.append(text[i])
            i += 1
    return "".join(out)
