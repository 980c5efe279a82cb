"""Pages: the Jinja2 environment (autoescaped), the security headers every console answer carries, the page and
error renderers, and `ConsoleRoute` — the console's routes answer with pages, never the API's JSON: no session →
a redirect to the sign-in page; a refusal (CSRF, read scope) → an error page; a service error of a form → back to
the page with the error as a message."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit
from zoneinfo import ZoneInfo

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from base.errors import BadInputError, NotFoundError, TailtuneError
from base.settings import get_settings
from control.kinds import operations
from control.model_text import value_fields
from service.console.session import FLASH_COOKIE, SignInRequired, Viewer, pop_flash, set_flash, viewer_of
from service.deps import database_for
from service.errors import HTTP_CODES, Forbidden, ServiceError, error_body

__all__ = [
    "HEADERS",
    "HTMX",
    "STATIC_DIR",
    "ConsoleRoute",
    "error_page",
    "fragment",
    "page",
    "plotly_js",
    "static_files",
]

_HERE = Path(__file__).resolve().parent
STATIC_DIR = _HERE / "static"

#: htmx, vendored with its license under static/vendor/ (docs/console.md): the npm package `htmx.org` at this
#: version (its tarball's integrity as the npm registry lists it) and the sha256 of its `dist/htmx.min.js`, which a
#: test checks the served file against.
HTMX = {
    "version": "2.0.11",
    "npm_integrity": "sha512-Thx/WtpeOQqSrqBCw/A1cwGJGg4UrVa3+sW0GmrM3p4gJgO89ecH4qtbnyzDDWFvBTqjnIMCgELTNt636dtamA==",
    "sha256": "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717",
}

#: Every console answer: scripts and styles from this server only (plotly.js sets inline styles on its SVG),
#: no framing, no referrer to other sites.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def plotly_js() -> Path:
    """plotly.js as the plotly wheel ships it (served by the console itself: no CDN)."""
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def static_files() -> dict[str, Path]:
    """The files under /static/: the console's own, htmx (vendored) and plotly.js (from the plotly package)."""
    return {
        "console.css": STATIC_DIR / "console.css",
        "console.js": STATIC_DIR / "console.js",
        "htmx.min.js": STATIC_DIR / "vendor" / "htmx.min.js",
        "plotly.min.js": plotly_js(),
    }


_versions: dict[str, str] = {}


def _static_url(name: str) -> str:
    """`/static/NAME?v=HASH`: the files are cached for a year; a changed file has a new URL."""
    if name not in _versions:
        path = static_files()[name]
        _versions[name] = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return f"/static/{name}?v={_versions[name]}"


