"""Typed FastAPI dependencies: settings (cached), the metadata DB, a per-request session, and auth scopes.

The non-blocking ones are `async def` so FastAPI does not hop to its thread pool for them (the token table is
cached in memory; it is re-read from the DB at most every 2 s).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from base.settings import Settings, get_settings
from control.db import Database, database_for
from service.auth import Principal, authenticate

__all__ = [
    "DbDep",
    "ReadAuth",
    "ReportAuth",
    "SessionDep",
    "SettingsDep",
    "WriteAuth",
    "database_for",
    "get_database",
    "settings_dep",
]


async def settings_dep() -> Settings:
    """The process-wide cached Settings (override in tests with `app.dependency_overrides`)."""
    return get_settings()


SettingsDep = Annotated[Settings, Depends(settings_dep)]


async def get_database(settings: SettingsDep) -> Database:
    return database_for(settings.resolved_database_url)


DbDep = Annotated[Database, Depends(get_database)]


def get_session(db: DbDep) -> Iterator[Session]:
    with db.session() as s:
        yield s


#: scope="function": the session commits *before* the response is sent, so a client that reads right after a
#: write sees it (the default "request" scope would commit after the response).
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


async def require_read(request: Request, settings: SettingsDep, db: DbDep) -> Principal:
    return authenticate(request, settings, db, scope="read")


async def require_write(request: Request, settings: SettingsDep, db: DbDep) -> Principal:
    return authenticate(request, settings, db, scope="write")


async def require_report(request: Request, settings: SettingsDep, db: DbDep) -> Principal:
    return authenticate(request, settings, db, scope="report")


ReadAuth = Annotated[Principal, Depends(require_read)]
ReportAuth = Annotated[Principal, Depends(require_report)]
WriteAuth = Annotated[Principal, Depends(require_write)]
