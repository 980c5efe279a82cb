"""Traces resource: streamed upload (raw body or multipart), list, show, delete; ingested by a background job.
"""

from __future__ import annotations

__all__: list[str] = []
