"""Ingest: trace files of many formats → validated, canonical Parquet datasets."""

from __future__ import annotations

__all__: list[str] = []
