"""Tuning: search spaces from the analysis summary, evaluators that replay candidates through the
simulation layer, Optuna studies tracked in MLflow, and the recommendation with its verdict.
"""

from __future__ import annotations

__all__: list[str] = []
