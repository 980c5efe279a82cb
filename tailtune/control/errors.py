"""Domain errors of the control plane (API and worker alike): an HTTP-like status, a machine code, a message
and the field at fault. `service/errors.py` maps them to JSON answers; the worker records them on the job.
"""

from __future__ import annotations

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


class ServiceError(Exception):
    """Base of the service's domain errors: a status code, a machine code, a message and the field at fault.
    """

    status_code = 400
    code = "bad_request"

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


class Invalid(ServiceError):
    status_code = 422
    code = "invalid"


class Missing(ServiceError):
    status_code = 404
    code = "not_found"


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


class InsufficientStorage(ServiceError):
    """A write found its filesystem (or the metadata DB's storage) full: where, and how many bytes are free."""

    status_code = 507
    code = "insufficient_storage"

    def __init__(self, detail: str, *, path: str, free_bytes: int | None) -> None:
        super().__init__(detail)
        self.path = path
        self.free_bytes = free_bytes
