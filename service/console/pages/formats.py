"""Formats: the trace formats an upload takes, and whether `auto` detects each (the API's `/formats`)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.console.render import ConsoleRoute, page
from service.console.session import ViewerDep
from service.formats import service as formats

__all__ = ["router"]

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


@router.get("/formats")
def list_page(request: Request, viewer: ViewerDep) -> Response:
    return page(request, "formats.html", viewer, title="Formats", formats=formats.list_all())