def _as_dt(value: Any, tz: str | None = None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        dt = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    else:
        dt = datetime.fromtimestamp(float(value), UTC)
    return dt.astimezone(ZoneInfo(tz)) if tz else dt


def _when(value: Any, tz: str | None = None) -> str:
    dt = _as_dt(value, tz)
    if dt is None:
        return "—"
    return dt.strftime("%Y-%m-%d %H:%M:%S ") + (dt.tzname() or "UTC")


def _ago(value: Any) -> str:
    dt = _as_dt(value)
    if dt is None:
        return "never"
    s = (datetime.now(UTC) - dt).total_seconds()
    if s < 0:
        return "in the future"
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            n = int(s // size)
            return f"{n} {unit}{'s' if unit == 'day' and n != 1 else ''} ago"
    return f"{int(s)} s ago"


def _bytes(n: Any) -> str:
    if n is None:
        return "—"
    size = float(n)
    if size < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}"
    return f"{size:.1f} TiB"


def _num(x: Any, digits: int = 3) -> str:
    if x is None or isinstance(x, bool):
        return "—" if x is None else str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        return f"{x:.{digits}g}" if abs(x) < 1e6 else f"{x:,.0f}"
    return str(x)


def _ms(x: Any) -> str:
    return "—" if x is None else f"{float(x):.3g} ms"


def _pct(x: Any) -> str:
    """A signed percentage to 0.1 (one that rounds to zero is +0.0 %, never −0.0 %)."""
    if x is None:
        return "—"
    shown = round(float(x), 1)
    return f"{shown if shown != 0 else 0.0:+.1f} %"


def _short(v: Any, limit: int = 100) -> str:
    """A value in a line: JSON for objects and lists, cut at `limit` characters."""
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _params(p: Any) -> str:
    if not isinstance(p, Mapping) or not p:
        return "defaults"
    return ", ".join(f"{k}={_num(v)}" for k, v in sorted(p.items()))


def _body_fields(kind: str) -> frozenset[str]:
    """The body fields only some kinds have that kind `kind` has (`server`, `driver`, `tables`)."""
    return operations(kind).body_fields


_env = Environment(
    loader=FileSystemLoader(_HERE / "templates"),
    autoescape=select_autoescape(["html"]),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters.update(when=_when, ago=_ago, bytes=_bytes, num=_num, ms=_ms, pct=_pct, params=_params, short=_short,
                    body_fields=_body_fields, fields=value_fields)
_env.globals.update(static=_static_url)


def _headers(response: Response) -> Response:
    for k, v in HEADERS.items():
        response.headers.setdefault(k, v)
    return response


def page(
    request: Request, template: str, viewer: Viewer | None, *, status_code: int = 200, **context: Any
) -> HTMLResponse:
    """A whole page: the layout with its navigation, the viewer, the flash message the last form left."""
    flash = pop_flash(request)
    html = _env.get_template(template).render(
        request=request, viewer=viewer, flash=flash, path=request.url.path, **context,
    )
    response = HTMLResponse(html, status_code=status_code)
    if flash is not None:
        response.delete_cookie(FLASH_COOKIE, path="/")
    return _headers(response)  # type: ignore[return-value]


def fragment(request: Request, template: str, viewer: Viewer | None, **context: Any) -> HTMLResponse:
    """A part of a page that htmx swaps in (live job progress, the trace list)."""
    html = _env.get_template(template).render(request=request, viewer=viewer, path=request.url.path, **context)
    return _headers(HTMLResponse(html))  # type: ignore[return-value]


def _detail(exc: Exception) -> tuple[int, str, list[str]]:
    """(status, one line, the problems as lines) of an error a page reports."""
    if isinstance(exc, ServiceError):
        named = exc.status_code == 422 and exc.field and exc.field not in exc.detail
        field = f"{exc.field}: " if named else ""
        return exc.status_code, f"{field}{exc.detail}", []
    if isinstance(exc, BadInputError):
        lines = [str(p) for p in exc.problems]
        return 422, lines[0], lines[1:]
    if isinstance(exc, NotFoundError):
        return 404, exc.message, []
    if isinstance(exc, TailtuneError):
        return 400, exc.message, []
    assert isinstance(exc, RequestValidationError)
    lines = [
        f"{'.'.join(str(p) for p in e.get('loc', ()) if p not in ('body', 'query', 'path'))}: {e.get('msg', '')}"
        for e in exc.errors()
    ]
    return 422, lines[0] if lines else "invalid request", lines[1:]


def error_page(request: Request, exc: Exception) -> Response:
    status, message, lines = _detail(exc)
    viewer = viewer_of(request, get_settings(), database_for(get_settings().resolved_database_url))
    title = {401: "Sign-in needed", 403: "Refused", 404: "Not found", 409: "Not possible now"}.get(status, "Error")
    return page(request, "error.html", viewer, status_code=status, title=title, message=message, lines=lines)


def _json(status: int, code: str, detail: str, field: str | None, lines: list[str] | None = None) -> Response:
    problems = [{"problem": line} for line in lines or []]
    return _headers(JSONResponse(error_body(code, detail, field, problems), status_code=status))


def _back(request: Request) -> str:
    """Where a form's answer goes back to: the page it was sent from (same server only), else the overview."""
    referer = request.headers.get("referer")
    if referer:
        parts = urlsplit(referer)
        if parts.netloc.lower() == request.headers.get("host", "").lower() and parts.path.startswith("/"):
            return parts.path + (f"?{parts.query}" if parts.query else "")
    return "/"


class ConsoleRoute(APIRoute):
    """A console route: errors become pages (or, for a form, a message on the page it came from)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            script = bool(request.headers.get("x-requested-with"))  # the page's own script (the upload)
            try:
                return await handler(request)
            except SignInRequired:
                if script:
                    return _json(401, "unauthorized", "sign in again: the session has ended", "token")
                if request.headers.get("hx-request"):
                    return Response(status_code=204, headers={"HX-Redirect": "/login"})
                target = request.url.path if request.method == "GET" else _back(request)
                return RedirectResponse(f"/login?next={quote(target, safe='/')}", status_code=303)
            except (TailtuneError, RequestValidationError) as exc:
                status, message, lines = _detail(exc)
                if script:
                    field = exc.field if isinstance(exc, ServiceError) else None
                    return _json(status, HTTP_CODES.get(status, "error"), message, field, lines)
                if request.method != "POST" or isinstance(exc, Forbidden):
                    return error_page(request, exc)
                response = RedirectResponse(_back(request), status_code=303)
                text = message + ("".join(f"; {line}" for line in lines[:5]))
                set_flash(request, response, get_settings(), "error", text)
                return response

        return route
