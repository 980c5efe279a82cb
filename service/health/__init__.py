"""Health (liveness) and readiness: metadata DB, worker heartbeat, MLflow store, each target's reachability.
"""

from __future__ import annotations

__all__: list[str] = []
