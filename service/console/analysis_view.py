"""The analysis page's content: the report's own components (`analysis.report.components`, which the standalone
report.html is built from too) — findings in plain sentences, interactive figures from summary.json and the tables
written beside it, and the numbers labelled in words — put in the shape the console's templates draw.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from analysis.report import components as report
from service.console.charts import CONFIG

__all__ = ["Figure", "Table", "figures", "findings", "tables"]

Figure = dict[str, Any]  # {"id", "title", "caption", "spec": {"data", "layout", "config"}}
Table = dict[str, Any]  # {"id", "title", "columns", "rows", "caption", "pairs"}


def findings(summary: Mapping[str, Any]) -> list[str]:
    """What the analysis found, in plain sentences (read first)."""
    return list(report.findings(dict(summary)))


def figures(summary: Mapping[str, Any], directory: Path | None = None) -> list[Figure]:
    """The report's figures as plotly.js specs; with the analysis's `directory`, those drawn from its tables
    (`tables/*.parquet`) too. The console's own script resizes them (`CONFIG`'s `responsive` off)."""
    data = report.load_tables(directory) if directory is not None else None
    out = []
    for f in report.figures(dict(summary), data):
        spec: dict[str, Any] = json.loads(f.json())
        spec["config"] = {**CONFIG, "toImageButtonOptions": {"format": "png", "scale": 2}}
        out.append({"id": f.id, "title": f.title, "caption": f.caption, "spec": spec})
    return out


def tables(summary: Mapping[str, Any]) -> list[Table]:
    """The numbers, labelled in words with their units; `pairs` tables are label/value lists without a header."""
    return [t.as_dict() for t in report.tables(dict(summary))]
