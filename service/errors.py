"""The domain errors of the control plane and the one handler that maps every `TailtuneError` to 4xx JSON.

Every error body is `{"error": CODE, "detail": MESSAGE, "field": FIELD-or-null, "problems": [...]}`. A metadata
DB that cannot be reached is a 503 with its one-line reason (what readiness reports), on every route. An
unexpected error is a 500 with `Connection: close`: the server closes a connection after an unhandled error, so a
keep-alive client is told rather than finding the connection gone.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from base.errors import BadInputError, NotFoundError, TailtuneError
from base.settings import get_settings
from control.errors import (
    Conflict,
    Forbidden,
    InsufficientStorage,
    Invalid,
    Missing,
    PayloadTooLarge,
    RequestTimeout,
    ServiceError,
    Unauthorized,
    Unavailable,
)
from control.redact import redact
from control.storage import disk_full_cause, storage_full

__all__ = [
    "HTTP_CODES",
    "Conflict",
    "Forbidden",
    "InsufficientStorage",
    "Invalid",
    "Missing",
    "PayloadTooLarge",
    "RequestTimeout",
    "ServiceError",
    "Unauthorized",
    "Unavailable",
    "db_unavailable",
    "error_body",
    "install_error_handlers",
    "one_line",
]

log = logging.getLogger("tailtune.api")

#: The `error` code of an HTTP status raised by the framework itself (unknown path, wrong method, unparsable
#: body, ...); the service's own errors carry theirs.
HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "timeout",
    409: "conflict",
    413: "too_large",
    414: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    429: "too_many_requests",
    431: "too_large",
    503: "unavailable",
    507: "insufficient_storage",
}


def error_body(
    code: str, detail: str, field: str | None, problems: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The one error shape of the API."""
    return {"error": code, "detail": detail, "field": field, "problems": problems or []}


def _field_of(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def one_line(exc: BaseException) -> str:
    """One line about a failure (the DB driver's own message when there is one), without credentials."""
    first = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [""])[0]
    return redact(f"{type(exc).__name__}: {first}")[:500]


def db_unavailable(exc: BaseException) -> Unavailable | None:
    """The 503 for an error that says the metadata DB cannot be reached or answer now (refused, lost or timed-out
    connection, a pool with no free connection), else None."""
    if isinstance(exc, OperationalError) or (isinstance(exc, DBAPIError) and exc.connection_invalidated):
        return Unavailable(f"the metadata DB is unavailable: {one_line(exc)}")
    if isinstance(exc, PoolTimeout):
        return Unavailable(f"the metadata DB is unavailable: no free connection ({one_line(exc)})")
    return None


def _service_answer(exc: ServiceError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    if isinstance(exc, RequestTimeout):  # the client stalled: free its connection
        headers = {"Connection": "close"}
    if isinstance(exc, Unavailable):
        log.warning("%s", exc.detail)
        headers = {"Retry-After": "5"}
    problems = None
    if isinstance(exc, InsufficientStorage):
        log.warning("disk full: %s", exc.detail)
        problems = [{"path": exc.path, "free_bytes": exc.free_bytes, "problem": "no space left"}]
    return JSONResponse(
        error_body(exc.code, exc.detail, exc.field, problems), status_code=exc.status_code, headers=headers
    )


async def _write_error(request: Request, exc: Exception) -> JSONResponse:
    """An OSError or a database error: 507 when it is a full disk (ENOSPC, EDQUOT, SQLite's or PostgreSQL's
    disk full), 503 when the metadata DB cannot be reached, else an internal error."""
    return await _internal_error(request, exc)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    """404 (no such path), 405 (method), 400 (unparsable body) and friends, in the one error shape. A JSON body
    nested too deeply for the parser (its recursion limit, far past any config's `config_max_depth`) is the same
    422 as one the checks find too deep."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
        detail = "body: JSON nested too deeply to parse"
        return JSONResponse(error_body("invalid", detail, "body"), status_code=422)
    code = HTTP_CODES.get(exc.status_code, "error")
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404 and detail == "Not Found":
        detail = "no such resource"
    return JSONResponse(error_body(code, detail, None), status_code=exc.status_code, headers=exc.headers)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    """An unexpected error: logged with its traceback on the server, answered without one (a full disk deep in
    its chain is still a 507)."""
    cause = disk_full_cause(exc)
    if cause is not None:
        return _service_answer(storage_full(get_settings(), cause))
    unavailable = db_unavailable(exc)
    if unavailable is not None:
        return _service_answer(unavailable)
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    body = error_body("internal", "internal error; the server log has the details", None)
    return JSONResponse(body, status_code=500, headers={"Connection": "close"})


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {"field": _field_of(e.get("loc", ())), "problem": str(e.get("msg", ""))} for e in exc.errors()
    ]
    first = problems[0] if problems else {"field": "body", "problem": "invalid request"}
    detail = f"field '{first['field']}': {first['problem']}"
    return JSONResponse(error_body("invalid", detail, first["field"], problems), status_code=422)


async def _tailtune_error(_: Request, exc: Exception) -> JSONResponse:
    """An expected error: a domain error with its status, code and field; bad input (422), not found (404)."""
    assert isinstance(exc, TailtuneError)
    if isinstance(exc, ServiceError):
        return _service_answer(exc)
    if isinstance(exc, BadInputError):
        problems = [
            {"file": p.file, "line": p.line, "field": p.field, "problem": p.problem} for p in exc.problems
        ]
        return JSONResponse(error_body("bad_input", exc.message, exc.problems[0].field, problems), status_code=422)
    if isinstance(exc, NotFoundError):
        return JSONResponse(error_body("not_found", exc.message, None), status_code=404)
    return JSONResponse(error_body("error", exc.message, None), status_code=400)


def install_error_handlers(app: FastAPI) -> None:
    """One mapping from every expected error type to a 4xx JSON answer naming the field."""
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(TailtuneError, _tailtune_error)
    app.add_exception_handler(OSError, _write_error)
    app.add_exception_handler(DBAPIError, _write_error)
    app.add_exception_handler(PoolTimeout, _write_error)
