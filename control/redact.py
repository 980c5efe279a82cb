"""Text that leaves the server — job errors and logs, trace and analysis errors, publish errors, health details,
API answers, process logs — goes through here first.

* `redact(text)` hides credentials: the password of any `scheme://user:password@host` URL, `password=...` /
  `token=...` / `secret=...` pairs (libpq DSNs, query strings), bearer tokens and tailtune API tokens.
* `redact_url(url)` (from `base.secrets`) parses a store's URL or DSN and hides its password, whatever
  characters it holds.
* `public(text, settings)` also removes the passwords of the stores `settings` names, wherever they appear, and
  server paths: TAILTUNE_HOME, the temp folder, the Python installation and the working directory become
  relative (`uploads/x.trace`), any other absolute file path becomes its file name. The process log (stderr)
  keeps the full story, tracebacks included, but credentials are hidden there too (`RedactingFormatter`).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from pathlib import Path

from base.secrets import redact_url, scrub, url_secrets
from base.settings import Settings

__all__ = ["RedactingFormatter", "install_log_redaction", "public", "redact", "redact_url", "settings_secrets"]

_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/@:'\"]*):(?P<pw>[^\s@'\"]*)@")
_KV_SECRET = re.compile(
    r"(?P<key>\b(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)\s*[=:]\s*)(?P<q>['\"]?)"
    r"(?P<val>[^\s'\"&;,)]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<head>\bBearer\s+)[A-Za-z0-9._~+/=\-]+", re.IGNORECASE)
_API_TOKEN = re.compile(r"\btt_[A-Za-z0-9_\-]{16,}")
HIDDEN = "***"


def redact(text: str) -> str:
    """`text` without the credentials it may carry."""
    if not text:
        return text
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}:{HIDDEN}@", text)
    text = _KV_SECRET.sub(lambda m: f"{m.group('key')}{m.group('q')}{HIDDEN}", text)
    text = _BEARER.sub(lambda m: f"{m.group('head')}{HIDDEN}", text)
    return _API_TOKEN.sub(HIDDEN, text)


def settings_secrets(settings: Settings | None) -> list[str]:
    """The passwords inside the stores' URLs of `settings` (metadata DB, MLflow, Optuna), in every form."""
    if settings is None:
        return []
    out: list[str] = []
    for url in (settings.database_url, settings.mlflow_tracking_uri, settings.optuna_storage):
        out += url_secrets(url)
    return out


def _roots(settings: Settings | None) -> list[str]:
    roots = []
    if settings is not None:
        roots.append(str(settings.home_dir))
    for extra in (tempfile.gettempdir(), sys.prefix, sys.base_prefix, os.getcwd(), str(Path.home())):
        roots.append(str(Path(extra).resolve()))
        roots.append(extra)
    # longest first, so TAILTUNE_HOME inside the working directory is cut as a whole
    return sorted({r.rstrip("/") for r in roots if r and r != "/"}, key=len, reverse=True)


_ABS_PATH = re.compile(r"(?<![\w:/.])(/(?:[^\s/'\"():,;]+/)+)([^\s/'\"():,;]*)")


def public(text: str | None, settings: Settings | None = None) -> str:
    """`text` as a client may see it: no credentials, no server paths, no traceback frames."""
    if not text:
        return text or ""
    text = redact(scrub(text, settings_secrets(settings)))
    for root in _roots(settings):
        text = text.replace(root + "/", "").replace(root, ".")
    return _ABS_PATH.sub(lambda m: m.group(0) if m.group(1).startswith("/api/") else m.group(2), text)


class RedactingFormatter(logging.Formatter):
    """A log formatter that hides credentials in the whole formatted record (message, arguments, traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def install_log_redaction(*loggers: str) -> None:
    """Wrap the formatter of every handler of the root logger (and the named loggers) so credentials never
    reach the process log."""
    for name in ("", *loggers):
        for handler in logging.getLogger(name).handlers:
            inner = handler.formatter or logging.Formatter()
            if isinstance(inner, _Wrapped):
                continue
            handler.setFormatter(_Wrapped(inner))


class _Wrapped(logging.Formatter):
    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return redact(self.inner.format(record))
