"""Response bodies of /api/v1/health."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["Check", "Readiness"]


class Check(BaseModel):
    name: str
    ok: bool
    detail: str


class Readiness(BaseModel):
    ready: bool
    checks: list[Check]
    targets: list[Check]
