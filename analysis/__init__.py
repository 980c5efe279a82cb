"""Spark characterization of a trace: transforms, fits, hash ring, slack bounds, summary, report.

Entry points: `analysis.pipeline.characterize` (Spark → small tables), `analysis.summary.build_summary`
(summary.json), `analysis.report.render_report` (report.html); the job is `jobs.characterize`.
"""

from __future__ import annotations

__all__: list[str] = []
