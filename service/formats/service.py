"""The trace formats as the API and the console show them."""

from __future__ import annotations

from ingest.formats import readers
from service.formats.schemas import FormatOut

__all__ = ["list_all"]


def list_all() -> list[FormatOut]:
    """Every format of the registry, in its order."""
    return [FormatOut(name=name, detected=r.sniff_rank is not None) for name, r in readers().items()]
