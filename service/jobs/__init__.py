"""Jobs resource: run now, list, show (steps, logs, MLflow run id, result), cancel."""

from __future__ import annotations

__all__: list[str] = []
