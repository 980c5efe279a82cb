"""Bearer-token auth of the API's requests, with the tokens of `control.tokens` (stored only as SHA-256
hashes, in the DB table `api_tokens` or `TAILTUNE_API_TOKENS`).

Scopes: `read` allows GET/HEAD; `report` only reports observations, for the deployments the token names;
`write` allows everything but the admin-only attributes of a deployment (`control.grants`); `admin`
allows those too, and is minted only by `tailtune serve --create-token admin` on the service host (never by a
route, never from `TAILTUNE_API_TOKENS`). Reads from 127.0.0.1/::1 need no token when `open_reads_on_localhost`
is set (the embedded default).
"""

from __future__ import annotations

from fastapi import Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from base.settings import Settings
from control.db import Database, DeploymentRow
from control.tokens import Principal, cached_principal, create_token, hash_token, principal_for_token
from service.errors import Forbidden, Unauthorized

__all__ = [
    "Principal",
    "authenticate",
    "check_report_for",
    "create_token",
    "principal_for_token",
    "quick_read_principal",
]

#: What may write: everything but a deployment's admin-only attributes (write), or those too (admin).
_WRITERS = ("write", "admin")
LOCALHOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def quick_read_principal(
    headers: dict[bytes, bytes], client: str, settings: Settings, db: Database
) -> Principal | None:
    """Read access decided from memory only (tokens cached, settings hashes, localhost); None → ask
    `authenticate`.
    """
    header = headers.get(b"authorization", b"").decode("latin-1")
    kind, _, token = header.partition(" ")
    if not token or kind.lower() != "bearer":
        ok = settings.open_reads_on_localhost and client in LOCALHOSTS
        return Principal("localhost", "read") if ok else None
    digest = hash_token(token.strip())
    principal = cached_principal(settings, db, digest)
    return None if principal is not None and principal.scope == "report" else principal


def authenticate(request: Request, settings: Settings, db: Database, *, scope: str) -> Principal:
    header = request.headers.get("authorization", "")
    kind, _, token = header.partition(" ")
    if not token or kind.lower() != "bearer":
        client = request.client.host if request.client else ""
        if scope == "read" and settings.open_reads_on_localhost and client in LOCALHOSTS:
            return Principal("localhost", "read")
        raise Unauthorized("a bearer token is required", field="Authorization")
    principal = principal_for_token(token, settings, db)
    if principal is None:
        raise Unauthorized("unknown token", field="Authorization")
    if principal.scope == "report" and scope != "report":
        raise Forbidden("this token may only report observations", field="Authorization")
    if scope == "report" and principal.scope not in ("report", *_WRITERS):
        raise Forbidden("the request needs a report or write token", field="Authorization")
    if scope == "write" and principal.scope not in _WRITERS:
        raise Forbidden("this token has read scope; the request needs write scope", field="Authorization")
    return principal


def check_report_for(principal: Principal, s: Session, deployment_id: int) -> None:
    """Refuse (403 naming `deployment_id`) a report token's report for a deployment it is not bound to."""
    if principal.deployments is None:
        return
    name = s.scalar(select(DeploymentRow.name).where(DeploymentRow.id == deployment_id))
    if name is None or name not in principal.deployments:
        allowed = ", ".join(sorted(principal.deployments)) or "none"
        raise Forbidden(f"this report token may report only for deployments {allowed}", field="deployment_id")
