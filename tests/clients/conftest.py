"""The service fixtures (metadata DB, tokens, app) and the real single-node Cassandra for the client's tests against
the real service."""

from __future__ import annotations

from tests.service.conftest import database_url, db_backend, svc

__all__ = ["database_url", "db_backend", "svc"]
