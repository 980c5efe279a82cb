"""The human-readable report: a self-contained report.html with inline PNG plots and plain findings."""

from __future__ import annotations

from analysis.report.html import render_report

__all__ = ["render_report"]
