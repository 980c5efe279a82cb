"""Trace formats (read-only): the formats an upload's `format` field takes, from the format registry
(`ingest.formats.READERS`)."""

from __future__ import annotations

__all__: list[str] = []
