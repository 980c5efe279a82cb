"""The console's routes at `/`: its pages (one router per resource, `pages/`) and its static files. (Not a
resource of the API: the API's resource packages have a `router.py`.)"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse

from service.console.pages import analyses, deployments, jobs, signin, traces
from service.console.render import static_files
from service.errors import Missing

__all__ = ["router"]

router = APIRouter(include_in_schema=False)
for _pages in (signin.router, deployments.router, traces.router, analyses.router, jobs.router):
    router.include_router(_pages)

_TYPES = {".css": "text/css", ".js": "text/javascript"}


@router.get("/static/{name}")
def static(name: str) -> FileResponse:
    """The console's CSS and script, htmx (vendored) and plotly.js (from the plotly package); the URLs the pages
    use carry the file's hash, so each is cached for a year."""
    path = static_files().get(name)
    if path is None or not path.is_file():
        raise Missing(f"no static file {name!r}", field="name")
    return FileResponse(
        path,
        media_type=_TYPES.get(path.suffix, "application/octet-stream"),
        headers={"Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"},
    )
