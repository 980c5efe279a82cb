"""The REST API (FastAPI): `main.create_app` assembles one router per resource (traces, analyses,
deployments, jobs, schedules, configs, health); its state lives in `control`, shared with the worker.
"""

from __future__ import annotations

__all__: list[str] = []
