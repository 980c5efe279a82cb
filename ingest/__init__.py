"""Ingest: trace files of many formats → validated, canonical Parquet datasets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingest.pipeline import ingest_file
    from ingest.sniff import Sniffed, sniff
    from ingest.store import DatasetInfo, DatasetStore

__all__ = ["DatasetInfo", "DatasetStore", "Sniffed", "ingest_file", "sniff"]

_LAZY = {
    "ingest_file": "ingest.pipeline",
    "sniff": "ingest.sniff",
    "Sniffed": "ingest.sniff",
    "DatasetInfo": "ingest.store",
    "DatasetStore": "ingest.store",
}


def __getattr__(name: str) -> Any:
    """Re-exports, imported on first use (so `import ingest.generate` stays light)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ingest' has no attribute {name!r}")
