"""Analyses resource: trigger a characterization of a trace, its status, summary.json and report.html."""

from __future__ import annotations

__all__: list[str] = []
