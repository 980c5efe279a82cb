"""Domain errors of the control plane (API, worker and CLI alike): an HTTP-like status, a machine code, a message
and the field at fault. They are `TailtuneError`s: `service/errors.py` maps them to JSON answers, the worker
records them on the job, the CLI prints them as one line and exits with their code (2: the request is wrong,
3: not found, 1: the environment failed).
"""

from __future__ import annotations

from base.errors import InputProblem, NotFoundError, TailtuneError

__all__ = [
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
]


class ServiceError(TailtuneError):
    """Base of the control plane's domain errors: a status code, a machine code, a message and the field at
    fault."""

    status_code = 400
    code = "bad_request"
    exit_code = 2

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field

    def at(self, where: str) -> ServiceError:
        """This error told about the input `where` (a file, `deployment`): `WHERE: field 'x': problem`, the
        field left out of the problem when the detail starts with it."""
        detail = self.detail.removeprefix(f"{self.field}: ") if self.field else self.detail
        self.message = str(InputProblem(where, None, self.field, detail))
        return self


class Invalid(ServiceError):
    status_code = 422
    code = "invalid"


class Missing(ServiceError, NotFoundError):
    status_code = 404
    code = "not_found"
    exit_code = 3

    def at(self, where: str) -> ServiceError:
        """What is missing is not a place in the input: the message stays as it is."""
        return self


class Conflict(ServiceError):
    status_code = 409
    code = "conflict"


class PayloadTooLarge(ServiceError):
    status_code = 413
    code = "too_large"


class Unauthorized(ServiceError):
    status_code = 401
    code = "unauthorized"


class Forbidden(ServiceError):
    status_code = 403
    code = "forbidden"


class RequestTimeout(ServiceError):
    """The client stopped sending its request (the API answers and closes the connection)."""

    status_code = 408
    code = "timeout"


class Unavailable(ServiceError):
    """A service the request needs (the metadata DB) cannot be reached now; the client may retry."""

    status_code = 503
    code = "unavailable"
    exit_code = 1


class InsufficientStorage(ServiceError):
    """A write found its filesystem (or the metadata DB's storage) full: where, and how many bytes are free."""

    status_code = 507
    code = "insufficient_storage"
    exit_code = 1

    def __init__(self, detail: str, *, path: str, free_bytes: int | None) -> None:
        super().__init__(detail)
        self.path = path
        self.free_bytes = free_bytes
