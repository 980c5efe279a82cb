"""The human-readable characterization: findings in plain sentences, interactive figures, labelled tables, and the
standalone report.html built from them (`analysis.report.components`; the web console reuses the same parts)."""

from __future__ import annotations

from analysis.report.components import (
    Figure,
    Table,
    figures,
    findings,
    load_tables,
    plotly_js,
    render_report,
    tables,
)

__all__ = ["Figure", "Table", "figures", "findings", "load_tables", "plotly_js", "render_report", "tables"]
