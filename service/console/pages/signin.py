"""Sign in with an API token, sign out."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse

from service.auth import principal_for_token
from service.console.render import ConsoleRoute, page
from service.console.session import (
    CSRF_COOKIE,
    FormDep,
    check_origin,
    clear_session,
    login_nonce,
    safe_next,
    set_flash,
    start_session,
    viewer_of,
)
from service.deps import DbDep, SettingsDep
from service.errors import Forbidden

__all__ = ["router"]

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


@router.get("/login")
def login_form(request: Request, settings: SettingsDep, db: DbDep, next: str | None = None) -> Response:
    target = safe_next(next)
    if viewer_of(request, settings, db) is not None:
        return RedirectResponse(target, status_code=303)
    probe = Response()
    nonce = login_nonce(request, probe, settings)
    response = page(request, "login.html", None, title="Sign in", nonce=nonce, next=target, error=None)
    for value in probe.headers.getlist("set-cookie"):
        response.headers.append("set-cookie", value)
    return response


@router.post("/login")
def login(
    request: Request,
    settings: SettingsDep,
    db: DbDep,
    token: Annotated[str, Form(max_length=512)] = "",
    csrf_token: Annotated[str, Form(max_length=128)] = "",
    next: Annotated[str, Form(max_length=2000)] = "/",
) -> Response:
    check_origin(request)
    nonce = request.cookies.get(CSRF_COOKIE, "")
    if not nonce or not hmac.compare_digest(nonce.encode(), csrf_token.encode()):
        raise Forbidden(
            "the sign-in form's CSRF token is missing or wrong: reload the sign-in page and try again",
            field="csrf_token",
        )
    target = safe_next(next)
    token = token.strip()
    principal = principal_for_token(token, settings, db) if token else None
    error = None
    if principal is None:
        error = "That token is not known to this server. Paste the whole token, starting with tt_."
    elif principal.scope not in ("read", "write"):
        error = "A report token only reports observations; sign in with a read or write token."
    if error is not None:
        return page(request, "login.html", None, status_code=401, title="Sign in", nonce=nonce, next=target,
                    error=error)
    response = RedirectResponse(target, status_code=303)
    start_session(request, response, settings, token)
    assert principal is not None
    scope = "read only: no write controls" if principal.scope == "read" else "read and write"
    set_flash(request, response, settings, "ok", f"Signed in as {principal.name} ({scope}).")
    return response


@router.post("/logout")
def logout(request: Request, settings: SettingsDep, _: FormDep) -> Response:
    response = RedirectResponse("/login", status_code=303)
    clear_session(request, response, settings)
    set_flash(request, response, settings, "ok", "Signed out.")
    return response

