"""Response bodies of /api/v1/formats."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["FormatOut"]


class FormatOut(BaseModel):
    """One trace format: its name (an upload's `format`) and whether `auto` detects it."""

    name: str
    detected: bool
