"""The console's sign-in and CSRF protection.

* **Sign-in.** The operator pastes an API token (the same tokens as the API: `tailtune serve --create-token`); it is
  checked as the API checks a bearer token (`service.auth.principal_for_token`) and kept in the `tailtune_session`
  cookie: HttpOnly (no script reads it), SameSite=Lax (no other site's form or script sends it), Path=/, Secure
  over HTTPS (or with `console_secure_cookies`), gone after `console_session_s`. Every request checks it again, so a
  token deleted from the DB signs its sessions out at once (within the token cache's 2 s). A `report` token cannot
  sign in; a `read` token sees every page and no write control, and a write is refused for it anyway.
* **CSRF.** Every state-changing request (all are POST) carries `csrf_token` (a form field) or `X-CSRF-Token` (the
  upload's header): an HMAC of the session's random nonce (`tailtune_csrf` cookie, HttpOnly, renewed at each
  sign-in) keyed by the session token, so a page of another site can neither read nor compute it. A request whose
  `Origin` names another site is refused as well. The sign-in form itself is a double submit of the nonce.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends, Request, Response

from base.settings import Settings
from control.db import Database
from service.auth import Principal, principal_for_token
from service.deps import DbDep, SettingsDep
from service.errors import Forbidden

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "FLASH_COOKIE",
    "SESSION_COOKIE",
    "FormDep",
    "SignInRequired",
    "Viewer",
    "ViewerDep",
    "WriterDep",
    "check_csrf_value",
    "check_origin",
    "clear_session",
    "csrf_for",
    "login_nonce",
    "pop_flash",
    "require_form",
    "require_viewer",
    "require_writer",
    "safe_next",
    "set_flash",
    "start_session",
    "viewer_of",
]

SESSION_COOKIE = "tailtune_session"
CSRF_COOKIE = "tailtune_csrf"
FLASH_COOKIE = "tailtune_flash"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
#: A flash message is shown on the next page; its cookie lives a minute at most.
_FLASH_S = 60
_FLASH_MAX = 1000


class SignInRequired(Exception):
    """No valid session: the page answers with a redirect to the sign-in page."""


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is looking at a page: the token's principal and the session's CSRF token for its forms."""

    principal: Principal
    csrf: str

    @property
    def can_write(self) -> bool:
        return self.principal.scope == "write"


def csrf_for(token: str, nonce: str) -> str:
    """The CSRF token of a session: HMAC-SHA256 of its nonce, keyed by its API token."""
    return hmac.new(token.encode(), b"tailtune-console-csrf:" + nonce.encode(), hashlib.sha256).hexdigest()


def viewer_of(request: Request, settings: Settings, db: Database) -> Viewer | None:
    """The signed-in viewer, or None (no cookie, an unknown or deleted token, a report token)."""
    token = request.cookies.get(SESSION_COOKIE)
    nonce = request.cookies.get(CSRF_COOKIE)
    if not token or not nonce or len(token) > 512:
        return None
    principal = principal_for_token(token, settings, db)
    if principal is None or principal.scope not in ("read", "write"):
        return None
    return Viewer(principal, csrf_for(token, nonce))


async def require_viewer(request: Request, settings: SettingsDep, db: DbDep) -> Viewer:
    viewer = viewer_of(request, settings, db)
    if viewer is None:
        raise SignInRequired
    return viewer


def check_origin(request: Request) -> None:
    """A state-changing request from another site's page is refused: its `Origin` (or, without one, its
    `Referer`) must name this server as the browser reached it (the Host header)."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is None:
        return  # not a browser (or one that sends neither): the CSRF token decides
    parts = urlsplit(origin)
    host = request.headers.get("host", "")
    if origin == "null" or parts.netloc.lower() != host.lower():
        raise Forbidden("the request comes from another site's page", field="Origin")


def check_csrf_value(viewer: Viewer, sent: str | None) -> None:
    if not sent or not hmac.compare_digest(sent.encode(), viewer.csrf.encode()):
        raise Forbidden(
            "the form's CSRF token is missing or wrong: reload the page and submit it again", field=CSRF_FIELD
        )


async def require_form(request: Request, viewer: Annotated[Viewer, Depends(require_viewer)]) -> Viewer:
    """A form of a signed-in viewer (any scope: signing out): from this server's own page, with the session's
    CSRF token (the `X-CSRF-Token` header or the `csrf_token` field)."""
    check_origin(request)
    sent = request.headers.get(CSRF_HEADER)
    if sent is None:
        form = await request.form()
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    check_csrf_value(viewer, sent)
    return viewer


async def require_writer(request: Request, viewer: Annotated[Viewer, Depends(require_viewer)]) -> Viewer:
    """A write: a write token, and a form as `require_form` checks it."""
    if not viewer.can_write:
        raise Forbidden("this token has read scope: sign in with a write token to change anything", field="token")
    return await require_form(request, viewer)


ViewerDep = Annotated[Viewer, Depends(require_viewer)]
FormDep = Annotated[Viewer, Depends(require_form)]
WriterDep = Annotated[Viewer, Depends(require_writer)]


def _secure(request: Request, settings: Settings) -> bool:
    return settings.console_secure_cookies or request.url.scheme == "https"


def _cookie(response: Response, request: Request, settings: Settings, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name, value, max_age=max_age, path="/", httponly=True, samesite="lax", secure=_secure(request, settings)
    )


def login_nonce(request: Request, response: Response, settings: Settings) -> str:
    """The sign-in form's double-submit value: the nonce cookie's, set now when the browser has none."""
    nonce = request.cookies.get(CSRF_COOKIE)
    if not nonce or len(nonce) > 128:
        nonce = secrets.token_urlsafe(32)
        _cookie(response, request, settings, CSRF_COOKIE, nonce, int(settings.console_session_s))
    return nonce


def start_session(request: Request, response: Response, settings: Settings, token: str) -> None:
    """Sign in: the token in its cookie and a fresh nonce (a nonce planted before sign-in is not kept)."""
    max_age = int(settings.console_session_s)
    _cookie(response, request, settings, SESSION_COOKIE, token, max_age)
    _cookie(response, request, settings, CSRF_COOKIE, secrets.token_urlsafe(32), max_age)


def clear_session(request: Request, response: Response, settings: Settings) -> None:
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        response.delete_cookie(name, path="/", httponly=True, samesite="lax", secure=_secure(request, settings))


def set_flash(request: Request, response: Response, settings: Settings, kind: str, text: str) -> None:
    """A one-line message for the next page (`ok` or `error`)."""
    raw = json.dumps({"kind": kind, "text": text[:_FLASH_MAX]}).encode()
    _cookie(response, request, settings, FLASH_COOKIE, base64.urlsafe_b64encode(raw).decode(), _FLASH_S)


def pop_flash(request: Request) -> dict[str, Any] | None:
    """The flash message the previous answer left (the page deletes its cookie), or None."""
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    try:
        doc = json.loads(base64.urlsafe_b64decode(raw.encode()))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("kind") not in ("ok", "error") or not isinstance(doc.get("text"), str):
        return None
    return {"kind": doc["kind"], "text": doc["text"][:_FLASH_MAX]}


def safe_next(path: str | None, default: str = "/") -> str:
    """A path on this server to go back to (never another site: `//host`, `/\\host` and schemes are refused)."""
    if not path or not path.startswith("/") or path.startswith(("//", "/\\")) or len(path) > 2000:
        return default
    if any(ord(c) < 0x20 for c in path):
        return default
    return path
