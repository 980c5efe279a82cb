"""/api/v1/formats: the trace formats, in the registry's order (`ingest.formats.READERS`)."""

from __future__ import annotations

from fastapi import APIRouter

from ingest.formats import readers
from service.deps import ReadAuth
from service.formats.schemas import FormatOut

__all__ = ["router"]

router = APIRouter(prefix="/formats", tags=["formats"])


@router.get("")
def list_all(_: ReadAuth) -> list[FormatOut]:
    return [FormatOut(name=name, detected=r.sniff_rank is not None) for name, r in readers().items()]
