"""What runs unattended: the worker (leases jobs from the queue in the metadata DB), the job handlers
(ingest, analyze, nightly: ingest → analyze → tune → decide → publish; publish), the cron scheduler, the Spark
characterization entry point and the quickstart pipeline of `make demo`.
"""

from __future__ import annotations

__all__: list[str] = []
